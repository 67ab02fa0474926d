"""CC'22 Fig. 5 data: exploration efficiency of manual, solver, random and model search.

For each VGG-16 layer (H and W divided by ``--scale`` so that a run fits minutes), each
strategy and each seed, one exploration of the GPGPU'20 convolution pipeline (the partial
convolution stage is explored) with ``--budget`` (a time, ``300s``, or a number of
candidates), one run after the other: never two at once, they are timed. Every candidate
goes to a resumable results store, one per layer and strategy:

    results/fig5-<layer>-<strategy>.sqlite      e.g. results/fig5-layer19-scale4-solver.sqlite
    results/fig5-<layer>-baseline.json          the hand-written kernel on the same data

One store per strategy, not per layer: a store hands a candidate it already holds to the
next run without evaluating it (and the ``model`` strategy's first samples are the
``solver`` strategy's with the same seed), so a shared store would take those candidates
and their time out of the later strategy's curve.

``manual`` is the paper's hand mapping (T=mapWrg(1) G=mapWrg(0) W=mapLcl(1) C=mapLcl(0),
the other maps sequential or fused) with its tuning space in a random order; ``random``
draws code assignments until one is valid (about 1 in 1e9 for this stage: the library
gives up after 10 million draws, and the run is recorded as stopped by that error).
VGG-16 layers 19 and 21 have the same shape (GPGPU'20 Table 3): layer 21 is a second,
independent repetition. Figures: ``python -m experiments.figures``.

    python -m experiments.fig_exploration --layers 19 21 --scale 4 --budget 60s
    python -m experiments.fig_exploration --sizes C=8,H=6,W=6,M=8 --budget 10 --seeds 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

STRATEGY_ORDER = ("manual", "solver", "random", "model")


# ---------------------------------------------------------------------- layers and tasks


def parse_layer_spec(layer: str, scale: int):
    """VGG-16 layer ``layer`` with H and W divided by ``scale`` -> ``ConvLayer``."""
    from mapper.explore import parse_layer

    if scale < 1:
        raise ValueError(f"--scale must be a positive integer, got {scale}")
    return parse_layer(layer if scale == 1 else f"{layer}/{scale}")


def custom_layer(text: str):
    """``"C=8,H=6,W=6,M=8[,K=3,S=1,P=1]"`` -> ``ConvLayer`` named after its sizes."""
    from ir.programs import ConvLayer
    from mapper.cli import parse_sizes

    s = parse_sizes(text)
    missing = [k for k in ("C", "H", "W", "M") if k not in s]
    unknown = sorted(set(s) - {"C", "H", "W", "M", "K", "S", "P"})
    if missing or unknown:
        raise ValueError("--sizes needs C, H, W and M (K, S, P optional)"
                         + (f"; missing {', '.join(missing)}" if missing else "")
                         + (f"; unknown {', '.join(unknown)}" if unknown else ""))
    name = "".join(f"{k}{s[k]}" for k in ("C", "H", "W", "M"))
    return ConvLayer(name, s["C"], s["H"], s["W"], s["M"], s.get("K", 3), s.get("S", 1),
                     s.get("P", 1))


def layer_tag(layer: str, scale: int = 1) -> str:
    """The layer part of a store's name: ``layer19``, ``layer19-scale4``, ``C8H6W6M8``."""
    base = f"layer{layer}" if layer.isdigit() else layer
    return base if scale == 1 else f"{base}-scale{scale}"


def layers_from_args(args) -> list[tuple[str, Any]]:
    """``(tag, ConvLayer)`` for ``--sizes`` or each of ``--layers`` (bad input: ValueError)."""
    if args.sizes:
        layer = custom_layer(args.sizes)
        return [(layer_tag(layer.name), layer)]
    return [(layer_tag(name, args.scale), parse_layer_spec(name, args.scale))
            for name in args.layers]


def conv_task(layer, name_suffix: str = ""):
    """The convolution pipeline task of ``layer`` (partial stage explored)."""
    from mapper.explore import Task

    task = Task.conv_layer(layer)
    if name_suffix:
        task.name = f"{task.name} {name_suffix}"
    return task


def hand_mapping(task) -> dict[str, int]:
    """The paper's hand mapping of the partial stage, valid under the task's fusion rule
    (the maps it does not name sequential or fused)."""
    from ir.programs import PAPER_HAND_MAPPING
    from mapper.candidates import first_mapping

    return first_mapping(task.program, PAPER_HAND_MAPPING, fusion=task.fusion)


def store_path(out: str, tag: str, strategy: str) -> str:
    """``<out>/fig5-<tag>-<strategy>.sqlite``."""
    return os.path.join(out, f"fig5-{tag}-{strategy}.sqlite")


def baseline_path(out: str, tag: str) -> str:
    """``<out>/fig5-<tag>-baseline.json``: the hand-written kernel's measurement."""
    return os.path.join(out, f"fig5-{tag}-baseline.json")


# ---------------------------------------------------------------------- running


def load_note() -> str:
    """The 1-minute load average, with a warning when the machine is busy."""
    load = os.getloadavg()[0]
    cores = len(os.sched_getaffinity(0))
    warn = " (WARNING: busy machine, timings are not representative)" if load > cores / 2 \
        else ""
    return f"load average {load:.1f} on {cores} core(s){warn}"


def _progress_line(tag: str) -> Callable[[dict, Any], None]:
    """An ``on_result`` callback printing one line per candidate (for piped output)."""
    from mapper.explore.run import label

    def show(row: dict, res) -> None:
        perf = f" {row['gflops']:.3g} GFLOP/s" if row.get("gflops") else ""
        best = res.best
        top = f", best {best['gflops']:.3g}" if best and best.get("gflops") else ""
        print(f"  {tag} {res.strategy} seed {res.seed} #{res.considered} "
              f"{res.elapsed_s:.0f} s: {label(row)}{perf}{top}", flush=True)

    return show


def explore_logged(task, store, *, tag: str, **kw: Any):
    """``explore`` with the live display on a terminal, a line per candidate otherwise.
    A run the strategy ends with an error (``random`` finding no valid assignment) is
    recorded as finished with ``stopped_by = "error: ..."`` and returns ``None``."""
    from rich.console import Console
    from rich.live import Live

    from mapper.explore import StrategyError, explore
    from mapper.explore.display import Dashboard

    started: list = []
    console = Console()
    dash = Dashboard() if console.is_terminal else None

    def on_start(res) -> None:
        started.append(res)
        if dash is not None:
            dash.start(res)

    on_result = dash.update if dash is not None else _progress_line(tag)
    try:
        if dash is None:
            return explore(task, store=store, on_start=on_start, on_result=on_result, **kw)
        with Live(dash, console=console, refresh_per_second=4, transient=False):
            return explore(task, store=store, on_start=on_start, on_result=on_result, **kw)
    except StrategyError as e:
        if not started:
            raise
        res = started[0]
        store.finish_run(res.run_id, f"error: {e}", res.evaluated, res.cached, None)
        print(f"  {tag} {kw.get('strategy')} seed {kw.get('seed')}: stopped after "
              f"{res.elapsed_s:.0f} s, {res.considered} candidate(s): {e}", flush=True)
        return None


def measure_baseline(layer, task, *, device: str | None, timeout_s: float,
                     repeats: int) -> dict[str, Any]:
    """The hand-written register-tiled OpenCL kernel on the task's data (a worker run)."""
    from codegen.worker import WorkerPool
    from experiments.bench_conv import hand_program

    prog, label = hand_program(layer)
    with WorkerPool(device) as pool:
        dev = pool.device_info().get("limits", {})
        o = pool.evaluate(prog, task.inputs, task.reference, timeout_s=timeout_s,
                          repeats=repeats, flops=layer.flops, **task.tolerance)
    return {"label": label, "status": o.label, "gflops": o.gflops, "time_s": o.time_s,
            "memory_bytes": (o.memory or {}).get("global_total"), "sizes": layer.sizes(),
            "device": dev.get("name"), "created": time.time()}


def collect_layer(tag: str, layer, args) -> bool:
    """Every strategy and seed on one layer; False when interrupted."""
    from mapper.explore import ResultStore

    if args.baseline:
        path = baseline_path(args.out, tag)
        try:
            b = measure_baseline(layer, conv_task(layer), device=args.device,
                                 timeout_s=args.timeout, repeats=args.repeats)
        except ValueError as e:  # no register tile fits this layer
            print(f"{tag}: no hand-written baseline ({e})")
        else:
            with open(path, "w") as f:
                json.dump(b, f, indent=1)
            print(f"{tag}: hand-written baseline {b['status']} "
                  f"{b['gflops'] or 0:.3g} GFLOP/s -> {path}")
    for strategy in args.strategies:
        for seed in range(args.seeds):
            task = conv_task(layer)  # fresh: no space built by an earlier run is reused
            kw: dict[str, Any] = {"mapping": hand_mapping(task)} if strategy == "manual" else {}
            path = store_path(args.out, tag, strategy)
            print(f"{tag}: {strategy} seed {seed}, budget {args.budget} -> {path}; "
                  f"{load_note()}", flush=True)
            with ResultStore(path) as store:
                res = explore_logged(task, store, tag=tag, strategy=strategy, seed=seed,
                                     budget=args.budget, device=args.device,
                                     timeout_s=args.timeout, repeats=args.repeats, **kw)
            if res is None:
                continue
            print(res.summary(), flush=True)
            if res.stopped_by == "interrupted":
                return False
    return True


# ---------------------------------------------------------------------- command line


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.fig_exploration",
        description=__doc__.split("\n\n")[0],
        epilog="Figures: python -m experiments.figures --stores DIR --out docs/figures")
    ap.add_argument("--layers", nargs="+", default=["19", "21"],
                    help="VGG-16 layers (default 19 21)")
    ap.add_argument("--scale", type=int, default=4,
                    help="divide H and W by this integer (default 4: 7x7 for layer 19)")
    ap.add_argument("--sizes", help="a custom layer instead: C=..,H=..,W=..,M=..[,K,S,P]")
    ap.add_argument("--strategies", default=",".join(STRATEGY_ORDER),
                    help="comma-separated, run in this order (default manual,solver,"
                    "random,model)")
    ap.add_argument("--budget", default="60s",
                    help="per strategy and seed: a time (300s, 10m) or candidates (default 60s)")
    ap.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 per strategy "
                    "(default 1)")
    ap.add_argument("--out", default="results", help="folder of the stores (default results)")
    ap.add_argument("--device", help="OpenCL device spec (default: LIFTMAP_DEVICE or the "
                    "first that passes the probe)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per candidate")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per candidate")
    ap.add_argument("--no-baseline", dest="baseline", action="store_false",
                    help="do not measure the hand-written kernel")
    args = ap.parse_args(argv)
    return validate(args, ap)


def validate(args: argparse.Namespace, ap: argparse.ArgumentParser) -> argparse.Namespace:
    """User errors before any work: one line and exit status 2."""
    from mapper.explore import get_strategy, parse_budget

    try:
        args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
        if not args.strategies:
            raise ValueError("--strategies is empty")
        for s in args.strategies:
            get_strategy(s)
        if "model" in args.strategies:
            try:
                import sklearn  # noqa: F401
            except ImportError:
                raise ValueError("strategy 'model' needs scikit-learn: pip install "
                                 "'liftmap[model]'") from None
        parse_budget(args.budget)
        if args.seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
        if args.timeout <= 0 or args.repeats < 1:
            raise ValueError("--timeout must be > 0 and --repeats >= 1")
        args.layer_list = layers_from_args(args)
    except ValueError as e:
        ap.error(str(e))
    return args


def run_layers(args: argparse.Namespace,
               collect: Callable[[str, Any, argparse.Namespace], bool]) -> int:
    """``collect(tag, layer, args)`` on each layer; the exit status (2: a library error,
    printed in one line; 130: interrupted)."""
    from mapper.cli import library_errors

    t0 = time.perf_counter()
    try:
        os.makedirs(args.out, exist_ok=True)
        for tag, layer in args.layer_list:
            print(f"== {tag}: C={layer.C} H={layer.H} W={layer.W} M={layer.M} K={layer.K}, "
                  f"{layer.flops / 1e9:.3f} GFLOP", flush=True)
            if not collect(tag, layer, args):
                print("interrupted")
                return 130
    except library_errors() as e:  # a store of another layer or device, a bad device spec
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"done in {time.perf_counter() - t0:.0f} s; figures: python -m experiments.figures "
          f"--stores {args.out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_layers(parse_args(argv), collect_layer)


if __name__ == "__main__":
    from experiments.fig_exploration import main as _main  # pickled names: this module's

    sys.exit(_main())
