"""Streaming stores (``codegen.streaming``): aligned vector stores into a buffer larger than
the device's last-level cache, which the kernel never reads, are non-temporal."""

from __future__ import annotations

import dataclasses
import os

import pytest

from codegen.device_description import DEFAULT_DEVICE, PRESETS
from mapper import problem

EX = os.path.join(os.path.dirname(__file__), "..", "examples")
TRANSPOSE = os.path.join(EX, "transpose.lift")
BOX = os.path.join(EX, "box_blur3x3.lift")
COLUMN_ACC = r"""
X : [[float]W]H
Z : [float]W
reduce(\acc row -> mapA(\p -> add(get(0)(p), get(1)(p))) $ zip(acc, row))(Z, X)
"""
# a 64 KiB last-level cache: a 256x256 float output (256 KiB) outgrows it
SMALL = dataclasses.replace(DEFAULT_DEVICE, global_mem_cache_size=64 << 10)
T_SIZES = {"H": 256, "W": 256, "uA": 16, "uB": 4, "vB": 4}
NT = "__builtin_nontemporal_store("


def source(path: str, mapping: str, sizes: dict, device=SMALL) -> str:
    return problem(path, device=device).build(mapping, sizes).source


def test_a_written_only_buffer_larger_than_the_cache_is_stored_around_it():
    src = source(TRANSPOSE, "A=W2 B=L2", T_SIZES)
    assert src.count(NT) == 1 and "vstore" not in src  # in the loop over the 4 vectors
    assert "(__global float4*)(out + " in src
    # the same kernel where the output fits the cache, or the cache is not known
    assert NT not in source(TRANSPOSE, "A=W2 B=L2", T_SIZES,
                            dataclasses.replace(SMALL, global_mem_cache_size=1 << 20))
    assert NT not in source(TRANSPOSE, "A=W2 B=L2", T_SIZES,
                            dataclasses.replace(SMALL, global_mem_cache_size=0))
    # a GPU keeps its stores as they are
    gpu = dataclasses.replace(PRESETS["h100"], global_mem_cache_size=64 << 10)
    assert NT not in source(TRANSPOSE, "A=G1 B=G0", {"H": 256, "W": 256}, gpu)


def test_only_aligned_whole_vectors_stream():
    # rows of 32: every vector of 8 starts at a multiple of 8
    assert NT in source(BOX, "A=G0 B=V", {"H": 1024, "W": 32, "vB": 8})
    # rows of 30: a row's vectors start anywhere, and the tail vector moves back
    src = source(BOX, "A=G0 B=V", {"H": 1024, "W": 30, "vB": 8})
    assert NT not in src and "vstore8(" in src
    # scalar stores stay ordinary
    assert NT not in source(TRANSPOSE, "A=G1 B=G0", {"H": 256, "W": 256})


def test_a_buffer_the_kernel_reads_is_not_streamed():
    from codegen.buffers import Buf
    from codegen.stmt import Store
    from codegen.streaming import streamed_buffers
    from codegen.views import VecMem
    from ir.sym import Var, sym
    from ir.types import ScalarType, VectorType

    f8 = VectorType(ScalarType("float"), sym(8))
    x, y, z = (Buf(n, "global", "float", 1 << 20) for n in "xyz")
    i = Var("i") * 8
    stmts = [Store(VecMem(y, i, f8), VecMem(x, i, f8)),  # y = x: y streams
             Store(VecMem(z, i, f8), VecMem(z, i + 8, f8))]  # z reads itself: it stays
    assert streamed_buffers(stmts, [x, y, z], SMALL) == {"y"}
    assert streamed_buffers(stmts, [x, y, z], PRESETS["h100"]) == frozenset()
    # a private accumulator copied out at the end: the output streams, the input not
    src = source(COLUMN_ACC, "A=V", {"H": 4, "W": 1024, "vA": 8},
                 dataclasses.replace(SMALL, global_mem_cache_size=1 << 10))
    assert "out[c_1] = acc[c_1];" in src and NT not in src  # scalar copy: ordinary


@pytest.mark.opencl
@pytest.mark.parametrize("path,mapping,sizes", [
    (TRANSPOSE, "A=W2 B=L2", T_SIZES),
    (TRANSPOSE, "A=W2 B=L2", {**T_SIZES, "vB": 16}),
    (BOX, "A=G0 B=V", {"H": 1024, "W": 32, "vB": 8}),
    (BOX, "A=W2 B=L2", {"H": 256, "W": 256, "uA": 2, "uB": 8, "vB": 8}),
])
def test_streamed_kernels_match_the_reference(path, mapping, sizes):
    import numpy as np

    from codegen.runner import Runner
    from ir.interp import evaluate
    from mapper.candidates import build_candidate
    from mapper.data import random_inputs

    p = problem(path, device=SMALL)
    cp = build_candidate(p.program, mapping, sizes, device=SMALL)
    assert any(NT in k.source for k in cp.kernels)
    inputs = random_inputs(p.program, sizes, seed=0)
    ref = np.asarray(evaluate(p.program, inputs, sizes), dtype=np.float64).ravel()
    out = np.asarray(Runner().run(cp, inputs, repeats=1).output).ravel()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.oclgrind
def test_a_streamed_kernel_is_clean_under_oclgrind():
    from codegen.oclgrind import check_with_oclgrind, oclgrind_available
    from mapper.candidates import build_candidate
    from mapper.witness import random_inputs

    if not oclgrind_available():
        pytest.fail("oclgrind is not installed (setup.sh installs it as root)")
    p = problem(TRANSPOSE, device=SMALL)
    sizes = {"H": 64, "W": 64, "uA": 4, "uB": 4, "vB": 4}
    cp = build_candidate(p.program, "A=W2 B=L2", sizes,
                         device=dataclasses.replace(SMALL, global_mem_cache_size=1 << 10))
    assert NT in cp.kernels[0].source
    report = check_with_oclgrind(cp, random_inputs(p.program, sizes), timeout_s=120)
    assert report.clean, (report.issues, report.error)
