"""``Record``: one evaluated candidate, typed (a results-store row as a value).

The store keeps its on-disk format (``mapper.explore.store.COLUMNS``: the mapping as
numeric codes ``"A=20 B=10"``, the tuning values as a JSON object text);
``Record.from_row`` reads that form and ``Record.to_row`` writes it back unchanged. Everything
else sees a ``Record``: the mapping is a ``MapCodes`` (printed in short codes,
``A=W0 B=L0 C=S``), the tuning values a read-only ``Tuning`` of ints, and
``Record.to_json`` gives the JSON object of ``docs/cli-json.md`` (mapping as short codes,
tuning as an object).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from codegen.program import Status
from mapper.encoding import FrozenNames, MapCodes


def short_mapping(mapping: Mapping[str, int]) -> str:
    """``A=W0 B=L0 C=S``: a mapping in short codes, in its map order."""
    return MapCodes(mapping).short()


class Tuning(FrozenNames):
    """Tuning values: a read-only, hashable mapping of parameter names to ints, sorted by
    name; prints as ``s0=64 s1=4``."""

    __slots__ = ()

    def __init__(self, values: Mapping[str, int] | None = None):
        self._items = {str(k): int(v) for k, v in sorted((values or {}).items())}

    def __str__(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self._items.items())

    def __repr__(self) -> str:
        return f"Tuning({self._items!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Tuning, (self._items,))


# the store column of each field whose name differs (every other field is its column)
_COLUMN_OF = {"check": "outcome_check"}


@dataclass(frozen=True, kw_only=True)
class Record:
    """One evaluated candidate: every column of the results store, typed, plus ``cached``
    (found in the store by this run rather than evaluated by it; not stored)."""

    key: str
    run_id: str
    strategy: str
    seed: int | None = None
    idx: int | None = None  # position of the candidate in its run
    mapping: MapCodes
    tuning: Mapping[str, int] = field(default_factory=Tuning)  # a Tuning once built
    status: Status  # ok | rejected | compile-error | wrong-result | timeout | crash | lost
    check: str | None = None  # the lowering check of a rejection, or early-cut
    reason: str | None = None
    search_s: float | None = None  # the strategy's time to propose it, in all:
    mapping_s: float | None = None  # finding its mapping
    tuning_s: float | None = None  # choosing its tuning values
    lower_s: float | None = None
    build_s: float | None = None
    run_s: float | None = None  # evaluation wall time minus lowering and build
    wall_s: float | None = None  # the whole evaluation, as seen by the driver
    gflops: float | None = None
    time_s: float | None = None  # median kernel time
    memory_bytes: int | None = None  # global device memory of the program
    max_abs_error: float | None = None
    source_hash: str | None = None
    draws: int | None = None  # random strategy: code assignments drawn for this mapping
    created: float | None = None  # unix time of the store insert
    cached: bool = False

    def __post_init__(self) -> None:
        if type(self.status) is not Status:  # its text, as a store row holds it
            object.__setattr__(self, "status", Status.of(self.status))
        if not isinstance(self.mapping, MapCodes):
            object.__setattr__(self, "mapping", MapCodes(dict(self.mapping)))
        if not isinstance(self.tuning, Tuning):
            object.__setattr__(self, "tuning", Tuning(self.tuning))

    # ------------------------------------------------------------------ the store's form

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        """The store columns a record holds, in field order."""
        return tuple(_COLUMN_OF.get(f.name, f.name) for f in dataclasses.fields(cls)
                     if f.name != "cached")

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Record:
        """A record of a store row (``mapping`` as ``"A=20 B=10"``, ``tuning`` as JSON text;
        a mapping and a dict are read too); missing columns read as ``None``."""
        mapping = row["mapping"]
        tuning = row.get("tuning") or {}
        kw: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in ("mapping", "tuning", "cached"):
                kw[f.name] = row.get(_COLUMN_OF.get(f.name, f.name))
        return cls(**kw, mapping=MapCodes.parse(mapping) if isinstance(mapping, str)
                   else MapCodes(dict(mapping)),
                   tuning=Tuning(json.loads(tuning) if isinstance(tuning, str) else tuning),
                   cached=bool(row.get("cached", False)))

    def to_row(self) -> dict[str, Any]:
        """The store row: every column of ``Record.columns()``, the mapping as numeric codes
        (``"A=20 B=10"``) and the tuning values as JSON text with sorted keys."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "cached":
                continue
            v = getattr(self, f.name)
            if f.name == "mapping":
                v = v.numeric()
            elif f.name == "tuning":
                v = json.dumps(dict(v))
            out[_COLUMN_OF.get(f.name, f.name)] = v
        return out

    # ------------------------------------------------------------------ for people and JSON

    @property
    def ok(self) -> bool:
        """Whether it ran and matched the reference."""
        return self.status == "ok"

    @property
    def label(self) -> str:
        """``ok``, ``rejected:<check>``, ``compile-error``, ``timeout``, ..."""
        if self.status == "rejected" and self.check:
            return f"rejected:{self.check}"
        return self.status

    @property
    def short_mapping(self) -> str:
        """The mapping in short codes: ``A=W0 B=L0 C=S``."""
        return self.mapping.short()

    def describe(self) -> str:
        """``12.3 GFLOP/s (0.045 ms): A=W0 B=L0 C=S; s0=64 s1=4``."""
        perf = f"{self.gflops:.3g} GFLOP/s " if self.gflops else ""
        t = f"({self.time_s * 1e3:.4g} ms)" if self.time_s else ""
        tun = str(self.tuning)
        return f"{perf}{t}: {self.short_mapping}" + (f"; {tun}" if tun else "")

    @classmethod
    def json_keys(cls) -> tuple[str, ...]:
        """The keys of ``to_json``, in order."""
        out: list[str] = []
        for f in dataclasses.fields(cls):
            out.append(f.name)
            if f.name == "status":
                out += ["label", "ok"]
        return tuple(out)

    def to_json(self) -> dict[str, Any]:
        """The JSON object of ``docs/cli-json.md``: every field, ``mapping`` as short codes
        (``{"A": "W0"}``), ``tuning`` as an object of ints, plus ``label`` and ``ok``."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "mapping":
                v = v.to_json()
            elif f.name == "tuning":
                v = dict(v)
            out[f.name] = v
            if f.name == "status":
                out["label"], out["ok"] = self.label, self.ok
        return out


def steady_time(round_medians: Sequence[float]) -> float | None:
    """The median of the faster half of rounds' medians (None: no round): a shared host
    slows whole rounds in phases of seconds and never speeds a kernel up, so the faster
    half are the rounds the host left alone. Over confirmation rounds spread across 16 s,
    two processes' figures of one kernel agreed within 10% in 92% of the cases, their
    medians over every run in 69% (a 90-second trace of one kernel resampled, Zen 3,
    2026-11-30)."""
    meds = sorted(m for m in round_medians if m > 0)
    if not meds:
        return None
    return statistics.median(meds[:(len(meds) + 1) // 2])


# rounds closer together than this meet one phase of a shared host: on a 2-core Zen 5
# (2026-12-01) one kernel ran at 215 or at 268 us for stretches of 20-50 s
WINDOW_S = 8.0


def windowed_median(rounds: Sequence[Sequence[float]], at: Sequence[float] | None,
                    window_s: float | None = None) -> float:
    """The median of the executions of ``rounds`` (at least one), each weighted so that
    every ``window_s``-second window (:data:`WINDOW_S`) of the rounds' times ``at``
    (seconds, one per round) weighs alike, however many rounds it holds; without ``at``,
    the plain median.
    Sixteen rounds in one slow phase of the host are one sample of that phase, and should
    not outweigh rounds spread over the minutes before."""
    if at is None or len(at) != len(rounds):
        return statistics.median([t for r in rounds for t in r])
    window_s = window_s or WINDOW_S
    t0 = min(at)
    per_window: dict[int, int] = {}
    for a, r in zip(at, rounds):
        win = int((a - t0) // window_s)
        per_window[win] = per_window.get(win, 0) + len(r)
    pairs = sorted((t, 1.0 / per_window[int((a - t0) // window_s)])
                   for a, r in zip(at, rounds) for t in r)
    half, acc = sum(w for _, w in pairs) / 2, 0.0
    for i, (t, w) in enumerate(pairs):
        acc += w
        if acc > half * (1 + 1e-9):
            return t
        if acc >= half * (1 - 1e-9):  # the half falls between two executions
            return (t + pairs[i + 1][0]) / 2 if i + 1 < len(pairs) else t
    return pairs[-1][0]


@dataclass(frozen=True)
class Retimed:
    """A winner re-timed at the end of a run: its record; the median of the fastest round
    of the rounds that chose it (``round_s``: a slow phase of a shared host can take a
    whole round); and the median, minimum, maximum and number of the executions its figure
    comes from, with the median's GFLOP/s (``None`` without a FLOP count). That figure is
    its confirmation rounds' where it has any (``confirmed``: timed again alone after the
    choice, so that picking the fastest of several noisy medians does not make it
    optimistic), with the rounds the run took of it while it explored (``watched``,
    ``mapper.explore.watch``), else every round's. Where the rounds' times are known, the
    median weighs every window of the host's time alike (:func:`windowed_median`);
    ``span_s``: from the figure's first round to its last."""

    record: Record
    median_s: float
    min_s: float
    n: int
    gflops: float | None = None
    round_s: float | None = None
    max_s: float | None = None  # the slowest execution of the figure
    rounds: int | None = None  # the rounds of the figure
    confirmed: bool = False
    figure_round_s: float | None = None  # the fastest of the figure's rounds' medians
    steady_s: float | None = None  # the median of the faster half of those medians
    watched: int = 0  # of the figure's rounds, those taken while the run explored
    span_s: float | None = None  # seconds from the figure's first round to its last

    @classmethod
    def of(cls, record: Record, rounds: Sequence[Sequence[float]],
           flops: float | None = None,
           confirm: Sequence[Sequence[float]] | None = None, *,
           confirm_at: Sequence[float] | None = None,
           watch: Sequence[tuple[float, Sequence[float]]] | None = None) -> Retimed:
        """``record`` re-timed in ``rounds`` (each round's execution times, seconds; at
        least one time in all), then ``confirm`` (the same, after the choice; optional,
        started at the times ``confirm_at``, seconds): the fastest of ``rounds``'
        medians, and the statistics over ``confirm``'s executions and ``watch``'s
        (``(start time, execution times)`` of rounds taken during the run; only with
        ``confirm``) where there are any, else over ``rounds``', with GFLOP/s from
        ``flops``."""
        per_round = [statistics.median(ts) for ts in rounds if ts]
        conf = list(confirm or ())
        when: list[float | None] = list(confirm_at) if confirm_at is not None \
            and len(confirm_at) == len(conf) else [None] * len(conf)
        confirmed = [(a, r) for a, r in zip(when, conf) if r]
        watched: list[tuple[float | None, Sequence[float]]] = \
            [(a, r) for a, r in (watch or ()) if r] if confirmed else []
        both = watched + confirmed
        figure = [r for _, r in both] or [r for r in rounds if r]
        known = [a for a, _ in both if a is not None]
        at = known if both and len(known) == len(both) else None
        ts = [t for r in figure for t in r]
        med = windowed_median(figure, at)
        return cls(record, med, min(ts), len(ts), flops / med / 1e9 if flops else None,
                   min(per_round) if per_round else None, max(ts), len(figure),
                   bool(confirmed), min(statistics.median(r) for r in figure),
                   steady_time([statistics.median(r) for r in figure]), len(watched),
                   max(at) - min(at) if at else None)

    @property
    def steady_gflops(self) -> float | None:
        """GFLOP/s of ``steady_s``: the kernel's speed with the host's slow phases left
        out (:func:`steady_time`)."""
        if self.gflops is None or not self.steady_s:
            return None
        return self.gflops * self.median_s / self.steady_s

    @property
    def figure_round_gflops(self) -> float | None:
        """GFLOP/s of ``figure_round_s``: the kernel's speed in the host's fastest phase
        of the figure's rounds. A shared host runs whole rounds slow (phases of seconds),
        so this is the figure that another process reproduces best (the median mixes
        the phases that one process happened to meet)."""
        if self.gflops is None or self.figure_round_s is None or self.figure_round_s <= 0:
            return None
        return self.gflops * self.median_s / self.figure_round_s

    @property
    def rank_s(self) -> float:
        """The time winners are compared by: the fastest round's median, else the median."""
        return self.round_s if self.round_s is not None else self.median_s

    def to_json(self) -> dict[str, Any]:
        """``{"median_s", "min_s", "max_s", "n", "rounds", "gflops", "round_s",
        "confirmed", "figure_round_s", "steady_s", "steady_gflops", "watched",
        "span_s"}`` (the record apart)."""
        return {"median_s": self.median_s, "min_s": self.min_s, "max_s": self.max_s,
                "n": self.n, "rounds": self.rounds, "gflops": self.gflops,
                "round_s": self.round_s, "confirmed": self.confirmed,
                "figure_round_s": self.figure_round_s, "steady_s": self.steady_s,
                "steady_gflops": self.steady_gflops, "watched": self.watched,
                "span_s": self.span_s}
