"""The image and convolution pipelines of issue 26 (Forma's workloads) as ``.lift``
examples: a separable blur, a blur then a Laplacian, the Harris corner response and two
convolution layers. Each is checked against an independent numpy computation (the
interpreter), and mappings sampled from its valid set lower, run on the OpenCL device and
match the interpreter, at sizes no tile divides."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ir.interp import evaluate
from ir.syntax import parse_file

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SOBEL = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], np.float32)
LAPLACE = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], np.float32)


def correlate(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A valid 2-D correlation of ``x`` ([H][W], or [H][W][C] with ``w`` [M][kh][kw][C])
    in float64."""
    x = x.astype(np.float64)
    kh, kw = w.shape[-3:-1] if x.ndim == 3 else w.shape
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(0, 1))
    if x.ndim == 2:
        return np.einsum("ijab,ab->ij", win, w.astype(np.float64))
    return np.einsum("ijcab,mabc->ijm", win, w.astype(np.float64))


def _image(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    return rng.standard_normal((h, w)).astype(np.float32)


def cases(h: int = 9, w: int = 11):
    """(name, inputs, sizes, float64 reference) of each pipeline."""
    rng = np.random.default_rng(0)
    x = _image(rng, h, w)
    k = np.array([0.25, 0.5, 0.25], np.float32)
    blur = rng.standard_normal((3, 3)).astype(np.float32)
    ix, iy = correlate(x, SOBEL), correlate(x, SOBEL.T)
    one = np.ones((3, 3))
    sxx, syy, sxy = correlate(ix * ix, one), correlate(iy * iy, one), correlate(ix * iy, one)
    c, m, n = 3, 4, 5
    xc = rng.standard_normal((h, w, c)).astype(np.float32)
    w1 = rng.standard_normal((m, 3, 3, c)).astype(np.float32)
    w2 = rng.standard_normal((n, 3, 3, m)).astype(np.float32)
    hw = {"H": h, "W": w}
    return [
        ("blur_separable", {"k": k, "inputData": x}, hw,
         correlate(correlate(x, k[None, :]), k[:, None])),
        ("blur_laplacian", {"blur": blur, "lap": LAPLACE, "inputData": x}, hw,
         correlate(correlate(x, blur), LAPLACE)),
        ("harris", {"sobelX": SOBEL, "sobelY": SOBEL.T.copy(), "inputData": x}, hw,
         sxx * syy - sxy * sxy - 0.04 * (sxx + syy) ** 2),
        ("conv2_layers", {"weights1": w1, "weights2": w2, "inputData": xc},
         {**hw, "C": c, "M": m, "N": n}, correlate(correlate(xc, w1), w2)),
    ]


@pytest.mark.parametrize("case", cases(), ids=lambda c: c[0])
def test_the_pipeline_computes_what_numpy_does(case) -> None:
    name, inputs, sizes, ref = case
    got = np.asarray(evaluate(parse_file(EXAMPLES / f"{name}.lift"), inputs, sizes))
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3 * max(1.0, np.abs(ref).max()))


@pytest.fixture(scope="module")
def runner():
    from codegen.runner import Runner

    return Runner()


@pytest.mark.opencl
@pytest.mark.parametrize("name,sizes", [
    ("blur_separable", {"H": 9, "W": 11}), ("blur_laplacian", {"H": 9, "W": 11}),
    ("harris", {"H": 10, "W": 13}), ("conv2_layers", {"H": 7, "W": 9, "C": 3, "M": 4, "N": 5}),
])
def test_sampled_mappings_of_the_pipeline_run_correctly(name: str, sizes, runner) -> None:
    """Each stage becomes a kernel (the stages exchange images through global memory);
    whatever the mapping, the kernels compute what the interpreter does."""
    from mapper.witness import check_program

    report = check_program(parse_file(EXAMPLES / f"{name}.lift"), sizes, runner, limit=6,
                           seed=1)
    counts = Counter(o.status for _, o in report.outcomes)
    assert counts["ok"] >= 4, report.outcomes
    assert set(counts) <= {"ok", "rejected"}, report.outcomes
