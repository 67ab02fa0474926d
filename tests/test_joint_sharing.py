"""The joint space shares one tuning problem between mappings that differ only in which
OpenCL dimension each parallel map takes (``mapper.tuning.JointSpace.tuning``). Its
witness: for every mapping of a few programs, the shared problem has the parameters,
restrictions, count and features that inferring it directly from the mapping's own
lowered program gives."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from codegen.target import POCL_CPU
from ir.equality import alpha_equal
from ir.syntax import parse_file
from mapper.api import lower_mapping
from mapper.tuning import JointSpace, dims_renamed, infer_tuning

ROOT = Path(__file__).resolve().parent.parent

CASES = [
    ("cc22_listing3.lift", {"N": 4096}),
    ("matmul_plain.lift", {"M": 64, "N": 64, "K": 64}),
    ("gpgpu20_stencil2d.lift", None),
    ("transpose.lift", None),
]


def _sizes(prog, given):
    if given is not None:
        return given
    return {v: 64 for v in sorted(prog.params[0].type.free_vars()
                                  | set().union(*(p.type.free_vars() for p in prog.params)))}


def _problem_of(tp):
    return (tuple(tp.params.items()), sorted(p.to_python() for p, _ in tp.predicates),
            tp.count(), {k: str(v) for k, v in tp.feature_exprs.items()})


@pytest.mark.parametrize("name,given", CASES, ids=[c[0] for c in CASES])
def test_shared_tuning_problems_equal_direct_inference(name, given):
    prog = parse_file(ROOT / "examples" / name)
    js = JointSpace(prog, _sizes(prog, given), device=POCL_CPU)
    shared = 0
    for m in js.mappings:
        tp = js.tuning(m)
        shared += tp._lower is not None
        direct = infer_tuning(lower_mapping(js.problem, m), js.sizes, **js.options)
        assert _problem_of(tp) == _problem_of(direct), m
        # the program is the mapping's own, not the one it shares a space with
        assert alpha_equal(tp.program, lower_mapping(js.problem, m))
    if any(c % 10 for m in js.mappings for c in dict(m).values() if c >= 10):
        assert shared, "mappings using dimension 1 or 2 share a problem"


def test_dims_renamed_numbers_dimensions_by_first_use():
    assert dims_renamed({"A": 31, "B": 11, "C": 30, "D": 0}) == \
        (("A", 30), ("B", 10), ("C", 31), ("D", 0))
    assert dims_renamed({"A": 32, "B": 21}) == dims_renamed({"A": 30, "B": 21})


def test_no_sharing_where_the_dimensions_have_different_limits():
    prog = parse_file(ROOT / "examples" / "matmul_plain.lift")
    device = replace(POCL_CPU, max_work_item_sizes=(4096, 64, 64))
    js = JointSpace(prog, {"M": 64, "N": 64, "K": 64}, device=device)
    assert all(js.tuning(m)._lower is None for m in js.mappings)
