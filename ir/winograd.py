"""Winograd's minimal filtering F(2x2, 3x3) and F(4x4, 3x3) (Lavin and Gray, CVPR 2016) as
pipelines of three plain programs: a 3x3 convolution (stride 1, padding 1) in 2.25x
(F(2x2)) or 4x (F(4x4)) fewer multiplications than the direct one.

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

F(4x4, 3x3) is the same pipeline with 6x6 input tiles (stride 4), 36 positions and 4x4
output tiles (``m=4`` throughout): 4x fewer multiplications than the direct convolution
(its matrix products 1.78x fewer than F(2x2, 3x3)'s), larger transforms, and a larger
rounding error (its matrices hold 1/6, 1/24, 5 and 8: in numpy's float32 the largest error
against the float64 reference was 7-27x the direct convolution's on five shapes, F(2x2)'s
0.4-1.0x).

Sizes: the output is ``m TH`` x ``m TW`` (a height and width that are multiples of m),
``C`` channels in, ``M`` kernels.
"""

from __future__ import annotations

import numpy as np

from ir.errors import InvalidOptionError
from ir.nodes import Lambda
from ir.pipeline import Pipeline, Stage

# Lavin and Gray's matrices (correlation, as a CNN's convolution is), by output tile m:
# F(2, 3) and F(4, 3)
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)
BT4 = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float64)
G4 = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], np.float64)
AT4 = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                [0, 1, -1, 8, -8, 1]], np.float64)
MATRICES = {2: (BT, G, AT), 4: (BT4, G4, AT4)}  # m -> (Bt, G, At)
TILES = tuple(MATRICES)  # the output tiles F(m x m, 3 x 3) is written for

# a sum of products, written as matmul_plain.lift writes it (a reduction that can run in
# vector lanes); a reduce gives a one-element array, which ``join o map(...)`` flattens
_MAC = r"reduce(\acc xy -> add(acc, mult(get(0)(xy), get(1)(xy))))"


def _stages(m: int) -> tuple[str, str, str]:
    """The three stages' texts for output tiles m x m (input tiles n x n, n = m + 2, and
    N = n*n positions)."""
    n = m + 2
    N = n * n
    inp = rf"""
inputData : [[[float]C]({m}*TW)]({m}*TH)
BB : [[float]{N}]{N}

mapA(\bb -> mapB(\tile -> join o mapC(\px -> {_MAC}(0.0f, zip(px, bb))) $ transpose(tile))
    $ map(join) o join $ slideND(2, ({n}, {n}), ({m}, {m})) $ padND(2, ((1, 1), (1, 1)))
    $ inputData)
  $ BB
"""
    gemm = rf"""
V : [[[float]C](TH*TW)]{N}
U : [[[float]M]C]{N}

mapD(\vu -> mapE(\row -> join o mapF(\col -> {_MAC}(0.0f, zip(row, col)))
                                $ transpose(get(1)(vu)))
              $ get(0)(vu))
  $ zip(V, U)
"""
    out = rf"""
P : [[[float]M](TH*TW)]{N}
AA : [[[float]{N}]{m}]{m}

join o mapG(\xth -> mapH(\aa -> join o mapI(\xtw ->
                mapJ(\ab -> join o mapK(\col -> {_MAC}(0.0f, zip(col, ab))) $ transpose(xtw))
                $ aa)
              $ xth) $ AA)
  $ map(transpose) o transpose o map(split(TW)) $ P
"""
    return inp, gemm, out


INPUT_STAGE, GEMM_STAGE, OUTPUT_STAGE = _stages(2)


def _matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if m not in MATRICES:
        raise InvalidOptionError(f"Winograd's F(m x m, 3 x 3) is written for m in {TILES}, "
                                 f"not {m}")
    return MATRICES[m]


def _parse(text: str) -> Lambda:
    from ir.syntax import parse

    prog = parse(text)
    assert isinstance(prog, Lambda)
    return prog


def winograd_pipeline(m: int = 2) -> Pipeline:
    """F(m x m, 3 x 3)'s three stages (``input``, ``gemm``, ``output``) over the inputs
    ``inputData`` (``[[[float]C](m*TW)](m*TH)``, HWC), ``BB`` (:func:`input_transform`),
    ``U`` (:func:`transform_weights`) and ``AA`` (:func:`output_transform`); the result is
    the ``[[[float]M](m*TW)](m*TH)`` convolution (HWM)."""
    _matrices(m)
    inp, gemm, out = _stages(m)
    return Pipeline(
        "winograd" if m == 2 else f"winograd{m}",
        ("inputData", "BB", "U", "AA"),
        (
            Stage("input", _parse(inp), (("inputData", "inputData"), ("BB", "BB"))),
            Stage("gemm", _parse(gemm), (("V", "<previous>"), ("U", "U"))),
            Stage("output", _parse(out), (("P", "<previous>"), ("AA", "AA"))),
        ),
    )


def input_transform(m: int = 2) -> np.ndarray:
    """``BB[n i + j][n k + l] = Bt[i][k] Bt[j][l]`` (float32, n*n x n*n, n = m + 2)."""
    bt = _matrices(m)[0]
    n = m + 2
    return np.einsum("ik,jl->ijkl", bt, bt).reshape(n * n, n * n).astype(np.float32)


def output_transform(m: int = 2) -> np.ndarray:
    """``AA[a][b][n i + j] = At[a][i] At[b][j]`` (float32, m x m x n*n)."""
    at = _matrices(m)[2]
    n = m + 2
    return np.einsum("ai,bj->abij", at, at).reshape(m, m, n * n).astype(np.float32)


def transform_weights(w: np.ndarray, m: int = 2) -> np.ndarray:
    """The weights ``w`` (MKKC, 3x3 kernels) transformed: ``U[n i + j][c][m] = sum over
    (k, l) of G[i][k] G[j][l] w[m][k][l][c]``, computed in float64 and rounded once to
    float32 (n*n x C x M, kernels innermost)."""
    g = _matrices(m)[1]
    if w.ndim != 4 or w.shape[1:3] != (3, 3):
        raise InvalidOptionError(f"F({m}x{m}, 3x3) takes 3x3 kernels (MKKC), got shape "
                                 f"{w.shape}")
    n = m + 2
    u = np.einsum("ik,jl,mklc->ijcm", g, g, w.astype(np.float64))
    return u.reshape(n * n, w.shape[3], w.shape[0]).astype(np.float32)


def applies(K: int, S: int, P: int, H: int, W: int, m: int = 2) -> bool:
    """Whether F(m x m, 3 x 3) computes this convolution as the pipeline is written: 3x3
    kernels, stride 1, padding 1 (the output as large as the input), a height and width
    that are multiples of m."""
    return (m in MATRICES and K == 3 and S == 1 and P == 1 and H % m == 0 and W % m == 0
            and H >= m and W >= m)
