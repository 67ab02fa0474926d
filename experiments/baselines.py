"""Baselines for the generated kernels, with the memory each needs.

* numpy im2col + matmul and PyTorch ``conv2d`` (CPU; torch is an optional, benchmark-only
  import: ``pip install torch==2.13.0``);
* the hand-written OpenCL programs, which live in ``experiments.handwritten`` (the tests use
  them too) and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from codegen.program import CompiledProgram
from experiments.handwritten import (  # noqa: F401  (re-exported for the experiment scripts)
    conv_inputs,
    conv_reference,
    im2col_conv,
    local_tiled_conv_program,
    naive_conv_program,
    register_tiled_conv_program,
    vector_add_program,
)
from ir.conv_layer import ConvLayer

# ------------------------------------------------------------------ candidates for a WorkerPool


def given_program(program: CompiledProgram) -> CompiledProgram:
    """A picklable ``lower_fn`` for an already built program. It lives in an importable
    module: worker processes do not import a script's ``__main__``."""
    return program


def with_nonce(lower_fn: Callable[[], CompiledProgram], nonce: float) -> CompiledProgram:
    """``lower_fn()`` with a comment added to every kernel: a source no cache has seen."""
    prog = lower_fn()
    kernels = tuple(replace(k, source=k.source + f"\n// nonce {nonce!r}\n")
                    for k in prog.kernels)
    return replace(prog, kernels=kernels)

# ------------------------------------------------------------------ numpy and torch


def im2col_memory(layer: ConvLayer) -> dict[str, int]:
    """Bytes numpy im2col+matmul needs: input, padded copy, im2col matrix, weights, output."""
    f = 4
    hp, wp = layer.H + 2 * layer.P, layer.W + 2 * layer.P
    cols = layer.out_h * layer.out_w * layer.K * layer.K * layer.C * f
    inp = layer.H * layer.W * layer.C * f
    weights = layer.M * layer.K * layer.K * layer.C * f
    out = layer.out_h * layer.out_w * layer.M * f
    return {"input": inp, "padded_input": hp * wp * layer.C * f, "im2col_matrix": cols,
            "weights": weights, "output": out,
            "total": inp + hp * wp * layer.C * f + cols + weights + out}


def skipped_peer(peer: str, module: str) -> str:
    """The line a benchmark prints for a peer it leaves out because ``module`` cannot be
    imported (the ``bench`` extra installs every peer)."""
    return f"{peer}: skipped: {module} not installed (pip install -e '.[bench]')"


def torch_available() -> bool:
    """True when PyTorch can be imported (benchmarks only)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def torch_conv_fn(x: np.ndarray, w: np.ndarray, stride: int = 1, pad: int = 1,
                  threads: int | None = None):
    """A zero-argument callable running ``torch.nn.functional.conv2d`` (NCHW, float32) on the
    HWC input; ``threads`` sets ``torch.set_num_threads``. Returns ``(fn, to_hwc)``."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    xt = torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)))[None]
    wt = torch.from_numpy(np.ascontiguousarray(w.transpose(0, 3, 1, 2)))

    def fn():
        with torch.no_grad():
            return torch.nn.functional.conv2d(xt, wt, stride=stride, padding=pad)

    def to_hwc(y) -> np.ndarray:
        return y[0].numpy().transpose(1, 2, 0)

    return fn, to_hwc


def torch_memory(layer: ConvLayer) -> dict[str, int]:
    """Bytes of PyTorch's tensors (input, weights, output); oneDNN's scratch space is not
    visible from Python and not counted."""
    f = 4
    inp = layer.H * layer.W * layer.C * f
    weights = layer.M * layer.K * layer.K * layer.C * f
    out = layer.out_h * layer.out_w * layer.M * f
    return {"input": inp, "weights": weights, "output": out, "total": inp + weights + out}


class RunFailed(RuntimeError):
    """A contender of :func:`interleave` that must run did not run ok (the message says
    how)."""


def wall_times(fn: Callable[[], object], repeats: int) -> list[float]:
    """``repeats`` wall-clock times of ``fn()`` (seconds), after one untimed warm-up (the
    OpenCL runs have one too)."""
    import time

    fn()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def interleave(runs: dict[str, Callable[[], Sequence[float]]], rounds: int,
               settle_s: float,
               per_round: dict[str, list[list[float]]] | None = None
               ) -> dict[str, list[float]]:
    """Each of ``runs`` (name -> one round's times) once per round, in order, ``settle_s``
    apart, ``rounds`` rounds: name -> every time. Interleaving spreads the machine's slow
    phases over every contender instead of one. A run raises :class:`RunFailed` to stop.
    ``per_round``, where given, receives name -> each round's times."""
    import time

    times: dict[str, list[float]] = {n: [] for n in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            time.sleep(settle_s)
            ts = list(run())
            times[name] += ts
            if per_round is not None:
                per_round.setdefault(name, []).append(ts)
    return times


def fastest_round_s(rounds: Sequence[Sequence[float]]) -> float | None:
    """The lowest of the rounds' medians (None where no round has a time): on a shared host
    noise only slows a run, and it slows whole rounds of one contender at a time, so the
    fastest round is the contender's own speed better than the median of every run."""
    import statistics

    meds = [statistics.median(r) for r in rounds if r]
    return min(meds) if meds else None


def kernel_times(pool: Any, task: Any, lower_fn: Callable[[], CompiledProgram], *,
                 repeats: int, flops: int | None, what: str) -> Callable[[], Sequence[float]]:
    """One round of :func:`interleave` for a kernel of ``task`` (a
    ``mapper.explore.Task``: its inputs, reference and tolerance, as the search checked
    it) on ``pool`` (a ``codegen.worker.WorkerPool``): its ``repeats`` profiled times;
    :class:`RunFailed` (naming ``what``) when it does not run ok."""
    def run() -> Sequence[float]:
        o = pool.evaluate_candidate(lower_fn, task.inputs, task.reference, timeout_s=300,
                                    repeats=repeats, flops=flops, **task.tolerance)
        if not o.ok:
            raise RunFailed(f"{what} re-run: {o.label}: {o.reason}")
        return o.times_s

    return run
