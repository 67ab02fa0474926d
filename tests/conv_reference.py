"""An independent numpy convolution (HWC input, MKKC weights), the witness for the IR programs."""

import numpy as np


def conv2d_hwc(x, w, bias=None, stride=1, pad=(0, 0, 0, 0)):
    """x: [H, W, C], w: [M, KH, KW, C] -> [outH, outW, M]; pad = (top, bottom, left, right)."""
    t, b, l, r = pad
    x = np.pad(x.astype(np.float64), ((t, b), (l, r), (0, 0)))
    M, KH, KW, C = w.shape
    H, W, _ = x.shape
    oh, ow = (H - KH) // stride + 1, (W - KW) // stride + 1
    out = np.zeros((oh, ow, M))
    for i in range(KH):
        for j in range(KW):
            rows = slice(i, i + stride * (oh - 1) + 1, stride)
            cols = slice(j, j + stride * (ow - 1) + 1, stride)
            patch = x[rows, cols]
            out += patch @ w[:, i, j, :].astype(np.float64).T
    if bias is not None:
        out += bias
    return out
