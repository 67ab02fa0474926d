"""Regressions found by the demo and the witnesses, each run on the OpenCL device."""

import numpy as np
import pytest

from codegen.runner import Runner
from ir.builders import as_vector, dot, lam, map_glb, param
from ir.nodes import FunCall, Lambda
from ir.types import Float, array
from mapper.candidates import lower_candidate


@pytest.fixture(scope="module")
def runner():
    return Runner()


@pytest.mark.parametrize("width", [2, 4, 8, 16])
def test_dot_on_every_vector_width(runner, width):
    """OpenCL's dot() has no float8/float16 overload: wider vectors sum the halves' dots."""
    from codegen.lower import lower

    X = param("X", array(Float, "N"))
    prog = Lambda((X,), map_glb(0, lam(lambda v: FunCall(dot, (v, v))))(as_vector(width)(X)))
    x = np.random.default_rng(width).standard_normal(64).astype(np.float32)
    cp = lower(prog, {"N": 64})
    ref = (x.reshape(-1, width) ** 2).sum(1)
    o = runner.evaluate(cp, {"X": x}, ref, repeats=1)
    assert o.ok, o.reason


def test_listing3_candidate_lowers_with_mapper_candidates(runner):
    from ir.interp import evaluate
    from ir.programs import cc22_listing3

    p = cc22_listing3(local=True)
    x = np.arange(256, dtype=np.float32)
    sizes = {"N": 256, "s0": 32, "s1": 4}
    ref = evaluate(p, {"X": x, "y": 2.0, "z": 1.0}, sizes)
    cp = lower_candidate(p, "A=W0 B=L0 C=L0 D=S", sizes, flops=512)
    o = runner.evaluate(cp, {"X": x, "y": np.float32([2.0]), "z": np.float32([1.0])}, ref,
                        repeats=1, flops=512)
    assert o.ok and o.gflops > 0
