"""CC'22 Fig. 6 data: throughput expectancy per number of evaluated candidates, for each
sequential-map fusion strategy, with the heuristic rules on and off.

For each VGG-16 layer (H and W divided by ``--scale``), each fusion strategy of the
library (``always``: perfectly nested sequential maps are fused or parallel, CC'22 rule 8;
``never``: no map is fused; ``free``: either) and each setting of the heuristic rules
(``mapper/rules.py``: rules that prune mappings that are correct but unlikely to be fast),
a data set of ``--candidates`` candidates drawn by the ``solver`` strategy (a uniformly
random valid mapping, then uniformly random tuning values), one data set after the other,
each in its own resumable store:

    results/fig6-<layer>-fusion-<always|never|free>-heuristics-<on|off>.sqlite

A setting whose valid mappings are exactly those of a setting collected before is skipped
with a note (``always`` with the heuristics off is ``free`` with them off: rule 8 is a
heuristic). With the heuristics off the space has thousands of mappings, and ``explore``
counts the whole joint space before its first candidate: 1-4 minutes per data set on 2
cores, whatever ``--candidates`` is. The expectancy after N candidates (CC'22 5.5): draw
N candidates of the data set uniformly 100 times, take each draw's best throughput (0 for
a candidate that did not run correctly), report the median. Figures:
``python -m experiments.figures``.

    python -m experiments.fig_fusion --layers 19 --scale 8 --candidates 40
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

from experiments.fig_exploration import (
    conv_task,
    explore_logged,
    layers_from_args,
    load_note,
    run_layers,
)
from mapper.explore import Task

FUSIONS = ("always", "never", "free")


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


def dataset_values(rows: Sequence[dict[str, Any]]) -> list[float]:
    """Each candidate's throughput: GFLOP/s when it ran ``ok``, else 0."""
    return [float(r["gflops"] or 0.0) if r["status"] == "ok" else 0.0 for r in rows]


def first_n_reaching(curve: Sequence[tuple[int, float]], target: float) -> int | None:
    """The smallest N whose expectancy is at least ``target`` (None if none is)."""
    return next((n for n, v in curve if v >= target), None)


# ---------------------------------------------------------------------- data sets


def dataset_name(fusion: str, heuristics: bool) -> str:
    """``fusion-always-heuristics-on``: the data set part of a store's name."""
    return f"fusion-{fusion}-heuristics-{'on' if heuristics else 'off'}"


def store_path(out: str, tag: str, fusion: str, heuristics: bool) -> str:
    """``<out>/fig6-<tag>-fusion-<f>-heuristics-<on|off>.sqlite``."""
    return os.path.join(out, f"fig6-{tag}-{dataset_name(fusion, heuristics)}.sqlite")


def valid_mappings(program, fusion: str, heuristics: bool) -> frozenset:
    """The valid mappings of ``program`` under a fusion strategy and heuristics setting."""
    from mapper.api import enumerate_mappings

    return frozenset(frozenset(m.items()) for m in enumerate_mappings(
        program, fusion=fusion, heuristics=heuristics))


def distinct_settings(program, settings: Sequence[tuple[str, bool]]
                      ) -> tuple[list[tuple[str, bool]], dict[tuple[str, bool], tuple[str, bool]]]:
    """The settings with distinct sets of valid mappings, and for each one dropped the
    earlier setting it equals."""
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


def lower_validity_only(lower_fn: Callable[[], Any]):
    """Runs ``lower_fn`` (a ``Task.lower_fn``) with its mapping checked against the
    validity rules only. The library's lowering entry points check every rule, heuristics
    included, and have no switch (see the report: ``heuristics=`` wanted there), so
    ``mapper.candidates.lower_mapping`` is swapped for the duration; this runs in the
    evaluator's worker process."""
    import mapper.candidates as mc
    from mapper.api import lower_mapping

    saved = mc.lower_mapping
    mc.lower_mapping = functools.partial(lower_mapping, heuristics=False)
    try:
        return lower_fn()
    finally:
        mc.lower_mapping = saved


class ValidityOnlyTask(Task):
    """A task with the heuristic rules off: its joint space holds the mappings the validity
    rules allow, and its candidates are lowered with the validity rules only."""

    def joint(self, device=None):
        from mapper.api import enumerate_mappings, problem

        js = super().joint(device)
        if js.problem.heuristics:  # built (again) by Task.joint: swap in the validity rules
            js.problem = problem(self.program, fusion=self.fusion, heuristics=False)
            js.mappings = list(enumerate_mappings(js.problem, fusion=self.fusion))
        return js

    def lower_fn(self, mapping, tuning):
        return functools.partial(lower_validity_only, super().lower_fn(mapping, tuning))


def fusion_task(layer, fusion: str, heuristics: bool):
    """The convolution task of ``layer`` with a fusion strategy and heuristics setting,
    named after them (the store's ``program`` says which data set it holds)."""
    task = conv_task(layer, f"[{dataset_name(fusion, heuristics)}]")
    task = dataclasses.replace(task, fusion=fusion, _joint=None)
    if heuristics:
        return task
    return ValidityOnlyTask(**{f.name: getattr(task, f.name) for f in dataclasses.fields(task)})


def collect_layer(tag: str, layer, args) -> bool:
    """Every distinct data set of one layer; False when interrupted."""
    from ir.programs import gpgpu20_conv_pipeline
    from mapper.explore import ResultStore

    program = gpgpu20_conv_pipeline().stage("partial").program
    settings = [(f, h) for h in args.heuristics for f in args.fusion]
    keep, same = distinct_settings(program, settings)
    for s, like in same.items():
        print(f"{tag}: {dataset_name(*s)} has the valid mappings of {dataset_name(*like)}: "
              "not collected again")
    for fusion, heur in keep:
        path = store_path(args.out, tag, fusion, heur)
        n = len(valid_mappings(program, fusion, heur))
        print(f"{tag}: {dataset_name(fusion, heur)} ({n} valid mappings), {args.candidates} "
              f"candidates -> {path}; {load_note()}", flush=True)
        with ResultStore(path) as store:
            res = explore_logged(fusion_task(layer, fusion, heur), store, tag=tag,
                                 strategy="solver", seed=args.seed, budget=args.candidates,
                                 device=args.device, timeout_s=args.timeout,
                                 repeats=args.repeats, workers=args.workers)
        if res is None:
            continue
        print(res.summary(), flush=True)
        if res.stopped_by == "interrupted":
            return False
    return True


# ---------------------------------------------------------------------- command line


def _on_off(text: str) -> list[bool]:
    vals = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in vals if v not in ("on", "off")]
    if bad or not vals:
        raise ValueError(f"--heuristics takes on, off or on,off; got {text!r}")
    return [v == "on" for v in dict.fromkeys(vals)]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.fig_fusion", description=__doc__.split("\n\n")[0],
        epilog="Figures: python -m experiments.figures --stores DIR --out docs/figures")
    ap.add_argument("--layers", nargs="+", default=["19", "21"],
                    help="VGG-16 layers (default 19 21)")
    ap.add_argument("--scale", type=int, default=4,
                    help="divide H and W by this integer (default 4)")
    ap.add_argument("--sizes", help="a custom layer instead: C=..,H=..,W=..,M=..[,K,S,P]")
    ap.add_argument("--candidates", type=int, default=250,
                    help="candidates per data set (default 250, as in CC'22)")
    ap.add_argument("--fusion", default=",".join(FUSIONS),
                    help="fusion strategies (default always,never,free)")
    ap.add_argument("--heuristics", default="on,off", help="on, off or on,off (default)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the solver strategy")
    ap.add_argument("--out", default="results", help="folder of the stores (default results)")
    ap.add_argument("--device", help="OpenCL device spec")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per candidate")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per candidate")
    ap.add_argument("--workers", type=int, default=1,
                    help="candidates lowered and built in parallel (default 1; their timed "
                    "runs take turns, but on a CPU device builds beside a run slow it down)")
    args = ap.parse_args(argv)
    try:
        args.fusion = list(dict.fromkeys(f.strip() for f in args.fusion.split(",")
                                         if f.strip()))
        bad = [f for f in args.fusion if f not in FUSIONS]
        if bad or not args.fusion:
            raise ValueError(f"--fusion takes {', '.join(FUSIONS)}; got {', '.join(bad)}")
        args.heuristics = _on_off(args.heuristics)
        if args.candidates < 1:
            raise ValueError(f"--candidates must be >= 1, got {args.candidates}")
        if args.timeout <= 0 or args.repeats < 1 or args.workers < 1:
            raise ValueError("--timeout must be > 0, --repeats and --workers >= 1")
        args.layer_list = layers_from_args(args)
    except ValueError as e:
        ap.error(str(e))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return run_layers(parse_args(argv), collect_layer)


if __name__ == "__main__":
    from experiments.fig_fusion import main as _main  # pickled names: this module's

    sys.exit(_main())
