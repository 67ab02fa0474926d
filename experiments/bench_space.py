"""Benchmark: build and count realistic tuning search spaces three ways.

1. ``constraints.space.SearchSpace`` (groups, planned order, vectorised incremental filtering);
2. python-constraint2's default solver (``Problem()`` with the same restriction strings,
   which it parses into its own constraint objects; ``len(getSolutions())``), run in a child
   process and stopped after ``--pc2-limit`` seconds;
3. a numpy brute force over the whole Cartesian product in chunks of 2**22 points, using the
   same compiled vectorised restrictions and dropping rejected points after each one;
   skipped above ``--brute-max`` points.

Each measurement is the median of 3 runs, or 1 run when the first takes more than 60 s.  The
three counts must agree.  ``--write-doc`` replaces the table in ``docs/tuning-space.md``.

Run: ``python -m experiments.bench_space [--quick] [--write-doc]``.
"""

from __future__ import annotations

import argparse
import functools
import math
import multiprocessing as mp
import os
import platform
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from constraints.examples import DEDISPERSION_PARAMS, DEDISPERSION_RESTRICTIONS
from constraints.restrictions import parse_restriction
from constraints.space import SearchSpace
from experiments.machine import cpu_model


@dataclass(frozen=True)
class Bench:
    name: str
    params: dict[str, list[int]]
    restrictions: list[str]
    note: str


DEDISPERSION = Bench(
    "dedispersion",
    DEDISPERSION_PARAMS,
    DEDISPERSION_RESTRICTIONS,
    "Kernel Tuner dedispersion example",
)

GEMM = Bench(
    "CLBlast xgemm",
    {
        "MWG": [16, 32, 64, 128],
        "NWG": [16, 32, 64, 128],
        "KWG": [16, 32, 64],
        "MDIMC": [8, 16, 32],
        "NDIMC": [8, 16, 32],
        "MDIMA": [8, 16, 32],
        "NDIMB": [8, 16, 32],
        "KWI": [1, 2, 4, 8],
        "VWM": [1, 2, 4, 8],
        "VWN": [1, 2, 4, 8],
        "STRM": [0, 1],
        "STRN": [0, 1],
        "SA": [0, 1],
        "SB": [0, 1],
    },
    [
        "KWG % KWI == 0",
        "MWG % (MDIMC * VWM) == 0",
        "NWG % (NDIMC * VWN) == 0",
        "MWG % (MDIMA * VWM) == 0",
        "NWG % (NDIMB * VWN) == 0",
        "KWG % ((MDIMC * NDIMC) / MDIMA) == 0",
        "KWG % ((MDIMC * NDIMC) / NDIMB) == 0",
        "MDIMC * NDIMC <= 256",
        "(SA * KWG * MWG + SB * KWG * NWG) * 4 <= 32768",
    ],
    "CLBlast Xgemm tuner constraints, wider KWG/KWI, 256 work-items, 32 KiB local memory",
)

HOTSPOT = Bench(
    "hotspot",
    {
        "block_size_x": [1, 2, 4, 8, 16] + [32 * i for i in range(1, 33)],
        "block_size_y": [2**i for i in range(6)],
        "tile_size_x": list(range(1, 11)),
        "tile_size_y": list(range(1, 11)),
        "temporal_tiling_factor": list(range(1, 11)),
        "max_tfactor": [10],
        "loop_unroll_factor_t": list(range(1, 11)),
        "sh_power": [0, 1],
        "blocks_per_sm": [0, 1, 2, 3, 4],
    },
    [
        "block_size_x * block_size_y >= 32",
        "temporal_tiling_factor % loop_unroll_factor_t == 0",
        "block_size_x * block_size_y <= 1024",
        "(block_size_x * tile_size_x + temporal_tiling_factor * 2)"
        " * (block_size_y * tile_size_y + temporal_tiling_factor * 2) * (2 + sh_power) * 4"
        " <= 49152",
        "blocks_per_sm == 0 or (block_size_x * tile_size_x + temporal_tiling_factor * 2)"
        " * (block_size_y * tile_size_y + temporal_tiling_factor * 2) * (2 + sh_power) * 4"
        " * blocks_per_sm <= 102400",
    ],
    "Kernel Tuner hotspot example (48 KiB per block, 100 KiB per SM)",
)

CONV = Bench(
    "VGG conv tiling",
    {
        "tile": list(range(3, 59)),
        "pad_opt": list(range(0, 9)),
        "kernels_per_wg": list(range(1, 65)),
        "windows_per_thread": list(range(1, 17)),
        "chunk": list(range(1, 33)),
        "vec": [1, 2, 4, 8],
    },
    [
        "tile <= 58 + pad_opt",
        "(58 + pad_opt - tile) % (tile - 2) == 0",
        "((tile - 2) * (tile - 2)) % windows_per_thread == 0",
        "1152 % chunk == 0",
        "chunk % vec == 0",
        "256 % kernels_per_wg == 0",
        "(1152 // chunk) * ((tile - 2) * (tile - 2) // windows_per_thread) <= 1024",
        "kernels_per_wg * windows_per_thread <= 64",
        "(tile - 2) * (tile - 2) * kernels_per_wg * 4 <= 32768",
    ],
    "GPGPU'20 direct convolution (tile, padding, kernels/windows per thread, chunk, vector) "
    "for a 128x56x56 input, 256 3x3 kernels",
)

STENCIL3D = Bench(
    "3-D stencil",
    {
        "block_size_x": [1, 2, 4, 8, 16] + [32 * i for i in range(1, 33)],
        "block_size_y": [1, 2, 4, 8, 16, 32],
        "block_size_z": [1, 2, 4, 8, 16, 32],
        "tile_size_x": list(range(1, 9)),
        "tile_size_y": list(range(1, 9)),
        "tile_size_z": list(range(1, 9)),
        "temporal_tiling": list(range(1, 9)),
        "loop_unroll": [1, 2, 4, 8],
        "unroll_z": [1, 2, 4, 8],
        "use_shared": [0, 1],
        "vector": [1, 2, 4, 8],
    },
    [
        "32 <= block_size_x * block_size_y * block_size_z <= 1024",
        "block_size_x % vector == 0 or block_size_x < 32",
        "tile_size_x % vector == 0",
        "temporal_tiling % loop_unroll == 0",
        "tile_size_x * tile_size_y * tile_size_z <= 64",
        "use_shared == 0 or (block_size_x * tile_size_x + 2 * temporal_tiling)"
        " * (block_size_y * tile_size_y + 2 * temporal_tiling)"
        " * (block_size_z * tile_size_z + 2 * temporal_tiling) * 4 <= 49152",
        "tile_size_x * tile_size_y * tile_size_z * temporal_tiling <= 128",
        "tile_size_z % unroll_z == 0",
        "unroll_z <= temporal_tiling",
    ],
    "7-point 3-D stencil with temporal blocking (a larger space of our own)",
)

ALL = [DEDISPERSION, GEMM, HOTSPOT, CONV, STENCIL3D]


# ----------------------------------------------------------------------------- the three ways


def ours(b: Bench) -> int:
    return SearchSpace(b.params, b.restrictions).count()


def python_constraint(b: Bench) -> int:
    import constraint

    problem = constraint.Problem()
    for name, dom in b.params.items():
        problem.addVariable(name, dom)
    for r in b.restrictions:
        problem.addConstraint(r)
    return len(problem.getSolutions())


def brute_force(b: Bench, chunk: int = 1 << 22) -> int:
    names = list(b.params)
    rs = [parse_restriction(r, names) for r in b.restrictions]
    values = {n: np.asarray(v) for n, v in b.params.items()}
    sizes = [len(v) for v in b.params.values()]
    strides = [math.prod(sizes[i + 1 :]) for i in range(len(sizes))]
    where = {n: (s, st) for n, s, st in zip(names, sizes, strides, strict=True)}
    total, count = math.prod(sizes), 0
    for start in range(0, total, chunk):
        idx = np.arange(start, min(start + chunk, total), dtype=np.int64)
        for r in rs:
            cols = [values[p][(idx // where[p][1]) % where[p][0]] for p in r.params]
            idx = idx[r.vector(*cols)]
        count += len(idx)
    return count


# ----------------------------------------------------------------------------- timing


def timed(fn: Callable[[], int]) -> tuple[int, float]:
    t = time.perf_counter()
    n = fn()
    return n, time.perf_counter() - t


def median_time(fn: Callable[[], int], runs: int = 3) -> tuple[int, float]:
    n, first = timed(fn)
    times = [first]
    if first <= 60:
        for _ in range(runs - 1):
            m, t = timed(fn)
            assert m == n
            times.append(t)
    return n, statistics.median(times)


def _child(b: Bench, runs: int, conn: mp.connection.Connection) -> None:
    conn.send(median_time(lambda: python_constraint(b), runs))
    conn.close()


def pc2_limited(b: Bench, limit: float, runs: int) -> tuple[int, float] | None:
    """python-constraint2 in a child process; None if it runs past ``limit`` seconds."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(b, runs, child))
    proc.start()
    child.close()
    deadline = time.monotonic() + limit * runs + 5
    result = None
    if parent.poll(max(0.0, deadline - time.monotonic())):
        result = parent.recv()
    proc.join(1.0)
    if proc.is_alive():
        proc.terminate()
        proc.join()
    if result is not None and result[1] > limit:
        return None
    return result


def fmt_s(t: float | None, over: float | None = None) -> str:
    if t is None:
        return f"> {over:g} s" if over is not None else "skipped"
    return f"{t * 1e3:.1f} ms" if t < 1 else f"{t:.2f} s"


def ratio(a: float | None, b: float) -> str:
    return "-" if a is None else f"{a / b:.1f}x"


def run(benches: Sequence[Bench], pc2_limit: float, brute_max: float, runs: int) -> str:
    header = (
        "| space | Cartesian | valid | this library | python-constraint2 | numpy brute force "
        "| vs pc2 | vs brute |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    rows = [header]
    print(header, flush=True)
    for b in benches:
        cart = math.prod(len(v) for v in b.params.values())
        n, t_ours = median_time(functools.partial(ours, b), runs)
        pc2 = pc2_limited(b, pc2_limit, runs)
        if pc2 is not None:
            assert pc2[0] == n, (b.name, pc2[0], n)
        if cart <= brute_max:
            nb, t_brute = median_time(functools.partial(brute_force, b), runs)
            assert nb == n, (b.name, nb, n)
        else:
            t_brute = None
            print(f"  ({b.name}: brute force skipped, {cart:.2e} points > {brute_max:.0e})")
        t_pc2 = None if pc2 is None else pc2[1]
        vs_pc2 = ratio(t_pc2, t_ours) if pc2 else f"> {pc2_limit / t_ours:.0f}x"
        row = (
            f"| {b.name} | {cart:,} | {n:,} | {fmt_s(t_ours)} | {fmt_s(t_pc2, pc2_limit)} "
            f"| {fmt_s(t_brute)} | {vs_pc2} | {ratio(t_brute, t_ours)} |"
        )
        rows.append(row)
        print(row, flush=True)
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 run each, dedispersion + GEMM only")
    ap.add_argument("--pc2-limit", type=float, default=60.0, help="seconds per pc2 run")
    ap.add_argument("--brute-max", type=float, default=2e9, help="max points for brute force")
    ap.add_argument("--write-doc", action="store_true", help="update docs/tuning-space.md")
    args = ap.parse_args(argv)
    benches = [DEDISPERSION, GEMM] if args.quick else ALL
    runs = 1 if args.quick else 3
    machine = f"{cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"machine: {machine}")
    t0 = time.perf_counter()
    table = run(benches, args.pc2_limit, args.brute_max, runs)
    print(f"total benchmark time {time.perf_counter() - t0:.0f} s")
    if args.write_doc:
        doc = Path(__file__).resolve().parent.parent / "docs" / "tuning-space.md"
        text = doc.read_text()
        block = f"<!-- bench:start -->\nMachine: {machine}.\n\n{table}\n<!-- bench:end -->"
        text = re.sub(r"<!-- bench:start -->.*<!-- bench:end -->", block, text, flags=re.S)
        doc.write_text(text)
        print(f"wrote {doc}")


if __name__ == "__main__":
    main()
