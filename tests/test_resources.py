"""The tuning space's resource constraints and the lowering's checks agree (they come from
the same lowering run: codegen.resources), so sampled candidates lower."""

from __future__ import annotations

import dataclasses

import pytest

from codegen.errors import LoweringError
from codegen.lower import lower, program_resources
from codegen.resources import check
from codegen.target import H100, POCL_CPU
from ir.conv_layer import ConvLayer
from ir.programs import conv_partial_stage
from ir.syntax import parse_file as load
from mapper.api import lower_mapping
from mapper.tuning import JointSpace

RESOURCE_CHECKS = {"private-memory", "local-memory", "max-allocation", "synchronizability"}

GENEROUS = dataclasses.replace(POCL_CPU, private_mem_size=1 << 30, private_group_budget=1 << 40,
                               local_mem_size=1 << 30, max_mem_alloc_size=1 << 40,
                               global_mem_size=1 << 42)
TIGHT = dataclasses.replace(POCL_CPU, private_mem_size=96, private_group_budget=1024,
                            local_mem_size=512, max_work_group_size=64,
                            max_work_item_sizes=(64, 64, 64))
SMALL_CONV = ConvLayer("tiny", C=4, H=8, W=8, M=8, K=3, S=1, P=1)

PROGRAMS = {
    "listing3_local": (lambda: load("examples/listing3_local.lift"), {"N": 256}),
    "matmul_tiled": (lambda: load("examples/matmul_tiled.lift"), {"M": 16, "N": 16, "K": 16}),
    "stencil2d": (lambda: load("examples/gpgpu20_stencil2d.lift"), {"H": 8, "W": 8}),
    "conv_partial": (conv_partial_stage, SMALL_CONV.sizes()),
}


def _sizes_ok(js: JointSpace, sizes: dict) -> bool:
    return bool(set(sizes) <= {v for p in js.problem.program.params
                               for v in p.type.free_vars()} | set(sizes))


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_symbolic_resources_agree_with_the_lowering(name):
    """For sampled (mapping, tuning) candidates of a space built without device limits, the
    exact resources that a tight device violates are exactly the lowering's refusals."""
    make, sizes = PROGRAMS[name]
    js = JointSpace(make(), sizes, device=GENEROUS)
    agree = violated = 0
    for m, cfg in js.sample(40, seed=1, per_mapping=True):
        low = lower_mapping(js.problem, m, fusion=js.problem.fusion)
        full = js.tuning(m).sizes_for(cfg)
        res = program_resources(low, full, device=TIGHT)
        bad = [r for r in check(res, full)]
        try:
            lower(low, full, device=TIGHT)
            refused = None
        except LoweringError as e:
            refused = e.check
        if refused in RESOURCE_CHECKS:
            assert bad, f"{m} {cfg}: the lowering refused ({refused}) but no resource says so"
        if any(r.exact for r in bad):
            assert refused is not None, f"{m} {cfg}: {bad[0]} but the lowering accepted it"
            violated += 1
        agree += 1
    assert agree == 40
    if name in ("conv_partial", "matmul_tiled"):
        assert violated, "the tight device should refuse some candidates"


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
@pytest.mark.parametrize("device", [POCL_CPU, H100, TIGHT], ids=lambda d: d.name[:12])
def test_every_sampled_candidate_lowers(device):
    """The joint space holds the device's limits: its samples lower without a refusal."""
    js = JointSpace(conv_partial_stage(), SMALL_CONV.sizes(), device=device,
                    max_value=2 * SMALL_CONV.H)
    samples = js.sample(60, seed=5, per_mapping=True)  # tuning spaces of the drawn only
    assert len(samples) == 60
    for m, cfg in samples:
        lower(lower_mapping(js.problem, m, fusion=js.problem.fusion),
              js.tuning(m).sizes_for(cfg), device=device)


def test_resource_origins_name_kernel_buffers_and_device():
    js = JointSpace(conv_partial_stage(), SMALL_CONV.sizes(), device=TIGHT)
    origins = [o for m in js.mappings[:20] for _, o in js.tuning(m).restrictions]
    priv = [o for o in origins if "private" in o and "bytes per work-item" in o]
    assert priv and all(TIGHT.name in o for o in priv)
    assert any("kappa*sigma" in o for o in priv)  # the accumulator's symbolic size


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
def test_buffers_carry_symbolic_counts_that_match():
    """Every buffer of the lowered convolution knows its size symbolically, and the symbolic
    size evaluates to the concrete one."""
    from codegen.lower import build

    js = JointSpace(conv_partial_stage(), SMALL_CONV.sizes())
    for m, cfg in js.sample(10, seed=2, per_mapping=True):
        full = js.tuning(m).sizes_for(cfg)
        b = build(lower_mapping(js.problem, m, fusion=js.problem.fusion), full)
        for buf in [*b.inputs, b.out_buf, *b.bufs]:
            assert buf.sym_count is not None, buf.name
            assert buf.sym_count.evaluate(full) == buf.count, buf.name
