"""The image and convolution pipelines of issue 26 (Forma's workloads) as ``.lift``
examples: a separable blur, a blur then a Laplacian, the Harris corner response and two
convolution layers. Each is checked against an independent numpy computation (the
interpreter), and mappings sampled from its valid set lower, run on the OpenCL device and
match the interpreter, at sizes no tile divides."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from pipeline_cases import cases

from ir.interp import evaluate
from ir.syntax import parse_file

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("case", cases(), ids=lambda c: c[0])
def test_the_pipeline_computes_what_numpy_does(case) -> None:
    name, inputs, sizes, ref = case
    got = np.asarray(evaluate(parse_file(EXAMPLES / f"{name}.lift"), inputs, sizes))
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3 * max(1.0, np.abs(ref).max()))


@pytest.fixture(scope="module")
def runner():
    from codegen.runner import Runner

    return Runner()


@pytest.mark.opencl
@pytest.mark.parametrize("name,sizes", [
    ("blur_separable", {"H": 9, "W": 11}), ("blur_laplacian", {"H": 9, "W": 11}),
    ("harris", {"H": 10, "W": 13}), ("conv2_layers", {"H": 7, "W": 9, "C": 3, "M": 4, "N": 5}),
])
@pytest.mark.slow
def test_sampled_mappings_of_the_pipeline_run_correctly(name: str, sizes, runner) -> None:
    """Each stage becomes a kernel (the stages exchange images through global memory);
    whatever the mapping, the kernels compute what the interpreter does."""
    from mapper.witness import check_program

    report = check_program(parse_file(EXAMPLES / f"{name}.lift"), sizes, runner, limit=6,
                           seed=1)
    counts = Counter(o.status for _, o in report.outcomes)
    assert counts["ok"] >= 4, report.outcomes
    assert set(counts) <= {"ok", "rejected"}, report.outcomes
