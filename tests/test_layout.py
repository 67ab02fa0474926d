"""Input layouts as a choice (``ir.layout``, ``mapper.layouts``,
``mapper.explore.task.layout_variants``): the variant computes what the program computes,
is proposed where an innermost map reads along a dimension that is not innermost and the
program reuses the input, and its kernels run and match the reference."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from ir.errors import InvalidOptionError, UnknownStageError
from ir.interp import evaluate
from ir.layout import (
    Prepad,
    Relayout,
    padded_reads,
    prepared_pipeline,
    relayout_pipeline,
    stored_type,
)
from ir.pipeline import Pipeline, Stage, run_pipeline, stage_source
from ir.syntax import parse_file
from ir.types import Float, array
from mapper import cli
from mapper.api import problem
from mapper.data import random_inputs
from mapper.explore.task import layout_variants, program_variants
from mapper.layouts import (
    MIN_FLOPS_PER_ELEMENT,
    blocked,
    preparation_plans,
    relayout_candidates,
    strided_reads,
)

ROOT = os.path.join(os.path.dirname(__file__), "..")
EX = os.path.join(ROOT, "examples")
CONV_SIZES = {"H": 6, "W": 5, "C": 4, "M": 3, "KH": 3, "KW": 3, "padT": 1, "padB": 1,
              "padL": 1, "padR": 1, "strideY": 1, "strideX": 1}


def _program(name: str):
    return problem(parse_file(os.path.join(EX, f"{name}.lift"))).program


def _stored(a: np.ndarray, r: Relayout) -> np.ndarray:
    """``a`` stored as ``r`` says, by numpy."""
    if r.block:
        sh = a.shape
        a = a.reshape(sh[:r.dim] + (sh[r.dim] // r.block, r.block) + sh[r.dim + 1:])
    return np.transpose(a, r.order)


def _variant(tasks: dict, prefix: str):
    """The one variant whose name starts with ``prefix`` (its block is the device's)."""
    hits = [t for k, t in tasks.items() if k.startswith(prefix)]
    assert len(hits) == 1, (prefix, list(tasks))
    return hits[0]


def test_a_layout_moves_one_dimension_innermost():
    r = Relayout("w", 0, 4)
    assert r.order == (1, 2, 3, 0) and r.name == "layout-w-0"
    t = array(Float, "M", "KH", "KW", "C")
    assert stored_type(t, r) == array(Float, "KH", "KW", "C", "M")
    assert stored_type(t, Relayout("w", 1, 4)) == array(Float, "M", "KW", "C", "KH")
    with pytest.raises(InvalidOptionError):
        Relayout("w", 3, 4)  # already innermost
    with pytest.raises(InvalidOptionError):
        stored_type(array(Float, "N"), Relayout("w", 0, 2))


def test_a_blocked_layout_moves_blocks_of_a_dimension_innermost():
    r = Relayout("w", 0, 4, 16)
    assert r.name == "layout-w-0b16" and r.order == (0, 2, 3, 4, 1)
    t = array(Float, "M", "KH", "KW", "C")
    sizes = {"M": 64, "KH": 3, "KW": 3, "C": 8}
    got = stored_type(t, r)
    assert [int(d.evaluate(sizes)) for d in _dims(got)] == [4, 3, 3, 8, 16]
    with pytest.raises(InvalidOptionError):
        Relayout("w", 0, 4, 1)
    mm = _program("matmul_plain")
    at = {"M": 64, "N": 64, "K": 32}
    assert blocked(Relayout("Bt", 0, 2), at, mm, 16) == Relayout("Bt", 0, 2, 16)
    assert blocked(Relayout("Bt", 0, 2), at, mm, 8) == Relayout("Bt", 0, 2, 8)
    # a width that does not divide, or leaves one block: the whole dimension moves
    assert blocked(Relayout("Bt", 0, 2), {**at, "N": 40}, mm, 16) == Relayout("Bt", 0, 2)
    assert blocked(Relayout("Bt", 0, 2), {**at, "N": 16}, mm, 16) == Relayout("Bt", 0, 2)
    assert blocked(Relayout("Bt", 0, 2), at, mm, 1) == Relayout("Bt", 0, 2)


def _dims(t):
    from ir.layout import dims_of

    return dims_of(t)[0]


def test_an_input_read_only_through_a_padding_is_found():
    assert padded_reads(_program("gpgpu20_conv_highlevel")) == [Prepad("inputData")]
    assert padded_reads(_program("matmul_plain")) == []
    # padded inside a composition (``f o padND $ X``): not an application to the input
    assert padded_reads(_program("box_blur3x3")) == []
    # read twice (padded and not): it cannot be replaced by its padded copy
    from ir.syntax import parse

    twice = parse("X : [float]N\n"
                          "map(\\r -> add(get(0)(r), get(1)(r))) $ zip(pad(1, 1) $ X, "
                          "pad(2, 0) $ X)")
    assert padded_reads(problem(twice).program) == []


@pytest.mark.parametrize("name, sizes, preps", [
    ("gpgpu20_conv_highlevel", {**CONV_SIZES, "M": 32},
     [Relayout("kernelsWeights", 0, 4, 16), Prepad("inputData")]),
    ("gpgpu20_conv_highlevel", CONV_SIZES, [Prepad("inputData")]),
    ("gpgpu20_conv_highlevel", CONV_SIZES,
     [Prepad("inputData"), Relayout("kernelsWeights", 2, 4, 3)]),
    ("matmul_plain", {"M": 5, "N": 32, "K": 6}, [Relayout("Bt", 0, 2, 8)]),
])
def test_every_prepared_pipeline_computes_what_the_program_computes(name, sizes, preps):
    prog = _program(name)
    inputs = random_inputs(prog, sizes, seed=2)
    want = np.asarray(evaluate(prog, inputs, sizes))
    pl = prepared_pipeline(prog, preps)
    assert [s.name for s in pl.stages][-1] == "main" and len(pl.stages) == len(preps) + 1
    got = np.asarray(run_pipeline(pl, inputs, sizes))
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-5)
    for r, st in zip(preps, pl.stages):
        copy = np.asarray(evaluate(st.program, {r.input: inputs[r.input]}, sizes))
        if isinstance(r, Relayout):
            np.testing.assert_array_equal(copy.reshape(-1), _stored(inputs[r.input], r)
                                          .reshape(-1))
        else:  # the padded input: its inside is the input, its border zero
            assert copy.size > np.size(inputs[r.input])
            assert np.count_nonzero(copy) == np.count_nonzero(inputs[r.input])


def test_a_prepared_pipeline_is_refused_what_it_cannot_be():
    prog = _program("gpgpu20_conv_highlevel")
    with pytest.raises(InvalidOptionError):
        prepared_pipeline(prog, [])
    with pytest.raises(InvalidOptionError):
        prepared_pipeline(prog, [Prepad("inputData"), Prepad("inputData")])
    with pytest.raises(InvalidOptionError):
        prepared_pipeline(prog, [Relayout("kernelsWeights", 0, 4), Relayout("inputData", 0, 3)])
    with pytest.raises(InvalidOptionError):
        prepared_pipeline(prog, [Prepad("kernelsWeights")])  # read with no padding


def test_a_stage_reads_an_earlier_stage_by_name_and_only_an_earlier_one():
    from ir.syntax import parse

    double = problem(parse("X : [float]N\nmap(\\x -> add(x, x)) $ X")).program
    pair = problem(parse("X : [float]N\nY : [float]N\n"
                                 "map(\\p -> mult(get(0)(p), get(1)(p))) $ zip(X, Y)")).program
    x = np.arange(4, dtype=np.float32)
    pl = Pipeline("p", ("X",), (
        Stage("a", double, (("X", "X"),)),
        Stage("b", double, (("X", "<previous>"),)),
        Stage("c", pair, (("X", stage_source("a")), ("Y", "<previous>")))))
    np.testing.assert_array_equal(np.asarray(run_pipeline(pl, {"X": x}, {"N": 4})),
                                  (2 * x) * (4 * x))
    bad = Pipeline("p", ("X",), (Stage("a", double, (("X", stage_source("b")),)),))
    with pytest.raises(UnknownStageError):
        run_pipeline(bad, {"X": x}, {"N": 4})


@pytest.mark.parametrize("name, sizes", [
    ("matmul_plain", {"M": 5, "N": 7, "K": 6}),
    ("gpgpu20_conv_highlevel", CONV_SIZES),
    ("conv2_layers", {"H": 7, "W": 6, "C": 3, "M": 4, "N": 2}),
    ("transpose", {"H": 5, "W": 3}),
])
def test_every_layout_variant_computes_what_the_program_computes(name, sizes):
    prog = _program(name)
    inputs = random_inputs(prog, sizes, seed=1)
    want = np.asarray(evaluate(prog, inputs, sizes))
    params = {p.name: p for p in prog.params}
    layouts = [Relayout(n, d, len(np.shape(inputs[n])))
               for n in params for d in range(len(np.shape(inputs[n])) - 1)]
    assert layouts
    for r in layouts:
        pl = relayout_pipeline(prog, r)
        assert [s.name for s in pl.stages] == ["layout", "main"]
        got = np.asarray(run_pipeline(pl, inputs, sizes))
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-5)
        # the copy is the input in the new layout, as numpy transposes it
        copy = np.asarray(evaluate(pl.stages[0].program, {r.input: inputs[r.input]}, sizes))
        np.testing.assert_array_equal(copy.reshape(-1), _stored(inputs[r.input], r).reshape(-1))


@pytest.mark.parametrize("name, want", [
    ("matmul_plain", [Relayout("Bt", 0, 2)]),
    ("gpgpu20_conv_highlevel", [Relayout("kernelsWeights", 0, 4)]),
    ("conv2_layers", [Relayout("weights1", 0, 4), Relayout("weights2", 0, 4)]),
    ("transpose", [Relayout("X", 0, 2)]),
    ("row_sums", [Relayout("X", 0, 2)]),
    ("box_blur3x3", []),  # its innermost map reads along rows
    ("harris", []),
    ("matmul_blocked", []),  # it spells its own vectors
])
def test_the_strided_reads_of_innermost_maps_are_found(name, want):
    assert strided_reads(_program(name)) == want


def test_a_layout_is_proposed_only_where_the_program_reuses_the_input():
    mm = _program("matmul_plain")
    n = 256
    flops = 2 * n ** 3
    assert relayout_candidates(mm, {"M": n, "N": n, "K": n}, flops) == [Relayout("Bt", 0, 2)]
    # each element of Bt serves 2M FLOPs: M = 32 is just enough, M = 16 is not
    assert MIN_FLOPS_PER_ELEMENT == 64
    assert relayout_candidates(mm, {"M": 32, "N": n, "K": 16}, 2 * 32 * n * 16)
    assert not relayout_candidates(mm, {"M": 16, "N": n, "K": 16}, 2 * 16 * n * 16)
    assert not relayout_candidates(mm, {"M": n, "N": n, "K": n}, None)  # FLOPs unknown
    for name, sizes in (("transpose", {"H": 512, "W": 512}), ("row_sums", {"H": 512, "W": 512})):
        prog = _program(name)
        from ir.flops import count_flops

        assert not relayout_candidates(prog, sizes, count_flops(prog, sizes)), name


def test_program_variants_add_the_layouts_unless_declared():
    prog = parse_file(os.path.join(EX, "matmul_plain.lift"))
    sizes = {"M": 64, "N": 64, "K": 64}
    tasks = program_variants(prog, sizes, name="mm")
    lanes = _lanes()
    blocked_name = f"layout-Bt-0b{lanes}" if lanes > 1 else "layout-Bt-0"
    assert list(tasks) == ["unfused", blocked_name]
    t = tasks[blocked_name]
    assert t.stage == "main" and t.flops == tasks["unfused"].flops == 2 * 64 ** 3
    assert set(t.stage_mappings) == {"layout"} and t.name == f"mm:{blocked_name}"
    np.testing.assert_array_equal(t.reference, tasks["unfused"].reference)
    # OpenCL C forbids a kernel called main: the stage's kernel takes another name
    p = t.joint().problem
    names = [k.name for k in t.lower_fn(p.mapping("A=G0 B=S"), _tuning(t, p.mapping(
        "A=G0 B=S")))().kernels]
    assert names[0] == "layout" and names[1] != "main" and names[1].startswith("main")
    assert list(program_variants(prog, sizes, layout="declared")) == ["unfused"]
    assert layout_variants(t) == {}  # a pipeline's stage has none of its own
    with pytest.raises(InvalidOptionError):
        program_variants(prog, sizes, layout="sideways")


def test_explore_refuses_a_manual_mapping_with_layout_auto(capsys):
    rc = cli.main(["explore", os.path.join(EX, "matmul_plain.lift"), "--sizes",
                   "M=64,N=64,K=64", "--strategy", "manual", "--mapping", "A=G0 B=S",
                   "--layout", "auto"])
    err = capsys.readouterr().err
    assert rc == 2 and "--layout" in err
    rc = cli.main(["explore", "conv", "--layout", "auto"])
    assert rc == 2 and "--layout" in capsys.readouterr().err


def _lanes() -> int:
    """The vector width of the device the tests run on (what layouts are blocked by)."""
    from codegen.target import resolve

    return int(resolve(None).preferred_vector_width_float or 0)


def test_preparation_plans_pair_each_layout_with_the_paddings():
    conv = _program("gpgpu20_conv_highlevel")
    sizes = {**CONV_SIZES, "H": 28, "W": 28, "C": 64, "M": 64}
    from ir.flops import count_flops

    flops = count_flops(conv, sizes)
    assert preparation_plans(conv, sizes, flops, 16) == [
        (Relayout("kernelsWeights", 0, 4, 16), Prepad("inputData")), (Prepad("inputData"),)]
    assert preparation_plans(conv, sizes, None, 16) == []
    # few FLOPs per input element: nothing pays for its copy
    small = {**sizes, "H": 2, "W": 2, "C": 2, "M": 2}
    assert preparation_plans(conv, small, count_flops(conv, small), 16) == []
    mm = _program("matmul_plain")
    at = {"M": 256, "N": 256, "K": 256}
    assert preparation_plans(mm, at, 2 * 256 ** 3, 8) == [(Relayout("Bt", 0, 2, 8),)]


def _tuning(task, mapping, **given) -> dict[str, int]:
    """Every tuning parameter of ``mapping``: ``given``, else 1 where it may be."""
    params = task.joint().tuning(mapping).params
    assert set(given) <= set(params), (sorted(given), sorted(params))
    return {k: given.get(k, 1 if 1 in p.domain else p.domain[0]) for k, p in params.items()}


@pytest.mark.opencl
@pytest.mark.slow
def test_layout_variant_kernels_run_and_match_the_reference():
    from codegen.worker import WorkerPool

    prog = parse_file(os.path.join(EX, "matmul_plain.lift"))
    tasks = program_variants(prog, {"M": 64, "N": 48, "K": 32})
    t = _variant(tasks, "layout-Bt-0")
    name = next(k for k in tasks if k.startswith("layout-Bt-0"))
    # the device's block (16 on AVX-512, 8 on AVX2), else a plain transposed layout
    block = int(name.rsplit("b", 1)[1]) if "-0b" in name else 16
    p = t.joint().problem
    cases = [("A=G1 B=G0", {"vB": block, "uA": 4}),  # outer products: B's rows in lanes
             ("A=G0 B=V", {"vB": 8}),
             ("A=W0 B=L0", {"rv1": 4}),
             ("A=G0 B=S", {})]
    with WorkerPool() as pool:
        for m, given in cases:
            mapping = p.mapping(m)
            tuning = _tuning(t, mapping, **given)
            o = pool.evaluate_candidate(t.lower_fn(mapping, tuning), t.inputs, t.reference,
                                        timeout_s=120, repeats=1, flops=t.flops,
                                        **t.tolerance)
            assert o.ok, (m, tuning, o.label, o.reason)
    first = p.mapping(cases[0][0])
    src = t.lower_fn(first, _tuning(t, first, **cases[0][1]))().kernels[1].source
    assert f"vload{block}" in src  # the stored rows of B read in lanes


@pytest.mark.oclgrind
def test_a_layout_variant_is_clean_under_oclgrind():
    from codegen.oclgrind import check_with_oclgrind, oclgrind_available
    from mapper.explore.task import Task

    if not oclgrind_available():
        pytest.fail("oclgrind is not installed (setup.sh installs it as root)")
    prog = parse_file(os.path.join(EX, "gpgpu20_conv_highlevel.lift"))
    # 36 outputs: 72 FLOPs per weight, enough for a layout of the weights, blocked; the
    # input padded by a kernel of its own
    sizes = {**CONV_SIZES, "H": 6, "W": 6, "C": 16, "M": 32}
    task = _variant(layout_variants(Task.from_program(prog, sizes)), "layout-kernelsWeights-0")
    assert task.name.endswith("+pad-inputData")
    mapping = task.joint().problem.mapping("Y=G1 X=G0 K=V")
    cp = task.lower_fn(mapping, _tuning(task, mapping, vK=8))()
    assert [k.name for k in cp.kernels][:2] == ["layout", "pad_inputData"]
    main = cp.kernels[-1].source
    assert "vload8" in main and "?" not in main.split("__kernel")[1]  # no bounds test
    report = check_with_oclgrind(cp, task.inputs, timeout_s=300)
    assert report.clean, (report.issues, report.error)


@pytest.mark.opencl
@pytest.mark.slow
def test_mapper_explore_probes_the_layout_variant(tmp_path, capsys):
    store = tmp_path / "mm.sqlite"
    # 32 candidates: the fewest that probe both variants (8 each) before exploring one
    # (mapper.explore.variants: a budget under 2 x 8 per variant explores the first only)
    rc = cli.main(["explore", os.path.join(EX, "matmul_plain.lift"), "--sizes",
                   "M=64,N=64,K=64", "--budget", "32", "--store", str(store), "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    doc = json.loads(out.out.strip().splitlines()[-1])
    names = [v["name"] for v in doc["variants"]]
    assert names[0] == "unfused" and names[1].startswith("layout-Bt-0"), names
