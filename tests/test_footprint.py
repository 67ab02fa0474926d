"""The bytes a kernel brings into a core's cache (``codegen.footprint``): data that fits
is read once, data that outgrows the cache again for every iteration that re-reads it;
checked against what the programs read (a register-blocked matmul, the convolution of a
layer whose weights outgrow the cache), on devices that differ only in their cache."""

from __future__ import annotations

import dataclasses
import os

import pytest

from codegen.target import DEFAULT_DEVICE
from ir.conv_layer import parse_layer
from mapper.explore import Task
from mapper.explore.prior import cache_term, feature_values

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cached(cache: int):
    return dataclasses.replace(DEFAULT_DEVICE, name=f"cache {cache}", local_mem_size=cache,
                               preferred_vector_width_float=16)


def _tuning_problem(task: Task, device, mapping: str):
    js = task.joint(device)
    want = dict(js.problem.mapping(mapping))
    m = next(m for m in js.mappings if dict(m) == want)
    return js.tuning(m)


MATMUL = "I=G1 J=G0 S1=S S2=F R1=S R2=S Z1=S Z2=F"


@pytest.mark.parametrize("bm,bn,v", [(4, 4, 4), (2, 8, 8)])
def test_a_matmul_that_fits_reads_each_matrix_once(bm, bn, v):
    """64 x 64 matrices (16 KiB each) in a 1 MiB cache: A's rows and Bt's columns are
    each read once, whatever the block."""
    task = Task.from_program(os.path.join(ROOT, "examples", "matmul_blocked.lift"),
                             {"M": 64, "N": 64, "K": 64})
    f = feature_values(_tuning_problem(task, _cached(1 << 20), MATMUL),
                       {"bm": bm, "bn": bn, "v": v})
    assert f["cache_bytes"] == 4 * (64 * 64 + 64 * 64)


@pytest.mark.parametrize("bm,bn,v", [(4, 4, 4), (2, 8, 8)])
def test_a_matmul_whose_matrix_outgrows_the_cache_reads_it_per_row_of_blocks(bm, bn, v):
    """A 4 KiB cache: a row of blocks (every work-item of dimension 0) reads all of Bt
    (16 KiB), which does not stay for the next row: Bt is read once per row of blocks,
    A's rows (2-4 KiB per work-item with its columns) still once."""
    task = Task.from_program(os.path.join(ROOT, "examples", "matmul_blocked.lift"),
                             {"M": 64, "N": 64, "K": 64})
    small = feature_values(_tuning_problem(task, _cached(4096), MATMUL),
                           {"bm": bm, "bn": bn, "v": v})
    assert small["cache_bytes"] == 4 * (64 * 64 + 64 * 64 * (64 // bm))
    assert cache_term(small, 64 ** 3) < 0.0  # 2 * 64^3 FLOPs over 132-260 KiB


def test_a_convolution_whose_weights_outgrow_the_cache_reads_them_per_tile():
    """VGG-16's 512 -> 512 channel 14 x 14 layer, its work-items each a tile of pixels x
    a slice of the input channels: eight slices of weights (9.4 MB in all) per row of
    work-items. With 2 x 2 tiles (49) and a 2 MiB cache they are read 49 times; one tile
    covering the image reads them once. The prior's cache term ranks the larger tile
    first."""
    layer = parse_layer("24")
    task = Task.conv_layer(layer, vectorise="kernels")
    tp = _tuning_problem(task, _cached(2 << 20),
                         "T=G2 G=S W=S C=G0 S1=S S2=F R1=S R2=S P=S I1=S I2=F")
    weights = 4 * layer.M * layer.C * layer.K * layer.K
    base = {"kappa": 64, "omega": 576, "rho": 0, "sigma": 4, "v": 16}
    tiles = feature_values(tp, {**base, "theta": 4})
    whole = feature_values(tp, {**base, "theta": 16})
    assert tiles["cache_bytes"] >= 49 * weights
    assert whole["cache_bytes"] <= whole["global_bytes"]
    least = layer.M * layer.C * layer.K ** 2 * layer.H * layer.W
    assert cache_term(tiles, least) < cache_term(whole, least)


def test_the_cache_term_is_a_cpu_term_and_needs_both_figures():
    """A GPU's score ignores the bytes a CPU core's cache would bring in; without the
    program's FLOP count or the bytes, the term is 0; below 1 FLOP per byte per lane it
    charges the shortfall, in log scale."""
    from mapper.explore.prior import prior_score

    gpu = dataclasses.replace(DEFAULT_DEVICE, name="a gpu", type="gpu")
    cheap, costly = {"work_items": 4096.0}, {"work_items": 4096.0, "cache_bytes": 1e12}
    assert prior_score(cheap, 1, gpu, 1e6) == prior_score(costly, 1, gpu, 1e6)
    cpu = _cached(1 << 20)
    assert prior_score(costly, 16, cpu, 1e6) < prior_score(cheap, 16, cpu, 1e6)
    assert cache_term({"cache_bytes": 1e6}, None) == 0.0
    assert cache_term({}, 1e6) == 0.0
    # 2e6 FLOPs over 1e6 bytes: 2 per byte, an eighth of 16 lanes' 16
    assert cache_term({"cache_bytes": 1e6}, 1e6, 16) == pytest.approx(-2.0794, abs=1e-3)
    assert cache_term({"cache_bytes": 1e6}, 1e6, 2) == 0.0


BLUR = os.path.join(ROOT, "examples", "box_blur3x3.lift")


def test_a_stencil_counts_the_window_it_shares_with_its_neighbours_once():
    """A 3 x 3 blur of a 64 x 64 image in a cache that holds it: each pixel's window
    overlaps its neighbours', and the image with its border (66 x 66) is read once, not
    nine times (as when each of a window's reads counted its own element)."""
    task = Task.from_program(BLUR, {"W": 64, "H": 64})
    js = task.joint(_cached(1 << 20))
    scalar = next(m for m in js.mappings if all(v == 0 for v in dict(m).values()))
    f = feature_values(js.tuning(scalar), {"rv1": 1})
    assert f["cache_bytes"] == 4 * 66 * 66


def test_a_strided_window_counts_the_span_it_reads():
    """Windows of 3 at stride 2 over 129 elements (64 windows) read 129 elements: the
    window's step and the stride's are multiples of one another."""
    text = ("X : [float]N\n"
            "map(\\w -> reduce(\\acc x -> add(acc, x))(0.0f, w)) o slide(3, 2) $ X\n")
    task = Task.from_program(text, {"N": 129})
    js = task.joint(_cached(1 << 20))
    seq = next(m for m in js.mappings if all(v == 0 for v in dict(m).values()))
    f = feature_values(js.tuning(seq), {})
    assert f["cache_bytes"] == 4 * 129


def _brute_force(leaf, loops) -> int:
    """The distinct indices ``leaf`` reads over ``loops``, every iteration enumerated."""
    import itertools

    seen = set()
    names = [lp.var.name for lp in loops]
    for values in itertools.product(*(range(lp.n) for lp in loops)):
        seen.add(leaf.idx.evaluate(dict(zip(names, values))))
    return len(seen)


def _witness(task: Task, monkeypatch) -> int:
    """Every global read of every mapping of ``task``: its elements counted over the loops
    its index uses (at the sizes the lowering wrote the indices for) lie between the
    distinct indices their iterations give, enumerated, and their product. The reads
    checked."""
    import codegen.footprint as fp
    import codegen.lower as lower

    seen: list = []
    real = lower.cache_features

    def spy(stmts, cache):
        seen.append(stmts)
        return real(stmts, cache)

    monkeypatch.setattr(lower, "cache_features", spy)
    js = task.joint(_cached(1 << 20))
    for m in js.mappings:
        js.tuning(m)
    checked = 0
    for stmts in seen:
        reads = list(fp._reads(stmts))
        names = frozenset(lp.var.name for _, nest in reads for lp in nest)
        for leaf, nest in reads:
            # copies of the loops without their symbolic counts: the concrete iterations
            used = [dataclasses.replace(lp, n_sym=None) for lp in nest
                    if lp.var.name in leaf.idx.free_vars()]
            counted = fp._distinct(leaf.idx, used, names)
            assert counted.is_const, counted
            exact = _brute_force(leaf, used)
            product = 1
            for lp in used:
                product *= max(lp.n, 1)
            assert exact <= counted.as_int() <= product, (leaf.idx, counted, exact)
            checked += 1
    return checked


@pytest.mark.parametrize("program,sizes", [
    (BLUR, {"W": 24, "H": 20}),
    (os.path.join(ROOT, "examples", "gpgpu20_stencil2d.lift"), {"W": 18, "H": 14}),
    (os.path.join(ROOT, "examples", "smooth1d_tiles.lift"), {"N": 32, "s": 8}),
    (os.path.join(ROOT, "examples", "matmul_blocked.lift"), {"M": 8, "N": 8, "K": 8}),
])
def test_the_counted_elements_bound_every_read_enumerated(program, sizes, monkeypatch):
    """An independent witness of the count over stencils' and a matmul's mappings."""
    assert _witness(Task.from_program(program, sizes), monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["window", "kernels"])
@pytest.mark.parametrize("S", [1, 2])
def test_the_counted_elements_bound_a_convolutions_reads(variant, S, monkeypatch):
    """The same witness over a small convolution's mappings, stride 1 and 2."""
    from ir.conv_layer import ConvLayer

    layer = ConvLayer("tiny", 4, 6, 6, 4, K=3, S=S, P=1)
    assert _witness(Task.conv_layer(layer, vectorise=variant), monkeypatch)


def test_a_blocked_stencil_never_counts_fewer_elements_than_it_reads():
    """Away from the configuration the lowering wrote the indices for (a block of ``u``
    vectors of ``v`` lanes per work-item, where the index has the blocks' loop step by 1),
    the count still covers the image: a block's loop and the loop over blocks never share
    a span, only a window's loops join another's."""
    task = Task.from_program(BLUR, {"W": 64, "H": 64})
    js = task.joint(_cached(1 << 20))
    checked = 0
    for m in js.mappings:
        tp = js.tuning(m)
        for config in tp.sample(min(12, tp.count()), seed=1):
            f = feature_values(tp, config)
            if "cache_bytes" in f:
                assert f["cache_bytes"] >= 4 * 64 * 64, (dict(m), config, f)
                checked += 1
    assert checked >= 12
