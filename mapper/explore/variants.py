"""Exploring the variants of one computation: programs that compute the same result in
different ways (the convolution vectorised along its window or across its kernels), each
with its own joint space and results store.

Each variant is probed first: its strategy's first ``probe`` proposals (the ``model``
strategy's initial design, ranked by the analytic prior and the transferred knowledge) are
evaluated, the later variants' early cut measuring against the fastest kernel found so
far. Where the probes are close (the runner-up's best within ``CLOSE`` times the fastest),
one measurement each does not decide: the probes' best kernels are timed again,
interleaved (``ROUNDS`` rounds of ``repeats`` runs: variant a, variant b, a, b, ...), and
the variant whose fastest round has the lowest median wins; a single lucky first
measurement on a noisy machine picked the slower variant before, and so did a slow phase
of the host over a whole round. Rounds are added (up to ``MAX_ROUNDS``) while a lead of
``TELL`` (10%) or more rests on one round only; a lead under 10%, or one no second round
confirms, is reported as not told apart (``VariantComparison.verdict``), the faster taken.
Where those figures are still within ``CONTEST`` of each other and the budget is a time,
eight candidates were too few to tell: each close variant is explored up to
``CONTEST_SHARE`` of the budget (a contest; its store keeps what it found), the
contest's best kernels are timed again the same way, and the fastest wins (on a
64-channel 224x224 convolution on a Zen 4, the probes chose the window's vectors at 1.04x,
whose run found 130 GFLOP/s; the kernels' space holds 172). The contest runs in two
halves, timed again after each: a variant more than ``CONTEST`` times slower than the
fastest after the first half leaves (in three contests on an AVX2 core, two 5x5 layers and a
1x1 one, the loser's whole share, 60-80 s of a 10-minute budget, ended 1.5-1.9x behind).
The variant with the fastest probe (or contest) then gets the rest of the budget: its
exploration resumes from its
store (same seed, so the probe's candidates come back from the store and the strategy goes
on where the probe stopped). A variant whose space is explored to its end before the
budget is spent hands the rest on to the next variant by its probe (a small unfused space
beside a large tiled one), and the fastest of those explored is the answer. A budget too
small to probe every variant explores the first one only; where the probes leave too
little time to start again, the fastest probe is the answer. Every phase shares one worker
pool (the options' pool, or one started here).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from mapper.errors import ConfigurationError
from mapper.explore.options import ExploreOptions
from mapper.explore.record import Record
from mapper.explore.run import Budget, Results, explore, parse_budget, quiet_thread_pools
from mapper.explore.store import ResultStore

PROBE = 8  # evaluations per variant: the model strategy's initial design
MIN_PROBE_SECONDS = 120.0  # a time budget under this explores the first variant only
CLOSE = 1.5  # probes whose best kernels are within this factor are timed again
ROUNDS = 4  # interleaved rounds of that re-timing, at least
MAX_ROUNDS = 8  # at most: rounds are added while a 10% lead is not yet confirmed
TELL = 0.10  # the smallest difference a comparison tells apart
CONTEST = 1.25  # re-timed figures within this factor: each close variant explored a while
CONTEST_SHARE = 0.125  # of a time budget, per variant of the contest


@dataclass(frozen=True)
class VariantComparison:
    """Kernels of several variants timed again, interleaved: variant -> the median of its
    fastest round (``medians``), the rounds run, the runner-up's lead lost
    (``margin``: runner-up / fastest - 1; None with one variant) and whether that is
    told apart (``decided``: see :func:`tell_apart`)."""

    medians: dict[str, float]
    rounds: int = 0
    margin: float | None = None
    decided: bool = False

    @property
    def fastest(self) -> str | None:
        return min(self.medians, key=lambda n: self.medians[n]) if self.medians else None

    def verdict(self) -> str:
        """In words: which is faster and whether the rounds tell it."""
        if self.fastest is None:
            return "no kernel ran ok again"
        if self.margin is None:
            return f"only {self.fastest} ran ok again"
        lead = f"{self.fastest} faster by {self.margin:.0%} in {self.rounds} round(s)"
        if self.decided:
            return lead
        if self.margin < TELL:
            return (f"could not tell apart: {lead}, under the {TELL:.0%} the re-timing "
                    f"tells apart ({self.fastest} taken)")
        return (f"could not tell apart: {lead}, but only its fastest round is ahead "
                f"({self.fastest} taken)")

    def to_json(self) -> dict[str, Any]:
        return {"medians_s": self.medians, "rounds": self.rounds, "margin": self.margin,
                "decided": self.decided, "verdict": self.verdict()}


def tell_apart(per_round: Mapping[str, list[float]]) -> tuple[float | None, bool]:
    """(margin, decided) of interleaved rounds (variant -> each round's median): the
    variants are ranked by their fastest round (a slow phase of a shared host takes whole
    rounds; it only ever slows a kernel); the margin is the runner-up's fastest over the
    leader's, less 1; it is told apart when the margin is at least :data:`TELL` and the
    leader's second-fastest round too beats the runner-up's fastest (one lucky round
    does not decide)."""
    fast = {n: sorted(r) for n, r in per_round.items() if r}
    if len(fast) < 2:
        return None, False
    lead, runner = sorted(fast, key=lambda n: fast[n][0])[:2]
    margin = fast[runner][0] / fast[lead][0] - 1.0
    second = fast[lead][1] if len(fast[lead]) > 1 else math.inf
    return margin, margin >= TELL and second < fast[runner][0]


@dataclass
class VariantsResults:
    """What :func:`explore_variants` did: the chosen variant, its run (whose records
    include its probe's, found in its store) and every variant's probe."""

    chosen: str
    results: Results
    probes: dict[str, Results] = field(default_factory=dict)
    stores: dict[str, str | None] = field(default_factory=dict)
    # the close probes' best kernels timed again, interleaved: variant -> the median of
    # its fastest round, seconds
    probe_medians: dict[str, float] = field(default_factory=dict)
    # the variants explored after the probes, in order (more than one: a space explored
    # to its end handed the rest of the budget on)
    explored: list[str] = field(default_factory=list)
    # the contest's best kernels timed again, the same way (empty: none held)
    contest_medians: dict[str, float] = field(default_factory=dict)
    # the re-timings that chose (the probes', then the contest's), with their verdicts
    comparisons: list[VariantComparison] = field(default_factory=list)

    def probe_best(self) -> dict[str, Record | None]:
        """Each probed variant's fastest ``ok`` candidate (None: none ran ok)."""
        return {name: r.best for name, r in self.probes.items()}

    def summary(self) -> str:
        """A line on the variants (empty when only one was explored)."""
        if not self.probes:
            return ""
        parts = []
        for name, b in self.probe_best().items():
            perf = f"{b.gflops:.3g} GFLOP/s" if b is not None and b.gflops else \
                ("ok" if b is not None else "nothing ran ok")
            if name in self.probe_medians:
                perf += f" (re-timed {self.probe_medians[name] * 1e3:.3g} ms)"
            parts.append(f"{name} {perf}")
        then = ""
        if self.contest_medians:
            meds = ", ".join(f"{n} {t * 1e3:.3g} ms" for n, t in self.contest_medians.items())
            then += (f" (the re-timed probes were close: each explored up to "
                     f"{CONTEST_SHARE:.0%} of the budget, in two halves, a variant "
                     f"{CONTEST:g}x slower after the first leaving; their best re-timed: "
                     f"{meds})")
        if len(self.explored) > 1:
            then += (f" ({', then '.join(self.explored)}: each space explored to its end "
                     f"handed the budget on; the fastest, {self.chosen}, is the answer)")
        told = "".join(f"; re-timed: {c.verdict()}" for c in self.comparisons)
        return (f"variants probed ({PROBE} candidates each at most): {', '.join(parts)}; "
                f"explored {self.chosen}{then}{told}")


def variant_store(path: str | None, name: str, first: bool) -> str | None:
    """The store of variant ``name``: ``path`` for the first variant, ``path`` with the
    name before its extension for the others (``conv.sqlite`` -> ``conv.kernels.sqlite``);
    None (in memory) stays None."""
    if path is None or first or path == ":memory:":
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.{name}{ext or '.sqlite'}"


def _fastest(probes: Mapping[str, Results]) -> str | None:
    best: tuple[float, str] | None = None
    for name, r in probes.items():
        b = r.best
        if b is None or not b.time_s:
            continue
        if best is None or b.time_s < best[0]:
            best = (b.time_s, name)
    return None if best is None else best[1]


def _close(probes: Mapping[str, Results]) -> list[str]:
    """The variants whose probe's best kernel is within ``CLOSE`` times the fastest one
    (with the fastest), in the probes' order; fewer than two: nothing to decide."""
    times = {n: r.best.time_s for n, r in probes.items()
             if r.best is not None and r.best.time_s}
    if len(times) < 2:
        return []
    fastest = min(times.values())
    close = [n for n, t in times.items() if t <= CLOSE * fastest]
    return close if len(close) > 1 else []


def retime_probes(variants: Mapping[str, Any], probes: Mapping[str, Results], names: list[str],
                  pool: Any, *, rounds: int = ROUNDS, max_rounds: int = MAX_ROUNDS,
                  repeats: int = 3, timeout_s: float = 30.0) -> VariantComparison:
    """The best kernel of each of ``names``' probes timed again, interleaved (each
    variant's kernel ``repeats`` times per round, ``rounds`` rounds and more, up to
    ``max_rounds``, while a lead of :data:`TELL` or more is not confirmed by a second
    round, :func:`tell_apart`) on ``pool`` (a ``WorkerPool``): a :class:`VariantComparison`
    whose ``medians`` are variant -> the median of its fastest round, in seconds. A kernel
    that does not run ok again is left out (it cannot be the answer).

    The fastest round, not the median of every run: a shared host slows a kernel for
    stretches of a fraction of a second to seconds, a whole round of one variant at a time
    (on a 2-vCPU cloud Zen 4, the same convolution kernel ran 1.1x-2.6x its fastest in
    3-run medians), and slowness is all such noise adds."""
    times: dict[str, list[float]] = {n: [] for n in names}
    # a pool of several devices (Ray) times every kernel on one of them
    evaluate = getattr(pool, "evaluate_pinned", pool.evaluate_candidate)
    done = 0
    margin: float | None = None
    decided = False
    while done < max(1, max_rounds):
        for n in list(times):
            task, best = variants[n], probes[n].best
            assert best is not None
            cand = probes[n].candidates.get(best.key, best)  # as proposed, else as stored
            o = evaluate(task.lower_fn(cand.mapping, cand.tuning), task.inputs,
                         task.reference, timeout_s=timeout_s, repeats=repeats,
                         flops=task.flops, **task.tolerance)
            if o.status != "ok" or not o.times_s:
                del times[n]
                continue
            times[n].append(statistics.median(o.times_s))
        done += 1
        margin, decided = tell_apart(times)
        if done >= rounds and (decided or margin is None or margin < TELL):
            break  # told apart, or closer than a re-timing tells: more rounds do not help
    return VariantComparison({n: min(ts) for n, ts in times.items() if ts}, done, margin, decided)


def explore_variants(variants: Mapping[str, Any], *, budget: int | str | Budget = 100,
                     stores: Mapping[str, str | ResultStore | None] | None = None,
                     probe: int = PROBE,
                     on_phase: Callable[[str, str], None] | None = None,
                     pool: Any = None, options: ExploreOptions | None = None,
                     **strategy_options: Any) -> VariantsResults:
    """Explores ``variants`` (name -> ``Task``, in order of preference) within
    ``budget``: each is probed with ``probe`` candidates, then the fastest gets the rest
    (see the module docstring). ``stores``: name -> store (path, ``ResultStore`` or None;
    default: in memory). ``on_phase(name, "probe" | "compare" | "contest" | "explore")``
    is called as each phase starts ("compare": the close probes', or the contests', best
    kernels timed again; ``name`` lists them, comma-separated). ``pool``, ``options`` and
    ``strategy_options`` (``strategy=`` among them) go to every
    :func:`mapper.explore.explore` call."""
    if not variants:
        raise ConfigurationError("explore_variants needs at least one variant")
    opts = options if options is not None else ExploreOptions()
    t0 = time.perf_counter()
    bud = parse_budget(budget)
    names = list(variants)
    stores = dict(stores or {})
    paths = {n: (s.path if isinstance(s, ResultStore) else s) for n, s in stores.items()}
    small = (bud.seconds is not None and bud.seconds < MIN_PROBE_SECONDS) or \
        (bud.candidates is not None and bud.candidates < 2 * probe * len(names))
    if len(names) == 1 or small:
        if on_phase:
            on_phase(names[0], "explore")
        res = explore(variants[names[0]], budget=bud, store=stores.get(names[0]), pool=pool,
                      options=opts, **strategy_options)
        return VariantsResults(names[0], res, {}, {names[0]: paths.get(names[0])})
    shared = pool is None and not opts.devices.ray
    if shared:
        from codegen.worker import WorkerPool

        pool_cm: Any = WorkerPool(opts.devices.device, workers=opts.devices.workers)
    else:
        pool_cm = nullcontext(pool)
    with pool_cm as p, quiet_thread_pools():  # the contests time kernels too
        return _probe_then_explore(variants, names, bud, stores, paths, probe, on_phase, t0,
                                   p, opts, strategy_options)


def _probe_then_explore(variants: Mapping[str, Any], names: list[str], bud: Budget,
                        stores: Mapping[str, Any], paths: dict[str, str | None], probe: int,
                        on_phase: Callable[[str, str], None] | None, t0: float,
                        pool: Any, opts: ExploreOptions,
                        strategy_options: dict[str, Any]) -> VariantsResults:
    """:func:`explore_variants` once its budget allows every probe (``pool``: the worker
    pool the close probes are timed again on; None on a Ray cluster: the stored times
    decide)."""
    probes: dict[str, Results] = {}
    known: float | None = None
    for name in names:
        # a probe is bounded by its count; in time, by a share that leaves the chosen
        # variant as much as any probe
        seconds = None if bud.seconds is None else bud.seconds / (len(names) + 1)
        if on_phase:
            on_phase(name, "probe")
        r = explore(variants[name], store=stores.get(name), pool=pool,
                    budget=Budget(candidates=probe, seconds=seconds, text=f"probe {probe}"),
                    options=opts.but(known_best_s=known, retime=0), **strategy_options)
        probes[name] = r
        if r.stopped_by == "interrupted":
            return VariantsResults(name, r, probes, paths)
        b = r.best
        if b is not None and b.time_s:
            known = b.time_s if known is None else min(known, b.time_s)
    chosen = _fastest(probes) or names[0]
    medians: dict[str, float] = {}
    comparisons: list[VariantComparison] = []
    close = _close(probes)
    if close and pool is not None:
        probe_cmp = _compare(variants, probes, close, pool, opts, on_phase)
        comparisons.append(probe_cmp)
        medians = probe_cmp.medians
        if medians:
            chosen = min(medians, key=lambda n: medians[n])
    contest: dict[str, float] = {}
    if len(medians) > 1 and bud.seconds is not None and pool is not None and \
            max(medians.values()) <= CONTEST * min(medians.values()):
        share = bud.seconds * CONTEST_SHARE
        spent = time.perf_counter() - t0
        if bud.seconds - spent - share * len(medians) >= bud.seconds / 2:
            contest, known, more, stopped = _contest(
                variants, [n for n in _ranking(probes, medians) if n in medians], share,
                stores, pool, opts, known, on_phase, strategy_options)
            comparisons += more
            if stopped is not None:
                return VariantsResults(stopped[0], stopped[1], probes, paths, medians,
                                       contest_medians=contest, comparisons=comparisons)
            if contest:
                chosen = min(contest, key=lambda n: contest[n])
    if bud.seconds is not None:
        seconds = bud.seconds - (time.perf_counter() - t0)
        if seconds < bud.seconds / (len(names) + 1) / 2:  # too little to start again
            return VariantsResults(chosen, probes[chosen], probes, paths, medians,
                                   contest_medians=contest, comparisons=comparisons)
        left = Budget(seconds=seconds, text=bud.text)
    else:
        assert bud.candidates is not None
        others = sum(r.considered for n, r in probes.items() if n != chosen)
        left = Budget(candidates=max(1, bud.candidates - others), text=bud.text)
    if on_phase:
        on_phase(chosen, "explore")
    res = explore(variants[chosen], budget=left, store=stores.get(chosen), pool=pool,
                  options=opts.but(known_best_s=known), **strategy_options)
    best = (chosen, res)
    explored = [chosen]
    # a space explored to its end leaves budget: the next variants (by their probes) get it
    for name in _ranking(probes, medians):
        if res.stopped_by != "exhausted" or name in explored:
            continue
        if bud.seconds is not None:
            seconds = bud.seconds - (time.perf_counter() - t0)
            if seconds < bud.seconds / (len(names) + 1) / 2:
                break
            left = Budget(seconds=seconds, text=bud.text)
        else:
            assert bud.candidates is not None
            spent = sum(r.considered for n, r in probes.items() if n not in explored) + \
                res.considered
            if bud.candidates - spent < 1:
                break
            left = Budget(candidates=bud.candidates - spent, text=bud.text)
        if res.best is not None and res.best.time_s:
            known = res.best.time_s if known is None else min(known, res.best.time_s)
        if on_phase:
            on_phase(name, "explore")
        res = explore(variants[name], budget=left, store=stores.get(name), pool=pool,
                      options=opts.but(known_best_s=known), **strategy_options)
        explored.append(name)
        if res.best is not None and res.best.time_s and (
                best[1].best is None or not best[1].best.time_s
                or res.best.time_s < best[1].best.time_s):
            best = (name, res)
    return VariantsResults(best[0], best[1], probes, paths, medians, explored, contest,
                           comparisons)


def _compare(variants: Mapping[str, Any], runs: Mapping[str, Results], names: list[str],
             pool: Any, opts: ExploreOptions,
             on_phase: Callable[[str, str], None] | None) -> VariantComparison:
    """The "compare" phase: ``names``' best kernels of ``runs`` timed again, interleaved
    (:func:`retime_probes`, with the options' repeats and timeout)."""
    if on_phase:
        on_phase(",".join(names), "compare")
    return retime_probes(variants, runs, names, pool, repeats=opts.evaluation.repeats,
                         timeout_s=opts.evaluation.timeout_s)


def _contest(variants: Mapping[str, Any], entrants: list[str], share: float,
             stores: Mapping[str, Any], pool: Any, opts: ExploreOptions, known: float | None,
             on_phase: Callable[[str, str], None] | None, strategy_options: dict[str, Any]
             ) -> tuple[dict[str, float], float | None, list[VariantComparison],
                        tuple[str, Results] | None]:
    """Each of ``entrants`` (close variants, fastest first) explored up to ``share``
    seconds from its store, in two halves: after the first, their best kernels are timed
    again (:func:`retime_probes`) and a variant slower than the fastest by more than
    :data:`CONTEST` leaves (the rest of its share is saved); the others get their second
    half, resuming from their stores, and are timed again. Returns (variant -> the last
    re-timed median, the fastest stored time known, the comparisons, the interrupted
    variant and its results or None)."""
    rounds: dict[str, Results] = {}
    comparisons: list[VariantComparison] = []
    medians: dict[str, float] = {}
    # a variant without a store gets one in memory: its second half resumes from it
    own = {n: ResultStore(":memory:") for n in entrants if stores.get(n) is None}
    try:
        for _half in range(2):
            for name in entrants:
                if on_phase:
                    on_phase(name, "contest")
                r = rounds[name] = explore(
                    variants[name], store=own.get(name, stores.get(name)), pool=pool,
                    budget=Budget(seconds=share / 2, text="contest"),
                    options=opts.but(known_best_s=known, retime=0), **strategy_options)
                if r.stopped_by == "interrupted":
                    return medians, known, comparisons, (name, r)
                b = r.best
                if b is not None and b.time_s:
                    known = b.time_s if known is None else min(known, b.time_s)
            names_ok = [n for n in entrants if rounds[n].best is not None]
            if len(names_ok) < 2:
                break
            cmp = _compare(variants, rounds, names_ok, pool, opts, on_phase)
            comparisons.append(cmp)
            medians = cmp.medians
            lead = min(medians.values(), default=0.0)
            entrants = [n for n in names_ok if n in medians and medians[n] <= CONTEST * lead]
            if len(entrants) < 2:  # told apart after the first half: the rest is saved
                break
    finally:
        for st in own.values():
            st.close()
    return medians, known, comparisons, None


def _ranking(probes: Mapping[str, Results], medians: Mapping[str, float]) -> list[str]:
    """The probed variants, fastest first: by the re-timed median where there is one, then
    by the probe's best time; those where nothing ran last."""
    def key(name: str) -> tuple[int, float]:
        if name in medians:
            return (0, medians[name])
        b = probes[name].best
        return (1, b.time_s) if b is not None and b.time_s else (2, 0.0)

    return sorted(probes, key=key)
