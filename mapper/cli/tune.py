"""``mapper tune``: :func:`mapper.explore.tune.tune_kernel` from the command line.

Kept apart from ``mapper.explore.tune`` so that building the command line's parser imports nothing
heavy; the kernel's arguments are described by ``--arg`` (:func:`parse_arg`) and the
expected output by ``--answer OUT = EXPR`` (a numpy expression over the arguments).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from mapper.cli.common import store_path
from mapper.cli.options import add_search

__all__ = ["add_parser", "cmd_tune", "parse_arg", "parse_values"]


def parse_values(text: str) -> list[Any]:
    """``16,32,64`` (ints), ``0.5,1.5`` (floats), ``float,double`` (strings), ``true,false``."""
    out: list[Any] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        for conv in (int, float):
            try:
                out.append(conv(part))
                break
            except ValueError:
                continue
        else:
            low = part.lower()
            out.append(True if low == "true" else False if low == "false" else part)
    return out


_ARG = re.compile(r"(?P<name>[A-Za-z_]\w*):(?P<type>float|int)"
                  r"(?:\[(?P<count>[^\]]+)\])?(?:=(?P<value>\S+))?")


def parse_arg(text: str, sizes: Mapping[str, int], seed: int) -> tuple[str, Any]:
    """One ``--arg``: ``NAME:TYPE[COUNT]`` (random values in [0, 1); ``=V`` fills with V),
    ``NAME:TYPE=V`` (a scalar); TYPE ``float`` (float32) or ``int`` (int32); COUNT an
    integer expression over the problem size ``x``, ``y``, ``z``."""
    from mapper.explore.tune import LaunchSizeError, TuneError, eval_size

    m = _ARG.fullmatch(text.strip())
    if not m:
        raise TuneError(f"--arg {text!r}: write NAME:float[COUNT], NAME:int[COUNT]=0 or "
                        f"NAME:int=VALUE")
    dtype = np.float32 if m["type"] == "float" else np.int32
    if m["count"] is None:
        if m["value"] is None:
            raise TuneError(f"--arg {text!r}: a scalar needs a value (NAME:{m['type']}=V)")
        try:
            return m["name"], dtype(eval_size(m["value"], sizes) if m["type"] == "int"
                                    else float(m["value"]))
        except (ValueError, LaunchSizeError) as e:
            raise TuneError(f"--arg {text!r}: {e}") from None
    try:
        count = eval_size(m["count"], sizes)
    except LaunchSizeError as e:
        raise TuneError(f"--arg {text!r}: {e}") from None
    if count <= 0:
        raise TuneError(f"--arg {text!r}: the array needs a positive size, got {count}")
    if m["value"] is not None:
        try:
            return m["name"], np.full(count, float(m["value"]), dtype=dtype)
        except ValueError:
            raise TuneError(f"--arg {text!r}: {m['value']!r} is not a number") from None
    rng = np.random.default_rng(seed + len(m["name"]))
    if dtype is np.int32:
        return m["name"], rng.integers(0, 100, count).astype(np.int32)
    return m["name"], rng.random(count, dtype=np.float32)


def add_parser(sub: Any) -> None:
    """The ``mapper tune`` sub-command (``sub``: ``argparse``'s sub-parsers)."""
    p = sub.add_parser(
        "tune", help="tune your own OpenCL kernel (as Kernel Tuner's tune_kernel): its "
        "tuning parameters as -D defines, each configuration run in a worker process",
        description="Tune an OpenCL kernel. Example: mapper tune examples/kernels/"
        "vector_add.cl --name vector_add --problem-size 100000 --arg c:float[x]=0 "
        "--arg a:float[x] --arg b:float[x] --arg n:int=x --answer 'c = a + b' "
        "--param block_size_x=32,64,128,256")
    p.add_argument("kernel", help="the OpenCL source file")
    p.add_argument("--name", required=True, help="the kernel function to tune")
    p.add_argument("--problem-size", required=True, help="1 to 3 sizes, X[,Y[,Z]] (the "
                   "grid is the size over the block size, rounded up)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="a tuning parameter and its values (repeat for each)")
    p.add_argument("--restriction", action="append", default=[], metavar="EXPR",
                   help="a restriction, as Kernel Tuner writes them "
                   "('block_size_x * tile <= 1024'); repeat for each")
    p.add_argument("--arg", action="append", default=[], metavar="SPEC",
                   help="a kernel argument, in order: NAME:float[COUNT] (random values), "
                   "NAME:float[COUNT]=0 (filled), NAME:int=VALUE (a scalar); COUNT and VALUE "
                   "may use the problem size x, y, z")
    p.add_argument("--answer", help="OUT = EXPR: the expected content of argument OUT, a "
                   "numpy expression over the arguments' names and the problem size x, y, z "
                   "(np is numpy)")
    p.add_argument("--grid-div-x", help="grid divisors of x, comma-separated names or "
                   "expressions (default: block_size_x)")
    p.add_argument("--grid-div-y", help="as --grid-div-x for y")
    p.add_argument("--flops", help="floating-point operations of one run, an expression over "
                   "x, y, z (for GFLOP/s)")
    add_search(p, strategy="search strategy (default model; solver draws uniformly)",
               budget="candidates (50) or time (2m) (default: every configuration)",
               budget_default=None, store="SQLite results store (default: in memory)",
               seed="strategy seed (and the data's)",
               device="OpenCL device spec (default: LIFTMAP_DEVICE, else the first)",
               timeout=(10.0, "seconds one configuration may take (default 10)"))
    p.add_argument("--atol", type=float, default=1e-6, help="--answer: absolute tolerance "
                   "(default 1e-6, relative 1e-5 as numpy.allclose)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


def cmd_tune(args: argparse.Namespace) -> int:
    """``mapper tune``: :func:`mapper.explore.tune.tune_kernel` from the command line; status 0
    when a configuration ran and matched the answer, 1 when none did."""
    from rich.console import Console

    from mapper.explore.tune import TuneError, eval_size, tune_kernel

    dims = [int(s) for s in str(args.problem_size).split(",") if s.strip()]
    if not 1 <= len(dims) <= 3 or min(dims) <= 0:
        raise TuneError(f"--problem-size {args.problem_size!r}: give 1 to 3 positive sizes")
    sizes = dict(zip("xyz", dims))
    params: dict[str, list[Any]] = {}
    for text in args.param:
        name, sep, vals = text.partition("=")
        if not sep or not name.strip() or not vals.strip():
            raise TuneError(f"--param {text!r}: write NAME=V1,V2,...")
        params[name.strip()] = parse_values(vals)
    if not args.arg:
        raise TuneError("give the kernel's arguments in order with --arg (e.g. --arg "
                        "a:float[x] --arg n:int=x)")
    named = [parse_arg(a, sizes, args.seed) for a in args.arg]
    arrays = dict(named)
    if len(arrays) != len(named):
        raise TuneError("two --arg have the same name")
    answer = None
    if args.answer:
        out, sep, expr = args.answer.partition("=")
        out = out.strip()
        if not sep or out not in arrays:
            raise TuneError(f"--answer {args.answer!r}: write OUT = EXPR with OUT one of "
                            f"{', '.join(arrays)}")
        env: dict[str, Any] = {**sizes, **{k: np.asarray(v) for k, v in arrays.items()}}
        try:
            want = eval(expr, {"__builtins__": {}, "np": np}, env)  # noqa: S307 - the user's
        except Exception as e:  # the user's expression
            raise TuneError(f"--answer {args.answer!r}: {type(e).__name__}: {e}") from None
        answer = [np.asarray(want, dtype=np.asarray(v).dtype) if k == out else None
                  for k, v in named]

    def div(text: str | None) -> Any:
        return None if text is None else [p.strip() for p in text.split(",") if p.strip()]

    flops = eval_size(args.flops, sizes) if args.flops else None
    res = tune_kernel(args.name, args.kernel, tuple(dims), [v for _, v in named], params,
                      restrictions=args.restriction or None, answer=answer, atol=args.atol,
                      grid_div_x=div(args.grid_div_x), grid_div_y=div(args.grid_div_y),
                      flops=flops, strategy=args.strategy, budget=args.budget,
                      seed=args.seed, store=store_path(args.store), device=args.device,
                      timeout_s=args.timeout)
    if args.json:
        b = res.best
        print(json.dumps({"command": "tune", "kernel": args.name, "space": res.space_size,
                          "tried": len(res.records), "stopped_by": res.results.stopped_by,
                          "counts": dict(res.results.counts),
                          "best": None if b is None else {
                              "config": res.best_config, "time_ms": (b.time_s or 0) * 1e3,
                              "gflops": b.gflops},
                          "configs": res.configs()}, default=str))
        return 0 if b is not None else 1
    Console(highlight=False).print(res.summary(), soft_wrap=True)
    return 0 if res.best is not None else 1
