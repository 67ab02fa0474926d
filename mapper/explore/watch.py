"""Rounds of the run's leaders taken while it explores, so that a winner's figure spans the
run and not only the seconds after its end.

A shared host's speed moves in phases: on a 2-core Zen 5 (2026-12-01) one kernel ran at
215 or at 268 us for stretches of 20-50 s, and a 10-minute run whose last 30 s were slow
reported 0.87x what a fresh process measured minutes later. The confirmation rounds after
the choice (16 s then, 30 s now) cannot leave such a phase. So every :data:`WATCH_EVERY_S`
of a run with a time budget of at least :data:`MIN_BUDGET_S`, one re-timing round of one
of the leaders is taken (the ``best`` fastest ``ok`` candidates by their stored figures
and the incumbent, the one watched least first) and stored (``retimes`` rows of phase ``watch``).
A winner's figure takes its watch rounds beside its confirmation rounds, every window of
the host's time weighing alike (``mapper.explore.record.windowed_median``); the watch
rounds do not choose the winner.

A round costs a lowering, a build from the caches and a few milliseconds of runs: about
a hundredth of the run at one round every ten seconds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence

from mapper.explore.record import Record
from mapper.explore.store import ResultStore

WATCH_EVERY_S = 10.0  # one round this often
MIN_BUDGET_S = 60.0  # shorter runs: their confirmation spans a good part of them already
PHASE = "watch"


def leaders(records: Sequence[Record], n: int, held: Record | None) -> list[Record]:
    """The ``n`` fastest ``ok`` records by their stored figures (the end-of-run re-timing's
    candidates), then ``held`` (the incumbent) where it is not among them."""
    ok = sorted((r for r in records if r.ok),
                key=lambda r: (-(r.gflops or 0.0), r.time_s or float("inf")))
    top = ok[:max(0, n)]
    if held is not None and held.ok and all(r.key != held.key for r in top):
        top.append(held)
    return top


class Watch:
    """The watch rounds of one run (``rounds``: ``key -> [(unix time, execution times)]``):
    :meth:`due` says when the next is, :meth:`take` takes it."""

    def __init__(self, n: int, every_s: float | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.n = n
        self.every_s = WATCH_EVERY_S if every_s is None else every_s
        self.clock = clock
        self.rounds: dict[str, list[tuple[float, list[float]]]] = {}
        self._tried: dict[str, int] = {}  # rounds attempted, by key (failed ones too)
        self._last = clock()

    def due(self) -> bool:
        """Whether ``every_s`` (:data:`WATCH_EVERY_S`) have passed since the last round (or
        the start)."""
        return self.clock() - self._last >= self.every_s

    def pick(self, records: Sequence[Record], held: Record | None,
             runnable: Mapping[str, object]) -> Record | None:
        """The leader (:func:`leaders`, those in ``runnable``) watched least (rounds
        attempted), the faster first among equals; None: no leader."""
        top = [r for r in leaders(records, self.n, held) if r.key in runnable]
        if not top:
            return None
        return min(enumerate(top), key=lambda ir: (self._tried.get(ir[1].key, 0), ir[0]))[1]

    def take(self, records: Sequence[Record], held: Record | None,
             runnable: Mapping[str, object],
             retime: Callable[[Record], list[float] | None], store: ResultStore,
             run_id: str) -> Record | None:
        """Times the leader :meth:`pick` names once (``retime(record)``: one round's
        execution times, or None where it did not run ok), stores the round and keeps it;
        returns the leader timed (None: none, or its round failed)."""
        self._last = self.clock()
        rec = self.pick(records, held, runnable)
        if rec is None:
            return None
        self._tried[rec.key] = self._tried.get(rec.key, 0) + 1
        ts = retime(rec)
        self._last = self.clock()
        if not ts:
            return None
        mine = self.rounds.setdefault(rec.key, [])
        store.add_retime(rec.key, run_id, len(mine), ts, phase=PHASE)
        mine.append((time.time(), list(ts)))
        return rec


SLOW = 1.10  # a round this much slower than its kernel's fastest met a slow phase


def host_phases(rounds: Mapping[str, Sequence[tuple[float, Sequence[float]]]]
                ) -> tuple[int, int, float] | None:
    """How the host's speed moved during a run, from its watch rounds (``Watch.rounds``):
    ``(slow, all, worst)``, the rounds whose median is more than :data:`SLOW` times their
    kernel's fastest round's, the rounds of kernels watched at least twice, and the
    largest such ratio; None: no kernel watched twice. Every kernel is compared with
    itself, so a slow kernel is not a slow phase."""
    ratios: list[float] = []
    for mine in rounds.values():
        meds = [statistics.median(ts) for _, ts in mine if ts]
        if len(meds) >= 2 and min(meds) > 0:
            ratios += [m / min(meds) for m in meds]
    if not ratios:
        return None
    return sum(r > SLOW for r in ratios), len(ratios), max(ratios)
