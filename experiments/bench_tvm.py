"""TVM's MetaSchedule against liftmap and PyTorch on one convolution layer (or numpy on a
matrix product), on this CPU.

    python -m experiments.bench_tvm --layer 19 --budget 10m --rounds 3
    python -m experiments.bench_tvm --matmul 1024 --budget 3m --rounds 5    # the plain matmul
    python -m experiments.bench_tvm --sizes C=64,H=56,W=56,M=128,S=2 --budget 4m \\
        --liftmap-store results/search/search-shape0-64x56x56x128k3s2p1.sqlite
    python -m experiments.bench_tvm --sizes C=16,H=14,W=14,M=16 --budget 15s --rounds 2  # check
    python -m experiments.bench_tvm --sizes C=8,H=8,W=8,M=8 --budget 25s --liftmap-budget 2 \
        --rounds 1    # liftmap's search ends after 2 candidates (a smoke run)

The layer is given as ``mapper explore conv`` takes it (``--layer 19`` or ``19/2``, or
``--sizes C=,H=,W=,M=[,K=,S=,P=]``, K=3 S=1 P=1 unless given) and computed by each tool in
float32: TVM on an NCHW input and MCKK weights (``topi.nn.conv2d_nchw``), liftmap on its
task's layout (``Task.conv_layer``), PyTorch's ``conv2d`` (NCHW).

1. TVM: MetaSchedule (``tvm.s_tir.meta_schedule.tune_tir``: evolutionary search, XGBoost
   cost model, the local builder and runner) tunes the layer for the target ``llvm`` with
   this host's CPU as LLVM names it (``-mcpu``) and its usable cores, for ``--budget`` of
   wall time (checked after each batch of ``--trials-per-iter`` trials: the last batch
   runs to its end). A measure callback records every trial's latency, so the run's
   best-so-far curve gives the trials and seconds to 90% and 95% of its final best.
2. liftmap: the best ``ok`` candidate of ``--liftmap-store`` (a store of the direct
   convolution at the same sizes), or else the search ``mapper explore conv`` runs, with
   its defaults, for the same wall budget (or ``--liftmap-budget``: candidates or a time):
   every variant that applies, Winograd's among them, the answer re-timed at the run's end
   (stored in ``--store-dir``).
3. Timing: ``--rounds`` interleaved rounds of liftmap's kernel (OpenCL profiling times, in a
   worker, checked), TVM's best (wall time of one call) and PyTorch (wall time of one call,
   as ``experiments.bench_search``), each after a ``--settle`` pause and an untimed
   warm-up, ``--repeats`` runs each; medians and maxima in GFLOP/s. TVM's output is checked
   against the float64 reference before timing.

``--matmul M[,N,K]`` compares the matrix product instead: TVM's MetaSchedule on ``C[i, j] =
sum_k A[i, k] * Bt[j, k]`` (the layout of ``examples/matmul_plain.lift``), liftmap's default
search of that file as ``mapper explore FILE --sizes M=,N=,K= --budget`` runs it
(``experiments.bench_plain.explore``: the run's re-timed answer, built again) and numpy's
sgemm (``A @ Bt.T``), each checked against a float64 product, timed as above.

``--table JSON...`` tunes nothing: it prints the runs' ``--json`` files as one Markdown
table, a row per workload, with the geometric means of liftmap / TVM and liftmap / its
baseline (PyTorch or numpy).

The machine (``experiments.machine.cpu_model``), the load average before and after, and any
other process using more than a tenth of a core (``bench_search.busy_others``) are printed:
figures taken beside other work are not comparable. Needs the ``bench`` extra
(``pip install -e ".[bench]"``: apache-tvm with apache-tvm-ffi 0.1.14, xgboost, PyTorch).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from experiments.machine import cpu_model, save_json
from experiments.options import add_bench_seed, add_interleaving, add_json

DEFAULT_LAYER = "19"


def parse_layer_args(layer: str | None, sizes: str | None) -> Any:
    """The ``ConvLayer`` of ``--layer`` (a VGG-16 layer, ``19`` or ``19/2``) or ``--sizes``
    (``C=,H=,W=,M=[,K=,S=,P=]``, as ``mapper explore conv --sizes``); ValueError if both
    or neither form is usable."""
    from ir.conv_layer import ConvLayer, parse_layer

    if layer and sizes:
        raise ValueError("give --layer or --sizes, not both")
    if not sizes:
        return parse_layer(layer or DEFAULT_LAYER)
    kv: dict[str, int] = {}
    for item in sizes.split(","):
        k, eq, v = item.partition("=")
        if not eq or not v.strip().lstrip("-").isdigit():
            raise ValueError(f"--sizes: {item!r} is not NAME=INTEGER")
        kv[k.strip()] = int(v)
    return ConvLayer.from_sizes(kv, name="custom")  # ConvShapeError (a ValueError) if wrong


def nchw_shapes(layer: Any) -> dict[str, tuple[int, ...]]:
    """The NCHW float32 shapes of the layer's input, weights and output (batch 1)."""
    return {"data": (1, layer.C, layer.H, layer.W),
            "kernel": (layer.M, layer.C, layer.K, layer.K),
            "output": (1, layer.M, layer.out_h, layer.out_w)}


def to_nchw(x_hwc: np.ndarray, w_mkkc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """liftmap's task inputs (HWC input, MKKC weights) as NCHW input and MCKK weights."""
    return (np.ascontiguousarray(x_hwc.transpose(2, 0, 1))[None],
            np.ascontiguousarray(w_mkkc.transpose(0, 3, 1, 2)))


def llvm_target(cpu: str, cores: int) -> dict[str, Any]:
    """TVM's target for this host: LLVM code for ``cpu`` (LLVM's name, e.g. ``znver3``)
    on ``cores`` cores, as the JSON dict TVM 0.27 takes."""
    return {"kind": "llvm", "mcpu": cpu, "num-cores": int(cores)}


def parse_seconds(text: str) -> float:
    """``"90"``, ``"90s"``, ``"10m"``, ``"1h"`` -> seconds (> 0)."""
    t = text.strip().lower()
    unit = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(t[-1:], None)
    value = float(t[:-1] if unit else t) * (unit or 1.0)
    if not value > 0:
        raise ValueError(f"budget {text!r} must be positive")
    return value


class NoSchedule(RuntimeError):
    """MetaSchedule's budget ended before any trial built and ran."""


@dataclass
class Curve:
    """A tuning run's trials: (seconds since its start, latency in s; inf for a failed
    trial), in order."""

    points: list[tuple[float, float]] = field(default_factory=list)

    @property
    def best(self) -> float:
        """The lowest latency (inf when no trial ran)."""
        return min((lat for _, lat in self.points), default=math.inf)

    def reach(self, fraction: float) -> tuple[int, float] | None:
        """(trials, seconds) until a latency at most ``best / fraction`` (the run's own
        final best as reference); None when no trial ran."""
        best = self.best
        if math.isinf(best):
            return None
        for i, (s, lat) in enumerate(self.points, 1):
            if lat <= best / fraction:
                return i, s
        return None


def import_intrinsics() -> None:
    """Imports TVM's tensor intrinsics (a MetaSchedule build worker's initializer)."""
    import tvm.s_tir.tensor_intrin  # noqa: F401


def conv_func(layer: Any) -> Any:
    """The layer as a TVM PrimFunc (NCHW input, MCKK weights, float32)."""
    from tvm import te, topi

    sh = nchw_shapes(layer)
    data = te.placeholder(sh["data"], name="data", dtype="float32")
    kernel = te.placeholder(sh["kernel"], name="kernel", dtype="float32")
    out = topi.nn.conv2d_nchw(data, kernel, layer.S, layer.P, 1, out_dtype="float32")
    return te.create_prim_func([data, kernel, out])


def matmul_func(m: int, n: int, k: int) -> Any:
    """``C[i, j] = sum_r A[i, r] * Bt[j, r]`` as a TVM PrimFunc (float32)."""
    from tvm import te

    a = te.placeholder((m, k), name="A", dtype="float32")
    bt = te.placeholder((n, k), name="Bt", dtype="float32")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * bt[j, r], axis=r), name="C")
    return te.create_prim_func([a, bt, c])


def tune_tvm(layer: Any, budget_s: float, work_dir: str, trials_per_iter: int, seed: int,
             cores: int, population: int | None = None, timeout_s: float | None = None
             ) -> tuple[Any, Curve, dict[str, Any]]:
    """MetaSchedule tuning of ``layer`` (a ``ConvLayer``, or a zero-argument function
    making the PrimFunc to tune) for ``budget_s`` of wall time (from the start of
    ``tune_tir``; TVM's one-time imports come before); returns the compiled best (a TVM
    module), the curve and what the run used. ``population``: the evolutionary search's
    population, ``timeout_s`` the local builder's and runner's per-trial timeout (None:
    MetaSchedule's defaults, 512 and 30 s)."""
    t_import = time.perf_counter()
    import tvm
    import tvm.s_tir.tensor_intrin  # noqa: F401  (parsed on first use: a minute under load)
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.measure_callback import MeasureCallback, PyMeasureCallback

    import_s = time.perf_counter() - t_import

    func = layer() if callable(layer) else conv_func(layer)
    cpu = str(tvm.target.codegen.llvm_get_system_cpu())
    target = tvm.target.Target(llvm_target(cpu, cores))
    curve = Curve()
    start = time.perf_counter()

    @derived_object
    class Record(PyMeasureCallback):
        """Records each trial's latency; ends the task once the budget is spent."""

        def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Any,
                  builder_results: Any, runner_results: Any) -> None:
            now = time.perf_counter() - start
            for r in runner_results:
                secs = [float(s) for s in (r.run_secs or [])]
                ok = r.error_msg is None and secs
                curve.points.append((now, statistics.mean(secs) if ok else math.inf))
            if now >= budget_s:
                task_scheduler.terminate_task(task_id)

    callbacks = [*MeasureCallback.create("default"), Record()]
    strategy: Any = "evolutionary" if population is None else \
        ms.search_strategy.EvolutionarySearch(population_size=population)
    # MetaSchedule starts fresh build workers for every batch, and each imports TVM's tensor
    # intrinsics on its first build (tens of seconds): imported by the worker's initializer,
    # that time is not taken out of each build's timeout
    builder: Any = ms.builder.LocalBuilder(initializer=import_intrinsics,
                                           **({} if timeout_s is None else
                                              {"timeout_sec": timeout_s}))
    runner: Any = "local" if timeout_s is None else ms.runner.LocalRunner(timeout_sec=timeout_s)
    db = ms.tune_tir(func, target, work_dir, max_trials_global=1_000_000,
                     num_trials_per_iter=trials_per_iter, measure_callbacks=callbacks,
                     strategy=strategy, builder=builder, runner=runner, seed=seed,
                     num_tuning_cores=cores)
    tuned_s = time.perf_counter() - start
    sch = ms.tir_integration.compile_tir(db, func, target)
    if sch is None:
        raise NoSchedule(f"none of MetaSchedule's {len(curve.points)} trial(s) ran (its log "
                         "is in --work-dir's logs; on a loaded machine, raise --tvm-timeout)")
    lib = tvm.compile(sch.mod, target=target)
    return lib, curve, {"target": str(target), "mcpu": cpu, "tuning_s": tuned_s,
                        "trials": len(curve.points), "import_s": import_s,
                        "population": population, "timeout_s": timeout_s}


def tvm_runner(lib: Any, x_nchw: np.ndarray, w_mckk: np.ndarray,
               out_shape: tuple[int, ...]) -> tuple[Any, Any]:
    """A zero-argument call of TVM's compiled layer on these inputs, and its output."""
    import tvm

    dev = tvm.cpu(0)
    a, w = tvm.runtime.tensor(x_nchw, dev), tvm.runtime.tensor(w_mckk, dev)
    out = tvm.runtime.tensor(np.zeros(out_shape, dtype=np.float32), dev)
    fn = lib["main"]

    def run() -> None:
        fn(a, w, out)

    return run, out


def liftmap_budget(args: argparse.Namespace) -> str:
    """liftmap's search budget: ``--liftmap-budget`` (candidates or a time), else the
    tuners' common wall budget ``--budget``."""
    return args.liftmap_budget or f"{args.budget_s:g}s"


def liftmap_kernel(task: Any, layer: Any, args: argparse.Namespace
                   ) -> tuple[Any, Any, dict]:
    """liftmap's found kernel: (its task, its ``lower_fn``, what it is) from
    ``--liftmap-store`` (a store of ``task``, the direct convolution) or a new search, as
    ``mapper explore conv`` runs it (every variant that applies, Winograd's among them:
    ``conv_variants``; its task is the chosen variant's)."""
    from mapper.explore import ExploreOptions
    from mapper.explore.store import ResultStore
    from mapper.explore.task import conv_variants
    from mapper.explore.variants import explore_variants, variant_store

    if args.liftmap_store:
        with ResultStore(args.liftmap_store, readonly=True) as st:
            ctx = st.context()
            if ctx is None or dict(ctx.sizes) != dict(layer.sizes()):
                raise ValueError(f"{args.liftmap_store} holds sizes "
                                 f"{None if ctx is None else dict(ctx.sizes)}, not "
                                 f"{layer.sizes()}")
            recs = [r for r in st.records() if r.ok and r.gflops]
        if not recs:
            raise ValueError(f"{args.liftmap_store} has no ok candidate")
        best = max(recs, key=lambda r: r.gflops or 0.0)
        info: dict[str, Any] = {"source": args.liftmap_store, "evaluated": len(recs)}
    else:
        os.makedirs(args.store_dir, exist_ok=True)
        path = os.path.join(args.store_dir, f"tvm-bench-{layer.C}x{layer.H}x{layer.W}x"
                            f"{layer.M}k{layer.K}s{layer.S}p{layer.P}.sqlite")
        tasks = conv_variants(layer)
        stores = {n: variant_store(path, n, i == 0) for i, n in enumerate(tasks)}
        t0 = time.time()
        vr = explore_variants(tasks, budget=liftmap_budget(args), stores=stores,
                              options=ExploreOptions.of(seed=args.seed))
        res = vr.results
        if res.final is None:
            raise RuntimeError("liftmap's search found no candidate that runs")
        best, task = res.final, tasks[vr.chosen]
        info = {"source": stores[vr.chosen], "variant": vr.chosen,
                "evaluated": res.evaluated, "explore_s": time.time() - t0}
    info["best"] = f"{best.short_mapping}; {dict(best.tuning)}"
    mapping = task.joint().problem.mapping(best.mapping)
    return task, task.lower_fn(mapping, dict(best.tuning)), info


def timed(runs: dict[str, Callable[[], Sequence[float]]], args: argparse.Namespace,
          out: dict[str, Any], warn: list[str]) -> dict[str, list[float]] | None:
    """``runs`` interleaved (``--rounds``, ``--settle``): name -> times; the load after and
    the warnings go into ``out``. None (the error printed) where a run failed."""
    from experiments.baselines import RunFailed, interleave
    from experiments.bench_search import busy_others, load

    try:
        times = interleave(runs, args.rounds, args.settle)
    except RunFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    out["load_after"] = load()
    others = busy_others()
    if others:
        warn.append(f"busy after: {', '.join(others)}")
    out["warnings"] = warn
    return times


def parse_matmul(text: str) -> tuple[int, int, int]:
    """``"1024"`` -> (1024, 1024, 1024); ``"M,N,K"`` -> (M, N, K); ValueError otherwise."""
    parts = [x.strip() for x in text.split(",")]
    if len(parts) not in (1, 3) or not all(x.isdigit() and int(x) >= 1 for x in parts):
        raise ValueError(f"--matmul {text!r}: give M,N,K or one size, positive integers")
    m, n, k = (int(parts[0]),) * 3 if len(parts) == 1 else tuple(int(x) for x in parts)
    return m, n, k


def bench_matmul(mnk: tuple[int, int, int], args: argparse.Namespace) -> int:
    """TVM, liftmap's default search and numpy on the plain matmul (the module docstring)."""
    from experiments.baselines import skipped_peer, wall_times
    from experiments.bench_plain import explore, kernel_round
    from experiments.bench_search import busy_others, load

    m, n, k = mnk
    flops = 2 * m * n * k
    cores = len(os.sched_getaffinity(0))
    print(f"machine: {cpu_model()}; load {load()}; matmul {m}x{k} by {k}x{n}, budget "
          f"{args.budget_s:g} s each", flush=True)
    others = busy_others()
    warn = [f"busy before: {', '.join(others)}"] if others else []
    out: dict[str, Any] = {"machine": cpu_model(), "matmul": {"M": m, "N": n, "K": k},
                           "flops": flops, "budget_s": args.budget_s,
                           "liftmap_budget": liftmap_budget(args),
                           "load_before": load(), "command": sys.argv}
    lib = None
    try:
        import tvm  # noqa: F401
    except ImportError:
        print(skipped_peer("TVM", "tvm"), flush=True)
    else:
        with tempfile.TemporaryDirectory(prefix="tvm-ms-") as tmp:
            try:
                lib, curve, info = tune_tvm(functools.partial(matmul_func, m, n, k),
                                            args.budget_s, args.work_dir or tmp,
                                            args.trials_per_iter, args.seed, cores,
                                            args.population, args.tvm_timeout)
            except NoSchedule as e:
                print(f"error: {e}", file=sys.stderr)
                return 1
        out["tvm"] = {**info, "best_while_tuning_gflops": flops / curve.best / 1e9,
                      **{f"to{round(f * 100)}": curve.reach(f) for f in (0.9, 0.95)}}
        print(f"TVM: {info['trials']} trials in {info['tuning_s']:.0f} s, best "
              f"{flops / curve.best / 1e9:.1f} GFLOP/s while tuning", flush=True)
    ans = explore("matmul_plain", liftmap_budget(args), {"M": m, "N": n, "K": k})
    out["liftmap"] = ans.row
    if ans.kernel is None:
        print(f"error: liftmap: {ans.row.get('error')}", file=sys.stderr)
        return 1
    print(f"liftmap: {ans.row['answer']} ({ans.row['evaluated']} evaluated in "
          f"{ans.row['explore_s']} s)", flush=True)
    a, bt = ans.inputs["A"], ans.inputs["Bt"]
    ref = a.astype(np.float64) @ bt.astype(np.float64).T
    scale = max(1.0, float(np.max(np.abs(ref))))
    runs: dict[str, Callable[[], Sequence[float]]] = {
        "liftmap": kernel_round(ans.kernel, ans.inputs, args.repeats, reference=ref)}
    if lib is not None:
        tvm_fn, tvm_out = tvm_runner(lib, a, bt, (m, n))
        tvm_fn()
        out["tvm"]["max_rel_error"] = float(np.max(np.abs(tvm_out.numpy() - ref)) / scale)
        if out["tvm"]["max_rel_error"] > 1e-3:
            print(f"error: TVM's product differs from the reference (max relative error "
                  f"{out['tvm']['max_rel_error']:.2g})", file=sys.stderr)
            return 1
        runs["TVM"] = functools.partial(wall_times, tvm_fn, args.repeats)
    runs["numpy"] = functools.partial(wall_times, lambda: a @ bt.T, args.repeats)
    times = timed(runs, args, out, warn)
    if times is None:
        return 1
    med = {name: flops / statistics.median(ts) / 1e9 for name, ts in times.items()}
    for name, ts in times.items():
        out[f"{name}_gflops"] = {"median": med[name], "max": flops / min(ts) / 1e9}
    ratios = [f"liftmap / {x} {med['liftmap'] / med[x]:.2f}x" for x in ("TVM", "numpy")
              if x in med]
    print(f"GFLOP/s, median of {args.rounds} interleaved rounds x {args.repeats}: "
          + ", ".join(f"{x} {v:.1f} (max {out[f'{x}_gflops']['max']:.1f})"
                      for x, v in med.items())
          + f"; {'; '.join(ratios)}; load {out['load_before']} -> {out['load_after']}"
          + (f"; WARNING: {'; '.join(warn)}" if warn else ""), flush=True)
    save_json(args.json, out)
    return 0


def workload_name(run: dict[str, Any]) -> str:
    """A run's workload as a table names it: ``matmul 1024x1024x1024`` or the layer's
    sizes (``C->M, HxW``, with the filter and stride where they are not 3x3, 1)."""
    if "matmul" in run:
        return "matmul " + "x".join(str(run["matmul"][k]) for k in "MNK")
    lay = run["layer"]
    name = f"{lay['C']} -> {lay['M']}, {lay['H']}x{lay['W']}"
    if lay.get("K", 3) != 3:
        name += f", {lay['K']}x{lay['K']}"
    if lay.get("S", 1) != 1:
        name += f", stride {lay['S']}"
    return name


def table(runs: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """The Markdown table of ``runs`` (name, a ``--json`` file's content): TVM's trials
    and median, liftmap's median and answer, the baseline's median, the ratios; last, the
    geometric means over the rows that have each ratio."""
    lines = ["| workload | TVM trials | TVM | liftmap (answer, evaluated) | baseline | "
             "liftmap / TVM | liftmap / baseline |", "|---|---:|---:|---|---:|---:|---:|"]
    vs_tvm: list[float] = []
    vs_base: list[float] = []
    for name, run in runs:
        lift = run.get("liftmap_gflops", {}).get("median")
        tvm = run.get("TVM_gflops", {}).get("median")
        base_name = "numpy" if "numpy_gflops" in run else "PyTorch"
        base = run.get(f"{base_name}_gflops", {}).get("median")
        info = run.get("liftmap", {})
        answer = info.get("variant", "") or ""
        cells = [f"{name} ({workload_name(run)})",
                 str(run.get("tvm", {}).get("trials", "-")),
                 f"{tvm:.1f}" if tvm else "-",
                 (f"{lift:.1f} ({answer}, {info.get('evaluated', '?')})" if lift else "-"),
                 f"{base_name} {base:.1f}" if base else "-"]
        for num, den, acc in ((lift, tvm, vs_tvm), (lift, base, vs_base)):
            if num and den:
                acc.append(num / den)
                cells.append(f"{num / den:.2f}x")
            else:
                cells.append("-")
        lines.append("| " + " | ".join(cells) + " |")

    def geo(xs: list[float]) -> str:
        return f"**{math.exp(sum(map(math.log, xs)) / len(xs)):.2f}x**" if xs else "-"

    lines.append(f"| geometric mean ({len(runs)} workloads) | | | | | {geo(vs_tvm)} | "
                 f"{geo(vs_base)} |")
    return lines


def print_table(paths: Sequence[str]) -> int:
    """``--table``: the runs of ``paths`` as one table (a file that does not read as a
    run's JSON is an error naming it)."""
    import json

    runs = []
    for path in paths:
        try:
            with open(path) as fh:
                run = json.load(fh)
            if not isinstance(run, dict) or ("layer" not in run and "matmul" not in run):
                raise ValueError("not a bench_tvm --json file (no layer, no matmul)")
        except (OSError, ValueError) as e:
            print(f"error: {path}: {e}", file=sys.stderr)
            return 2
        runs.append((os.path.basename(path).removesuffix(".json"), run))
    print("\n".join(table(runs)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.bench_search import busy_others, load

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--layer", help="VGG-16 layer, e.g. 19 or 19/2 (default 19)")
    ap.add_argument("--sizes", help="C=,H=,W=,M=[,K=,S=,P=] instead of --layer")
    ap.add_argument("--matmul", metavar="M[,N,K]", help="the plain matmul (M x K by K x N; "
                    "one number: square) instead of a convolution layer")
    ap.add_argument("--budget", default="10m", help="wall budget of each tuner (default 10m)")
    ap.add_argument("--liftmap-budget", metavar="BUDGET", help="liftmap's search budget "
                    "instead: candidates (500) or a time (90s), as mapper explore --budget "
                    "(default: --budget)")
    ap.add_argument("--trials-per-iter", type=int, default=64,
                    help="MetaSchedule trials per batch (default 64)")
    ap.add_argument("--population", type=int, help="evolutionary search population "
                    "(default: MetaSchedule's, 512; smaller only for a quick check)")
    ap.add_argument("--tvm-timeout", type=float, help="seconds one MetaSchedule build or run "
                    "may take (default: MetaSchedule's, 30; more on a loaded machine)")
    ap.add_argument("--liftmap-store", help="take liftmap's kernel from this store (same "
                    "sizes) instead of searching")
    ap.add_argument("--store-dir", default="results/tvm", help="where liftmap's search is "
                    "stored (default results/tvm)")
    ap.add_argument("--work-dir", help="MetaSchedule's database (default: a temporary one)")
    add_interleaving(ap, rounds=3, repeats=5, settle=0.3)
    add_bench_seed(ap)
    add_json(ap)
    ap.add_argument("--table", nargs="+", metavar="JSON", help="no tuning: print these runs' "
                    "--json files as one table")
    args = ap.parse_args(argv)
    if args.table:
        return print_table(args.table)
    try:
        args.budget_s = parse_seconds(args.budget)
        if args.liftmap_budget:
            from mapper.explore.run import BudgetError, parse_budget

            try:
                parse_budget(args.liftmap_budget)
            except BudgetError as e:
                raise ValueError(f"--liftmap-budget: {e}") from None
        if args.matmul:
            if args.layer or args.sizes or args.liftmap_store:
                raise ValueError("--matmul takes no --layer, --sizes or --liftmap-store")
            return bench_matmul(parse_matmul(args.matmul), args)
        layer = parse_layer_args(args.layer, args.sizes)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        import tvm  # noqa: F401
        have_tvm = True
    except ImportError:  # liftmap (and PyTorch) are still searched and timed
        have_tvm = False
    from codegen.worker import WorkerPool
    from experiments.baselines import (
        kernel_times,
        skipped_peer,
        torch_available,
        torch_conv_fn,
        wall_times,
    )
    from mapper.explore import Task

    cores = len(os.sched_getaffinity(0))
    print(f"machine: {cpu_model()}; load {load()}", flush=True)
    others = busy_others()
    warn = [f"busy before: {', '.join(others)}"] if others else []
    out: dict[str, Any] = {"machine": cpu_model(), "layer": layer.sizes(),
                           "flops": layer.flops, "budget_s": args.budget_s,
                           "liftmap_budget": liftmap_budget(args),
                           "load_before": load(), "command": sys.argv}
    task = Task.conv_layer(layer)
    # the layer's own channels: the task may run with zero channels added
    x, w = to_nchw(task.inputs["inputData"][..., :layer.C],
                   task.inputs["kernelsWeights"][..., :layer.C])
    tvm_fn = None
    if not have_tvm:
        print(skipped_peer("TVM", "tvm"), flush=True)
    else:
        with tempfile.TemporaryDirectory(prefix="tvm-ms-") as tmp:
            try:
                lib, curve, info = tune_tvm(layer, args.budget_s, args.work_dir or tmp,
                                            args.trials_per_iter, args.seed, cores,
                                            args.population, args.tvm_timeout)
            except NoSchedule as e:
                print(f"error: {e}", file=sys.stderr)
                return 1
        out["tvm"] = info
        # each trial: seconds since tune_tir started, latency (s; None: the trial failed)
        out["tvm"]["trials_curve"] = [(round(t, 3), None if math.isinf(lat) else lat)
                                      for t, lat in curve.points]
        tvm_fn, tvm_out = tvm_runner(lib, x, w, nchw_shapes(layer)["output"])
        tvm_fn()
        got = tvm_out.numpy()[0].transpose(1, 2, 0)
        ref = np.asarray(task.reference)
        err = float(np.max(np.abs(got - ref)) / max(1.0, float(np.max(np.abs(ref)))))
        out["tvm"]["max_rel_error"] = err
        if err > 1e-3:
            print(f"error: TVM's result differs from the reference (max relative error "
                  f"{err:.2g})", file=sys.stderr)
            return 1
        for frac in (0.9, 0.95):
            r = curve.reach(frac)
            out["tvm"][f"to{round(frac * 100)}"] = r
        reach = [f"{round(fr * 100)}% at trial {r[0]} ({r[1]:.0f} s)" for fr in (0.9, 0.95)
                 if (r := out["tvm"][f"to{round(fr * 100)}"])]
        print(f"TVM: {info['trials']} trials in {info['tuning_s']:.0f} s (import "
              f"{info['import_s']:.0f} s before; {info['target']}), best "
              f"{layer.flops / curve.best / 1e9:.1f} GFLOP/s while tuning; of its best: "
              f"{', '.join(reach)}", flush=True)
    try:
        found_task, found_fn, linfo = liftmap_kernel(task, layer, args)
    except (ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    out["liftmap"] = linfo
    variant = f"{linfo['variant']}: " if "variant" in linfo else ""
    print(f"liftmap: {variant}{linfo['best']} ({linfo['source']}, {linfo['evaluated']} "
          "evaluated)",
          flush=True)
    torch_fn = None
    if torch_available():
        torch_fn, _ = torch_conv_fn(task.inputs["inputData"][..., :layer.C],
                                    task.inputs["kernelsWeights"][..., :layer.C],
                                    layer.S, layer.P, threads=cores)
    else:
        print(skipped_peer("PyTorch", "torch"), flush=True)
    with WorkerPool() as pool:
        runs: dict[str, Callable[[], Sequence[float]]] = {
            "liftmap": kernel_times(pool, found_task, found_fn, repeats=args.repeats,
                                    flops=layer.flops, what="liftmap's kernel")}
        if tvm_fn is not None:
            runs["TVM"] = functools.partial(wall_times, tvm_fn, args.repeats)
        if torch_fn is not None:
            runs["PyTorch"] = functools.partial(wall_times, torch_fn, args.repeats)
        times = timed(runs, args, out, warn)
    if times is None:
        return 1
    parts = []
    for name, ts in times.items():
        med = layer.flops / statistics.median(ts) / 1e9
        out[f"{name}_gflops"] = {"median": med, "max": layer.flops / min(ts) / 1e9}
        parts.append(f"{name} {med:.1f} (max {out[f'{name}_gflops']['max']:.1f})")
    lm, ratios = out["liftmap_gflops"]["median"], []
    if "TVM_gflops" in out:
        tv = out["TVM_gflops"]["median"]
        ratios.append(f"liftmap / TVM {lm / tv:.2f}x")
        if "PyTorch_gflops" in out:
            ratios.append(f"TVM / PyTorch {tv / out['PyTorch_gflops']['median']:.2f}x")
    elif "PyTorch_gflops" in out:
        ratios.append(f"liftmap / PyTorch {lm / out['PyTorch_gflops']['median']:.2f}x")
    ratio = "".join(f"; {r}" for r in ratios)
    print(f"GFLOP/s, median of {args.rounds} interleaved rounds x {args.repeats}: "
          f"{', '.join(parts)}{ratio}; load {out['load_before']} -> {out['load_after']}"
          + (f"; WARNING: {'; '.join(warn)}" if warn else ""), flush=True)
    save_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
