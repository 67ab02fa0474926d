"""Halide on the stencil pipelines, beside liftmap's default search and OpenCV (issue 47).

    python -m experiments.bench_halide                         # 2048x2048, 3 min search each
    python -m experiments.bench_halide --size 256 --rounds 1 --budget 20s   # a smoke run
    python -m experiments.bench_halide --skip-liftmap --rounds 9           # Halide and OpenCV

The separable blur, blur then Laplacian and Harris of ``examples/`` (``blur_separable.lift``,
``blur_laplacian.lift``, ``harris.lift``), written in Halide's Python front end (the
``halide`` package, 19-21: the ``bench`` extra) exactly as the ``.lift`` files compute
them: float32, the weights inputs of the pipeline (``k``; ``blur``/``lap``;
``sobelX``/``sobelY``: buffers, as liftmap's kernels and OpenCV take them), each stage a
valid correlation (no border: a 3-tap or 3x3 stage's output is 2 narrower and 2 shorter
than its input), each sum in the ``.lift`` file's order (row-major over the window).
Every output is ``--size`` x ``--size``: the inputs are 2 (the separable blur) or 4 (the
two-stage pipelines) wider and taller. Harris' products ``Ix*Ix``, ``Iy*Iy``, ``Ix*Iy``
are stages of their own (the same arithmetic as the ``.lift`` file's products inside the
window sums; a schedule may inline them).

Each pipeline is scheduled
- by every autoscheduler plugin the package ships that loads (``Adams2019``, ``Li2018``,
  ``Mullapudi2016``; ``Anderson2021`` is tried too and is for GPU targets only), with
  ``parallelism`` the thread count and the output's and inputs' sizes as estimates; the
  plugins are loaded by name (``hl.load_plugin("autoschedule_adams2019")``), and where the
  loader cannot find them so, by their path in the package (``lib64/`` or ``lib/``);
- by hand (``hand``): rows of output strips in parallel, ``vec`` lanes (twice the target's
  natural float32 vector), each intermediate stage computed per row of the strip and
  stored per strip (a sliding window over the strip: no recomputed halo rows).

Every Halide output, liftmap's answer and OpenCV's are checked against a float64 numpy
reference (itself checked against liftmap's reference interpreter, at the run's size)
before anything is timed: the largest absolute error, the largest relative to the
output's scale (max |reference|), and the tolerance liftmap's runner applies
(``mapper.data.reduction_tolerance``).

liftmap's answer is ``experiments.bench_plain``'s: the program explored with the default
search, ``--budget`` each (``bench_plain.explore``), its answer built again and timed by
OpenCL profiling in a worker (``bench_plain.kernel_round``, checked every round);
OpenCV is ``bench_plain``'s baseline for the program (``sepFilter2D``; ``filter2D`` x2;
``filter2D``, ``boxFilter`` and numpy for Harris), wall time of one call. Halide is the
wall time of one call of its compiled ``Callable`` on buffers wrapped once. Every
contender runs ``--repeats`` times per round, ``--rounds`` rounds interleaved; the table
gives the median over every run, the fastest round's median
(``baselines.fastest_round_s``) and OpenCV's median over the contender's. Threads:
``--threads`` (2) for Halide (``HL_NUM_THREADS``, set before Halide loads) and OpenCV
(``cv2.setNumThreads``); liftmap's kernels run on the OpenCL device's cores (PoCL: all
of them). Run it on an idle machine: the machine and its load are printed.
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

from experiments.options import add_interleaving, add_json, ranged

PIPELINES = ("blur_separable", "blur_laplacian", "harris")
# the weights of each pipeline, in the order its Halide inputs take them (after the image)
WEIGHTS = {"blur_separable": ("k",), "blur_laplacian": ("blur", "lap"),
           "harris": ("sobelX", "sobelY")}
HALO = {"blur_separable": 2, "blur_laplacian": 4, "harris": 4}
AUTOSCHEDULERS = ("Adams2019", "Li2018", "Mullapudi2016", "Anderson2021")
SKIPPED_HALIDE = "halide: skipped: halide not installed"


def sizes_of(name: str, size: int) -> dict[str, int]:
    """The ``.lift`` program's sizes for a ``size`` x ``size`` output."""
    return {"H": size + HALO[name], "W": size + HALO[name]}


# ------------------------------------------------------------------ the numpy reference


def _corr(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Valid 2-D correlation of ``a`` with the 3x3 ``w``, in float64, row-major order."""
    h, v = a.shape[0] - 2, a.shape[1] - 2
    out = np.zeros((h, v))
    for i in range(3):
        for j in range(3):
            out += a[i:i + h, j:j + v] * float(w[i, j])
    return out


def _box(a: np.ndarray) -> np.ndarray:
    return _corr(a, np.ones((3, 3)))


def reference(name: str, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """What the ``.lift`` file computes for ``inputs``, in float64."""
    x = inputs["inputData"].astype(np.float64)
    if name == "blur_separable":
        k = inputs["k"].astype(np.float64)
        w = x.shape[1] - 2
        bx = sum(x[:, j:j + w] * k[j] for j in range(3))
        h = x.shape[0] - 2
        return sum(bx[i:i + h] * k[i] for i in range(3))
    if name == "blur_laplacian":
        return _corr(_corr(x, inputs["blur"]), inputs["lap"])
    ix, iy = _corr(x, inputs["sobelX"]), _corr(x, inputs["sobelY"])
    sxx, syy, sxy = _box(ix * ix), _box(iy * iy), _box(ix * iy)
    return sxx * syy - sxy * sxy - 0.04 * (sxx + syy) * (sxx + syy)


def errors(out: np.ndarray, ref: np.ndarray) -> dict[str, Any]:
    """Largest absolute error, the same relative to the output's scale, and whether
    ``out`` is within liftmap's runner tolerance of ``ref``."""
    from mapper.data import reduction_tolerance

    out64 = np.asarray(out, dtype=np.float64)
    if out64.shape != ref.shape:
        return {"ok": False, "why": f"shape {out64.shape}, expected {ref.shape}"}
    err = np.abs(out64 - ref)
    scale = float(np.abs(ref).max()) or 1.0
    tol = reduction_tolerance(ref)
    ok = bool(np.allclose(out64, ref, rtol=tol["rtol"], atol=tol["atol"]))
    return {"ok": ok, "max_abs": float(err.max()), "max_rel": float(err.max()) / scale,
            "scale": scale}


# ------------------------------------------------------------------ Halide


def load_autoschedulers(hl: Any) -> dict[str, str]:
    """Each of ``AUTOSCHEDULERS`` -> how its plugin loaded (``loaded: <name or path>``) or
    why it did not (``not loaded: <error>``)."""
    dirs = [os.path.join(hl.install_dir(), d) for d in ("lib64", "lib")]
    status: dict[str, str] = {}
    for name in AUTOSCHEDULERS:
        lib = f"autoschedule_{name.lower()}"
        tries = [lib] + [os.path.join(d, f"lib{lib}.so") for d in dirs
                         if os.path.exists(os.path.join(d, f"lib{lib}.so"))]
        why = ""
        for t in tries:
            try:
                hl.load_plugin(t)
            except Exception as e:  # noqa: BLE001  (Halide raises its own HalideError)
                why = why or str(e).strip().splitlines()[-1]
                continue
            status[name] = f"loaded: {os.path.relpath(t, hl.install_dir()) if '/' in t else t}"
            break
        else:
            status[name] = f"not loaded: {why}"
    return status


@dataclasses.dataclass
class Pipe:
    """A pipeline defined in Halide: its inputs (image first, then ``WEIGHTS``), output and
    intermediate stages by name (for a hand schedule)."""

    params: list[Any]
    output: Any
    stages: dict[str, Any]
    x: Any
    y: Any


def define(hl: Any, name: str, size: int) -> Pipe:
    """Pipeline ``name`` in Halide's front end, with estimates for a ``size`` output."""
    x, y = hl.Var("x"), hl.Var("y")
    f32 = hl.Float(32)
    inp = hl.ImageParam(f32, 2, "inputData")
    n = size + HALO[name]
    inp.set_estimates([(0, n), (0, n)])
    ws = []
    for w in WEIGHTS[name]:
        p = hl.ImageParam(f32, 1 if name == "blur_separable" else 2, w)
        p.set_estimates([(0, 3)] * p.dimensions())
        ws.append(p)

    def corr(src: Any, w: Any) -> Any:  # row-major over the window, as join(nbh)
        terms = [src[x + j, y + i] * w[j, i] for i in range(3) for j in range(3)]
        e = terms[0]
        for t in terms[1:]:
            e = e + t
        return e

    def box(src: Any) -> Any:
        e = src[x, y]
        for i in range(3):
            for j in range(3):
                if i or j:
                    e = e + src[x + j, y + i]
        return e

    out = hl.Func(name)
    stages: dict[str, Any] = {}
    if name == "blur_separable":
        (k,) = ws
        bx = hl.Func("blur_x")
        bx[x, y] = inp[x, y] * k[0] + inp[x + 1, y] * k[1] + inp[x + 2, y] * k[2]
        out[x, y] = bx[x, y] * k[0] + bx[x, y + 1] * k[1] + bx[x, y + 2] * k[2]
        stages["blur_x"] = bx
    elif name == "blur_laplacian":
        blur, lap = ws
        b = hl.Func("blurred")
        b[x, y] = corr(inp, blur)
        out[x, y] = corr(b, lap)
        stages["blurred"] = b
    else:
        sx, sy = ws
        ix, iy = hl.Func("ix"), hl.Func("iy")
        ix[x, y] = corr(inp, sx)
        iy[x, y] = corr(inp, sy)
        ixx, iyy, ixy = hl.Func("ixx"), hl.Func("iyy"), hl.Func("ixy")
        ixx[x, y] = ix[x, y] * ix[x, y]
        iyy[x, y] = iy[x, y] * iy[x, y]
        ixy[x, y] = ix[x, y] * iy[x, y]
        sxx, syy, sxy = box(ixx), box(iyy), box(ixy)
        out[x, y] = sxx * syy - sxy * sxy - hl.f32(0.04) * (sxx + syy) * (sxx + syy)
        stages.update(ix=ix, iy=iy, ixx=ixx, iyy=iyy, ixy=ixy)
    out.set_estimates([(0, size), (0, size)])
    return Pipe([inp, *ws], out, stages, x, y)


def hand_schedule(hl: Any, name: str, pipe: Pipe, target: Any, size: int) -> str:
    """The hand schedule (a description of it): strips of ``rows`` output rows in
    parallel, ``vec`` float32 lanes, each intermediate stage computed per output row and
    stored per strip (a sliding window down the strip)."""
    x, y = pipe.x, pipe.y
    yo, yi = hl.Var("yo"), hl.Var("yi")
    vec = 2 * target.natural_vector_size(hl.Float(32))
    rows = max(8, min(64, size // 16))  # at least 16 strips: 2 threads share them evenly
    out = pipe.output
    out.split(y, yo, yi, rows, hl.TailStrategy.ShiftInwards).parallel(yo)
    out.vectorize(x, vec, hl.TailStrategy.ShiftInwards)
    inline = ("ixx", "iyy", "ixy")  # Harris' products: computed inside the window sums
    for s, f in pipe.stages.items():
        if s in inline:
            continue
        f.store_at(out, yo).compute_at(out, yi).vectorize(x, vec)
    kept = [s for s in pipe.stages if s not in inline]
    return (f"output split into strips of {rows} rows, parallel; vectorize x {vec}; "
            f"{', '.join(kept)} store_at strip, compute_at row (sliding window)")


def input_buffers(hl: Any, pipe: Pipe, arrays: list[np.ndarray], size: int,
                  target: Any) -> tuple[list[Any], str]:
    """Halide buffers of ``arrays`` (the pipeline's inputs, wrapped, not copied) and, where
    the schedule reads an input outside the image (some autoscheduled schedules do: their
    split loops compute a few rows of an intermediate that no output uses), the image
    copied into a zero-padded allocation whose coordinates start below 0, so that those
    reads stay in memory; the outputs are checked all the same. Also says what was padded
    ("" where nothing was)."""
    hl.Pipeline(pipe.output).infer_input_bounds([size, size], target)
    bufs, notes = [], []
    for q, arr in zip(pipe.params, arrays):
        b = q.get()
        need = [(b.dim(i).min(), b.dim(i).extent()) for i in range(b.dimensions())]
        q.reset()
        have = list(reversed(arr.shape))  # Halide's dimensions: x (columns) first
        lo = [min(0, m) for m, _ in need]
        hi = [max(h, m + e) for (m, e), h in zip(need, have)]
        if lo == [0] * len(lo) and hi == have:
            bufs.append(hl.Buffer(arr))
            continue
        pad = np.zeros(tuple(reversed([h - lo_ for lo_, h in zip(lo, hi)])), dtype=arr.dtype)
        pad[tuple(reversed([slice(-lo_, -lo_ + h) for lo_, h in zip(lo, have)]))] = arr
        buf = hl.Buffer(pad)
        buf.set_min(lo)
        bufs.append(buf)
        notes.append(f"{q.name()} read over " + " x ".join(
            f"{d} {m}..{m + e - 1}" for d, (m, e) in zip("xy", need)))
    return bufs, "; ".join(notes)


@dataclasses.dataclass
class Scheduled:
    """One Halide contender: its compiled callable and what scheduled it."""

    label: str
    call: Callable[[], object]
    output: np.ndarray
    schedule_s: float
    compile_s: float
    detail: str
    padded: str  # the inputs read outside the image (input_buffers), "" where none


def halide_contenders(hl: Any, name: str, size: int, inputs: dict[str, np.ndarray],
                      threads: int, loaded: dict[str, str], target: Any
                      ) -> tuple[list[Scheduled], dict[str, str]]:
    """Every schedule of pipeline ``name`` that builds: the loaded autoschedulers', then
    the hand schedule; and label -> why a schedule did not build."""
    arrays = [np.ascontiguousarray(inputs["inputData"])] + [
        np.ascontiguousarray(inputs[w]) for w in WEIGHTS[name]]
    failed: dict[str, str] = {}
    found: list[Scheduled] = []
    plans: list[str] = [a for a in AUTOSCHEDULERS if loaded[a].startswith("loaded")]
    for a in AUTOSCHEDULERS:
        if a not in plans:
            failed[f"Halide {a}"] = loaded[a]
    for plan in [*plans, "hand"]:
        label = f"Halide {plan}"
        pipe = define(hl, name, size)
        t0 = time.perf_counter()
        try:
            if plan == "hand":
                detail = hand_schedule(hl, name, pipe, target, size)
            else:
                params = hl.AutoschedulerParams(plan, {"parallelism": str(threads)})
                res = hl.Pipeline(pipe.output).apply_autoscheduler(target, params)
                detail = res.schedule_source
            t1 = time.perf_counter()
            call = hl.Pipeline(pipe.output).compile_to_callable(pipe.params, target)
        except Exception as e:  # noqa: BLE001  (HalideError: e.g. a GPU-only autoscheduler)
            why = str(e).strip().splitlines()[-1]
            failed[label] = ("schedules GPU targets only (Halide: 'Specified target ... does "
                             "not support GPU')" if "does not support GPU" in why else why)
            continue
        t2 = time.perf_counter()
        out = np.empty((size, size), dtype=np.float32)
        ins, padded = input_buffers(hl, pipe, arrays, size, target)
        bufs = [*ins, hl.Buffer(out)]

        def run(call: Any = call, bufs: list[Any] = bufs) -> object:
            return call(*bufs)

        found.append(Scheduled(label, run, out, t1 - t0, t2 - t1, detail, padded))
    return found, failed


# ------------------------------------------------------------------ the run


def _timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _crop(name: str, out: Any, size: int) -> np.ndarray:
    """OpenCV's output cut to the valid part: ``bench_plain``'s separable blur is
    same-size (``sepFilter2D``), its pipelines are cropped already."""
    a = np.asarray(out)
    if a.shape != (size, size):
        h = (a.shape[0] - size) // 2
        a = a[h:h + size, h:h + size]
    return a


def bench(name: str, a: argparse.Namespace, hl: Any, loaded: dict[str, str],
          target: Any) -> dict:
    """One pipeline: every contender checked, then timed interleaved."""
    from experiments import bench_plain
    from experiments.baselines import fastest_round_s, interleave
    from ir.nodes import Lambda
    from ir.syntax import parse_file
    from mapper.data import random_inputs, reference_result

    size = a.size
    sizes = sizes_of(name, size)
    prog = parse_file(os.path.join(bench_plain.EX, bench_plain.PROGRAMS[name][0]))
    assert isinstance(prog, Lambda)  # a .lift file declares its inputs
    inputs = random_inputs(prog, sizes, seed=0)  # what bench_plain.explore draws too
    ref = reference(name, inputs)
    interp = np.asarray(reference_result(prog, inputs, sizes), dtype=np.float64)
    row: dict = {"pipeline": name, "size": size, "sizes": sizes,
                 "reference_vs_interpreter": errors(interp.astype(np.float32), ref)}
    if not row["reference_vs_interpreter"]["ok"]:
        row["error"] = f"the numpy reference disagrees with liftmap's reference " \
                       f"interpreter: {row['reference_vs_interpreter']}"
        return row
    runs: dict[str, Callable[[], Sequence[float]]] = {}
    checks: dict[str, dict] = {}
    skipped: dict[str, str] = {}

    def timed(fn: Callable[[], object]) -> Callable[[], Sequence[float]]:
        return lambda: [_timed(fn) for _ in range(a.repeats)]

    if not a.skip_liftmap:
        ans = bench_plain.explore(name, a.budget, sizes)
        row["liftmap"] = ans.row
        if ans.kernel is None:
            skipped["liftmap"] = ans.row.get("error", "no answer")
        else:
            r = ans.kernel.run(ans.inputs, repeats=1, reference=ref.astype(np.float32))
            checks["liftmap"] = {"ok": r.ok, "max_abs": r.max_abs_error,
                                 "max_rel": (r.max_abs_error or 0.0)
                                 / (float(np.abs(ref).max()) or 1.0), "status": r.label}
            if r.ok:
                runs["liftmap"] = bench_plain.kernel_round(ans.kernel, ans.inputs, a.repeats,
                                                           ref.astype(np.float32))
            else:
                skipped["liftmap"] = f"its answer did not run ok: {r.label} {r.reason}"
    else:
        skipped["liftmap"] = "--skip-liftmap"
    if hl is not None:
        found, failed = halide_contenders(hl, name, size, inputs, a.threads, loaded, target)
        skipped.update(failed)
        row["halide_schedules"] = {}
        for s in found:
            try:
                s.call()
            except Exception as e:  # noqa: BLE001  (HalideError)
                skipped[s.label] = f"did not run: {str(e).strip().splitlines()[-1]}"
                continue
            checks[s.label] = errors(s.output, ref)
            row["halide_schedules"][s.label] = {"schedule_s": round(s.schedule_s, 3),
                                                "compile_s": round(s.compile_s, 3),
                                                "inputs_padded": s.padded,
                                                "schedule": s.detail}
            if checks[s.label]["ok"]:
                runs[s.label] = timed(s.call)
            else:
                skipped[s.label] = f"wrong result: {checks[s.label]}"
    base_fn, base_name = bench_plain.PROGRAMS[name][3], bench_plain.PROGRAMS[name][4]
    fn = base_fn(inputs)
    if fn is None:
        skipped["OpenCV"] = "OpenCV: skipped: cv2 not installed"
    else:
        import cv2

        cv2.setNumThreads(a.threads)
        checks["OpenCV"] = errors(_crop(name, fn(), size), ref)
        if checks["OpenCV"]["ok"]:
            runs["OpenCV"] = timed(fn)
        else:
            skipped["OpenCV"] = f"wrong result: {checks['OpenCV']}"
        row["opencv"] = base_name
    row["checks"] = checks
    row["skipped"] = skipped
    per_round: dict[str, list[list[float]]] = {}
    interleave(runs, a.rounds, a.settle, per_round)
    row["times_s"] = per_round
    meds = {k: statistics.median([t for r in v for t in r]) for k, v in per_round.items()}
    row["median_ms"] = {k: v * 1e3 for k, v in meds.items()}
    row["fastest_ms"] = {k: (fastest_round_s(v) or float("nan")) * 1e3
                         for k, v in per_round.items()}
    return row


def table(rows: list[dict]) -> str:
    """The markdown table: pipeline | contender | ms median | ms fastest | vs OpenCV."""
    lines = ["| pipeline | contender | ms median | ms fastest | vs OpenCV |",
             "|---|---|---:|---:|---:|"]
    for r in rows:
        meds, fast = r.get("median_ms", {}), r.get("fastest_ms", {})
        cv = meds.get("OpenCV")
        for k in sorted(meds, key=lambda k: meds[k]):
            vs = f"{cv / meds[k]:.2f}x" if cv else "-"
            lines.append(f"| {r['pipeline']} | {k} | {meds[k]:.3f} | {fast[k]:.3f} | {vs} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pipelines", default=",".join(PIPELINES),
                    help=f"comma-separated, of {', '.join(PIPELINES)} (default: all)")
    ap.add_argument("--size", type=ranged(int, 8, 1 << 15, "an output size"), default=2048,
                    help="output rows and columns (default 2048)")
    ap.add_argument("--budget", default="3m",
                    help="liftmap's default search, each pipeline (default 3m)")
    ap.add_argument("--skip-liftmap", action="store_true",
                    help="leave liftmap out (no search): Halide and OpenCV only")
    ap.add_argument("--threads", type=ranged(int, 1, 1024, "a thread count"), default=2,
                    help="Halide's and OpenCV's threads (default 2)")
    add_interleaving(ap, rounds=5, repeats=5, settle=0.2)
    add_json(ap)
    a = ap.parse_args(argv)
    names = [n for n in a.pipelines.split(",") if n]
    unknown = [n for n in names if n not in PIPELINES]
    if unknown or not names:
        ap.error(f"unknown pipeline(s) {', '.join(unknown)}; the pipelines: "
                 f"{', '.join(PIPELINES)}")
    # Halide's JIT runtime reads its thread count once, when its thread pool starts
    os.environ["HL_NUM_THREADS"] = str(a.threads)
    from experiments.machine import cpu_model, save_json

    try:
        import halide as hl
    except ImportError:
        hl = None
        print(SKIPPED_HALIDE, flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {cpu_model()}, load {load:.2f}; {a.size}x{a.size} outputs, "
          f"{a.threads} threads, budget {a.budget} each", flush=True)
    loaded: dict[str, str] = {}
    target = None
    version = None
    if hl is not None:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as pkg_version

        try:
            version = pkg_version("halide")
        except PackageNotFoundError:
            version = "?"
        target = hl.get_jit_target_from_environment()
        loaded = load_autoschedulers(hl)
        print(f"halide {version}, target {target}", flush=True)
        for k, v in loaded.items():
            print(f"halide: {k}: {v}", flush=True)
    rows = []
    for n in names:
        row = bench(n, a, hl, loaded, target)
        rows.append(row)
        if "error" in row:
            print(f"{n}: {row['error']}", flush=True)
            continue
        if "liftmap" in row and "answer" in row["liftmap"]:
            print(f"{n}: liftmap's answer ({row['liftmap']['evaluated']} evaluated in "
                  f"{row['liftmap']['explore_s']} s): {row['liftmap']['answer']}", flush=True)
        ri = row["reference_vs_interpreter"]
        print(f"{n}: numpy reference vs liftmap's interpreter: max abs {ri['max_abs']:.2e}",
              flush=True)
        for k, c in row["checks"].items():
            print(f"{n}: {k}: {'ok' if c.get('ok') else 'WRONG'}, max abs error "
                  f"{c.get('max_abs', float('nan')):.2e}, relative to the output's scale "
                  f"{c.get('max_rel', float('nan')):.2e}", flush=True)
        for k, h in row.get("halide_schedules", {}).items():
            if h["inputs_padded"]:
                print(f"{n}: {k}: its schedule reads outside the image ({h['inputs_padded']}): "
                      f"given a zero-padded copy", flush=True)
        for k, why in row["skipped"].items():
            print(f"{n}: {why}" if why.startswith("OpenCV:") else f"{n}: {k}: skipped: {why}",
                  flush=True)
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nmedian of {a.rounds} interleaved rounds x {a.repeats} runs (liftmap: OpenCL "
          f"profiling; the rest: wall time of one call); load after {load_after:.2f}")
    print(table(rows), flush=True)
    save_json(a.json, {"machine": cpu_model(), "load": load, "load_after": load_after,
                       "halide": version, "target": str(target), "autoschedulers": loaded,
                       "threads": a.threads, "rows": rows})
    wrong = [(r["pipeline"], k) for r in rows for k, c in r.get("checks", {}).items()
             if not c.get("ok")]
    return 0 if not wrong and all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
