"""The innermost reduction's features (``codegen.intensity``): operations, loads, register
block and iterations per work-item, in the program's symbolic sizes; checked against what
the programs compute (a register-blocked matmul, the convolution's partial stage)."""

from __future__ import annotations

import functools
import os

import pytest

from ir.conv_layer import parse_layer
from mapper.explore import Task
from mapper.explore.prior import feature_values, work

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _features(task: Task, mapping: str):
    js = task.joint()
    want = dict(js.problem.mapping(mapping))  # the space's own problem reads the mapping
    m = next(m for m in js.mappings if dict(m) == want)
    return js.tuning(m)


@functools.cache
def _matmul_blocked() -> Task:
    """The blocked matmul at 64^3, its joint space built once for the two tests below."""
    return Task.from_program(os.path.join(ROOT, "examples", "matmul_blocked.lift"),
                             {"M": 64, "N": 64, "K": 64})


def test_register_blocked_matmul_loads_a_row_and_a_column_per_block():
    """``bm x bn`` accumulators updated from ``bm`` vectors of A and ``bn`` of Bt."""
    task = _matmul_blocked()
    tp = _features(task, "I=G1 J=G0 S1=S S2=F R1=S R2=S Z1=S Z2=F")
    for bm, bn, v in ((4, 4, 4), (2, 8, 8), (8, 1, 1)):
        cfg = {"bm": bm, "bn": bn, "v": v}
        assert cfg in tp.space, cfg
        f = feature_values(tp, cfg)
        assert f["loop_ops"] == bm * bn
        assert f["loop_loads"] == bm + bn
        assert f["loop_registers"] == bm * bn
        # the smaller side held for its reuse, the larger streamed through one register
        assert f["loop_operands"] == min(bm, bn) + 1
        # every multiply-add of C = A x B once: the work is M*N*K lanes
        assert work(f, v) == 64 * 64 * 64


def test_a_map_distributed_inside_the_reduction_gives_each_work_item_one_row():
    """With R1 across global threads, a work-item updates one row of the block."""
    task = _matmul_blocked()
    tp = _features(task, "I=S J=S S1=G0 S2=S R1=G0 R2=S Z1=G0 Z2=S")
    f = feature_values(tp, {"bm": 4, "bn": 2, "v": 4})
    assert (f["loop_ops"], f["loop_loads"], f["loop_registers"]) == (2, 3, 2)
    # all rows of every block, one per work-item: the same work in all
    assert work(f, 4) == 64 * 64 * 64


@pytest.fixture(scope="module")
def conv17():
    layer = parse_layer("17/4")
    task = Task.conv_layer(layer)
    return layer, _features(task, "T=G0 G=G1 W=S C=S S1=S S2=F R1=S R2=S P=S I1=S I2=F")


@pytest.mark.parametrize("tuning", [
    {"kappa": 4, "omega": 768, "rho": 0, "sigma": 7, "theta": 9, "v": 8},
    {"kappa": 8, "omega": 2304, "rho": 0, "sigma": 1, "theta": 3, "v": 8},
])
def test_convolution_block_and_work_match_the_layer(conv17, tuning):
    """The partial convolution's register block is sigma windows x kappa kernels: sigma
    input vectors staged, kappa weights loaded, sigma*kappa accumulators; the staged
    windows and the weights are two operand groups, the smaller held for the larger's
    reuse (as a matmul's blocks: ``min + 1``); with tiles that cover the output exactly,
    its work is the layer's multiply-adds."""
    layer, tp = conv17
    assert tuning in tp.space
    f = feature_values(tp, tuning)
    s, k = tuning["sigma"], tuning["kappa"]
    assert (f["loop_ops"], f["loop_loads"], f["loop_registers"]) == (s * k, s + k, s * k)
    assert f["loop_operands"] == min(s, k) + 1
    assert work(f, tuning["v"]) == layer.flops // 2


def test_overlapping_tiles_count_as_more_work(conv17):
    layer, tp = conv17
    cfg = {"kappa": 4, "omega": 768, "rho": 2, "sigma": 3, "theta": 5, "v": 8}
    assert cfg in tp.space
    f = feature_values(tp, cfg)
    out = layer.H  # the tiles cover (H + 2P + rho - K + 1)^2 outputs of the padded input
    assert work(f, 8) == layer.flops // 2 * (out + 2) ** 2 // out ** 2


def test_a_register_block_the_search_adds_multiplies_the_work_per_iteration():
    """A plain matmul (no block written) blocked by the search, ``uA`` rows x ``uB``
    columns unrolled around the reduction (``codegen.lanes.jam``): ``uA*uB`` operations
    and accumulators on ``uA + uB`` vector loads per iteration, the same work in all."""
    task = Task.from_program(os.path.join(ROOT, "examples", "matmul_plain.lift"),
                             {"M": 64, "N": 64, "K": 64})
    tp = _features(task, "A=W0 B=L0")
    for ua, ub, rv in ((8, 2, 16), (1, 1, 4), (4, 4, 8)):
        cfg = {"rv1": rv, "uA": ua, "uB": ub, "vB": 1}
        assert cfg in tp.space, cfg
        f = feature_values(tp, cfg)
        assert (f["loop_ops"], f["loop_loads"], f["loop_registers"]) == (ua * ub, ua + ub,
                                                                         ua * ub)
        assert f["loop_operands"] == min(ua, ub) + 1
        assert work(f, rv) == 64 * 64 * 64


def test_a_gather_counts_a_load_per_lane():
    """Winograd's matrix products read the weights kernels innermost: kernels in lanes
    load vectors, the channel sum in lanes gathers (one load per lane)."""
    from ir.conv_layer import ConvLayer
    from mapper.explore.task import winograd_task

    task = winograd_task(ConvLayer("w", 32, 8, 8, 32))
    tp = _features(task, "D=G2 E=G0 F=G1")
    f = feature_values(tp, {"rv1": 1, "uE": 4, "uF": 2, "vF": 16})
    assert (f["loop_ops"], f["loop_loads"]) == (8, 6)
    f = feature_values(tp, {"rv1": 8, "uE": 4, "uF": 2, "vF": 1})
    assert (f["loop_ops"], f["loop_loads"]) == (8, 4 + 2 * 8)
