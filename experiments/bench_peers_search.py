"""Search efficiency against Kernel Tuner's strategies, on the same data sets, without a device.

    python -m experiments.bench_peers_search              # the default stores, 20 seeds
    python -m experiments.bench_peers_search --stores results/search/search-7-*.sqlite \\
        --seeds 5 --kt random_sample,genetic_algorithm --liftmap solver,model
    python -m experiments.bench_peers_search --out results/bench-peers.json

For each results store (``DEFAULT_STORES``: the committed ``results/search/*.sqlite`` and
``docs/figures/data`` stores; each printed as held-out or in-sample, ``IN_SAMPLE``): the
store is written as a Kernel Tuner cache (``mapper.explore.interop``) and Kernel Tuner
1.5's strategies run on it in ``simulation_mode`` (``interop.kernel_tuner_args``: its space
exactly the stored candidates, failures included unless ``--drop-failures``, as Kernel
Tuner's ``tune_cache`` drops them); liftmap's strategies are replayed on the store
(``mapper.explore.replay``). For each strategy and seed: the evaluations (distinct
candidates, in the order the strategy evaluated them) until one reached 90% and 95% of the
data set's best throughput (for Kernel Tuner: the best time over the fraction). Printed
per store: median and interquartile range over the seeds (a seed that never reaches counts
as infinite: "never" when more than half do not), how many seeds reached, and how many Kernel
Tuner runs ended otherwise than by finishing: ``crash`` (the strategy raised; Kernel
Tuner 1.5's ``greedy_ils`` does on these sparse spaces, where a configuration has no
Hamming neighbour), ``conv`` (it proposed only configurations it had evaluated,
``MAX_REPEATS`` times in a row, as liftmap's replay stops a strategy) and ``wall`` (past
``--kt-wall`` seconds). Such a run counts the evaluations it made before it ended: one that
had not reached a target by then never reaches it. ``--out`` writes every figure as JSON.

The Kernel Tuner runs are observed by wrapping its ``SimulationRunner.run`` (every
configuration served to the strategy, in order), so a run that crashes or is stopped keeps
its evaluations. Its strategies draw from numpy's and Python's global generators: each run
seeds both.

liftmap's ``model`` is replayed twice: ``model`` with no transferred knowledge (replay's
default) and ``model+loo`` with the shipped knowledge (``mapper/explore/knowledge``) of the
same program at other sizes than the store's (``replay.load_space(transfer=True)``): the
knowledge was built from the stores of ``results/search``, each of distinct sizes, so
for them it is leave-one-out (the row says how many knowledge rows it used). The stores of
``docs/figures/data`` were explored with an older text of the program: no knowledge
applies to them, and ``model+loo`` is left out there. Needs ``pip install -e ".[bench]"``
(Kernel Tuner 1.5). Not timed; the figures are counts, so machine load does not matter.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import math
import os
import random
import signal
import statistics
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from experiments.machine import save_json

KT_STRATEGIES = ("random_sample", "greedy_ils", "greedy_mls", "dual_annealing",
                 "genetic_algorithm", "diff_evo", "pso", "simulated_annealing",
                 "firefly_algorithm", "bayes_opt", "hybrid_vndx", "adaptive_tabu_greywolf")
# liftmap's ``random`` draws from the whole joint space: in replay nearly every draw is a
# candidate the store does not hold (skipped), so it is left out; ``solver`` is the uniform
# sampler over the stored valid candidates, as Kernel Tuner's random_sample.
LIFTMAP_STRATEGIES = ("solver", "model", "model+loo")
FRACTIONS = (0.9, 0.95)
# the stores run by default: held-out first, then the in-sample reference
DEFAULT_STORES = ("results/heldout/*.sqlite",  # experiments/heldout.py: never tuned on
                  "results/search/*.sqlite",
                  "docs/figures/data/fig6-layer19-scale8-fusion-*.sqlite",
                  "docs/figures/data/l19-half-live-solver.sqlite",
                  "docs/figures/data/l19-half-1k.sqlite")
# The stores the model strategy's defaults were chosen on, by replay (docs/exploration.md,
# "Strategy efficiency by replay"; commits 2126259, 87bc3a5, adf8616): figures on them are
# in-sample. Every other committed store is held-out.
IN_SAMPLE = ("docs/figures/data/l19-half-1k.sqlite", "docs/figures/data/l19-half-solver.sqlite")


def first_reaching(values: Sequence[float], target: float, higher: bool) -> int | None:
    """1-based position of the first value at least (``higher``) or at most ``target``."""
    for i, v in enumerate(values, 1):
        if (v >= target) if higher else (v <= target):
            return i
    return None


def in_sample(store: str) -> bool:
    """Whether the model strategy's defaults were chosen on ``store`` (``IN_SAMPLE``)."""
    return os.path.normpath(store) in {os.path.normpath(s) for s in IN_SAMPLE}


class WallLimit(Exception):
    """A Kernel Tuner run went past its wall-clock limit."""


@contextlib.contextmanager
def _wall_limit(seconds: float | None) -> Iterator[None]:
    if not seconds:
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise WallLimit(f"no end after {seconds:g} s of wall time")

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Trace:
    """One Kernel Tuner run as its simulation runner served it: each distinct
    configuration's time (infinite for a failure), in order, and how the run ended."""

    trace: list[float] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    repeats: int = 0  # configurations served in a row that were already evaluated
    ended: str = "done"  # done | crash | conv | wall
    error: str = ""


def observe(tr: Trace, served: Sequence[Sequence[Any]], results: Sequence[Any],
            max_repeats: int) -> bool:
    """Adds the distinct configurations of one runner call to ``tr``; True when the run has
    proposed only configurations it had evaluated ``max_repeats`` times in a row."""
    new = 0
    for cfg, res in zip(served, results):
        if res is None:  # Kernel Tuner's budget was spent before this one
            continue
        key = ",".join(str(v) for v in cfg)
        if key in tr.seen:
            continue
        tr.seen.add(key)
        t = res.get("time")
        tr.trace.append(float(t) if "__error__" not in res and isinstance(t, (int, float))
                        else math.inf)
        new += 1
    tr.repeats = 0 if new else tr.repeats + len(served)
    return tr.repeats >= max_repeats


@contextlib.contextmanager
def _observed(tr: Trace, max_repeats: int) -> Iterator[None]:
    """Wraps Kernel Tuner's ``SimulationRunner.run`` to record what it serves into ``tr``."""
    from kernel_tuner.runners.simulation import SimulationRunner
    from kernel_tuner.util import StopCriterionReached

    orig: Callable[..., list[Any]] = SimulationRunner.run

    def run(runner: Any, parameter_space: Any, tuning_options: Any) -> list[Any]:
        served = [tuple(c) for c in parameter_space]
        results = orig(runner, served, tuning_options)
        if observe(tr, served, results, max_repeats):
            tr.ended = "conv"
            raise StopCriterionReached(f"{max_repeats} configurations in a row evaluated "
                                       "before")
        return results

    SimulationRunner.run = run
    try:
        yield
    finally:
        SimulationRunner.run = orig


def kernel_tuner_runs(cache: str, strategy: str, seeds: Sequence[int],
                      failures: bool, wall_s: float | None = 120.0,
                      max_repeats: int | None = None) -> list[Trace]:
    """One observed Kernel Tuner run of ``strategy`` on ``cache`` per seed (Kernel Tuner
    may evaluate the whole data set)."""
    import numpy as np
    from kernel_tuner import tune_kernel

    from mapper.explore.interop import kernel_tuner_args
    from mapper.explore.run import MAX_REPEATS

    with open(cache) as f:
        size = len(json.load(f)["cache"])
    out: list[Trace] = []
    for seed in seeds:
        random.seed(seed)
        np.random.seed(seed)
        tr = Trace()
        try:
            with warnings.catch_warnings(), _wall_limit(wall_s), \
                    _observed(tr, max_repeats or MAX_REPEATS):
                warnings.simplefilter("ignore")
                tune_kernel(**kernel_tuner_args(cache, failures=failures), strategy=strategy,
                            strategy_options={"max_fevals": size})
        except WallLimit as e:
            tr.ended, tr.error = "wall", str(e)
        except Exception as e:  # the peer's strategy failed on this seed: a typed end
            tr.ended, tr.error = "crash", f"{type(e).__name__}: {e}"
        out.append(tr)
    return out


def kernel_tuner_best(cache: str) -> tuple[float, int]:
    """The best (lowest) time of the cache's successful entries, and how many there are."""
    with open(cache) as f:
        doc = json.load(f)
    times = [float(e["time"]) for e in doc["cache"].values() if "__error__" not in e]
    return min(times), len(times)


def reach(traces: Sequence[Trace], best_time: float, fraction: float) -> list[int | None]:
    """Per run: the evaluations until a time at most ``best_time / fraction``."""
    return [first_reaching(t.trace, best_time / fraction, higher=False) for t in traces]


def liftmap_runs(store: str, strategy: str, seeds: Sequence[int], fractions: Sequence[float]
                 ) -> tuple[dict[float, list[int | None]], dict[str, Any]]:
    """Per fraction, per seed: a replayed liftmap strategy's evaluations to reach it, and
    what the run used (the transferred knowledge's rows for ``model+loo``)."""
    from mapper.explore.knowledge import Knowledge
    from mapper.explore.replay import _perf, evaluations_to_reach, load_space, replay

    name, transfer = ("model", True) if strategy == "model+loo" else (strategy, False)
    space, _ = load_space(store, transfer=transfer)
    info: dict[str, Any] = {}
    options: dict[str, Any] = {}
    if name == "model":
        options["transfer"] = transfer
    if transfer:
        kn = Knowledge.for_space(space)
        info = {"knowledge_rows": kn.rows if kn else 0,
                "knowledge_sizes": len(kn.sizes) if kn else 0}
    best = max(_perf(r) for r in space.records.values())
    out: dict[float, list[int | None]] = {fr: [] for fr in fractions}
    for seed in seeds:
        res = replay(space, name, seed=seed, stop_at=max(fractions) * best, **options)
        for fr in fractions:
            out[fr].append(evaluations_to_reach(res, fr * best))
    return out, info


def store_targets(store: str, fractions: Sequence[float]) -> tuple[int, dict[float, int]]:
    """The store's candidates and, per fraction, how many reach it (liftmap's throughput)."""
    from mapper.explore.replay import _perf, load_space

    space, _ = load_space(store)
    perfs = [_perf(r) for r in space.records.values()]
    best = max(perfs)
    return len(perfs), {fr: sum(p >= fr * best for p in perfs) for fr in fractions}


def summarise(evals: Sequence[int | None]) -> dict[str, Any]:
    """Median and quartiles over seeds (never reached: infinite), how many reached."""
    vals = sorted(math.inf if v is None else float(v) for v in evals)
    q = statistics.quantiles(vals, n=4, method="inclusive") if len(vals) > 1 else vals * 3
    med = statistics.median(vals)
    return {"median": None if math.isinf(med) else med,
            "q1": None if math.isinf(q[0]) else q[0], "q3": None if math.isinf(q[2]) else q[2],
            "reached": sum(v is not None for v in evals), "seeds": len(evals)}


def fmt(s: dict[str, Any]) -> str:
    """``median [q1-q3] (reached/seeds)``, or ``never (reached/seeds)``."""
    if s["median"] is None:
        return f"never ({s['reached']}/{s['seeds']})"
    q3 = "inf" if s["q3"] is None else f"{s['q3']:g}"
    return f"{s['median']:g} [{s['q1']:g}-{q3}] ({s['reached']}/{s['seeds']})"


def short_name(store: str) -> str:
    """A store's column name in the table: its file name without ``search-`` and suffix."""
    name = os.path.basename(store).removesuffix(".sqlite").removeprefix("search-")
    return name.replace("fig6-layer19-scale8-fusion-", "l19/8-")


def markdown(docs: Sequence[dict[str, Any]], fraction: float) -> str:
    """One markdown table from ``--out`` files: a row per strategy, a column per store,
    each cell the median evaluations to ``fraction`` of the best and the seeds that reached
    it (``never`` when more than half did not)."""
    stores = [(st, d) for doc in docs for st, d in doc["stores"].items()]
    names: list[str] = []
    for _, d in stores:
        names += [n for n in d["strategies"] if n not in names]
    head = ["strategy"] + [f"{short_name(st)} ({d['kind']}, {d['candidates']}, "
                           f"{d['targets'][str(fraction)]} target)" for st, d in stores]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * len(stores) + "|"]
    for n in names:
        cells = []
        for _, d in stores:
            row = d["strategies"].get(n)
            if row is None:
                cells.append("")
                continue
            s = row[str(fraction)]
            med = "never" if s["median"] is None else f"{s['median']:g}"
            ended = ", ".join(f"{k} {v}" for k, v in sorted(ends_of(row).items())) \
                if "ended" in row else ""
            cells.append(f"{med} ({s['reached']}/{s['seeds']}{'; ' + ended if ended else ''})")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def default_stores() -> list[str]:
    """The committed stores of ``DEFAULT_STORES`` that exist here, in that order."""
    out: list[str] = []
    for pattern in DEFAULT_STORES:
        out += [p for p in sorted(glob.glob(pattern)) if p not in out]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--stores", nargs="*", help="results stores (default: DEFAULT_STORES)")
    ap.add_argument("--seeds", type=int, default=20, help="seeds per strategy (default 20)")
    ap.add_argument("--first-seed", type=int, default=0, help="first seed (default 0)")
    ap.add_argument("--kt", default=",".join(KT_STRATEGIES), help="Kernel Tuner strategies")
    ap.add_argument("--liftmap", default=",".join(LIFTMAP_STRATEGIES),
                    help="liftmap strategies (model+loo: the model with leave-one-out "
                    "transferred knowledge)")
    ap.add_argument("--drop-failures", action="store_true", help="Kernel Tuner's space "
                    "without the failed candidates (as its tune_cache)")
    ap.add_argument("--kt-wall", type=float, default=120.0, help="wall-clock seconds one "
                    "Kernel Tuner run may take (default 120; past it, the run ends)")
    ap.add_argument("--out", help="write every figure to this JSON file")
    ap.add_argument("--table", nargs="+", metavar="JSON", help="print the markdown tables "
                    "(90%% and 95%%) of these --out files and run nothing")
    args = ap.parse_args(argv)
    if args.table:
        docs = []
        for path in args.table:
            with open(path) as f:
                docs.append(json.load(f))
        for fr in FRACTIONS:
            print(f"\nevaluations to {fr:.0%} of the best: median (seeds reached; runs that "
                  f"did not finish)\n\n{markdown(docs, fr)}")
        return 0
    from experiments.baselines import skipped_peer
    from mapper.explore.interop import export_store

    kt = [s for s in args.kt.split(",") if s]
    try:
        import kernel_tuner
    except ModuleNotFoundError:  # liftmap's strategies are still replayed
        kernel_tuner, kt = None, []
        print(skipped_peer("Kernel Tuner", "kernel_tuner"), flush=True)

    stores = args.stores or default_stores()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    lm = [s for s in args.liftmap.split(",") if s]
    doc: dict[str, Any] = {"seeds": seeds, "fractions": list(FRACTIONS),
                           "kernel_tuner": getattr(kernel_tuner, "__version__", "?"),
                           "failures_in_kernel_tuner_space": not args.drop_failures,
                           "kt_wall_s": args.kt_wall, "command": sys.argv, "stores": {}}
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        for store in stores:
            cache = os.path.join(tmp, os.path.basename(store) + ".json")
            export_store(store, "kernel-tuner", cache)
            n, targets = store_targets(store, FRACTIONS)
            best_time, n_ok = kernel_tuner_best(cache)
            rows: dict[str, Any] = {}
            for name in lm:
                runs, info = liftmap_runs(store, name, seeds, FRACTIONS)
                if name == "model+loo" and not info.get("knowledge_rows"):
                    continue  # no knowledge of this program at other sizes: same as model
                rows[f"liftmap:{name}"] = {**info, **{str(fr): {"evaluations": runs[fr],
                                                                **summarise(runs[fr])}
                                                      for fr in runs}}
            for name in kt:
                traces = kernel_tuner_runs(cache, name, seeds, not args.drop_failures,
                                           args.kt_wall)
                row: dict[str, Any] = {
                    "ended": [t.ended for t in traces],
                    "errors": sorted({t.error for t in traces if t.error}),
                    "evaluated": [len(t.trace) for t in traces]}
                for fr in FRACTIONS:
                    runs_kt = reach(traces, best_time, fr)
                    row[str(fr)] = {"evaluations": runs_kt, **summarise(runs_kt)}
                rows[f"kernel_tuner:{name}"] = row
            kind = "in-sample" if in_sample(store) else "held-out"
            doc["stores"][store] = {"candidates": n, "ok": n_ok, "kind": kind,
                                    "targets": {str(k): v for k, v in targets.items()},
                                    "strategies": rows}
            print(f"\n{store} ({kind}): {n} candidates, {n_ok} ok, "
                  f"{targets[0.9]} / {targets[0.95]} within 90% / 95% of the best; "
                  f"evaluations to 90% / 95%: median [q1-q3] (seeds reached), runs not "
                  f"finished", flush=True)
            for name, row in rows.items():
                extra = ""
                if "ended" in row:
                    extra = " ".join(f"{k} {v}" for k, v in sorted(ends_of(row).items()))
                elif "knowledge_rows" in row:
                    extra = (f"knowledge: {row['knowledge_rows']} rows of "
                             f"{row['knowledge_sizes']} other sizes")
                print(f"  {name:<34} {fmt(row['0.9']):<28} {fmt(row['0.95']):<28} {extra}",
                      flush=True)
            for name, row in rows.items():
                if row.get("errors"):
                    print(f"  {name}: {row['errors'][0]}", flush=True)
    if args.out:
        save_json(args.out, doc)
        print(f"\nwrote {args.out}")
    return 0


def ends_of(row: dict[str, Any]) -> dict[str, int]:
    """How many runs of a Kernel Tuner row ended each way other than ``done``."""
    out: dict[str, int] = {}
    for e in row["ended"]:
        if e != "done":
            out[e] = out.get(e, 0) + 1
    return out


if __name__ == "__main__":
    sys.exit(main())
