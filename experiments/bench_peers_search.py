"""Search efficiency against Kernel Tuner's strategies, on the same data sets, without a device.

    python -m experiments.bench_peers_search              # every committed store, 20 seeds
    python -m experiments.bench_peers_search --stores results/search/search-7-*.sqlite \\
        --seeds 5 --kt random_sample,genetic_algorithm --liftmap solver,model
    python -m experiments.bench_peers_search --no-transfer --out results/bench-peers.json

For each results store (``results/search/*.sqlite`` by default): the store is written as a
Kernel Tuner cache (``mapper.explore.interop``) and Kernel Tuner 1.5's strategies run on it
in ``simulation_mode`` (``interop.kernel_tuner_args``: its space exactly the stored
candidates, failures included unless ``--drop-failures``, as Kernel Tuner's ``tune_cache``
drops them); liftmap's strategies are replayed on the store (``mapper.explore.replay``).
For each strategy and seed: the evaluations (distinct candidates, Kernel Tuner's count)
until one reached 90% and 95% of the data set's best throughput (time for Kernel Tuner:
the best time over the fraction). Printed per store: median and interquartile range over
the seeds (a seed that never reaches counts as infinite: "never" when more than half do
not), and how many seeds reached; ``--out`` writes every figure as JSON. Every strategy may
evaluate the whole data set (``max_fevals``); one that stops on its own before reaching
(a converged local search) counts as never reaching.

Kernel Tuner's strategies draw from numpy's and Python's global generators: each run seeds
both. The ``model`` strategy's transferred knowledge (``mapper/explore/knowledge``) was
built from these data sets: ``--no-transfer`` turns it off, for figures out of sample.
Needs ``pip install -e ".[bench]"`` (Kernel Tuner 1.5). Not timed; the figures are counts.
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
from collections.abc import Iterator, Sequence
from typing import Any

KT_STRATEGIES = ("random_sample", "greedy_ils", "greedy_mls", "dual_annealing",
                 "genetic_algorithm", "diff_evo", "pso", "simulated_annealing",
                 "firefly_algorithm", "bayes_opt", "hybrid_vndx", "adaptive_tabu_greywolf")
LIFTMAP_STRATEGIES = ("solver", "random", "model")
FRACTIONS = (0.9, 0.95)


def _first_reaching(values: Sequence[float], target: float, higher: bool) -> int | None:
    """1-based position of the first value at least (``higher``) or at most ``target``."""
    for i, v in enumerate(values, 1):
        if (v >= target) if higher else (v <= target):
            return i
    return None


class WallLimit(Exception):
    """A Kernel Tuner run went past its wall-clock limit (some strategies revisit the same
    configurations for ever on a sparse space)."""


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


def kernel_tuner_runs(cache: str, strategy: str, seeds: Sequence[int],
                      fractions: Sequence[float], failures: bool,
                      wall_s: float | None = 120.0) -> dict[float, list[int | None]]:
    """Per fraction, per seed: Kernel Tuner's distinct evaluations to reach it (a run that
    fails or passes ``wall_s`` never reached)."""
    import numpy as np
    from kernel_tuner import tune_kernel

    from mapper.explore.interop import kernel_tuner_args

    with open(cache) as f:
        doc = json.load(f)
    keys = doc["tune_params_keys"]
    times = [e["time"] for e in doc["cache"].values() if "__error__" not in e]
    best = min(times)
    out: dict[float, list[int | None]] = {fr: [] for fr in fractions}
    errors: list[str] = []
    for seed in seeds:
        random.seed(seed)
        np.random.seed(seed)
        try:
            with warnings.catch_warnings(), _wall_limit(wall_s):
                warnings.simplefilter("ignore")
                results, _ = tune_kernel(**kernel_tuner_args(cache, failures=failures),
                                         strategy=strategy,
                                         strategy_options={"max_fevals": len(doc["cache"])})
        except Exception as e:  # the peer's strategy failed on this seed: it never reached
            errors.append(f"seed {seed}: {type(e).__name__}: {e}")
            for fr in fractions:
                out[fr].append(None)
            continue
        seen: set[str] = set()
        trace: list[float] = []  # each distinct candidate's time, in the order evaluated
        for r in results:
            if r is None:
                continue
            key = ",".join(str(r[p]) for p in keys)
            if key in seen:
                continue
            seen.add(key)
            t = r.get("time")
            trace.append(t if "__error__" not in r and isinstance(t, (int, float))
                         else math.inf)
        for fr in fractions:
            out[fr].append(_first_reaching(trace, best / fr, higher=False))
    if errors:
        print(f"  {strategy}: {len(errors)} seed(s) failed in Kernel Tuner, counted as never "
              f"reaching; first: {errors[0]}", file=sys.stderr)
    return out


def liftmap_runs(store: str, strategy: str, seeds: Sequence[int], fractions: Sequence[float],
                 options: dict[str, Any]) -> dict[float, list[int | None]]:
    """Per fraction, per seed: a replayed liftmap strategy's evaluations to reach it."""
    from mapper.explore.replay import _perf, evaluations_to_reach, load_space, replay

    space, _ = load_space(store)
    best = max(_perf(r) for r in space.records.values())
    out: dict[float, list[int | None]] = {fr: [] for fr in fractions}
    for seed in seeds:
        res = replay(space, strategy, seed=seed, stop_at=max(fractions) * best,
                     **(options if strategy == "model" else {}))
        for fr in fractions:
            out[fr].append(evaluations_to_reach(res, fr * best))
    return out


def summarise(evals: list[int | None]) -> dict[str, Any]:
    """Median and quartiles over seeds (never reached: infinite), how many reached."""
    vals = sorted(math.inf if v is None else float(v) for v in evals)
    q = statistics.quantiles(vals, n=4, method="inclusive") if len(vals) > 1 else vals * 3
    med = statistics.median(vals)
    return {"median": None if math.isinf(med) else med,
            "q1": None if math.isinf(q[0]) else q[0], "q3": None if math.isinf(q[2]) else q[2],
            "reached": sum(v is not None for v in evals), "seeds": len(evals)}


def _fmt(s: dict[str, Any]) -> str:
    if s["median"] is None:
        return f"never ({s['reached']}/{s['seeds']})"
    q3 = "inf" if s["q3"] is None else f"{s['q3']:g}"
    return f"{s['median']:g} [{s['q1']:g}-{q3}] ({s['reached']}/{s['seeds']})"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stores", nargs="*", help="results stores (default: results/search/*)")
    ap.add_argument("--seeds", type=int, default=20, help="seeds per strategy (default 20)")
    ap.add_argument("--kt", default=",".join(KT_STRATEGIES), help="Kernel Tuner strategies")
    ap.add_argument("--liftmap", default=",".join(LIFTMAP_STRATEGIES),
                    help="liftmap strategies")
    ap.add_argument("--drop-failures", action="store_true", help="Kernel Tuner's space "
                    "without the failed candidates (as its tune_cache)")
    ap.add_argument("--no-transfer", action="store_true", help="the model strategy without "
                    "its transferred knowledge")
    ap.add_argument("--kt-wall", type=float, default=120.0, help="wall-clock seconds one "
                    "Kernel Tuner run may take (default 120; past it: never reached)")
    ap.add_argument("--out", help="write every figure to this JSON file")
    args = ap.parse_args(argv)
    try:
        import kernel_tuner  # noqa: F401
    except ModuleNotFoundError:
        print("needs Kernel Tuner 1.5: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    from mapper.explore.interop import export_store

    stores = args.stores or sorted(glob.glob("results/search/*.sqlite"))
    seeds = list(range(args.seeds))
    kt = [s for s in args.kt.split(",") if s]
    lm = [s for s in args.liftmap.split(",") if s]
    options = {"transfer": False} if args.no_transfer else {}
    doc: dict[str, Any] = {"seeds": args.seeds, "fractions": list(FRACTIONS),
                           "failures_in_kernel_tuner_space": not args.drop_failures,
                           "model_transfer": not args.no_transfer, "stores": {}}
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        for store in stores:
            cache = os.path.join(tmp, os.path.basename(store) + ".json")
            n = export_store(store, "kernel-tuner", cache)
            rows: dict[str, Any] = {}
            for name in lm:
                runs = liftmap_runs(store, name, seeds, FRACTIONS, options)
                rows[f"liftmap:{name}"] = {str(fr): {"evaluations": runs[fr],
                                                     **summarise(runs[fr])} for fr in runs}
            for name in kt:
                try:
                    runs = kernel_tuner_runs(cache, name, seeds, FRACTIONS,
                                             not args.drop_failures, args.kt_wall)
                except Exception as e:  # a peer's strategy failing is a row, not the end
                    rows[f"kernel_tuner:{name}"] = {"error": f"{type(e).__name__}: {e}"}
                    continue
                rows[f"kernel_tuner:{name}"] = {str(fr): {"evaluations": runs[fr],
                                                          **summarise(runs[fr])}
                                                for fr in runs}
            doc["stores"][store] = {"candidates": n, "strategies": rows}
            print(f"\n{store}: {n} candidates, evaluations to 90% / 95% of the best: "
                  f"median [q1-q3] (seeds reached)")
            for name, row in rows.items():
                if "error" in row:
                    print(f"  {name:<34} {row['error']}")
                    continue
                print(f"  {name:<34} {_fmt(row['0.9']):<28} {_fmt(row['0.95'])}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
