"""The papers' exploration experiments: CC'22 Fig. 5 and Fig. 6 data, collected with the
library's public exploration API.

``experiments/fig_exploration.py`` and ``experiments/fig_fusion.py`` are thin command
lines over this module; ``experiments/figures.py`` draws the figures from the stores.

* Fig. 5 (exploration efficiency): per VGG-16 layer (H and W divided by a scale), each
  strategy (``manual``, ``solver``, ``random``, ``model``) and seed explores the
  GPGPU'20 convolution pipeline (its partial-convolution stage) with a budget, one run
  after the other, into ``<out>/fig5-<layer>-<strategy>.sqlite``: one store per
  strategy, because a store hands a candidate it already holds to the next run without
  evaluating it (and ``model``'s first samples are ``solver``'s with the same seed).
* Fig. 6 (throughput expectancy): per layer, each fusion strategy (``always``, ``never``,
  ``free``) and heuristics setting, a data set of candidates drawn by ``solver`` into
  ``<out>/fig6-<layer>-fusion-<f>-heuristics-<on|off>.sqlite``. A setting whose valid
  mappings are those of a setting collected before is skipped (``always`` with the
  heuristics off is ``free`` with them off: CC'22 rule 8 is a heuristic).

The expectancy after N candidates (CC'22 5.5): draw N candidates of a data set uniformly
100 times, take each draw's best throughput (0 for a candidate that did not run
correctly), report the median.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from ir.errors import LiftmapError
from mapper.explore.record import Record

STRATEGY_ORDER = ("manual", "solver", "random", "model")
FUSIONS = ("always", "never", "free")


class ExperimentError(LiftmapError, ValueError):
    """A bad argument of an experiment (layer, sizes, strategies, counts): one line."""


# ---------------------------------------------------------------------- the expectancy curve


def expectancy_curve(values: Sequence[float], ns: Sequence[int] | None = None, *,
                     trials: int = 100, seed: int = 0) -> list[tuple[int, float]]:
    """``(N, median over trials of the best of N values drawn uniformly without
    replacement)`` for each N in ``ns`` (default 1..len(values))."""
    vals = list(values)
    if ns is None:
        ns = range(1, len(vals) + 1)
    rng = random.Random(seed)
    out = []
    for n in ns:
        if not 1 <= n <= len(vals):
            raise ValueError(f"N must be within 1..{len(vals)}, got {n}")
        out.append((n, statistics.median(max(rng.sample(vals, n)) for _ in range(trials))))
    return out


def dataset_values(records: Sequence[Record]) -> list[float]:
    """Each candidate's throughput: GFLOP/s when it ran ``ok``, else 0."""
    return [float(r.gflops or 0.0) if r.ok else 0.0 for r in records]


def first_n_reaching(curve: Sequence[tuple[int, float]], target: float) -> int | None:
    """The smallest N whose expectancy is at least ``target`` (None if none is)."""
    return next((n for n, v in curve if v >= target), None)


# ---------------------------------------------------------------------- layers and tasks


def parse_layer_spec(layer: str, scale: int):
    """VGG-16 layer ``layer`` with H and W divided by ``scale`` -> ``ConvLayer``."""
    from ir.conv_layer import parse_layer

    if scale < 1:
        raise ExperimentError(f"--scale must be a positive integer, got {scale}")
    try:
        return parse_layer(layer if scale == 1 else f"{layer}/{scale}")
    except ValueError as e:
        raise ExperimentError(str(e)) from None


def custom_layer(text: str):
    """``"C=8,H=6,W=6,M=8[,K=3,S=1,P=1]"`` -> ``ConvLayer`` named after its sizes."""
    from ir.conv_layer import ConvLayer
    from mapper.sizes import parse_sizes

    try:
        s = parse_sizes(text)
    except ValueError as e:
        raise ExperimentError(f"--sizes: {e}") from None
    missing = [k for k in ("C", "H", "W", "M") if k not in s]
    unknown = sorted(set(s) - {"C", "H", "W", "M", "K", "S", "P"})
    if missing or unknown:
        raise ExperimentError("--sizes needs C, H, W and M (K, S, P optional)"
                              + (f"; missing {', '.join(missing)}" if missing else "")
                              + (f"; unknown {', '.join(unknown)}" if unknown else ""))
    name = "".join(f"{k}{s[k]}" for k in ("C", "H", "W", "M"))
    return ConvLayer(name, s["C"], s["H"], s["W"], s["M"], s.get("K", 3), s.get("S", 1),
                     s.get("P", 1))


def layer_tag(layer: str, scale: int = 1) -> str:
    """The layer part of a store's name: ``layer19``, ``layer19-scale4``, ``C8H6W6M8``."""
    base = f"layer{layer}" if layer.isdigit() else layer
    return base if scale == 1 else f"{base}-scale{scale}"


def layer_list(layers: Sequence[str], scale: int, sizes: str | None) -> list[tuple[str, Any]]:
    """``(tag, ConvLayer)`` for ``sizes`` (a custom layer) or each of ``layers``."""
    if sizes:
        layer = custom_layer(sizes)
        return [(layer_tag(layer.name), layer)]
    return [(layer_tag(name, scale), parse_layer_spec(name, scale)) for name in layers]


def conv_task(layer, *, fusion: str = "always", heuristics: bool = True,
              name_suffix: str = ""):
    """The convolution pipeline task of ``layer`` (partial stage explored under ``fusion``
    and ``heuristics``), its name followed by ``name_suffix``."""
    from mapper.explore.task import Task

    name = f"conv:vgg16-{layer.name}" + (f" {name_suffix}" if name_suffix else "")
    return Task.conv_layer(layer, fusion=fusion, heuristics=heuristics, name=name)


def hand_mapping(task) -> dict[str, int]:
    """The paper's hand mapping of the partial stage, valid under the task's fusion rule
    (the maps it does not name sequential or fused)."""
    from experiments.vgg16 import PAPER_HAND_MAPPING
    from mapper.candidates import first_mapping

    return first_mapping(task.program, PAPER_HAND_MAPPING, fusion=task.fusion)


# ---------------------------------------------------------------------- store names


def fig5_store_path(out: str, tag: str, strategy: str) -> str:
    """``<out>/fig5-<tag>-<strategy>.sqlite``."""
    return os.path.join(out, f"fig5-{tag}-{strategy}.sqlite")


def baseline_path(out: str, tag: str) -> str:
    """``<out>/fig5-<tag>-baseline.json``: the hand-written kernel's measurement."""
    return os.path.join(out, f"fig5-{tag}-baseline.json")


def dataset_name(fusion: str, heuristics: bool) -> str:
    """``fusion-always-heuristics-on``: the data set part of a Fig. 6 store's name."""
    return f"fusion-{fusion}-heuristics-{'on' if heuristics else 'off'}"


def fig6_store_path(out: str, tag: str, fusion: str, heuristics: bool) -> str:
    """``<out>/fig6-<tag>-fusion-<f>-heuristics-<on|off>.sqlite``."""
    return os.path.join(out, f"fig6-{tag}-{dataset_name(fusion, heuristics)}.sqlite")


# ---------------------------------------------------------------------- Fig. 6 settings


def valid_mappings(program, fusion: str, heuristics: bool) -> frozenset:
    """The valid mappings of ``program`` under a fusion strategy and heuristics setting."""
    from mapper.api import enumerate_mappings

    return frozenset(frozenset(m.items()) for m in enumerate_mappings(
        program, fusion=fusion, heuristics=heuristics))


def distinct_settings(program, settings: Sequence[tuple[str, bool]]
                      ) -> tuple[list[tuple[str, bool]], dict[tuple[str, bool], tuple[str, bool]]]:
    """The ``(fusion, heuristics)`` settings with distinct sets of valid mappings, and for
    each one dropped the earlier setting it equals."""
    seen: dict[frozenset, tuple[str, bool]] = {}
    keep, same = [], {}
    for s in settings:
        maps = valid_mappings(program, *s)
        if maps in seen:
            same[s] = seen[maps]
        else:
            seen[maps] = s
            keep.append(s)
    return keep, same


# ---------------------------------------------------------------------- running


def load_note() -> str:
    """The 1-minute load average, with a warning when the machine is busy."""
    load = os.getloadavg()[0]
    cores = len(os.sched_getaffinity(0))
    warn = " (WARNING: busy machine, timings are not representative)" if load > cores / 2 \
        else ""
    return f"load average {load:.1f} on {cores} core(s){warn}"


def _progress_line(tag: str) -> Callable[[Record, Any], None]:
    """An ``on_result`` callback printing one line per candidate (for piped output)."""

    def show(rec: Record, res) -> None:
        perf = f" {rec.gflops:.3g} GFLOP/s" if rec.gflops else ""
        best = res.best
        top = f", best {best.gflops:.3g}" if best and best.gflops else ""
        print(f"  {tag} {res.strategy} seed {res.seed} #{res.considered} "
              f"{res.elapsed_s:.0f} s: {rec.label}{perf}{top}", flush=True)

    return show


def explore_logged(task, store, *, tag: str, **kw: Any):
    """``explore`` (without counting the joint space or re-timing the winners) with the
    live display on a terminal, a line per candidate otherwise; returns its ``Results``."""
    from rich.console import Console
    from rich.live import Live

    from mapper.explore.display import Dashboard
    from mapper.explore.options import ExploreOptions, option_names
    from mapper.explore.run import explore

    console = Console()
    # a figure is about the exploration sequence itself: no count, no re-timing
    flat = {"count": False, "retime": 0, **{k: v for k, v in kw.items() if k in option_names()}}
    kw = {k: v for k, v in kw.items() if k not in option_names()}
    kw["options"] = ExploreOptions.of(**flat)
    if not console.is_terminal:
        return explore(task, store=store, on_result=_progress_line(tag), **kw)
    dash = Dashboard()
    with Live(dash, console=console, refresh_per_second=4, transient=False):
        return explore(task, store=store, on_start=dash.start, on_result=dash.update, **kw)


BaselineFn = Callable[[Any, Any, argparse.Namespace], dict[str, Any]]


def collect_fig5(tag: str, layer, args: argparse.Namespace,
                 measure_baseline: BaselineFn | None = None) -> bool:
    """Fig. 5 data of one layer: every strategy and seed of ``args`` (see
    ``fig5_parser``), and the hand-written kernel's measurement when ``args.baseline``
    and ``measure_baseline(layer, task, args)`` is given (``ValueError``: no baseline for
    this layer). False when interrupted."""
    import json

    from mapper.explore.store import ResultStore

    if args.baseline and measure_baseline is not None:
        path = baseline_path(args.out, tag)
        try:
            b = measure_baseline(layer, conv_task(layer), args)
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
            path = fig5_store_path(args.out, tag, strategy)
            print(f"{tag}: {strategy} seed {seed}, budget {args.budget} -> {path}; "
                  f"{load_note()}", flush=True)
            with ResultStore(path) as store:
                res = explore_logged(task, store, tag=tag, strategy=strategy, seed=seed,
                                     budget=args.budget, device=args.device,
                                     timeout_s=args.timeout, repeats=args.repeats, **kw)
            print(res.summary(), flush=True)
            if res.stopped_by == "interrupted":
                return False
    return True


def collect_fig6(tag: str, layer, args: argparse.Namespace) -> bool:
    """Fig. 6 data of one layer: a ``solver`` data set per distinct ``(fusion,
    heuristics)`` setting of ``args`` (see ``fig6_parser``). False when interrupted."""
    from ir.programs import gpgpu20_conv_pipeline
    from mapper.explore.store import ResultStore

    program = gpgpu20_conv_pipeline().stage("partial").program
    settings = [(f, h) for h in args.heuristics for f in args.fusion]
    keep, same = distinct_settings(program, settings)
    for s, like in same.items():
        print(f"{tag}: {dataset_name(*s)} has the valid mappings of {dataset_name(*like)}: "
              "not collected again")
    for fusion, heur in keep:
        path = fig6_store_path(args.out, tag, fusion, heur)
        task = conv_task(layer, fusion=fusion, heuristics=heur,
                         name_suffix=f"[{dataset_name(fusion, heur)}]")
        print(f"{tag}: {dataset_name(fusion, heur)}, {args.candidates} candidates -> "
              f"{path}; {load_note()}", flush=True)
        with ResultStore(path) as store:
            res = explore_logged(task, store, tag=tag, strategy="solver", seed=args.seed,
                                 budget=args.candidates, device=args.device,
                                 timeout_s=args.timeout, repeats=args.repeats,
                                 workers=args.workers)
        print(res.summary(), flush=True)
        if res.stopped_by == "interrupted":
            return False
    return True


def run_layers(args: argparse.Namespace,
               collect: Callable[[str, Any, argparse.Namespace], bool]) -> int:
    """``collect(tag, layer, args)`` on each of ``args.layer_list``; the exit status (2: a
    library error, printed in one line; 130: interrupted)."""
    import sys

    from mapper.errors import library_errors

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


# ---------------------------------------------------------------------- command lines


def _figure_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """A collection's command line: the options the figures' collections share."""
    ap = argparse.ArgumentParser(
        prog=prog, description=description,
        epilog="Figures: python -m experiments.figures --stores DIR --out docs/figures")
    ap.add_argument("--layers", nargs="+", default=["19", "21"],
                    help="VGG-16 layers (default 19 21)")
    ap.add_argument("--scale", type=int, default=4,
                    help="divide H and W by this integer (default 4: 7x7 for layer 19)")
    ap.add_argument("--sizes", help="a custom layer instead: C=..,H=..,W=..,M=..[,K,S,P]")
    ap.add_argument("--out", default="results", help="folder of the stores (default results)")
    ap.add_argument("--device", help="OpenCL device spec (default: LIFTMAP_DEVICE or the "
                    "first that passes the probe)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per candidate")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per candidate")
    return ap


def fig5_parser(prog: str = "python -m experiments.fig_exploration",
                description: str | None = None) -> argparse.ArgumentParser:
    """The command line of the Fig. 5 collection."""
    ap = _figure_parser(prog, description or "CC'22 Fig. 5 data: exploration efficiency of "
                        "manual, solver, random and model search.")
    ap.add_argument("--strategies", default=",".join(STRATEGY_ORDER),
                    help="comma-separated, run in this order (default manual,solver,"
                    "random,model)")
    ap.add_argument("--budget", default="60s",
                    help="per strategy and seed: a time (300s, 10m) or candidates (default 60s)")
    ap.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 per strategy "
                    "(default 1)")
    ap.add_argument("--no-baseline", dest="baseline", action="store_false",
                    help="do not measure the hand-written kernel")
    return ap


def parse_fig5_args(argv: Sequence[str] | None,
                    ap: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    """Parsed and checked Fig. 5 arguments (``layer_list`` added); a user error exits
    with status 2 and one line."""
    from mapper.explore.run import BudgetError, parse_budget
    from mapper.explore.strategies import StrategyError, get_strategy

    def check(args: argparse.Namespace) -> None:
        args.strategies = comma_list(args.strategies)
        if not args.strategies:
            raise ExperimentError("--strategies is empty")
        for s in args.strategies:
            get_strategy(s)
        if "model" in args.strategies and importlib.util.find_spec("sklearn") is None:
            raise ExperimentError("strategy 'model' needs scikit-learn: pip install "
                                  "'liftmap[model]'")
        parse_budget(args.budget)
        if args.seeds < 1:
            raise ExperimentError(f"--seeds must be >= 1, got {args.seeds}")

    return _parse_checked(ap or fig5_parser(), argv, check,
                          (ExperimentError, BudgetError, StrategyError))


def fig6_parser(prog: str = "python -m experiments.fig_fusion",
                description: str | None = None) -> argparse.ArgumentParser:
    """The command line of the Fig. 6 collection."""
    ap = _figure_parser(prog, description or "CC'22 Fig. 6 data: throughput expectancy per "
                        "number of evaluated candidates, per fusion strategy, heuristics on "
                        "and off.")
    ap.add_argument("--candidates", type=int, default=250,
                    help="candidates per data set (default 250, as in CC'22)")
    ap.add_argument("--fusion", default=",".join(FUSIONS),
                    help="fusion strategies (default always,never,free)")
    ap.add_argument("--heuristics", default="on,off", help="on, off or on,off (default)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the solver strategy")
    ap.add_argument("--workers", type=int, default=1,
                    help="candidates lowered and built in parallel (default 1; their timed "
                    "runs take turns, but on a CPU device builds beside a run slow it down)")
    return ap


def parse_on_off(text: str) -> list[bool]:
    """``"on"``, ``"off"``, ``"on,off"`` -> ``[True]``, ``[False]``, ``[True, False]``."""
    vals = comma_list(text)
    bad = [v for v in vals if v not in ("on", "off")]
    if bad or not vals:
        raise ExperimentError(f"--heuristics takes on, off or on,off; got {text!r}")
    return [v == "on" for v in vals]


def parse_fig6_args(argv: Sequence[str] | None,
                    ap: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    """Parsed and checked Fig. 6 arguments (``layer_list`` added); a user error exits
    with status 2 and one line."""

    def check(args: argparse.Namespace) -> None:
        args.fusion = comma_list(args.fusion)
        bad = [f for f in args.fusion if f not in FUSIONS]
        if bad or not args.fusion:
            raise ExperimentError(f"--fusion takes {', '.join(FUSIONS)}; got "
                                  f"{', '.join(bad) or 'nothing'}")
        args.heuristics = parse_on_off(args.heuristics)
        if args.candidates < 1:
            raise ExperimentError(f"--candidates must be >= 1, got {args.candidates}")
        if args.workers < 1:
            raise ExperimentError(f"--workers must be >= 1, got {args.workers}")

    return _parse_checked(ap or fig6_parser(), argv, check, (ExperimentError,))


def comma_list(text: str) -> list[str]:
    """The items of a comma-separated list, stripped, without empty ones and repeats."""
    return list(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))


def _parse_checked(ap: argparse.ArgumentParser, argv: Sequence[str] | None,
                   check: Callable[[argparse.Namespace], None],
                   errors: tuple[type[Exception], ...]) -> argparse.Namespace:
    """``argv`` parsed, then ``check``-ed, with the run options and ``layer_list`` (added);
    one of ``errors`` exits with status 2 and its message (``ap.error``)."""
    args = ap.parse_args(argv)
    try:
        check(args)
        _check_run_options(args)
        args.layer_list = layer_list(args.layers, args.scale, args.sizes)
    except errors as e:
        ap.error(str(e))
    return args


def _check_run_options(args: argparse.Namespace) -> None:
    if not args.timeout > 0:
        raise ExperimentError(f"--timeout must be > 0, got {args.timeout}")
    if args.repeats < 1:
        raise ExperimentError(f"--repeats must be >= 1, got {args.repeats}")
