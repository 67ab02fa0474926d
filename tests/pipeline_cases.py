"""The image and convolution pipelines of ``examples/`` (issue 26) with inputs and float64
numpy references, shared by tests/test_pipelines.py and tests/test_tiling.py."""

from __future__ import annotations

import numpy as np

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
