"""Programs written plainly, explored with the defaults, against what a user would pick.

    python -m experiments.bench_plain                      # every program, 3 min each
    python -m experiments.bench_plain --budget 5m --programs matmul_plain,row_sums
    python -m experiments.bench_plain --scale 16 --budget 20s --rounds 1   # a smoke run

Each program of ``examples/`` written without ``split``, ``asVector`` or a register block
(a matmul, row and column sums, a matrix-vector product, a transpose, a 3x3 box blur,
the separable blur) is explored by
``mapper.explore`` with no option but the budget, as ``mapper explore FILE --sizes ...``
runs it (``mapper.explore.program_variants``: with its tilings and input layouts probed).
The run's answer (its end-of-run re-timed winner) is then built again from its variant's
task and timed on the search's own evaluation path, interleaved round by round, against
the library a user would pick: numpy (OpenBLAS) for the products and sums, OpenCV (2
threads, if installed) for the filters, plus the machine's roofline: the float8 FMA-chain
peak for compute-bound programs, numpy's copy
bandwidth for memory-bound ones. Medians; the CPU and the load are printed with them.

numpy's BLAS reads ``OPENBLAS_CORETYPE``/``OPENBLAS_L2_SIZE`` when it loads: unset both for
this command (``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE``) to time OpenBLAS's own choice.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from experiments.baselines import interleave
from experiments.machine import cpu_model, save_json
from experiments.options import add_json, add_rounds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")


def _mm(inputs: dict) -> Callable[[], object]:
    a, bt = inputs["A"], inputs["Bt"]
    return lambda: a @ bt.T


def _rows(inputs: dict) -> Callable[[], object]:
    x = inputs["X"]
    return lambda: x.sum(axis=1)


def _cols(inputs: dict) -> Callable[[], object]:
    x = inputs["X"]
    return lambda: x.sum(axis=0)


def _matvec(inputs: dict) -> Callable[[], object]:
    a, x = inputs["A"], inputs["x"]
    return lambda: a @ x


def _transpose(inputs: dict) -> Callable[[], object]:
    x = inputs["X"]
    return lambda: np.ascontiguousarray(x.T)


def _box(inputs: dict) -> Callable[[], object] | None:
    try:
        import cv2
    except ImportError:
        return None
    cv2.setNumThreads(2)
    x = inputs["X"]
    return lambda: cv2.blur(x, (3, 3), borderType=cv2.BORDER_CONSTANT)


def _sep(inputs: dict) -> Callable[[], object] | None:
    try:
        import cv2
    except ImportError:
        return None
    cv2.setNumThreads(2)
    x, k = inputs["inputData"], inputs["k"]
    return lambda: cv2.sepFilter2D(x, -1, k, k)


def _pipeline(name: str) -> Callable[[dict], Callable[[], object] | None]:
    def fn(inputs: dict) -> Callable[[], object] | None:
        from experiments.bench_tiling import opencv_fn

        try:
            import cv2
        except ImportError:
            return None
        cv2.setNumThreads(2)
        weights = {k: v for k, v in inputs.items() if k != "inputData"}
        return opencv_fn(name, inputs["inputData"], weights)

    return fn


# name -> (file, full sizes, sizes divided by --scale, baseline, its name, bound)
PROGRAMS: dict[str, tuple] = {
    "matmul_plain": ("matmul_plain.lift", {"M": 1024, "N": 1024, "K": 1024}, ("M", "N", "K"),
                     _mm, "numpy sgemm", "compute"),
    "row_sums": ("row_sums.lift", {"H": 4096, "W": 4096}, ("H", "W"), _rows, "numpy sum",
                 "memory"),
    "col_sums": ("col_sums.lift", {"H": 4096, "W": 4096}, ("H", "W"), _cols, "numpy sum",
                 "memory"),
    "matvec": ("matvec.lift", {"M": 4096, "K": 4096}, ("M", "K"), _matvec, "numpy sgemv",
               "memory"),
    "transpose": ("transpose.lift", {"H": 4096, "W": 4096}, ("H", "W"), _transpose,
                  "numpy transpose copy", "memory"),
    "box_blur3x3": ("box_blur3x3.lift", {"H": 2048, "W": 2048}, ("H", "W"), _box,
                    "OpenCV blur", "memory"),
    "blur_separable": ("blur_separable.lift", {"H": 2048, "W": 2050}, ("H", "W"), _sep,
                       "OpenCV sepFilter2D", "memory"),
    # stencil pipelines (outputs of the sizes given; inputs 4 wider, the two 3x3 stages'
    # halo): mapper explore's default probes the unfused
    # program and its fusions through tiling, as it does here
    "blur_laplacian": ("blur_laplacian.lift", {"H": 2048, "W": 2048}, ("H", "W"),
                       _pipeline("blur_laplacian"), "OpenCV filter2D x2", "memory"),
    "harris": ("harris.lift", {"H": 2048, "W": 2048}, ("H", "W"), _pipeline("harris"),
               "OpenCV Harris (filter2D, boxFilter, numpy)", "memory"),
}


def copy_gbs(nbytes: int = 1 << 27) -> float:
    """numpy's copy bandwidth (GB/s, bytes read plus written), best of 5."""
    a = np.ones(nbytes // 4, dtype=np.float32)
    b = np.empty_like(a)
    best = min(_timed(lambda: np.copyto(b, a)) for _ in range(5))
    return 2 * a.nbytes / best / 1e9


def _timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def sizes_of(name: str, scale: int) -> dict[str, int]:
    """The sizes of program ``name`` at its full sizes divided by ``scale``."""
    _, full, scaled = PROGRAMS[name][:3]
    sizes = {k: (v // scale if k in scaled else v) for k, v in full.items()}
    if name == "blur_separable":
        sizes["W"] = sizes["H"] + 2
    elif name in ("blur_laplacian", "harris"):
        sizes = {"H": full["H"] // scale + 4, "W": full["W"] // scale + 4}
    return sizes


@dataclasses.dataclass
class FoundKernel:
    """The search's answer built again from its task (``task.lower_fn``: the program's
    kernel, or a layout variant's two) and run on the search's own evaluation path (a
    worker lowers, runs and checks it): ``run`` gives a ``codegen.program.Outcome``;
    ``flops`` and ``bytes`` (the program's compulsory traffic) as the program counts them."""

    task: Any
    mapping: dict
    tuning: dict
    flops: int | None
    bytes: int

    def run(self, inputs: dict, *, repeats: int, reference: np.ndarray | None = None) -> Any:
        from codegen.worker import evaluate_candidate

        t = self.task
        return evaluate_candidate(t.lower_fn(self.mapping, self.tuning), inputs,
                                  t.reference if reference is None else reference,
                                  timeout_s=300, repeats=repeats, flops=self.flops,
                                  **t.tolerance)


@dataclasses.dataclass
class Answer:
    """What the default search answered for one program: ``row`` (the search's figures, or
    ``error``), the answer built again (``kernel``: a :class:`FoundKernel`, None when the
    search found none) and the program's seeded inputs."""

    row: dict
    kernel: FoundKernel | None
    inputs: dict


def explore(name: str, budget: str, sizes: dict[str, int]) -> Answer:
    """Program ``name`` of ``PROGRAMS`` at ``sizes`` explored as ``mapper explore FILE
    --sizes ...`` runs it (only the budget given; a stencil pipeline's fusions through
    tiling probed too), and its answer (the end-of-run re-timed winner) built again."""
    from ir.flops import count_bytes
    from ir.nodes import Lambda
    from ir.syntax import parse_file
    from mapper.data import random_inputs
    from mapper.explore.task import program_variants
    from mapper.explore.variants import explore_variants

    fname = PROGRAMS[name][0]
    path = os.path.join(EX, fname)
    prog = parse_file(path)
    assert isinstance(prog, Lambda)  # a .lift file declares its inputs
    inputs = random_inputs(prog, sizes, seed=0)
    # what `mapper explore FILE --sizes ...` runs: the program, for a stencil pipeline its
    # fusions through tiling too (--tiling auto), its worthwhile input layouts (--layout
    # auto), GFLOP/s of the unfused program's work
    tasks = program_variants(prog, sizes, name=fname)
    t0 = time.time()
    vr = explore_variants(tasks, budget=budget)
    res = vr.results
    win = res.final_retimed
    rec = res.final
    row: dict = {"program": name, "sizes": sizes, "budget": budget,
                 "explore_s": round(time.time() - t0, 1), "evaluated": res.evaluated,
                 "variant": vr.chosen}
    if rec is None:
        row["error"] = "the search found no kernel that runs"
        return Answer(row, None, inputs)
    row["answer"] = (f"{vr.chosen + ': ' if len(tasks) > 1 else ''}{rec.mapping}"
                     + (f"; {rec.tuning}" if len(rec.tuning) else ""))
    row["run_retimed_ms"] = round(win.median_s * 1e3, 4) if win else None
    task = tasks[vr.chosen]
    kernel = FoundKernel(task, dict(rec.mapping), dict(rec.tuning), task.flops,
                         count_bytes(prog, sizes))
    return Answer(row, kernel, inputs)


def kernel_round(kernel: FoundKernel, inputs: dict, repeats: int,
                 reference: np.ndarray | None = None) -> Callable[[], Sequence[float]]:
    """One interleaved round of ``kernel``: ``repeats`` profiled times, checked against
    ``reference`` (default: the reference interpreter's)."""
    def found() -> Sequence[float]:
        r = kernel.run(inputs, repeats=repeats, reference=reference)
        if not r.ok:
            raise RuntimeError(f"the found kernel did not run ok: {r}")
        return list(r.times_s)

    return found


def bench(name: str, budget: str, scale: int, rounds: int, repeats: int) -> dict:
    _, _, _, base_fn, base_name, bound = PROGRAMS[name]
    ans = explore(name, budget, sizes_of(name, scale))
    row, kernel, inputs = ans.row, ans.kernel, ans.inputs
    if kernel is None:
        return row
    runs: dict[str, Callable[[], Sequence[float]]] = {}
    runs["liftmap"] = kernel_round(kernel, inputs, repeats)
    fn = base_fn(inputs)
    if fn is not None:
        fn()
        runs[base_name] = lambda: [_timed(fn) for _ in range(repeats)]
    else:
        row["baseline_skipped"] = f"{base_name}: not installed (pip install opencv-python)"
    times = interleave(runs, rounds, 0.2)
    meds = {k: statistics.median(v) for k, v in times.items()}
    row["liftmap_ms"] = round(meds["liftmap"] * 1e3, 4)
    if base_name in meds:
        row["baseline"] = base_name
        row["baseline_ms"] = round(meds[base_name] * 1e3, 4)
        row["ratio"] = round(meds[base_name] / meds["liftmap"], 3)
    if kernel.flops:
        row["gflops"] = round(kernel.flops / meds["liftmap"] / 1e9, 2)
    row["gbs"] = round(kernel.bytes / meds["liftmap"] / 1e9, 2)
    row["bound"] = bound
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", default=",".join(PROGRAMS),
                    help=f"comma-separated, of {', '.join(PROGRAMS)}")
    ap.add_argument("--budget", default="3m", help="each exploration's budget (default 3m)")
    ap.add_argument("--scale", type=int, default=1,
                    help="divide the sizes by this (a smoke run; default 1: full size)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per round (default 5)")
    add_rounds(ap, 5)
    add_json(ap)
    a = ap.parse_args(argv)
    names = [n for n in a.programs.split(",") if n]
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        ap.error(f"unknown program(s) {', '.join(unknown)}; the programs: {', '.join(PROGRAMS)}")
    if a.scale < 1 or a.repeats < 1:
        ap.error("--scale and --repeats must be 1 or more")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {cpu_model()}, load {load:.2f}; budget {a.budget} each", flush=True)
    gbs = copy_gbs()
    print(f"numpy copy bandwidth: {gbs:.1f} GB/s", flush=True)
    rows = []
    for n in names:
        row = bench(n, a.budget, a.scale, a.rounds, a.repeats)
        if "gbs" in row and row.get("bound") == "memory":
            row["of_copy_bandwidth"] = round(row["gbs"] / gbs, 3)
        rows.append(row)
        if "error" in row:
            print(f"{n}: {row['error']}", flush=True)
            continue
        base = (f"{row['baseline']} {row['baseline_ms']} ms, ratio {row['ratio']}x"
                if "baseline" in row else row.get("baseline_skipped", ""))
        extra = (f", {row['of_copy_bandwidth']:.0%} of copy bandwidth"
                 if "of_copy_bandwidth" in row else "")
        print(f"{n} {row['sizes']}: {row['answer']}: {row['liftmap_ms']} ms "
              f"({row.get('gflops', '-')} GFLOP/s, {row['gbs']} GB/s{extra}); {base}",
              flush=True)
    save_json(a.json, {"machine": cpu_model(), "load": load, "copy_gbs": gbs, "rows": rows})
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
