"""The run's answer while it runs: the incumbent, decided by re-timing, not by one stored
measurement.

A candidate's stored figure is the median of a few runs in one phase of the host; on a
shared host two kernels within 10-30% of each other swap places between phases, and the
fastest stored figure of hundreds is the luckiest. Stopped at any moment, a run should
answer with a kernel that is fast when timed again. So whenever a candidate's stored time
beats the incumbent's re-timed time, the two are timed again, interleaved
(``rounds`` rounds: newcomer, incumbent, newcomer, ...), and the newcomer takes over only
if the median of its fastest round is lower. Their rounds are stored (``retimes`` rows of
phase ``incumbent`` for the one that holds the answer after the challenge, ``challenger``
for the other), so the answer's history can be read back from a store
(:func:`answer_history`). The end-of-run re-timing takes the incumbent among the candidates
it compares.

A challenge costs a few executions of two kernels the worker built moments ago (its build
cache holds them): well under a second for millisecond kernels.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from mapper.explore.record import Record
from mapper.explore.store import ResultStore

HOLDS, CHALLENGER = "incumbent", "challenger"  # the phases of a challenge's rounds


@dataclass
class Incumbent:
    """The candidate that holds the run's answer (``key``, its record) and the median of
    its fastest round in its last challenge (``time_s``); ``history``: ``(seconds since
    the run's start, key)`` each time the answer changed."""

    rounds: int = 2
    key: str | None = None
    record: Record | None = None
    time_s: float | None = None
    history: list[tuple[float, str]] = field(default_factory=list)
    challenges: int = 0

    def challenged_by(self, rec: Record) -> bool:
        """Whether ``rec`` (an ``ok`` record) is to challenge the incumbent: its stored
        time beats the incumbent's re-timed time."""
        if not rec.ok or not rec.time_s or rec.key == self.key or self.rounds < 1:
            return False
        return self.time_s is None or rec.time_s < self.time_s

    def challenge(self, rec: Record, retime: Callable[[Record], list[float] | None],
                  store: ResultStore, run_id: str, elapsed_s: float) -> bool:
        """Times ``rec`` and the incumbent again, interleaved (``retime(record)``: one
        round's execution times, or None where it did not run ok); ``rec`` takes over
        where its fastest round's median is the lower, or where the incumbent no longer
        runs. Stores both's rounds; returns whether the answer changed."""
        self.challenges += 1
        mine: list[list[float]] = []
        theirs: list[list[float]] = []
        held = self.record
        for _ in range(self.rounds):
            ts = retime(rec)
            if not ts:
                break  # the newcomer does not run again: the incumbent stays
            mine.append(ts)
            if held is not None:
                ts = retime(held)
                if ts:
                    theirs.append(ts)
        new_s = _fastest_round(mine)
        old_s = _fastest_round(theirs)
        wins = new_s is not None and (held is None or old_s is None or new_s < old_s)
        for key, rounds, phase in ((rec.key, mine, HOLDS if wins else CHALLENGER),
                                   (held.key if held else None, theirs,
                                    CHALLENGER if wins else HOLDS)):
            if key is not None:
                for i, ts in enumerate(rounds):
                    store.add_retime(key, run_id, i, ts, phase=phase)
        if wins:
            self.key, self.record, self.time_s = rec.key, rec, new_s
            self.history.append((elapsed_s, rec.key))
        elif old_s is not None:
            self.time_s = old_s
        return wins


def _fastest_round(rounds: list[list[float]]) -> float | None:
    meds = [statistics.median(ts) for ts in rounds if ts]
    return min(meds) if meds else None


def answer_history(store: ResultStore, run_id: str | None = None,
                   since: float = 0.0) -> list[tuple[float, str, float]]:
    """The answer of the runs in ``store`` (one run's, with ``run_id``) as it changed, from
    the stored challenges: ``(unix time, key, the median of its fastest round in that
    challenge)`` each time a challenge left another candidate holding the answer, oldest
    first (a challenge's rounds are numbered from 0)."""
    groups: list[tuple[float, str, list[list[float]]]] = []
    for key, created, rnd, times in store.retime_rows(HOLDS, run_id):
        if created < since:
            continue
        if rnd == 0 or not groups or groups[-1][1] != key:
            groups.append((created, key, []))
        groups[-1][2].append(times)
    out: list[tuple[float, str, float]] = []
    for created, key, rounds in groups:
        s = _fastest_round(rounds)
        if s is not None and (not out or out[-1][1] != key):
            out.append((created, key, s))
    return out
