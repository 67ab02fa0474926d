"""Winograd's minimal filtering F(2x2, 3x3) and F(4x4, 3x3) (Lavin and Gray, CVPR 2016) as
pipelines of plain programs: a 3x3 convolution (stride 1, padding 1) in 2.25x
(F(2x2)) or 4x (F(4x4)) fewer multiplications than the direct one.

Each 4x4 tile ``d`` of the padded input (stride 2) gives a 2x2 tile of the output,
``Y = At [(G g Gt) . (Bt d B)] A``, where ``.`` multiplies elementwise. Summed over the
input channels, the elementwise products are 16 matrix products, one per position ``xi``
of the 4x4 tile: ``P[xi] = V[xi] x U[xi]`` with ``V[xi]`` tiles x channels and
``U[xi]`` channels x kernels. The transforms are matrix products of small tiles, each
written as two passes (a product by ``Bt`` on the left, then by ``B`` on the right), as
they are separable: ``2 n^3`` products per tile and channel instead of the ``n^4`` of one
pass by the Kronecker product ``Bt (x) Bt`` (432 against 1,296 for F(4x4)). The stages,
every one a plain program:

* ``input_rows``: ``W1[i][t][l][c] = sum over k of Bt[i][k] d_t[k][l][c]``;
* ``input_cols``: ``V[n i + j][t][c] = sum over l of Bt[j][l] W1[i][t][l][c]``. One pass
  by the whole ``Bt (x) Bt`` took 0.53 ms where these two take 0.2 ms (F(4x4), 128
  channels at 28x28, Zen 3): a second intermediate is cheaper than three times the
  products;
* ``gemm``: ``P[xi][t][m] = sum over c of V[xi][t][c] U[xi][c][m]``, written as the plain
  matrix product (``examples/matmul_plain.lift``) of ``V[xi]`` and ``transpose(U[xi])``
  under a map over ``xi``. The weights are laid out kernels innermost (they are transformed
  on the host anyway, so their layout is free): a map over the kernels then reads
  consecutive kernels in vector lanes, each channel's input broadcast to them (an outer
  product, as BLAS computes a GEMM). In the other layout (``U[xi][m][c]``) only the
  channel sum could run in lanes, a dot product with a horizontal step per output:
  ``mapper explore`` found 1.7x slower kernels there in the same minute (layer 19's shape,
  Zen 5);
* ``output_rows``: ``Z[a][t][j][m] = sum over i of At[a][i] P[n i + j][t][m]``;
* ``output_cols``: ``Y[m th + a][m tw + b][k] = sum over j of At[b][j] Z[a][t][j][k]``,
  written in the output's HWM order;
* ``crop``: ``Y`` without the rows and columns past the output's ``H`` x ``W``, where m
  does not divide them; the lowering leaves it out where it does (``identity_when``).

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

Sizes (:func:`sizes`): the output is ``H`` x ``W``, ``C`` channels in, ``M`` kernels; the
tiles ``TH`` x ``TW`` cover it, ``TH = ceil(H / m)``. Where m does not divide ``H``, the
last row of tiles reads the padding below the input and computes ``m TH - H`` rows past
the output, which the crop drops (likewise the columns): a 7 x 7 output in 4 x 4 tiles
computes 8 x 8, 1.31x the products it keeps, for 4x fewer multiplications.
"""

from __future__ import annotations

import numpy as np

from ir.errors import InvalidOptionError
from ir.nodes import Lambda
from ir.pipeline import Pipeline, Stage
from ir.sym import parse_expr, sym

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


def _stages(m: int) -> dict[str, str]:
    """The five stages' texts for output tiles m x m (input tiles n x n, n = m + 2, and
    N = n*n positions), by stage name."""
    n = m + 2
    N = n * n
    # the padding below and right also covers the last tiles' rows and columns past the
    # output (m TH - H of them, 0 where m divides H): the crop stage drops their outputs
    rows = rf"""
inputData : [[[float]C]W]H
BT : [[float]{n}]{n}

mapA(\bt -> mapB(\tile -> mapL(\col -> join o mapC(\px -> {_MAC}(0.0f, zip(px, bt)))
                                  $ transpose(col))
                 $ transpose(tile))
    $ join $ slideND(2, ({n}, {n}), ({m}, {m}))
    $ padND(2, ((1, {m}*TH-H+1), (1, {m}*TW-W+1))) $ inputData)
  $ BT
"""
    cols = rf"""
W1 : [[[[float]C]{n}](TH*TW)]{n}
BT : [[float]{n}]{n}

join o mapA(\w -> mapJ(\bt -> mapB(\t -> join o mapC(\px -> {_MAC}(0.0f, zip(px, bt)))
                                        $ transpose(t))
                       $ w)
                  $ BT)
  $ W1
"""
    gemm = rf"""
V : [[[float]C](TH*TW)]{N}
U : [[[float]M]C]{N}

mapD(\vu -> mapE(\row -> join o mapF(\col -> {_MAC}(0.0f, zip(row, col)))
                                $ transpose(get(1)(vu)))
              $ get(0)(vu))
  $ zip(V, U)
"""
    out_rows = rf"""
P : [[[float]M](TH*TW)]{N}
AT : [[float]{n}]{m}

mapA(\at -> mapT(\t -> mapJ(\jm -> join o mapM(\px -> {_MAC}(0.0f, zip(px, at))) $ jm)
                      $ t)
    $ map(map(transpose)) o transpose o map(transpose) o transpose o split({n}) $ P)
  $ AT
"""
    out_cols = rf"""
Z : [[[[float]M]{n}](TH*TW)]{m}
AT : [[float]{n}]{m}

join o mapG(\xth -> mapH(\xa -> join o mapI(\z ->
            mapJ(\atb -> join o mapK(\col -> {_MAC}(0.0f, zip(col, atb))) $ transpose(z))
            $ AT) $ xa) $ xth)
  $ transpose o map(split(TW)) $ Z
"""
    crop = rf"""
Y : [[[float]M]({m}*TW)]({m}*TH)

mapA(\row -> mapB(\px -> mapK(toGlobal(id)) $ px) $ row)
  $ padND(2, ((0, H-{m}*TH), (0, W-{m}*TW))) $ Y
"""
    return {"input_rows": rows, "input_cols": cols, "gemm": gemm, "output_rows": out_rows,
            "output_cols": out_cols, "crop": crop}


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
    """F(m x m, 3 x 3)'s stages (``input_rows``, ``input_cols``, ``gemm``,
    ``output_rows``, ``output_cols``, ``crop``) over the inputs ``inputData``
    (``[[[float]C]W]H``, HWC), ``BT`` (:func:`input_matrix`), ``U``
    (:func:`transform_weights`) and ``AT`` (:func:`output_matrix`); the result is the
    ``[[[float]M]W]H`` convolution (HWM). Its sizes: :func:`sizes`."""
    _matrices(m)
    text = _stages(m)
    return Pipeline(
        "winograd" if m == 2 else f"winograd{m}",
        ("inputData", "BT", "U", "AT"),
        (
            Stage("input_rows", _parse(text["input_rows"]),
                  (("inputData", "inputData"), ("BT", "BT"))),
            Stage("input_cols", _parse(text["input_cols"]), (("W1", "<previous>"), ("BT", "BT"))),
            Stage("gemm", _parse(text["gemm"]), (("V", "<previous>"), ("U", "U"))),
            Stage("output_rows", _parse(text["output_rows"]),
                  (("P", "<previous>"), ("AT", "AT"))),
            Stage("output_cols", _parse(text["output_cols"]),
                  (("Z", "<previous>"), ("AT", "AT"))),
            Stage("crop", _parse(text["crop"]), (("Y", "<previous>"),),
                  identity_when=((parse_expr(f"{m}*TH"), sym("H")),
                                 (parse_expr(f"{m}*TW"), sym("W")))),
        ),
    )


def input_matrix(m: int = 2) -> np.ndarray:
    """``Bt`` (float32, n x n, n = m + 2): ``V = Bt d B`` for an input tile ``d``."""
    return _matrices(m)[0].astype(np.float32)


def output_matrix(m: int = 2) -> np.ndarray:
    """``At`` (float32, m x n): ``Y = At P A`` for a tile of products ``P``."""
    return _matrices(m)[2].astype(np.float32)


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
    """Whether F(m x m, 3 x 3) computes this convolution as the pipeline is written, in
    fewer multiplications than the direct one (:func:`why_not` says why not)."""
    return why_not(K, S, P, H, W, m) is None


def why_not(K: int, S: int, P: int, H: int, W: int, m: int = 2) -> str | None:
    """Why F(m x m, 3 x 3) does not take this convolution, or None where it does: it
    takes 3x3 kernels, stride 1 and padding 1 (the output as large as the input), and an
    output whose tiles' (m + 2)^2 products each, those past the output included, are
    fewer than the direct convolution's 9 per output (a 2 x 2 output in 4 x 4 tiles is
    not)."""
    if m not in MATRICES:
        return f"F(m x m, 3 x 3) is written for m in {TILES}, not {m}"
    if (K, S, P) != (3, 1, 1):
        return (f"F({m}x{m}, 3x3) takes 3x3 kernels, stride 1 and padding 1; this layer "
                f"has K={K}, S={S}, P={P}")
    tiles = -(-H // m) * -(-W // m)
    if H < 1 or W < 1 or tiles * (m + 2) ** 2 >= 9 * H * W:
        return (f"F({m}x{m}, 3x3) would multiply no less than the direct convolution on a "
                f"{H}x{W} output: its {tiles} tile(s) of {m}x{m} take {(m + 2) ** 2} "
                f"products each")
    return None


def sizes(H: int, W: int, C: int, M: int, m: int = 2) -> dict[str, int]:
    """The pipeline's sizes for an ``H`` x ``W`` output of ``M`` kernels over ``C``
    channels: the tiles ``TH`` x ``TW`` that cover it (``ceil(H / m)``)."""
    return {"TH": -(-H // m), "TW": -(-W // m), "H": H, "W": W, "C": C, "M": M}
