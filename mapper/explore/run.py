"""``explore(...)``: a strategy, the evaluator and the store in one loop.

The budget counts the candidates a run *considers*: evaluated now or found in the store.
So the same command run again (same strategy, seed and store) walks the same sequence,
takes the stored candidates without evaluating them, and continues where the last run
stopped; with a larger budget it extends that run. A candidate a strategy proposes twice
in one run is skipped and not counted.
"""

from __future__ import annotations

import functools
import math
import re
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any

import mapper.explore.watch as watching
from ir.errors import LiftmapError
from mapper.errors import ConfigurationError
from mapper.explore.incumbent import Incumbent
from mapper.explore.options import ExploreOptions, option_names
from mapper.explore.record import WINDOW_S, Record, Retimed
from mapper.explore.store import ResultStore
from mapper.explore.strategies import Candidate, Manual, get_strategy
from mapper.explore.task import Task

# a strategy that proposes only candidates it proposed before is treated as exhausted
MAX_REPEATS = 2000


class BudgetError(LiftmapError, ValueError):
    """A budget that is not a positive number of candidates or a positive duration."""


@dataclass(frozen=True)
class Budget:
    """At most ``candidates`` candidates and/or ``seconds`` of wall time."""

    candidates: int | None = None
    seconds: float | None = None
    text: str = ""

    @property
    def total(self) -> float:
        """The budget's size in its own unit (candidates or seconds)."""
        return float(self.candidates if self.candidates is not None else self.seconds or 0)


_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}


def parse_budget(budget: int | float | str | Budget) -> Budget:
    """``500`` (candidates), ``"10m"``, ``"90s"``, ``"1.5h"`` (wall time) -> ``Budget``."""
    if isinstance(budget, Budget):
        return budget
    if isinstance(budget, bool):
        raise BudgetError(f"budget must be a number of candidates or a time, got {budget!r}")
    if isinstance(budget, (int, float)):
        if budget != int(budget) or budget <= 0:
            raise BudgetError(f"budget must be a positive number of candidates, got {budget}")
        return Budget(candidates=int(budget), text=str(int(budget)))
    text = str(budget).strip().lower()
    if re.fullmatch(r"[+-]?\d+", text):
        n = int(text)
        if n <= 0:
            raise BudgetError(f"budget must be a positive number of candidates, got {text}")
        return Budget(candidates=n, text=text)
    m = re.fullmatch(r"([+-]?\d+(?:\.\d*)?)\s*(s|sec|m|min|h)", text)
    if not m:
        raise BudgetError(f"cannot read budget {budget!r}: give a number of candidates (500) "
                          "or a time (90s, 10m, 1.5h)")
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if not math.isfinite(seconds) or seconds <= 0:
        raise BudgetError(f"budget must be a positive time, got {budget!r}")
    return Budget(seconds=seconds, text=text)


@dataclass
class Results:
    """What one ``explore`` call did: its records (evaluated now or found in the store, in
    the order the strategy proposed them), counts and the best candidate."""

    run_id: str
    strategy: str
    seed: int
    store_path: str
    context: Any
    budget: Budget
    records: list[Record] = field(default_factory=list)
    evaluated: int = 0  # evaluated in this run
    cached: int = 0  # found in the store
    stopped_by: str = ""  # budget | time | exhausted[: why] | interrupted
    elapsed_s: float = 0.0
    draws: int = 0  # random strategy: code assignments drawn in all
    total_candidates: int | None = None  # size of the joint space (None: not counted)
    # mapping search in no row: the valid mappings' enumeration (strategies drawing from
    # them) and a search the end of the run cut short (random: its last, fruitless draws)
    mapping_s: float = 0.0
    # seconds the driver loop waited for evaluations (the rest of its time is its own:
    # proposing, receiving, storing; experiments/bench_ray_scaling.py measures it)
    wait_s: float = 0.0
    # the winners re-timed at the end, by key
    retimed: dict[str, Retimed] = field(default_factory=dict)
    # the answer during the run, decided by re-timing (``history``: when it changed)
    incumbent: Incumbent = field(default_factory=lambda: Incumbent(rounds=0))
    # the leaders' rounds taken while the run explored (``mapper.explore.watch``), by key:
    # ``[(unix time, execution times)]``
    watched: dict[str, list[tuple[float, list[float]]]] = field(default_factory=dict)
    candidates: dict[str, Candidate] = field(default_factory=dict, repr=False)

    @property
    def considered(self) -> int:
        """Candidates considered: evaluated now or found in the store."""
        return len(self.records)

    @property
    def counts(self) -> Counter:
        """Outcome labels (``Record.label``) of this run's records."""
        return Counter(r.label for r in self.records)

    @property
    def best(self) -> Record | None:
        """The ``ok`` record with the highest GFLOP/s (or the lowest time)."""
        ok = [r for r in self.records if r.ok]
        if not ok:
            return None
        return max(ok, key=lambda r: (r.gflops or 0.0, -(r.time_s or math.inf)))

    @property
    def final_retimed(self) -> Retimed | None:
        """The winner of the end-of-run re-timing (the lowest median of a fastest round,
        ``Retimed.rank_s``), or ``None`` when nothing was re-timed."""
        if not self.retimed:
            return None
        return min(self.retimed.values(), key=lambda r: r.rank_s)

    @property
    def final(self) -> Record | None:
        """The run's answer: the winner of the end-of-run re-timing, else ``best``."""
        win = self.final_retimed
        return win.record if win is not None else self.best

    def summary(self) -> str:
        """Some lines in words."""
        b = self.best
        lines = [f"run {self.run_id}: strategy {self.strategy}, seed {self.seed}: "
                 f"{self.considered} candidate(s), {self.evaluated} evaluated, {self.cached} "
                 f"found in the store, stopped by {self.stopped_by} after "
                 f"{self.elapsed_s:.1f} s",
                 "outcomes: " + (", ".join(f"{k} {v}" for k, v in self.counts.most_common())
                                 or "none")]
        if self.strategy == "random":
            lines.append(f"random code assignments drawn: {self.draws}")
        r = self.final_retimed
        if b is None:
            lines.append("best: no candidate ran ok")
        else:
            lines.append(f"best: {b.describe()}"
                         + (" (the fastest single measurement)" if r is not None else ""))
        if r is not None:
            f = r.record
            name = f.short_mapping + (f"; {f.tuning}" if f.tuning else "")
            perf = f"{r.gflops:.3g} GFLOP/s, " if r.gflops else ""
            fastest = "" if r.round_s is None else \
                f"fastest round's median {r.round_s * 1e3:.4g} ms, "
            top = "" if r.max_s is None else f", max {r.max_s * 1e3:.4g} ms"
            after = f" in {r.rounds} rounds after it was chosen" if r.confirmed else ""
            if r.confirmed and r.watched:
                after = (f" in {(r.rounds or 0) - r.watched} rounds after it was chosen and "
                         f"{r.watched} while the run explored")
            if r.span_s and r.span_s >= 2 * WINDOW_S:
                after += f", across {r.span_s:.0f} s (each {WINDOW_S:.0f} s alike)"
            steady = "" if r.steady_s is None else \
                f"; steady {r.steady_s * 1e3:.4g} ms" + (
                    f" ({r.steady_gflops:.3g} GFLOP/s)" if r.steady_gflops else "") + \
                " (the faster half of the rounds)"
            lines.append(f"re-timed ({len(self.retimed)} best, interleaved): {perf}median "
                         f"{r.median_s * 1e3:.4g} ms, {fastest}min {r.min_s * 1e3:.4g} ms"
                         f"{top} over {r.n} runs{after}{steady}: {name}")
            ph = watching.host_phases(self.watched)
            if ph is not None and ph[0]:
                lines.append(f"the host: {ph[0]} of {ph[1]} watch rounds ran more than "
                             f"{watching.SLOW - 1:.0%} slower than their kernel's fastest "
                             f"(at worst {ph[2]:.2f}x): a shared host's slow phases, which "
                             "another process meets or not")
            if b is not None and f.key == b.key:
                lines.append(f"answer: {name} (the best, confirmed by the re-timing)")
            else:
                lines.append(f"answer: {name}, the re-timed winner (the lowest median of a "
                             "fastest round), not the best above: one measurement does "
                             "not decide")
        return "\n".join(lines)


def _task(program, sizes, *, fusion, heuristics, inputs, reference, flops, max_value,
          data_seed) -> Task:
    if isinstance(program, Task):
        return program
    from ir.pipeline import Pipeline

    if isinstance(program, Pipeline):
        if inputs is None or reference is None:
            raise ConfigurationError("exploring a pipeline needs its inputs and reference result")
        return Task.from_pipeline(program, sizes or {}, inputs=inputs, reference=reference,
                                  flops=flops, max_value=max_value, fusion=fusion,
                                  heuristics=heuristics)
    return Task.from_program(program, sizes or {}, fusion=fusion, inputs=inputs,
                             reference=reference, flops=flops, max_value=max_value,
                             seed=data_seed, heuristics=heuristics)


def explore(program, sizes: Mapping[str, int] | None = None, *, strategy: str = "model",
            budget: int | str | Budget = 100, store: str | ResultStore | None = None,
            pool=None, options: ExploreOptions | None = None,
            on_start: Callable[[Results], None] | None = None,
            on_result: Callable[[Record, Results], None] | None = None,
            **strategy_options: Any) -> Results:
    """Explores ``program`` (a ``Task``, a program ``Lambda``, its text, a ``.lift`` path,
    or a ``Pipeline`` with ``options.space.inputs``/``reference``) for ``sizes`` with
    ``strategy`` until ``budget`` is spent, recording every candidate in ``store`` (a path,
    a ``ResultStore`` or ``None`` for an in-memory store). ``pool``: the evaluator's pool
    (default: one made from ``options.devices``). ``options``: every other option, grouped
    (``mapper.explore.options.ExploreOptions``; ``ExploreOptions.of(repeats=5, ...)`` by
    flat names). ``strategy``: ``model`` by default (prior, learned model and local
    search), or any registered name; ``strategy_options`` go to its constructor (``mapping``
    for ``manual``).

    A time budget counts from the call (start-up included) and bounds the candidate in
    flight: the run ends within about a second of it (a candidate stopped by the end of
    the budget is not recorded); one candidate may take a twentieth of it (at least 5 s,
    at most ``timeout_s``). The early cut (``options.evaluation.cut``) stops a slow
    kernel inside its first execution, measured against the best kernel time so far (upload,
    PoCL's compilation at the first launch and the comparison not counted); a cut
    candidate is stored as ``timeout`` with check ``early-cut``. ``options.devices.workers``:
    candidates lowered and built in parallel worker processes (their timed runs still take
    turns on the device); ``ray``: on a Ray cluster (``mapper.explore.ray_pool.RayPool``),
    the store written here, by the driver. ``options.count``: count the joint space first
    (``Results.total_candidates``, information only; off by default: it builds every
    mapping's tuning space). ``options.retiming``: at the end, the ``best`` best ``ok``
    candidates are timed again, ``rounds`` interleaved rounds of ``repeats`` runs each;
    every execution's time is stored (``ResultStore.retimes``) and ``Results.final`` is
    the winner by the median of its fastest round. With a time budget, fewer are re-timed
    where they would take more than ``RETIME_SHARE`` of it, and the search stops early
    enough to leave room for them.

    ``on_result(record, results)`` is called after each candidate (a ``Record``). Ctrl-C
    stops the run cleanly (``stopped_by == "interrupted"``); the candidates in flight are
    not recorded. A strategy that gives up (``random`` after its draw limit) ends the run
    with its reason as ``stopped_by`` (``"exhausted: ..."``).
    """
    opts = options if options is not None else ExploreOptions()
    if not isinstance(opts, ExploreOptions):
        raise ConfigurationError(f"options must be an ExploreOptions, not "
                                 f"{type(opts).__name__}: ExploreOptions.of(repeats=5, ...)")
    misplaced = sorted(set(strategy_options) & set(option_names()))
    if misplaced:
        raise ConfigurationError(
            f"{', '.join(misplaced)} {'is an option' if len(misplaced) == 1 else 'are options'}"
            f" of the exploration, not of the strategy: pass options=ExploreOptions.of("
            f"{', '.join(f'{k}=...' for k in misplaced)})")
    if "mapping" in strategy_options and strategy_options["mapping"] is None:
        del strategy_options["mapping"]  # manual's, where a caller passes "none given"
    ev, dv, sp, rt = opts.evaluation, opts.devices, opts.space, opts.retiming
    seed = opts.seed
    t_call = time.perf_counter()  # a time budget counts from here: start-up included
    if dv.workers < 1:
        raise ConfigurationError(f"workers must be at least 1, not {dv.workers}")
    bud = parse_budget(budget)
    cls = get_strategy(strategy)
    own_store = not isinstance(store, ResultStore)
    st = store if isinstance(store, ResultStore) else ResultStore(store or ":memory:")
    evaluator = None
    try:
        task = _task(program, sizes, fusion=sp.fusion, heuristics=sp.heuristics,
                     inputs=sp.inputs, reference=sp.reference, flops=sp.flops,
                     max_value=sp.max_value, data_seed=0)
        from codegen.target import Device
        from mapper.explore.evaluator import Evaluator

        run_id = uuid.uuid4().hex[:12]
        evaluator = Evaluator(task, st, run_id=run_id, strategy=strategy, seed=seed,
                              device=dv.device, pool=pool, timeout_s=ev.timeout_s,
                              repeats=ev.repeats, cut=ev.cut, cut_min_s=ev.cut_min_s,
                              workers=dv.workers, run_budget_s=ev.run_budget_s, ray=dv.ray)
        heur = "on" if task.heuristics else "off"
        st.bind(evaluator.context, {"explored_program": task.explored_text,
                                    "fusion": task.fusion, "heuristics": heur,
                                    "stage": task.stage or ""})
        joint = task.joint(Device.from_limits(evaluator.limits))
        strategy_options = _batch_for(cls, getattr(evaluator.pool, "size", 1),
                                      strategy_options)
        strat = cls(joint, seed=seed, **strategy_options)
        res = Results(run_id, strategy, seed, st.path, evaluator.context, bud,
                      incumbent=Incumbent(rounds=rt.challenge if rt.best > 0 else 0))
        res.mapping_s = joint.enumerate_s if strat.uses_mappings else 0.0
        if opts.count:
            try:
                res.total_candidates = joint.tuning(strat.mapping).count() \
                    if isinstance(strat, Manual) else joint.count()
            except LiftmapError:  # counting is informative only (too large, ...)
                res.total_candidates = None
        st.start_run(run_id, strategy, seed, bud.text,
                     {"timeout_s": ev.timeout_s, "repeats": ev.repeats, "cut": ev.cut,
                      "run_budget_s": ev.run_budget_s, "task": task.name,
                      "fusion": task.fusion, "heuristics": heur,
                      **{k: str(v) for k, v in strategy_options.items()}})
        if on_start:
            on_start(res)
        count_of = functools.partial(_retime_count, res, rt.best, rt.rounds, bud.seconds)

        def reserve() -> float:
            return _retime_reserve(res, count_of(), rt.rounds)

        watch = watching.Watch(rt.best) if rt.best > 0 and bud.seconds is not None \
            and bud.seconds >= watching.MIN_BUDGET_S else None
        if watch is not None:
            res.watched = watch.rounds
        with quiet_thread_pools():
            _loop(res, strat, evaluator, st, bud, on_result,
                  workers=getattr(evaluator.pool, "size", 1), t_start=t_call,
                  reserve=reserve if rt.best > 0 else None, known_best_s=ev.known_best_s,
                  watch=watch)
            if rt.best > 0 and res.stopped_by != "interrupted":
                _retime(res, evaluator, st, count_of(), rt.rounds, ev.repeats)
        st.finish_run(run_id, res.stopped_by, res.evaluated, res.cached,
                      strat.draws_total if strategy == "random" else None, res.mapping_s)
        return res
    finally:
        if evaluator is not None:
            evaluator.close()
        if own_store:
            st.close()


def quiet_thread_pools() -> AbstractContextManager[Any]:
    """This process's BLAS and OpenMP thread pools held to one thread (``threadpoolctl``)
    while a run times kernels: their idle threads spin-wait after each call, on the cores
    the device's kernels run on (a 0.22 ms kernel timed right after a numpy matmul here
    ran 4% slower, median of 12 pairs, 2-core Zen 5). The driver's own numeric work (the
    model's forests, the prior) is small."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


def _batch_for(cls: type, inflight: int, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with a strategy's ``batch`` (proposals per refit: the ``model``'s) raised
    to the candidates in flight, where the caller left it at its default: one refit then
    feeds every device of a large pool (a Ray cluster), where a small batch would refit
    several times per round of the devices, on the driver, while freed devices wait."""
    import inspect

    param = inspect.signature(cls).parameters.get("batch")
    if param is None or "batch" in options or not isinstance(param.default, int) \
            or inflight <= param.default:
        return options
    return {**options, "batch": inflight}


RETIME_SHARE = 0.1  # of a time budget: the most the end-of-run re-timing takes


def _retime_count(res: Results, n: int, rounds: int, budget_s: float | None) -> int:
    """How many of the best the end-of-run re-timing takes: ``n``, fewer (at least one)
    where they and the winner's confirmation (:func:`_confirm_s`) would take more than
    ``RETIME_SHARE`` of a time budget ``budget_s``."""
    each = rounds * _round_s(res)  # one of the best's rounds
    if budget_s is None or each <= 0:
        return n
    share = RETIME_SHARE * budget_s - _confirm_s(res, rounds, budget_s)
    return max(1, min(n, int(share / each)))


def _round_s(res: Results) -> float:
    """Seconds one re-timing round of the best so far takes (0: none ran ok)."""
    best = res.best
    if best is None:
        return 0.0
    return float(best.run_s or 0.0) + float(best.lower_s or 0.0) + 0.2


def _confirm_s(res: Results, rounds: int, budget_s: float | None) -> float:
    """Seconds the winner's confirmation takes: ``rounds`` rounds, or its spread
    (:func:`confirm_span`) and a round where that is longer."""
    each = _round_s(res)
    return max(rounds * each, confirm_span(budget_s) + each) if each else 0.0


def _retime_reserve(res: Results, n: int, rounds: int) -> float:
    """Seconds the end-of-run re-timing of the ``n`` best and the winner's confirmation
    should take (from the runs of the best so far), which a time budget keeps free."""
    return n * rounds * _round_s(res) + _confirm_s(res, rounds, res.budget.seconds)


# the winner's confirmation rounds are spread over this long, one round every
# CONFIRM_EVERY_S: the host's speed moves in phases of seconds (one kernel re-timed for
# 90 s on Zen 3, 2026-11-30: 2-second windows' medians from 0.96 to 1.58 ms, the rounds'
# autocorrelation gone after about 8 s), so rounds back to back meet one phase, and two
# processes' figures of one kernel agreed within 10% in a third of the cases. Twice 16 s:
# on a 2-core Zen (family 23, 2026-12-02) the F(4x4) Winograd answers' rounds ran at
# 12.5-30 ms in stretches of 5-10 s; of the 16-round stretches of a minute-long trace, 49-89%
# had a median within 10% of the minute's on the three most spread, of the 30-round ones
# 65-100% (a run of 10 minutes gives it 30 s of its 60 s re-timing share)
CONFIRM_SPAN_S = 30.0
CONFIRM_EVERY_S = 1.0


def confirm_span(seconds: float | None) -> float:
    """Seconds a winner's confirmation is spread over, in a run given (or, without a time
    budget, taking) ``seconds``: :data:`CONFIRM_SPAN_S`, at most half the re-timing's
    share of the run."""
    return 0.0 if not seconds or seconds <= 0 else min(CONFIRM_SPAN_S,
                                                       RETIME_SHARE / 2 * seconds)


def spread_rounds(rounds: int, span_s: float) -> Iterator[int]:
    """The confirmation's rounds, each yielded at its start: ``rounds``, or one every
    :data:`CONFIRM_EVERY_S` over ``span_s`` where that is more, evenly spread (a round
    that takes longer delays the next one only)."""
    n = max(rounds, int(span_s / CONFIRM_EVERY_S))
    gap = span_s / n if n else 0.0
    t0 = time.perf_counter()
    for i in range(n):
        wait = t0 + i * gap - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        yield i


RETIME_ROUND_S = 0.02  # kernel time one re-timing round of a candidate takes at least
RETIME_MAX_REPEATS = 50  # runs per round at most


def retime_repeats(time_s: float | None, repeats: int) -> int:
    """Runs per re-timing round of a kernel that took ``time_s``: ``repeats``, more for a
    short kernel, so that a round spans :data:`RETIME_ROUND_S` of kernel time (at most
    :data:`RETIME_MAX_REPEATS` runs): a few runs of a 0.3 ms kernel fall within one phase
    of the host, and their median moved by 0.7-1.3x between processes."""
    if not time_s or time_s <= 0 or not math.isfinite(time_s):
        return repeats
    return max(repeats, min(RETIME_MAX_REPEATS, math.ceil(RETIME_ROUND_S / time_s)))


def _retime(res: Results, evaluator, st: ResultStore, n: int, rounds: int,
            repeats: int) -> None:
    """Re-times the ``n`` best ``ok`` records of ``res``, interleaved, to choose the winner
    (the lowest median of a fastest round), then the winner alone in confirmation rounds
    spread over :func:`confirm_span` (``rounds`` at least: :func:`spread_rounds`), whose
    times are its reported figure with its rounds taken while the run explored
    (``Results.watched``): the rounds that chose it favour it (of several kernels within
    the noise, the one that ran luckiest wins), the rounds after the choice do not, and
    rounds spread over the run meet the host's slow and fast phases alike
    (``Retimed.of``). Every execution is recorded (see ``explore``'s ``retime``)."""
    held = res.incumbent.record  # the answer during the run competes too
    top = watching.leaders([r for r in res.records if r.key in res.candidates], n,
                           held if held is not None and held.key in res.candidates else None)
    if len(top) > n:  # the incumbent takes the last place
        top = top[:max(0, n - 1)] + top[-1:]
    if len(top) < 1:
        return
    times: dict[str, list[list[float]]] = {r.key: [] for r in top}  # each round's times
    confirm: list[list[float]] = []
    confirm_at: list[float] = []  # each confirmation round's time (unix seconds)
    winner = None
    try:
        for rnd in range(rounds):
            for r in top:
                o = evaluator.retime(res.candidates[r.key], retime_repeats(r.time_s, repeats))
                if o.status != "ok" or not o.times_s:
                    times.pop(r.key, None)  # not reproducible: not a winner
                    continue
                if r.key in times:
                    times[r.key].append(list(o.times_s))
                    st.add_retime(r.key, res.run_id, rnd, list(o.times_s))
            top = [r for r in top if r.key in times]
        if top:
            winner = min(top, key=lambda r: Retimed.of(r, times[r.key]).rank_s)
            for rnd in spread_rounds(rounds, confirm_span(res.budget.seconds
                                                          or res.elapsed_s)):
                o = evaluator.retime(res.candidates[winner.key],
                                     retime_repeats(winner.time_s, repeats))
                if o.status != "ok" or not o.times_s:
                    break  # its rounds above stand
                confirm.append(list(o.times_s))
                confirm_at.append(time.time())
                st.add_retime(winner.key, res.run_id, rnd, list(o.times_s), confirm=True)
    except KeyboardInterrupt:
        res.stopped_by = "interrupted"
    flops = getattr(evaluator.task, "flops", None)
    for r in top:
        if times.get(r.key):
            won = winner is not None and r.key == winner.key
            res.retimed[r.key] = Retimed.of(
                r, times[r.key], flops, confirm=(confirm or None) if won else None,
                confirm_at=confirm_at if won else None,
                watch=res.watched.get(r.key) if won else None)


def _loop(res: Results, strat, evaluator, st: ResultStore, bud: Budget, on_result,
          workers: int = 1, t_start: float | None = None,
          reserve: Callable[[], float] | None = None,
          known_best_s: float | None = None, watch: watching.Watch | None = None) -> None:
    """Draws candidates from ``strat`` and evaluates them until the budget is spent; with
    ``workers`` > 1 that many are in flight at once (the pool's workers lower and build in
    parallel and take turns for the timed runs). ``known_best_s``: a kernel time the early
    cut measures against until a candidate of the run is faster. ``watch``: the leaders
    are timed again now and then (``mapper.explore.watch``) while the budget leaves room
    beyond the end-of-run re-timing."""
    interrupted = threading.Event()
    old = None
    if threading.current_thread() is threading.main_thread():
        def on_sigint(signum, frame):
            interrupted.set()
            raise KeyboardInterrupt

        old = signal.signal(signal.SIGINT, on_sigint)
    if t_start is None:
        t_start = time.perf_counter()
    # with a time budget, one candidate may take a twentieth of it (at least 5 s): the
    # first candidates, before any ran ok and the early cut applies, cannot eat the budget
    cap = None if bud.seconds is None else max(5.0, bud.seconds / 20)
    if bud.seconds is not None:
        strat.deadline = t_start + bud.seconds
    seen: set[str] = set()
    repeats = 0
    searching: float | None = None  # when the pending next(it) began
    it = strat.candidates()
    ex = ThreadPoolExecutor(workers) if workers > 1 else None
    pending: dict[Future, tuple[Candidate, str]] = {}

    def retime_times(r: Record) -> list[float] | None:
        o = evaluator.retime(res.candidates[r.key], retime_repeats(r.time_s, evaluator.repeats))
        return list(o.times_s) if o.status == "ok" and o.times_s else None

    def record(cand: Candidate, key: str, rec: Record, cached: bool) -> None:
        if cached:
            res.cached += 1
            rec = replace(rec, cached=True)
        elif not st.add(rec):  # another writer stored it meanwhile
            rec = st.record(key) or rec
            res.cached += 1
        else:
            res.evaluated += 1
        res.records.append(rec)
        res.candidates[rec.key] = cand
        res.draws = strat.draws_total
        res.elapsed_s = time.perf_counter() - t_start
        strat.observe(cand, rec)
        inc = res.incumbent
        if inc.challenged_by(rec) and (bud.seconds is None or res.elapsed_s < bud.seconds - (
                reserve() if reserve else 0.0)):
            inc.challenge(rec, retime_times, st, res.run_id, res.elapsed_s)
        if watch is not None and watch.due() and bud.seconds is not None and \
                res.elapsed_s + 2 * _round_s(res) < bud.seconds - (reserve() if reserve
                                                                  else 0.0):
            watch.take(res.records, inc.record, res.candidates, retime_times, st,
                       res.run_id)
        if on_result:
            on_result(rec, res)

    try:
        while True:
            stop = None
            while stop is None and len(pending) < workers:
                if bud.candidates is not None and \
                        res.considered + len(pending) >= bud.candidates:
                    stop = "budget"
                elif bud.seconds is not None and time.perf_counter() - t_start >= \
                        bud.seconds - (reserve() if reserve else 0.0):
                    stop = "time"
                if stop:
                    break
                searching = time.perf_counter()
                cand: Candidate | None = next(it, None)
                if cand is None:  # the time a search that found nothing took
                    res.mapping_s += time.perf_counter() - searching
                    searching = None
                    stop = strat.stopped_by or "exhausted"
                    break
                searching = None
                key = evaluator.key(cand)
                if key in seen:
                    repeats += 1
                    if repeats >= MAX_REPEATS:
                        stop = "exhausted"
                    continue
                repeats = 0
                seen.add(key)
                stored = st.record(key)
                if stored is not None:
                    record(cand, key, stored, True)
                    continue
                best = res.best
                idx = res.considered + len(pending)
                best_t = best.time_s if best and best.time_s else None
                best_s = best_t  # the cut compares kernel time with kernel time
                if known_best_s is not None:
                    best_s = known_best_s if best_s is None else min(best_s, known_best_s)
                left = None if bud.seconds is None else \
                    t_start + bud.seconds - (reserve() if reserve else 0.0) \
                    - time.perf_counter()
                if ex is None:
                    t_wait = time.perf_counter()
                    rec = evaluator.run(cand, idx, best_s, left, cap, best_t)
                    res.wait_s += time.perf_counter() - t_wait
                    if interrupted.is_set():  # the worker got the Ctrl-C too: not its outcome
                        raise KeyboardInterrupt
                    if rec is None:  # stopped by the end of the time budget
                        stop = "time"
                        break
                    record(cand, key, rec, False)
                else:
                    pending[ex.submit(evaluator.run, cand, idx, best_s, left, cap, best_t)] = \
                        (cand, key)
            if not pending:
                res.stopped_by = stop or strat.stopped_by or "exhausted"
                break
            t_wait = time.perf_counter()
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            res.wait_s += time.perf_counter() - t_wait
            if interrupted.is_set():
                raise KeyboardInterrupt
            for f in done:
                cand, key = pending.pop(f)
                done_rec = f.result()
                if done_rec is not None:  # None: stopped by the end of the time budget
                    record(cand, key, done_rec, False)
    except KeyboardInterrupt:
        res.stopped_by = "interrupted"
        if searching is not None:  # interrupted while the strategy searched
            res.mapping_s += time.perf_counter() - searching
    finally:
        if ex is not None:
            ex.shutdown(wait=False, cancel_futures=True)
        if old is not None:
            signal.signal(signal.SIGINT, old)
        res.elapsed_s = time.perf_counter() - t_start
        res.draws = strat.draws_total
