"""The matrix multiplications of ``examples/`` (issue 9: a second program, not a
convolution): parsed, mapped, lowered and run on the OpenCL device at small sizes, checked
against numpy. No speed asserts (``experiments/bench_matmul.py`` measures the speed)."""

from pathlib import Path

import numpy as np
import pytest

from codegen.lower import lower
from codegen.runner import Runner
from ir.parser import parse_file
from mapper.api import lower_mapping
from mapper.candidates import build_candidate, reduction_tolerance

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
BLOCKED = EXAMPLES / "matmul_blocked.lift"
TILED = EXAMPLES / "matmul_tiled.lift"
DEFAULT_MAPPING = "I=G1 J=G0 Z1=S Z2=S R1=S R2=S S1=S S2=S"  # bench_matmul's CPU mapping


def lower_matmul(path: str, mapping: str, sizes: dict[str, int]):
    return build_candidate(parse_file(path), mapping, sizes, fusion="free",
                           flops=2 * sizes["M"] * sizes["N"] * sizes["K"])


@pytest.fixture(scope="module")
def runner():
    return Runner()


def _inputs(m: int, n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return {"A": a, "Bt": np.ascontiguousarray(b.T)}, ref


@pytest.mark.parametrize("m,n,k,bm,bn,v", [
    (16, 24, 32, 2, 4, 8),
    (8, 8, 64, 4, 4, 16),
    (12, 20, 24, 4, 2, 4),
    (4, 6, 8, 1, 3, 1),
])
def test_blocked_matmul_runs(runner, m, n, k, bm, bn, v):
    sizes = {"M": m, "N": n, "K": k, "bm": bm, "bn": bn, "v": v}
    cp = lower_matmul(str(BLOCKED), DEFAULT_MAPPING, sizes)
    inputs, ref = _inputs(m, n, k)
    o = runner.evaluate(cp, inputs, ref, repeats=1, **reduction_tolerance(ref))
    assert o.ok, (o.label, o.reason)


def test_blocked_matmul_uses_vector_accumulators():
    """The reduction over ``asVector`` chunks accumulates ``bm x bn`` float8 vectors with
    ``fma`` in a fully unrolled loop, summed horizontally once."""
    cp = lower_matmul(str(BLOCKED), DEFAULT_MAPPING,
                      {"M": 32, "N": 32, "K": 64, "bm": 4, "bn": 4, "v": 8})
    (kern,) = cp.kernels
    assert "float8 vacc_" in kern.source
    assert kern.source.count("= fma(vload8(") == 16
    assert "liftmap_hsum8" in kern.source


def test_blocked_matmul_local_sizes(runner):
    """A given work-group shape (2-D) computes the same result."""
    m = n = 32
    k = 64
    low = lower_mapping(parse_file(BLOCKED), DEFAULT_MAPPING, fusion="free")
    cp = lower(low, {"M": m, "N": n, "K": k, "bm": 4, "bn": 2, "v": 8}, local_sizes={0: 4, 1: 2})
    assert cp.kernels[0].local_size == (4, 2)
    inputs, ref = _inputs(m, n, k, seed=3)
    o = runner.evaluate(cp, inputs, ref, repeats=1, **reduction_tolerance(ref))
    assert o.ok, (o.label, o.reason)


def test_tiled_matmul_gpu_mapping_runs(runner):
    """``matmul_tiled.lift`` with its local-memory (GPU) mapping, on the CPU device."""
    m, n, k, t = 16, 24, 8, 4
    low = lower_mapping(parse_file(TILED), "A=W1 B=W0 E=L1 F=L0 G=L1 H=L0 C=L1 D=L0",
                        fusion="free")
    cp = lower(low, {"M": m, "N": n, "K": k, "t": t})
    inputs, ref = _inputs(m, n, k, seed=1)
    o = runner.evaluate(cp, inputs, ref, repeats=1, **reduction_tolerance(ref))
    assert o.ok, (o.label, o.reason)
