"""Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray, CVPR 2016) as a pipeline of
three plain programs: a 3x3 convolution (stride 1, padding 1) in 2.25x fewer
multiplications than the direct one.

Each 4x4 tile ``d`` of the padded input (stride 2) gives a 2x2 tile of the output,
``Y = At [(G g Gt) . (Bt d B)] A``, where ``.`` multiplies elementwise. Summed over the
input channels, the elementwise products are 16 matrix products, one per position ``xi``
of the 4x4 tile: ``P[xi] = V[xi] x U[xi]`` with ``V[xi]`` tiles x channels and
``U[xi]`` channels x kernels. The three stages:

* ``input``: ``V[xi][t][c] = sum over the 16 (k, l) of BB[xi][k, l] d_t[k][l][c]``, where
  ``BB[xi = 4i + j][4k + l] = Bt[i][k] Bt[j][l]`` (an input: the transform as numbers);
* ``gemm``: ``P[xi][t][m] = sum over c of V[xi][t][c] U[xi][c][m]``, written as the plain
  matrix product (``examples/matmul_plain.lift``) of ``V[xi]`` and ``transpose(U[xi])``
  under a map over ``xi``. The weights are laid out kernels innermost (they are transformed
  on the host anyway, so their layout is free): a map over the kernels then reads
  consecutive kernels in vector lanes, each channel's input broadcast to them (an outer
  product, as BLAS computes a GEMM). In the other layout (``U[xi][m][c]``) only the
  channel sum could run in lanes, a dot product with a horizontal step per output:
  ``mapper explore`` found 1.7x slower kernels there in the same minute (layer 19's shape,
  Zen 5);
* ``output``: ``Y[2 th + a][2 tw + b][m] = sum over xi of AA[a][b][xi] P[xi][t][m]``, with
  ``AA[a][b][4i + j] = At[a][i] At[b][j]``, written in the output's HWM order.

The weights' transform ``U[xi][c][m] = sum over (k, l) of G[i][k] G[j][l] w[m][k][l][c]``
is done once per layer on the host (:func:`transform_weights`), as inference libraries
transform constant weights once, not on every call. Nothing here is special to the
lowering: the stages are programs of maps, reductions, zips and views, and the mapping
space, vectorisation and register blocking apply to them as to any program.

Sizes: the output is ``2 TH`` x ``2 TW`` (an even height and width), ``C`` channels in,
``M`` kernels.
"""

from __future__ import annotations

import numpy as np

from ir.errors import InvalidOptionError
from ir.nodes import Lambda
from ir.pipeline import Pipeline, Stage

# F(2, 3): Lavin and Gray's matrices (correlation, as a CNN's convolution is)
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)

# a sum of products, written as matmul_plain.lift writes it (a reduction that can run in
# vector lanes); a reduce gives a one-element array, which ``join o map(...)`` flattens
_MAC = r"reduce(\acc xy -> add(acc, mult(get(0)(xy), get(1)(xy))))"

INPUT_STAGE = rf"""
inputData : [[[float]C](2*TW)](2*TH)
BB : [[float]16]16

mapA(\bb -> mapB(\tile -> join o mapC(\px -> {_MAC}(0.0f, zip(px, bb))) $ transpose(tile))
    $ map(join) o join $ slideND(2, (4, 4), (2, 2)) $ padND(2, ((1, 1), (1, 1))) $ inputData)
  $ BB
"""

GEMM_STAGE = rf"""
V : [[[float]C](TH*TW)]16
U : [[[float]M]C]16

mapD(\vu -> mapE(\row -> join o mapF(\col -> {_MAC}(0.0f, zip(row, col)))
                                $ transpose(get(1)(vu)))
              $ get(0)(vu))
  $ zip(V, U)
"""

OUTPUT_STAGE = rf"""
P : [[[float]M](TH*TW)]16
AA : [[[float]16]2]2

join o mapG(\xth -> mapH(\aa -> join o mapI(\xtw ->
                mapJ(\ab -> join o mapK(\col -> {_MAC}(0.0f, zip(col, ab))) $ transpose(xtw))
                $ aa)
              $ xth) $ AA)
  $ map(transpose) o transpose o map(split(TW)) $ P
"""


def _parse(text: str) -> Lambda:
    from ir.syntax import parse

    prog = parse(text)
    assert isinstance(prog, Lambda)
    return prog


def winograd_pipeline() -> Pipeline:
    """The three stages (``input``, ``gemm``, ``output``) over the inputs ``inputData``
    (``[[[float]C](2*TW)](2*TH)``, HWC), ``BB`` (:func:`input_transform`), ``U``
    (:func:`transform_weights`) and ``AA`` (:func:`output_transform`); the result is the
    ``[[[float]M](2*TW)](2*TH)`` convolution (HWM)."""
    return Pipeline(
        "winograd",
        ("inputData", "BB", "U", "AA"),
        (
            Stage("input", _parse(INPUT_STAGE), (("inputData", "inputData"), ("BB", "BB"))),
            Stage("gemm", _parse(GEMM_STAGE), (("V", "<previous>"), ("U", "U"))),
            Stage("output", _parse(OUTPUT_STAGE), (("P", "<previous>"), ("AA", "AA"))),
        ),
    )


def input_transform() -> np.ndarray:
    """``BB[4i + j][4k + l] = Bt[i][k] Bt[j][l]`` (float32, 16 x 16)."""
    return np.einsum("ik,jl->ijkl", BT, BT).reshape(16, 16).astype(np.float32)


def output_transform() -> np.ndarray:
    """``AA[a][b][4i + j] = At[a][i] At[b][j]`` (float32, 2 x 2 x 16)."""
    return np.einsum("ai,bj->abij", AT, AT).reshape(2, 2, 16).astype(np.float32)


def transform_weights(w: np.ndarray) -> np.ndarray:
    """The weights ``w`` (MKKC, 3x3 kernels) transformed: ``U[4i + j][c][m] = sum over
    (k, l) of G[i][k] G[j][l] w[m][k][l][c]``, computed in float64 and rounded once to
    float32 (16 x C x M, kernels innermost)."""
    if w.ndim != 4 or w.shape[1:3] != (3, 3):
        raise InvalidOptionError(f"F(2x2, 3x3) takes 3x3 kernels (MKKC), got shape {w.shape}")
    u = np.einsum("ik,jl,mklc->ijcm", G, G, w.astype(np.float64))
    return u.reshape(16, w.shape[3], w.shape[0]).astype(np.float32)


def applies(K: int, S: int, P: int, H: int, W: int) -> bool:
    """Whether F(2x2, 3x3) computes this convolution as the pipeline is written: 3x3
    kernels, stride 1, padding 1 (the output as large as the input), an even height and
    width."""
    return K == 3 and S == 1 and P == 1 and H % 2 == 0 and W % 2 == 0 and H >= 2 and W >= 2
