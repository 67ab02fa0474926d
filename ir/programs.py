"""Example programs from the two papers: CC'22's listings, GPGPU'20's stencil, its
convolution as one program (Listing 3) and as the four-kernel pipeline of Listing 4.

Every builder returns a fresh program (new map uids) with symbolic sizes.
Maps are free (plain ``map``) unless the name says otherwise: choosing their
parallel mapping is the mapper's job.
"""

from __future__ import annotations

from collections.abc import Mapping

from ir.builders import (
    add,
    as_scalar,
    as_vector,
    compose,
    dot,
    fresh,
    get,
    join,
    lam,
    let,
    lit,
    map_,
    mult,
    pad2d,
    param,
    reduce_,
    reorder_stride,
    scale_add,
    slide2d,
    split,
    to_global,
    to_local,
    to_private,
    transpose,
    userfun,
    zip_,
)
from ir.errors import InvalidOptionError
from ir.nodes import FunCall, FunDecl, Id, Lambda, Literal
from ir.pipeline import Pipeline, Stage
from ir.sym import Cst, Var
from ir.types import Float, VectorType, array

# ------------------------------------------------------------------ CC'22 examples


def cc22_listing3(local: bool = False, private: bool = False) -> Lambda:
    """CC'22 Listing 3: ``X * y + z``, multiplication double-tiled, addition single-tiled.

    ``join o mapA(mapB(_ + z) o join o mapC(mapD(_ * y)) o split(s1)) o split(s0) $ X``.
    ``local=True`` writes the multiplication's result to local memory (``toLocal``),
    ``private=True`` to private memory, as in the paper's memory-scoping examples.
    """
    X = param("X", array(Float, "N"))
    y, z = param("y", Float), param("z", Float)
    mul: FunDecl = lam(lambda e: FunCall(mult, (e, y)))
    if local:
        mul = to_local(mul)
    elif private:
        mul = to_private(mul)
    addz = to_global(lam(lambda e: FunCall(add, (e, z))))
    body = compose(
        join(),
        map_(
            compose(
                map_(addz, "B"),
                join(),
                map_(map_(mul, "D"), "C"),
                split("s1"),
            ),
            "A",
        ),
        split("s0"),
    )(X)
    return Lambda((X, y, z), body)


def cc22_listing1() -> Lambda:
    """CC'22 Listing 1: ``f`` into a local buffer, ``g`` out of it; loops A-E.

    ``mapA(transpose o mapD(mapE(toGlobal(g))) o transpose o mapB(mapC(toLocal(f))))``
    over ``input: [[[float]K]J]I``: loops B (j), C (k) write ``local_buf[j][k]``; loops
    D (k), E (j) read it transposed.
    """
    f = userfun("f", ("x",), (Float,), Float, "return x * 2.0f + 1.0f;", lambda x: x * 2 + 1)
    g = userfun("g", ("x",), (Float,), Float, "return x * x;", lambda x: x * x)
    inp = param("input", array(Float, "I", "J", "K"))
    body = map_(
        compose(
            transpose(),
            map_(map_(to_global(g), "E"), "D"),
            transpose(),
            map_(map_(to_local(f), "C"), "B"),
        ),
        "A",
    )(inp)
    return Lambda((inp,), body)


# --------------------------------------------------------------- GPGPU'20 examples


def mult_add_lambda():
    """``(acc, (x, w)) -> acc + x * w`` for reductions over zipped pairs."""
    return lam(
        lambda acc, xw: FunCall(
            add, (acc, FunCall(mult, (FunCall(get(0), (xw,)), FunCall(get(1), (xw,)))))
        ),
        arity=2,
    )


def gpgpu20_stencil2d() -> Lambda:
    """GPGPU'20 Listing 1: 3x3 stencil ``[[float]W]H -> [[float]W-2]H-2`` (maps free)."""
    weights = param("weights", array(Float, 3, 3))
    data = param("inputData", array(Float, "H", "W"))
    acc0 = FunCall(to_private(Id()), (lit(0.0),))

    def window(nbh):
        return FunCall(
            reduce_(mult_add_lambda()),
            (acc0, zip_(FunCall(join(), (nbh,)), FunCall(join(), (weights,)))),
        )

    body = map_(compose(join(), map_(lam(window), "B")), "A")(
        FunCall(slide2d(3, 1, 3, 1), (data,))
    )
    return Lambda((weights, data), body)


def plain_matmul() -> Lambda:
    """A matrix product written plainly (``examples/matmul_plain.lift``): ``A: [[float]K]M``
    times ``Bt: [[float]K]N`` (B given transposed), ``[[float]N]M``; maps A (rows) and B
    (columns) free, a scalar reduction, no split, no vectors: the mapping space chooses
    the parallel maps, the vector lanes and the register block."""
    a = param("A", array(Float, "M", "K"))
    bt = param("Bt", array(Float, "N", "K"))
    acc, ab = fresh("acc"), fresh("ab")
    step = Lambda((acc, ab), FunCall(add, (acc, FunCall(mult, (
        FunCall(get(0), (ab,)), FunCall(get(1), (ab,)))))))

    def row(r):
        def col(c):
            return FunCall(reduce_(step), (lit(0.0), zip_(r, c)))

        return map_(lam(col, prefix="col"), "B")(bt)

    return Lambda((a, bt), map_(lam(row, prefix="row"), "A")(a))


def conv_reference_sizes(layer: Mapping[str, int]) -> dict[str, int]:
    """Output height and width of a layer with keys H, W, K, S, P (PyTorch's formula)."""
    H, W, K, S, P = (layer[k] for k in ("H", "W", "K", "S", "P"))
    return {"outH": (H + 2 * P - K) // S + 1, "outW": (W + 2 * P - K) // S + 1}


def gpgpu20_conv_highlevel() -> Lambda:
    """GPGPU'20 Listing 3: a convolution layer with bias, padding and stride (maps free).

    Inputs (HWC layout): ``kernelsWeights: [[[[float]C]KW]KH]M``, ``kernelsBiases:
    [float]M``, ``inputData: [[[float]C]W]H``. Sizes ``padT, padB, padL, padR``,
    ``strideY, strideX``. Result ``[[[float]M]outW]outH``.
    """
    weights = param("kernelsWeights", array(Float, "M", "KH", "KW", "C"))
    biases = param("kernelsBiases", array(Float, "M"))
    data = param("inputData", array(Float, "H", "W", "C"))
    padded = FunCall(pad2d("padT", "padB", "padL", "padR"), (data,))
    windows = FunCall(slide2d("KH", "strideY", "KW", "strideX"), (padded,))

    def per_kernel(window):
        def body(wb):
            flat_w = FunCall(compose(join(), join()), (window,))
            flat_k = FunCall(compose(join(), join()), (FunCall(get(0), (wb,)),))
            return FunCall(
                reduce_(mult_add_lambda()), (FunCall(get(1), (wb,)), zip_(flat_w, flat_k))
            )

        return FunCall(compose(join(), map_(lam(body), "K")), (zip_(weights, biases),))

    body = map_(map_(lam(per_kernel), "X"), "Y")(windows)
    return Lambda((weights, biases, data), body)


# ------------------------------------------- GPGPU'20 Listing 4: the low-level pipeline

TUNING_SYMBOLS = {
    "theta": "input tile size (θ)",
    "rho": "optimisational padding (ρ)",
    "kappa": "kernels per work-group (κ)",
    "sigma": "sliding windows per thread (σ)",
    "omega": "sequentially processed input elements (ω)",
    "v": "vector width",
}


def _sz(name: str):
    return Var(name, 1, None)


def conv_sizes() -> dict:
    """Symbolic sizes of the low-level convolution: layer sizes and derived ones."""
    H, W, C, M, K, S, P = (_sz(n) for n in ("H", "W", "C", "M", "K", "S", "P"))
    theta, rho, kappa, sigma, omega, v = (
        Var("theta", 1, None), Var("rho", 0, None), _sz("kappa"), _sz("sigma"), _sz("omega"),
        _sz("v"),
    )
    Hp, Wp = H + 2 * P + rho, W + 2 * P + rho
    tile_stride = theta - (K - S)
    nWT = (theta - K) / S + 1  # windows per tile side (the in-tile slide is strict)
    nTH = (Hp - theta) / tile_stride + 1  # tiles per column (strict)
    nTW = (Wp - theta) / tile_stride + 1
    ws = C * K * K
    return dict(H=H, W=W, C=C, M=M, K=K, S=S, P=P, theta=theta, rho=rho, kappa=kappa,
                sigma=sigma, omega=omega, v=v, Hp=Hp, Wp=Wp, tile_stride=tile_stride,
                nWT=nWT, nTH=nTH, nTW=nTW, nW=nWT * nWT, nC=ws / omega, ws=ws,
                outPH=nTH * nWT, outPW=nTW * nWT,
                outH=(H + 2 * P - K) // S + 1, outW=(W + 2 * P - K) // S + 1)


def _chunk_vectorise(s, coalesce: bool = True) -> FunDecl:
    """Flatten a ``[[[float]C]K]K`` window, vectorise it by v, reorder the vectors with
    stride ``ws/ω`` (coalescing: chunk i takes every (ws/ω)-th vector) and split into
    chunks of ω/v vectors: ``-> [[float<v>]ω/v]ws/ω``. Vectorising before reordering keeps
    each vector's lanes contiguous in memory (v consecutive channels of one pixel).
    ``coalesce=False`` leaves the reorder out: chunk i is the i-th ω contiguous elements
    (contiguous reads per work-item, what a CPU wants)."""
    layout: list[FunDecl] = [split(s["omega"] / s["v"])]
    if coalesce:
        layout.append(reorder_stride(s["ws"] / s["omega"]))
    return compose(*layout, as_vector(s["v"]), join(), join())


def _block_step(update):
    """The reduction step of a ``σ x κ`` register block: ``step(acc, pair)`` copies the
    ``σ`` inputs of ``pair`` (inputs, weights at one position) to private memory (map
    ``P``) and updates accumulator ``acc[i][j]`` to ``update(acc[i][j], input i, weight
    j)`` (maps ``R1``, ``R2``)."""
    def step(acc, pair):
        def body(ins_private):
            def row(acc_in):
                acc_row, x = FunCall(get(0), (acc_in,)), FunCall(get(1), (acc_in,))
                return FunCall(
                    map_(lam(lambda a_w: update(FunCall(get(0), (a_w,)), x,
                                                FunCall(get(1), (a_w,)))), "R2"),
                    (zip_(acc_row, FunCall(get(1), (pair,))),),
                )

            return FunCall(map_(lam(row), "R1"), (zip_(acc, ins_private),))

        private_ins = FunCall(map_(to_private(Id()), "P"), (FunCall(get(0), (pair,)),))
        return let(private_ins, body)

    return step


def conv_pad_stage() -> Lambda:
    """Pads the input by P on every side plus ρ on the bottom and right (a copying kernel)."""
    s = conv_sizes()
    data = param("inputData", array(Float, s["H"], s["W"], s["C"]))
    P, rho = s["P"], s["rho"]
    body = map_(map_(map_(to_global(Id()), "Pc"), "Pw"), "Ph")(
        FunCall(pad2d(P, P + rho, P, P + rho), (data,))
    )
    return Lambda((data,), body)


def conv_partial_stage(coalesce: bool = True) -> Lambda:
    """GPGPU'20 Listing 4, partial convolution, maps free.

    ``coalesce=True`` (the paper's) reorders the flattened windows and kernels with
    ``reorder(stride(ws/ω))`` so that consecutive work-items of a GPU read consecutive
    vectors; ``coalesce=False`` leaves the reorder out, so each work-item reads one
    contiguous chunk (faster on a CPU). Both sum the same products per output: only the
    assignment of products to chunks differs (the final stage sums all chunks).

    Tiles ``θ x θ`` (stride ``θ-(K-S)``, strict), windows per tile grouped by σ,
    kernels grouped by κ, windows and kernels flattened, coalesced, chunked by ω
    and vectorised by v. Result ``[[[[[[float]nC]σ]nW/σ]κ]M/κ]nTiles``: the
    partial sums of every (tile, kernel group, kernel, window group, window, chunk).

    Differences from the printed listing, which does not type-check as printed: the
    window groups are transposed to chunk-major before zipping with the kernel
    chunks, and the accumulator is ``[[float]κ]σ`` (σ windows by κ kernels), which
    is what one thread computes; the output transposes produce the declared layout.
    """
    s = conv_sizes()
    weights = param("kernelsWeights", array(Float, s["M"], s["K"], s["K"], s["C"]))
    padded = param("paddedInput", array(Float, s["Hp"], s["Wp"], s["C"]))
    theta, K, S = s["theta"], s["K"], s["S"]
    kappa, sigma = s["kappa"], s["sigma"]

    tiles = FunCall(
        compose(join(), slide2d(theta, s["tile_stride"], theta, s["tile_stride"], strict=True)),
        (padded,),
    )
    windows = FunCall(map_(compose(join(), slide2d(K, S, K, S, strict=True))), (tiles,))
    # per tile: [[ [[floatv]ω/v]σ ] nC ] nW/σ  (window groups, chunk-major)
    tiles_ready = FunCall(
        map_(compose(map_(transpose()), split(sigma), map_(_chunk_vectorise(s, coalesce)))),
        (windows,)
    )
    # [[ [[floatv]ω/v]κ ] nC ] M/κ (kernel groups, chunk-major)
    kernels_ready = FunCall(
        compose(map_(transpose()), split(kappa), map_(_chunk_vectorise(s, coalesce))),
        (weights,)
    )

    zero = Literal(0.0, array(Float, sigma, kappa))
    init = FunCall(map_(map_(to_private(Id()), "I2"), "I1"), (zero,))

    # pair: ([floatv]σ inputs, [floatv]κ weights) at one vector position of the chunk
    step = _block_step(lambda a, x, w: FunCall(add, (a, FunCall(dot, (x, w)))))

    def thread(chunk_pair):
        ins, ks = FunCall(get(0), (chunk_pair,)), FunCall(get(1), (chunk_pair,))
        reduced = FunCall(
            reduce_(lam(step, arity=2)),
            (init, zip_(FunCall(transpose(), (ins,)), FunCall(transpose(), (ks,)))),
        )
        return FunCall(
            compose(map_(map_(to_global(Id()), "S2"), "S1"), join()), (reduced,)
        )

    def window_group(wg, kgroup):
        per_chunk = FunCall(map_(lam(thread), "C"), (zip_(wg, kgroup),))  # [[[float]κ]σ]nC
        # -> [[[float]nC]σ]κ
        return FunCall(compose(transpose(), map_(transpose()), transpose()), (per_chunk,))

    def kernel_group(tile):
        def body(kgroup):
            per_wg = FunCall(map_(lam(lambda wg: window_group(wg, kgroup)), "W"), (tile,))
            return FunCall(transpose(), (per_wg,))  # [[[[float]nC]σ]nW/σ]κ

        return FunCall(map_(lam(body), "G"), (kernels_ready,))

    body = FunCall(map_(lam(kernel_group), "T"), (tiles_ready,))
    return Lambda((weights, padded), body)


def conv_partial_kvec_stage() -> Lambda:
    """The partial convolution vectorised over kernels (an outer product), maps free.

    Each vector holds ``v`` consecutive kernels' weights at one window position and is
    multiplied by one broadcast input element: the reduction runs over the window's scalars
    (``ω`` per chunk) into ``σ x κ/v`` vector accumulators, with no horizontal sums. It
    wins where the window is short (few input channels, as in a network's first layer),
    which leaves a vector along the window few positions to accumulate over. The weights
    come in ``[[[[float]M]C]K]K`` (KKCM) layout, so that ``v`` consecutive kernels are
    contiguous; ``v`` divides ``κ``. Result ``[[[[[[float]κ]σ]nC]nW/σ]M/κ]nTiles``: one
    work-item's ``σ x κ`` sums are contiguous (written as vectors), kernels innermost, as
    :func:`conv_final_kvec_stage` reads them.
    """
    s = conv_sizes()
    weights = param("kernelsWeights", array(Float, s["K"], s["K"], s["C"], s["M"]))
    padded = param("paddedInput", array(Float, s["Hp"], s["Wp"], s["C"]))
    theta, K, S = s["theta"], s["K"], s["S"]
    kappa, sigma, omega, v = s["kappa"], s["sigma"], s["omega"], s["v"]

    tiles = FunCall(
        compose(join(), slide2d(theta, s["tile_stride"], theta, s["tile_stride"], strict=True)),
        (padded,),
    )
    windows = FunCall(map_(compose(join(), slide2d(K, S, K, S, strict=True))), (tiles,))
    # per tile: [[[[float]σ]ω]nC]nW/σ (window groups; per chunk, σ windows at each position)
    tiles_ready = FunCall(
        map_(compose(map_(split(omega)), map_(transpose()), split(sigma),
                     map_(compose(join(), join())))),
        (windows,),
    )
    # [[[[float<v>]κ/v]ω]nC]M/κ (kernel groups; per chunk, κ/v vectors at each position)
    kernels_ready = FunCall(
        compose(map_(split(omega)), map_(transpose()), split(kappa / v), transpose(),
                map_(as_vector(v)), join(), join()),
        (weights,),
    )

    zero = Literal(0.0, array(VectorType(Float, v), sigma, kappa / v))
    init = FunCall(map_(map_(to_private(Id()), "I2"), "I1"), (zero,))

    # pair: ([float]σ inputs, [float<v>]κ/v weights) at one position of the chunk
    step = _block_step(lambda a, x, w: FunCall(scale_add, (a, x, w)))

    def thread(chunk_pair):
        ins, ks = FunCall(get(0), (chunk_pair,)), FunCall(get(1), (chunk_pair,))
        reduced = FunCall(reduce_(lam(step, arity=2)), (init, zip_(ins, ks)))
        return FunCall(  # [[float]κ]σ: the vectors written whole, read as floats
            compose(map_(as_scalar()), map_(map_(to_global(Id()), "S2"), "S1"), join()),
            (reduced,),
        )

    def kernel_group(tile):
        def body(kgroup):
            def window_group(wg):
                return FunCall(map_(lam(thread), "C"), (zip_(wg, kgroup),))  # [[[float]κ]σ]nC

            return FunCall(map_(lam(window_group), "W"), (tile,))

        return FunCall(map_(lam(body), "G"), (kernels_ready,))

    body = FunCall(map_(lam(kernel_group), "T"), (tiles_ready,))
    return Lambda((weights, padded), body)


def _sum_chunks(part) -> FunCall:
    """``part`` ``[a][b][c][d][e][nC]`` summed over its chunks: each sum reduced in private
    memory and copied out by ``map(toGlobal(id))`` (maps ``F1``-``F6``) -> ``[a][b][c][d][e]``."""
    def sum_chunks(x):
        return FunCall(map_(to_global(Id()), "F6"), (FunCall(reduce_(add), (lit(0.0), x)),))

    return FunCall(
        map_(map_(map_(map_(compose(join(), map_(lam(sum_chunks), "F5")), "F4"), "F3"), "F2"),
             "F1"),
        (part,),
    )


def _tiles_to_image(s) -> list[FunDecl]:
    """The layout steps ``(nT², nW, m) -> (outPH, outPW, m)``: tiles and their windows back
    into image rows and columns (the last steps of a ``compose``)."""
    return [
        map_(join()),  # (ty, wy, tx, wx, m) -> (ty, wy, outPW, m)
        join(),  # -> (outPH, outPW, m)
        map_(transpose()),  # (ty, tx, wy, wx, m) -> (ty, wy, tx, wx, m)
        map_(map_(split(s["nWT"]))),  # (ty, tx, nW, m) -> (ty, tx, wy, wx, m)
        split(s["nTW"]),  # (nT², nW, m) -> (ty, tx, nW, m)
    ]


def conv_final_kvec_stage() -> Lambda:
    """:func:`conv_final_stage` for :func:`conv_partial_kvec_stage`'s result layout: sums
    the chunks and lays the outputs out as ``[[[float]M]outPW]outPH`` (HWC), maps free."""
    s = conv_sizes()
    part = param(
        "partial",
        array(Float, s["nTH"] * s["nTW"], s["M"] / s["kappa"], s["nW"] / s["sigma"], s["nC"],
              s["sigma"], s["kappa"]),
    )

    chunks_inner = map_(map_(map_(compose(map_(transpose()), transpose()))))
    summed = _sum_chunks(FunCall(chunks_inner, (part,)))  # [nT², M/κ, nW/σ, σ, κ]
    return Lambda((part,), FunCall(_kvec_layout(s), (summed,)))


def _kvec_layout(s) -> FunDecl:
    """``(nT², M/κ, nW/σ, σ, κ) -> (outPH, outPW, M)``: the kvec partial's sums laid out as
    the image (HWM)."""
    return compose(
        *_tiles_to_image(s),
        map_(map_(join())),  # (nT², nW, M/κ, κ) -> (nT², nW, M)
        map_(transpose()),  # (nT², M/κ, nW, κ) -> (nT², nW, M/κ, κ)
        map_(map_(join())),  # (nT², M/κ, nW/σ, σ, κ) -> (nT², M/κ, nW, κ)
    )


def fold_final_kvec(partial: Lambda) -> Lambda:
    """:func:`conv_partial_kvec_stage` (``partial``) writing the convolution's output
    itself where one chunk covers the window (``nC = 1``, ``omega = C*K*K``): its
    ``[nT²][M/κ][nW/σ][1][σ][κ]`` sums written through :func:`conv_final_kvec_stage`'s
    layout, which then has nothing to sum (``Stage.fold``). On a 3-channel 224x224 layer
    of 64 kernels (one chunk of 27) the final stage was a 12.8 MB copy, 1.0 of 3.6 ms."""
    s = conv_sizes()
    drop = map_(map_(map_(join())))  # (.., nW/σ, 1, σ, κ) -> (.., nW/σ, σ, κ)
    return Lambda(partial.params, FunCall(compose(_kvec_layout(s), drop), (partial.body,)))


def conv_final_stage() -> Lambda:
    """Sums the partial results over chunks and lays the outputs out as
    ``[[[float]M]outPW]outPH`` (HWC), maps free.

    Each sum is copied out of its private accumulator by ``map(toGlobal(id))`` (map F6);
    the layout after the maps is a write view (no second copy)."""
    s = conv_sizes()
    part = param(
        "partial",
        array(Float, s["nTH"] * s["nTW"], s["M"] / s["kappa"], s["kappa"],
              s["nW"] / s["sigma"], s["sigma"], s["nC"]),
    )

    summed = _sum_chunks(part)  # [nT², M/κ, κ, nW/σ, σ]
    layout = compose(
        *_tiles_to_image(s),
        map_(transpose()),  # (nT², M, nW) -> (nT², nW, M)
        map_(compose(join(), map_(map_(join())))),  # (nT², M/κ, κ, nW/σ, σ) -> (nT², M, nW)
    )
    return Lambda((part,), FunCall(layout, (summed,)))


def conv_crop_stage() -> Lambda:
    """Crops the extra outputs caused by ρ: ``[[[float]M]outPW]outPH -> [[[float]M]outW]outH``."""
    s = conv_sizes()
    x = param("paddedOutput", array(Float, s["outPH"], s["outPW"], s["M"]))
    cropH, cropW = s["outPH"] - s["outH"], s["outPW"] - s["outW"]
    body = map_(map_(map_(to_global(Id()), "Cc"), "Cw"), "Ch")(
        FunCall(pad2d(0, -cropH, 0, -cropW), (x,))
    )
    return Lambda((x,), body)


CONV_VECTORISE = ("window", "kernels")


def gpgpu20_conv_pipeline(coalesce: bool = True, vectorise: str = "window") -> Pipeline:
    """The four kernels of GPGPU'20 Section 4.2: pad, partial convolution, final
    reduction, crop. Inputs ``inputData: [[[float]C]W]H`` and
    ``kernelsWeights: [[[[float]C]K]K]M`` (no bias, as in the paper's listing).
    ``coalesce`` picks the partial stage's layout (see :func:`conv_partial_stage`).
    ``vectorise="kernels"`` takes :func:`conv_partial_kvec_stage` instead (vectors across
    kernels; weights in ``[[[[float]M]C]K]K`` layout; ``coalesce`` does not apply).
    The crop is left out where the tiles cover exactly the output (ρ = 0); with
    ``kernels``, the final stage is folded into the partial one where one chunk covers the
    window (:func:`fold_final_kvec`)."""
    if vectorise not in CONV_VECTORISE:
        raise InvalidOptionError(f"vectorise must be one of {CONV_VECTORISE}, not {vectorise!r}")
    partial = conv_partial_kvec_stage() if vectorise == "kernels" else \
        conv_partial_stage(coalesce)
    s = conv_sizes()
    return Pipeline(
        "conv",
        ("inputData", "kernelsWeights"),
        (
            Stage("pad", conv_pad_stage(), (("inputData", "inputData"),)),
            Stage("partial", partial,
                  (("kernelsWeights", "kernelsWeights"), ("paddedInput", "<previous>"))),
            Stage("final", conv_final_kvec_stage(), (("partial", "<previous>"),),
                  folds_when=((s["nC"], Cst(1)),), fold=fold_final_kvec)
            if vectorise == "kernels" else
            Stage("final", conv_final_stage(), (("partial", "<previous>"),)),
            Stage("crop", conv_crop_stage(), (("paddedOutput", "<previous>"),),
                  identity_when=((s["outPH"], s["outH"]), (s["outPW"], s["outW"]))),
        ),
    )


PROGRAMS = {
    "cc22_listing1": cc22_listing1,
    "cc22_listing3": cc22_listing3,
    "gpgpu20_stencil2d": gpgpu20_stencil2d,
    "plain_matmul": plain_matmul,
    "gpgpu20_conv_highlevel": gpgpu20_conv_highlevel,
    "gpgpu20_conv_partial": conv_partial_stage,
    "gpgpu20_conv_final": conv_final_stage,
    "gpgpu20_conv_pad": conv_pad_stage,
    "gpgpu20_conv_crop": conv_crop_stage,
}

