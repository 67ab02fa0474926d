"""Vector lanes (code V, ``mapVec``): the code, its rules, its lowering and its runs."""

from __future__ import annotations

import os

import pytest

from codegen.lanes import access_stride, lane_safe
from codegen.lower import lower
from ir.errors import LiftmapError
from ir.nodes import UserFun
from ir.sym import Var
from ir.types import ScalarType
from mapper import MapCodes, check_mapping, parse_code, problem, short_code
from mapper.apply import vector_width_names
from mapper.errors import SizeError
from mapper.tuning import infer_tuning

ROOT = os.path.join(os.path.dirname(__file__), "..")
EX = os.path.join(ROOT, "examples")
LISTING1 = os.path.join(EX, "cc22_listing1.lift")
MM = os.path.join(EX, "matmul_plain.lift")
BOX = os.path.join(EX, "box_blur3x3.lift")
SCALAR = ScalarType("float")
TRANSPOSED = r"""
X : [[float]W]H
transpose o mapA(mapB(\x -> mult(x, 2.0f))) $ X
"""
RELU = r"""
userfun relu(x: float) : float = x > 0.0f ? x : 0.0f
X : [[float]W]H
mapA(mapB(relu)) $ X
"""


def rules_of(violations) -> set[str]:
    return {str(c.rule) for c in violations}


def test_code_v_reads_and_prints_in_every_form():
    for text in ("V", "v", "vec", "mapVec", "2"):
        assert parse_code(text) == 2
    assert short_code(2) == "V" and str(MapCodes.parse("A=W0 B=V")) == "A=W0 B=V"
    assert MapCodes.parse("A=mapVec").names() == "A=mapVec"


def test_cc22_table1_m5_is_unvectorizable_and_m6_vectorises_the_contiguous_access():
    # Table 1: M5 (E=V) "Invalid: unvectorizable"; M6 (C=V) valid, vectorised contiguously
    m5 = check_mapping(LISTING1, "A=W0 B=L0 C=S D=L0 E=V")
    assert rules_of(m5) == {"vector-lanes"}
    assert "unvectorizable" in m5[0].description
    assert check_mapping(LISTING1, "A=W0 B=L0 C=V D=S E=L0") == []
    p = problem(LISTING1)
    low = p.lower("A=W0 B=L0 C=V D=S E=L0")
    src = lower(low, {"I": 4, "J": 8, "K": 32, "vC": 8}).kernels[0].source
    assert "vload8(" in src and "vstore8(" in src and "float8 uf_f_x8(float8 x)" in src


def test_a_map_in_lanes_has_only_sequential_maps_inside():
    bad = check_mapping(MM, "A=V B=G0")
    assert "vector-innermost" in rules_of(bad)
    # lanes over the rows of A: A and the result strided, Bt uniform: nothing contiguous
    assert rules_of(check_mapping(MM, "A=V B=S")) == {"vector-lanes"}
    # a map whose body already computes vectors (asVector) is never V
    blocked = problem(os.path.join(EX, "matmul_blocked.lift"))
    assert "vector-lanes" in rules_of(blocked.check("I=G1 J=G0 R1=S R2=V Z1=S Z2=S S1=S "
                                                    "S2=S"))


def test_the_width_is_a_tuning_parameter_at_most_the_maps_length():
    p = problem(MM)
    m = MapCodes.parse("A=G0 B=V")
    assert vector_width_names(p.program, m, p.tree) == {"B": "vB"}
    tp = infer_tuning(p.lower(m), {"M": 64, "N": 24, "K": 16})
    assert tp.params["vB"].domain == (2, 4, 8, 16)
    # 16 does not divide 24: its last vector overlaps the one before (a tail)
    assert sorted(c["vB"] for c in tp.space) == [2, 4, 8, 16]
    tp = infer_tuning(p.lower(m), {"M": 64, "N": 12, "K": 16})
    assert sorted(c["vB"] for c in tp.space) == [2, 4, 8]  # 16 lanes, 12 iterations
    assert any("vB <= N" in why for _, why in tp.predicates)


def test_strides_across_lanes_are_read_from_the_indices():
    i, j = Var("i", 0, 63), Var("j", 0, 15)
    assert access_stride(i + 16 * j, i, 8) == 1  # contiguous
    assert access_stride(16 * j + 3, i, 8) == 0  # uniform
    assert access_stride(16 * i + j, i, 8) is None  # strided: gathered
    # a join's index is contiguous within a vector when the vector fits in a row
    k = Var("k", 0, 511)
    assert access_stride((k // 16) * 32 + k % 16, k, 8) == 1
    assert access_stride((k // 4) * 32 + k % 4, k, 8) is None


def test_only_arithmetic_bodies_run_as_vector_functions():
    def uf(body: str) -> UserFun:
        return UserFun("f", ("a", "b"), (SCALAR, SCALAR), SCALAR, body, lambda a, b: a)

    assert lane_safe(uf("a * b + 1.0f")) and lane_safe(uf("fma(a, b, a)"))
    assert not lane_safe(uf("a > b ? a : b"))  # a vector comparison is an int vector
    assert not lane_safe(uf("a * 2.0"))  # a double literal
    assert not lane_safe(uf("dot(a, b)"))  # dot sums the lanes


def test_a_vector_width_not_given_takes_the_fewest_vector_operations():
    from codegen.lanes import default_lanes

    # operations counting a scalar tail: n // w + n % w; a tie to a divisor, then the wider
    assert [default_lanes(n) for n in (1, 2, 3, 12, 20, 24, 30, 1022)] == \
        [1, 2, 2, 4, 4, 8, 8, 8]
    assert default_lanes(2046, (16, 8, 4, 2)) == 16  # 127 vectors and 14 scalars
    assert default_lanes(12, (16, 8, 4, 2)) == 4  # 16 does not fit
    p = problem(MM)
    assert "4 lanes at a time" in p.build("A=G0 B=V", {"M": 16, "N": 12, "K": 16}).source
    assert "8 lanes at a time" in p.build("A=G0 B=V", {"M": 16, "N": 24, "K": 16}).source
    # no width of 8, 4, 2 divides 30: 8 lanes and a tail, where 2 were taken before
    assert "8 lanes at a time" in p.build("A=G0 B=V", {"M": 16, "N": 30, "K": 16}).source
    assert "2 lanes at a time" in p.build("A=G0 B=V", {"M": 16, "N": 24, "K": 16,
                                                       "vB": 2}).source
    with pytest.raises(SizeError):
        p.build("A=G0 B=V", {"M": 16, "N": 24, "K": 16, "vB": 2, "vA": 2})  # not a size


@pytest.mark.opencl
@pytest.mark.parametrize("path,mapping,sizes", [
    (MM, "A=G0 B=V", {"M": 16, "N": 32, "K": 8, "vB": 8}),  # gathers of Bt, vector store
    (MM, "A=V B=G0", None),  # (rejected: parallel inside lanes)
    (MM, "A=S B=V", {"M": 16, "N": 8, "K": 8, "vB": 4}),
    (BOX, "A=G0 B=V", {"H": 16, "W": 32, "vB": 8}),  # padding: edge lanes gathered
    (BOX, "A=S B=V", {"H": 16, "W": 48, "vB": 16}),
    (os.path.join(EX, "col_sums.lift"), "A=V", {"H": 8, "W": 32, "vA": 8}),
    (TRANSPOSED, "A=G0 B=V", {"H": 8, "W": 32, "vB": 8}),  # read in vectors, scattered
    (os.path.join(EX, "row_sums.lift"), "A=V", {"H": 16, "W": 8, "vA": 4}),  # gathers
    (LISTING1, "A=W0 B=L0 C=V D=S E=L0", {"I": 4, "J": 8, "K": 32, "vC": 4}),
    (os.path.join(EX, "blur_separable.lift"), "A=G0 B=V C=G0 D=V",
     {"H": 16, "W": 18, "vB": 16, "vD": 2}),
])
def test_kernels_in_lanes_match_the_reference(path, mapping, sizes):
    p = problem(path)
    if sizes is None:
        assert p.check(mapping)
        return
    assert p.check(mapping) == []
    r = p.run(mapping, sizes)
    assert r.ok and r.max_abs_error is not None and r.max_abs_error <= 1e-5, r


# a column sum accumulated row by row into an array: its map in lanes reads what it writes
COLUMN_ACC = r"""
X : [[float]W]H
Z : [float]W
reduce(\acc row -> mapA(\p -> add(get(0)(p), get(1)(p))) $ zip(acc, row))(Z, X)
"""


@pytest.mark.opencl
@pytest.mark.parametrize("path,mapping,sizes,tail", [
    # one more vector, overlapping the last whole one (its iterations run twice)
    (MM, "A=G0 B=V", {"M": 16, "N": 20, "K": 8, "vB": 8}, "the last vector moved back"),
    (BOX, "A=G0 B=V", {"H": 16, "W": 30, "vB": 8}, "the last vector moved back"),
    (BOX, "A=S B=V", {"H": 16, "W": 18, "vB": 16}, "the last vector moved back"),
    (os.path.join(EX, "col_sums.lift"), "A=V", {"H": 8, "W": 27, "vA": 8},
     "the last vector moved back"),
    (os.path.join(EX, "blur_separable.lift"), "A=G0 B=V C=G0 D=V",
     {"H": 16, "W": 22, "vB": 16, "vD": 8}, "the last vector moved back"),
    # an iteration run twice would add its row twice: the tail runs one by one
    (COLUMN_ACC, "A=V", {"H": 4, "W": 20, "vA": 8}, "its last 4 iterations one by one"),
])
def test_a_map_whose_length_the_width_does_not_divide_gets_a_tail(path, mapping, sizes,
                                                                   tail):
    p = problem(path)
    assert p.check(mapping) == []
    k = p.build(mapping, sizes)  # built once: ``p.run`` would build it again
    assert tail in k.source
    r = k.run()
    assert r.ok and r.max_abs_error is not None and r.max_abs_error <= 1e-5, r


def test_a_width_above_the_maps_length_is_outside_the_space():
    p = problem(COLUMN_ACC)
    with pytest.raises(LiftmapError, match="vA <= W, which does not hold"):
        p.build("A=V", {"H": 4, "W": 6, "vA": 8})


def test_a_short_loop_over_global_memory_alone_stays_rolled():
    # a transpose's block of 4 vectors: unrolled, it left the 16-row loop innermost, which
    # PoCL's LLVM vectorised into scattered stores (16 ms against 5.7 ms at 4096^2, Zen 5)
    src = problem(os.path.join(EX, "transpose.lift")).build(
        "A=W2 B=L2", {"H": 256, "W": 256, "uA": 16, "uB": 4, "vB": 4}).source
    assert "for (int i_v = 0; i_v < 4; i_v += 1)" in src


def test_a_stencils_window_is_unrolled_as_a_short_nest():
    from codegen.emit import SHORT_TRIPS

    src = problem(BOX).build("A=G0 B=V", {"H": 16, "W": 32, "vB": 8}).source
    assert "reduce" in src and "for (int r" not in src  # the 3x3 window: 9 updates
    # each update's product, fused with its addition or not (codegen.contract)
    assert src.count("uf_mult_x8(") + src.count("liftmap_mad_float8(") >= 9
    # a reduction of more than SHORT_TRIPS steps keeps its loop
    src = problem(MM).build("A=G0 B=V", {"M": 16, "N": 32, "K": SHORT_TRIPS + 1,
                                         "vB": 8}).source
    assert "for (int r" in src


@pytest.mark.opencl
def test_a_body_with_a_comparison_runs_lane_by_lane():
    p = problem(RELU)
    k = p.build("A=G0 B=V", {"H": 8, "W": 32, "vB": 8})
    assert "(float8)(uf_relu(a0.s0)" in k.source  # the scalar function, lane by lane
    r = k.run()
    assert r.ok and r.max_abs_error == 0, r


def test_a_reduction_by_an_associative_operator_gets_a_lane_width():
    from codegen.lanes import reduction_identity

    def uf(body: str) -> UserFun:
        return UserFun("f", ("a", "b"), (SCALAR, SCALAR), SCALAR, body, lambda a, b: a)

    assert reduction_identity(uf("a + b")) == 0.0 and reduction_identity(uf("(b+a)")) == 0.0
    assert reduction_identity(uf("fmax(a, b)")) == float("-inf")
    assert reduction_identity(uf("min(b, a)")) == float("inf")
    assert reduction_identity(uf("a - b")) is None and reduction_identity(uf("a * b")) is None
    p = problem(MM)
    tp = infer_tuning(p.lower("A=G1 B=G0"), {"M": 64, "N": 64, "K": 64})
    assert tp.params["rv1"].domain == (1, 2, 4, 8, 16) and tp.params["vB"].domain[0] == 1
    # one level of lanes: the columns in lanes or the reduction in lanes, not both
    assert all(c["rv1"] == 1 or c["vB"] == 1 for c in tp.space)
    # the convolution's reduction of vectors (asVector) has its lanes already
    blocked = problem(os.path.join(EX, "matmul_blocked.lift"))
    low = blocked.lower("I=G1 J=G0 R1=S R2=S Z1=S Z2=F S1=S S2=F")
    assert "rv" not in " ".join(infer_tuning(low, {"M": 8, "N": 8, "K": 16, "bm": 2,
                                                   "bn": 2, "v": 4}).params)


@pytest.mark.opencl
@pytest.mark.parametrize("path,mapping,sizes", [
    (os.path.join(EX, "row_sums.lift"), "A=G0", {"H": 8, "W": 64, "rv1": 8}),
    (MM, "A=G1 B=G0", {"M": 8, "N": 8, "K": 32, "rv1": 16}),
    (MM, "A=S B=V", {"M": 4, "N": 8, "K": 16, "vB": 4, "rv1": 1}),
    (r"""
userfun mx(a: float, b: float) : float = fmax(a, b)
X : [[float]W]H
map(\row -> reduce(\acc x -> mx(x, acc))(-1000.0f, row)) $ X
""", "A=G0", {"H": 8, "W": 32, "rv1": 4}),
])
def test_reductions_in_lanes_match_the_reference(path, mapping, sizes):
    p = problem(path)
    k = p.build(mapping, sizes)
    if sizes.get("rv1", 1) > 1:
        assert f"{sizes['rv1']} lanes at a time" in k.source
    r = k.run()
    assert r.ok, r


@pytest.mark.opencl
def test_a_strip_mined_map_runs_a_register_block_of_vectors_inside_its_reduction():
    p = problem(os.path.join(EX, "col_sums.lift"))
    tp = infer_tuning(p.lower("A=G0"), {"H": 16, "W": 256})
    assert tp.params["uA"].domain == (1, 2, 4, 8, 16)
    k = p.build("A=G0", {"H": 16, "W": 256, "vA": 8, "uA": 4})
    src = k.source
    assert "float8 acc[4];" in src and "(register block)" in src
    # the reduction's loop holds the four vectors: one pass over the rows
    loop = src[src.index("for (int r"):]
    assert loop.count("vload8(") == 4 and loop.index("acc[3]") < loop.index("}")
    r = k.run()
    assert r.ok and r.max_abs_error == 0, r
    assert p.run("A=G0", {"H": 16, "W": 256}).ok  # no widths given: the map as written


def test_a_parallel_map_around_a_strip_mined_map_takes_a_block_of_rows():
    from mapper.lanes_probe import row_blocks
    from mapper.nesting import MapNestingTree

    p = problem(MM)
    tree = MapNestingTree(p.program)
    assert row_blocks(tree, {"A": 31, "B": 30}) == {"A": "B"}
    assert row_blocks(tree, {"A": 0, "B": 30}) == {}  # A sequential: no rows to share out
    assert row_blocks(tree, {"A": 30, "B": 0}) == {}  # B not strip-mined
    # map(map(g)): B maps over A's own element, the chunk of rows transposed
    own = problem(r"""
X : [[float]W]H
map(\row -> map(\x -> mult(x, x)) $ row) $ X
""")
    assert row_blocks(MapNestingTree(own.program), {"A": 31, "B": 30}) == {"A": "B"}
    # B's array is computed from A's element: B's loop cannot run A's rows together
    joined = problem(r"""
X : [[[float]W]V]H
map(\plane -> map(\x -> mult(x, x)) $ join(plane)) $ X
""")
    assert row_blocks(MapNestingTree(joined.program), {"A": 31, "B": 30}) == {}
    tp = infer_tuning(p.lower("A=G1 B=G0"), {"M": 64, "N": 64, "K": 64})
    assert tp.params["uA"].domain == (1, 2, 4, 8, 16)
    assert tp.params["uA"].why.startswith("rows per work-item")
    # rows of pixels: the divisors of a 14-wide image up to 16, not only powers of two
    conv = problem(os.path.join(EX, "gpgpu20_conv_highlevel.lift"))
    ct = infer_tuning(conv.lower("Y=G1 X=G0 K=G2"), {
        "M": 8, "C": 16, "KH": 3, "KW": 3, "H": 14, "W": 14, "padT": 1, "padB": 1,
        "padL": 1, "padR": 1, "strideY": 1, "strideX": 1})
    assert ct.params["uX"].domain == (1, 2, 7, 14)
    # a V mapping's split is not a row block: its domain stays the divisors
    l3 = infer_tuning(problem(os.path.join(EX, "cc22_listing3.lift")).lower(
        "A=G0 B=V C=S D=V"), {"N": 1024})
    assert max(l3.params["s0"].domain) > 16


@pytest.mark.opencl
@pytest.mark.parametrize("path,mapping,sizes", [
    (os.path.join(EX, "transpose.lift"), "A=G0 B=G1", {"H": 16, "W": 32, "uA": 4, "uB": 2,
                                                       "vB": 4}),
    (BOX, "A=G1 B=G0", {"H": 16, "W": 32, "uA": 2, "uB": 2, "vB": 8}),  # padding, rows
])
def test_a_block_of_rows_over_the_maps_own_elements_matches_the_reference(path, mapping,
                                                                           sizes):
    p = problem(path)
    k = p.build(mapping, sizes)
    assert "// mapVec(1)" in k.source  # the rows' loop (jammed where it holds a loop)
    r = k.run()
    assert r.ok and r.max_abs_error is not None and r.max_abs_error <= 1e-5, r


@pytest.mark.opencl
@pytest.mark.parametrize("sizes,acc,block", [
    ({"uA": 4, "uB": 4, "vB": 1, "rv1": 16}, "float16 lanes_acc[16];", 16),  # 4 x 4 x 16
    ({"uA": 2, "uB": 2, "vB": 1, "rv1": 1}, "float acc[4];", 4),  # scalars
    ({"uA": 2, "uB": 2, "vB": 4, "rv1": 1}, "float4 acc[4];", 4),  # the columns in lanes
    # 8 x 4 > JAM_MAX: the rows are jammed, the columns keep their loop
    ({"uA": 8, "uB": 4, "vB": 1, "rv1": 4}, "float4 lanes_acc[8];", 8),
])
def test_a_plain_matmul_runs_a_two_dimensional_register_block(sizes, acc, block):
    p = problem(MM)
    # K = 128: the reduction keeps its loop (8 steps of 16 lanes; the printer unrolls a
    # loop of at most SHORT_TRIPS)
    k = p.build("A=G1 B=G0", {"M": 16, "N": 32, "K": 128, **sizes})
    src = k.source
    assert acc in src, src
    # the reduction's loop holds every update of the block: one pass over K
    loop = src[src.index("for (int r"):]
    body = loop[:loop.index("\n      }")]
    # an update: an addition, or a multiply-add (codegen.contract)
    assert body.count("uf_add") + body.count("liftmap_mad_") >= block, body
    r = k.run()
    assert r.ok and r.max_abs_error is not None and r.max_abs_error <= 1e-4, r


@pytest.mark.slow
@pytest.mark.oclgrind
@pytest.mark.parametrize("path,mapping,sizes", [
    (os.path.join(EX, "row_sums.lift"), "A=G0", {"H": 4, "W": 32, "rv1": 8}),
    (os.path.join(EX, "col_sums.lift"), "A=G0", {"H": 4, "W": 64, "vA": 8, "uA": 4}),
    (BOX, "A=W0 B=L0", {"H": 8, "W": 32, "vB": 8, "uB": 2}),  # padding at the edges
    (BOX, "A=G0 B=V", {"H": 8, "W": 16, "vB": 8}),
    (TRANSPOSED, "A=G0 B=V", {"H": 4, "W": 16, "vB": 8}),  # scattered
    (BOX, "A=G0 B=V", {"H": 4, "W": 14, "vB": 8}),  # an overlapping tail vector
    (COLUMN_ACC, "A=V", {"H": 3, "W": 11, "vA": 4}),  # a scalar tail
    (MM, "A=G1 B=G0", {"M": 4, "N": 16, "K": 16, "vB": 4, "uB": 2}),  # gathered
    (MM, "A=G1 B=G0", {"M": 8, "N": 16, "K": 32, "uA": 4, "uB": 2, "rv1": 8}),  # 2-D block
    # a flattened padded window read row by row (whole vectors, or zero at the edges)
    (os.path.join(EX, "gpgpu20_conv_highlevel.lift"), "Y=G1 X=G0 K=G2",
     {"M": 4, "C": 8, "KH": 3, "KW": 3, "H": 4, "W": 4, "padT": 1, "padB": 1, "padL": 1,
      "padR": 1, "strideY": 1, "strideX": 1, "uX": 2, "uK": 2, "vK": 1, "rv1": 4}),
])
def test_kernels_in_lanes_are_clean_under_oclgrind(path, mapping, sizes):
    from codegen.oclgrind import check_with_oclgrind, oclgrind_available
    from mapper.candidates import build_candidate
    from mapper.witness import random_inputs

    if not oclgrind_available():
        pytest.fail("oclgrind is not installed (setup.sh installs it as root)")
    p = problem(path)
    report = check_with_oclgrind(build_candidate(p.program, mapping, sizes),
                                 random_inputs(p.program, sizes), timeout_s=120)
    assert report.clean, (report.issues, report.error)


def test_maps_made_in_a_worker_never_take_a_uid_the_program_brought():
    # a worker unpickles the program, then the mapping builds new maps (a row block's
    # mapVec(1)): a uid taken twice made the mapping re-map its own new map (a crash)
    import pickle
    import subprocess
    import sys

    from ir.nodes import Map, replace, walk

    p = problem(MM)
    prog = p.program
    big = max(n.uid for n in walk(prog) if isinstance(n, Map)) + 10_000
    prog = replace(prog, body=replace(prog.body, f=replace(prog.body.f, uid=big)))
    code = ("import pickle, sys\n"
            "from ir.nodes import Map, walk\n"
            "from mapper.candidates import build_candidate\n"
            "prog = pickle.loads(sys.stdin.buffer.read())\n"
            "build_candidate(prog, 'A=G1 B=G0', dict(M=8, N=8, K=8, uA=2, uB=2, vB=2, rv1=1))\n"
            "print(sorted(n.uid for n in walk(prog) if isinstance(n, Map))[-1])\n"
            "print(Map(prog).uid)\n")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(prog),
                         capture_output=True, cwd=ROOT, check=True).stdout.split()
    assert int(out[1]) > int(out[0]) == big


CONV_HL = os.path.join(EX, "gpgpu20_conv_highlevel.lift")
CONV_SIZES = {"M": 8, "C": 32, "KH": 3, "KW": 3, "H": 6, "W": 6, "padT": 1, "padB": 1,
              "padL": 1, "padR": 1, "strideY": 1, "strideX": 1}


@pytest.mark.opencl
@pytest.mark.parametrize("tuning", [
    {"uX": 2, "uK": 2, "vK": 1, "rv1": 4},  # in lanes: rows of C / 4 vectors
    {"uX": 1, "uK": 1, "vK": 1, "rv1": 1},  # scalars: rows of C
])
def test_a_reduction_over_a_flattened_window_runs_row_by_row(tuning):
    import re

    p = problem(CONV_HL)
    k = p.build("Y=G1 X=G0 K=G2", {**CONV_SIZES, **tuning})
    src = k.source
    lanes = tuning["rv1"]
    # the window's KH*KW rows in an outer loop, each row's C / lanes steps inside
    # (C = 32: 8 or 32 steps, more than the printer unrolls as a short loop)
    assert f"_lo < {CONV_SIZES['C'] // lanes};" in src and "_hi < 9;" in src, src
    inner = src[src.index("_lo < "):]
    inner = inner[:inner.index("\n          }")]
    # no division by the inner counter is left in the inner loop
    assert not re.search(r"r\w*_lo\)?\s*[/%]", inner), inner
    if lanes > 1:  # a padded row is read whole or is zero: its test is the row's own
        assert f"((float{lanes})(0.0f))" in inner and f"vload{lanes}" in inner
    r = k.run()
    assert r.ok and r.max_abs_error is not None and r.max_abs_error <= 1e-4, r
