"""Text syntax: parser, printer, round trips, error messages, alpha equality."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from located_cases import TYPE_ERRORS

from ir import builders as B
from ir.equality import alpha_equal
from ir.errors import ParseError
from ir.interp import evaluate
from ir.nodes import FunCall, Id, Lambda, Literal, Map, Pad, Param, Slide, Split, ToMem, Zip
from ir.programs import (
    PROGRAMS,
    cc22_listing1,
    cc22_listing3,
    conv_partial_stage,
    gpgpu20_conv_highlevel,
    gpgpu20_stencil2d,
)
from ir.sym import Var, parse_expr, smax, smin, sym
from ir.syntax import parse, parse_file, parse_size, parse_type, print_program, show, show_type
from ir.typecheck import typecheck
from ir.types import ArrayType, Float, Int, TupleType, VectorType, array

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE_BUILDERS = {
    "cc22_listing1": cc22_listing1,
    "cc22_listing3": cc22_listing3,
    "listing3_local": lambda: cc22_listing3(local=True),
    "gpgpu20_stencil2d": gpgpu20_stencil2d,
    "gpgpu20_conv_highlevel": gpgpu20_conv_highlevel,
    "gpgpu20_conv_partial": conv_partial_stage,
}
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.lift"))


# ------------------------------------------------------------------------- examples


def test_every_builder_has_its_example_file():
    """The papers' programs exist both as builders and as files; further examples (the
    exact-rules programs) are text only."""
    assert set(EXAMPLE_BUILDERS) <= {p.stem for p in EXAMPLE_FILES}


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_example_parses_typechecks_and_matches_builder(path):
    prog = parse_file(path)
    assert isinstance(prog, Lambda)
    typecheck(prog)
    if path.stem in EXAMPLE_BUILDERS:
        assert alpha_equal(prog, EXAMPLE_BUILDERS[path.stem]())
    text = print_program(prog)
    again = parse(text)
    assert alpha_equal(again, prog)
    assert print_program(again) == text


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_round_trip(name):
    prog = PROGRAMS[name]()
    text = print_program(prog)
    back = parse(text)
    assert alpha_equal(back, prog)
    assert print_program(back) == text
    # deterministic: a second build (new fresh names, new uids) prints the same
    assert print_program(PROGRAMS[name]()) == text
    assert typecheck(back).type == typecheck(prog).type


def test_listing3_prints_like_the_paper():
    text = print_program(cc22_listing3())
    assert text.startswith("X : [float]N\ny : float\nz : float\n")
    flat = " ".join(text.split("\n", 4)[-1].split())
    assert flat == (
        "join o mapA(mapB(toGlobal(\\x -> add(x, z))) o join o mapC(mapD(\\x -> mult(x, y))) "
        "o split(s1)) o split(s0) $ X"
    )


def _rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_evaluate_parsed_examples_like_builders():
    rng = np.random.default_rng(0)
    ex = {p.stem: parse_file(p) for p in EXAMPLE_FILES}
    cases = [
        ("cc22_listing3", {"X": _rand(rng, 24), "y": np.float32(1.5), "z": np.float32(-2.0)},
         {"s0": 12, "s1": 4}),
        ("listing3_local", {"X": _rand(rng, 16), "y": np.float32(3.0), "z": np.float32(1.0)},
         {"s0": 8, "s1": 2}),
        ("cc22_listing1", {"input": _rand(rng, (2, 3, 4))}, {}),
        ("gpgpu20_stencil2d", {"weights": _rand(rng, (3, 3)), "inputData": _rand(rng, (6, 7))},
         {}),
        ("gpgpu20_conv_highlevel",
         {"kernelsWeights": _rand(rng, (4, 3, 3, 2)), "kernelsBiases": _rand(rng, 4),
          "inputData": _rand(rng, (5, 6, 2))},
         {"padT": 1, "padB": 1, "padL": 1, "padR": 1, "strideY": 2, "strideX": 1}),
    ]
    for name, inputs, sizes in cases:
        got = evaluate(ex[name], inputs, sizes)
        want = evaluate(EXAMPLE_BUILDERS[name](), inputs, sizes)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------- syntax features


def test_listing3_text_variants_are_equal():
    a = parse("X : [float]N\ny : float\nz : float\n"
              "join o mapA(mapB(\\e -> add(e, z)) o join o mapC(mapD(\\e -> mult(e, y)))"
              " o split(s1)) o split(s0) $ X")
    b = parse("# comment\nX: [float]N  # input\ny: float\nz: float\n"
              "join o mapA(mapB(_ + z) o join o mapC(mapD(_ * y)) o split(s1)\n)\n"
              "  o split(s0)\n  $ X")
    assert alpha_equal(a, b)
    assert [p.name for p in a.params] == ["X", "y", "z"]
    assert a.params[0].type == array(Float, "N")


def test_application_forms():
    X = B.param("X", array(Float, "N"))
    decl = "X : [float]N\n"
    assert alpha_equal(parse(decl + "join(split(4)(X))"), Lambda((X,), B.join()(B.split(4)(X))))
    assert alpha_equal(parse(decl + "join $ split(4) $ X"), Lambda((X,), B.join()(B.split(4)(X))))
    comp = parse(decl + "join o split(4) $ X")
    assert alpha_equal(comp, Lambda((X,), B.compose(B.join(), B.split(4))(X)))
    assert not alpha_equal(comp, parse(decl + "join $ split(4) $ X"))
    let = parse(decl + "let a = split(4) $ X in join $ a")
    assert alpha_equal(let, Lambda((X,), B.let(B.split(4)(X), lambda a: B.join()(a))))
    assert alpha_equal(parse(decl + "(\\a -> join $ a) $ split(4) $ X"), let)
    lam2 = parse(decl + "(\\a b -> add(a, b))(1.0, 2.0f)")
    assert isinstance(lam2.body.f, Lambda) and lam2.body.args == (B.lit(1.0), B.lit(2.0))
    assert parse("2") == Literal(2, Int) and parse("-1.5") == Literal(-1.5, Float)
    assert parse("value(0, [[float]kappa]sigma)") == Literal(0.0, array(Float, "sigma", "kappa"))


def test_map_kinds_and_labels():
    m = parse("mapWrgA(1)(mapLcl(0)(mapSeqD(toPrivate(id))))")
    assert (m.kind, m.dim, m.label) == ("mapWrg", 1, "A")
    inner = m.f
    assert (inner.kind, inner.dim, inner.label) == ("mapLcl", 0, None)
    assert (inner.f.kind, inner.f.label) == ("mapSeq", "D")
    assert isinstance(inner.f.f, ToMem) and inner.f.f.space == "private"
    assert parse("mapND(id)").label == "ND"  # one argument: the map labelled ND
    assert alpha_equal(parse("mapND(2, id)"), B.map_nd(2, Id()))
    assert print_program(m) == "mapWrgA(1)(mapLcl(0)(mapSeqD(toPrivate(id))))\n"


def test_macros_expand_like_builders():
    assert alpha_equal(parse("slideND(2, (3, K), (1, s))"), B.slide_nd(2, (3, "K"), (1, "s")))
    assert alpha_equal(parse("slideStrictND(2, (3, 3), (1, 1))"),
                       B.slide_nd(2, (3, 3), (1, 1), strict=True))
    assert alpha_equal(parse("slideND(1, 3, 1)"), B.slide(3, 1))
    assert alpha_equal(parse("padND(2, ((1, 2), (p, q)))"), B.pad_nd(2, [(1, 2), ("p", "q")]))
    assert alpha_equal(parse("padND(1, ((1, 1)), 2.5)"), B.pad(1, 1, 2.5))
    assert alpha_equal(parse("joinND(3)"), B.join_nd(3))
    X = B.param("X", array(Float, "N", "M"))
    Y = B.param("Y", array(Float, "N", "M"))
    got = parse("X : [[float]M]N\nY : [[float]M]N\nzipND(2)(X, Y)")
    assert alpha_equal(got, Lambda((X, Y), B.zip_nd(2, X, Y)))


def test_primitives_parse_to_nodes():
    assert parse("split(N/s)") == Split(sym("N/s"))
    assert parse("slide(3, 1)") == Slide(3, 1) and parse("slideStrict(3, 2)").strict
    assert parse("pad(1, -1)") == Pad(1, -1) and parse("pad(0, 2, -1.0)").value == -1.0
    z = parse("X : [float]N\nzip(X, X, X)")
    assert z.body.f == Zip(3)
    v = parse("vectorize(v, mult)")
    assert v.f is B.mult and v.width == Var("v")
    for text in ["asVector(4)", "asScalar", "transpose", "reorderStride(s)", "get(1)", "id",
                 "reduceSeq(add)", "toLocal(mult)", "zip"]:
        assert print_program(parse(text)) == text + "\n"


def test_userfun_declarations():
    text = ("userfun relu(x: float) : float = x > 0.0f ? x : 0.0f\n"
            "userfun h(a: float, b: float) : float = fmax(a, b) / 2.0f + sqrt(fabs(a))\n"
            "X : [float]N\n"
            "map(\\x -> h(relu(x), x)) $ X\n")
    prog = parse(text)
    relu = prog.body.f.f.body.args[0].f
    assert relu.name == "relu" and relu.c_body == "return x > 0.0f ? x : 0.0f;"
    x = np.array([-2.0, 1.0, 4.0], dtype=np.float32)
    got = evaluate(prog, {"X": x})
    r = np.maximum(x, 0)
    np.testing.assert_allclose(got, np.maximum(r, x) / 2 + np.sqrt(np.abs(r)), rtol=1e-6)
    out = print_program(prog)
    assert out.startswith("userfun h(a: float, b: float) : float = fmax(a, b) / 2.0f")
    assert "userfun relu(x: float) : float = x > 0.0f ? x : 0.0f" in out
    assert alpha_equal(parse(out), prog)
    # a declaration shadows a builtin; extra user functions can be passed in
    shadow = parse("userfun add(a: float, b: float) : float = a - b\nadd(3.0, 1.0)")
    assert evaluate(shadow).ravel()[0] == 2.0
    assert parse("g(1.0)", userfuns={"g": B.idf}).f is B.idf


def test_constant_userfun_broadcasts():
    prog = parse("userfun zero(x: float) : float = 0.0f\nX : [float]N\nmap(zero) $ X")
    np.testing.assert_array_equal(evaluate(prog, {"X": np.ones(5)}), np.zeros(5))


# ----------------------------------------------------------------- types and sizes


SIZE_TEXTS = ["N", "4", "N/s", "(N + 2)//4", "N % 3", "min(a, b)", "max(N, 1) - 1",
              "-(N//2)", "2*N/(s + 1)", "(H - K + 2*P)//S + 1", "-K + S + theta", "1/s"]


@pytest.mark.parametrize("text", SIZE_TEXTS)
def test_size_round_trip(text):
    e = parse_size(text)
    assert e == parse_expr(text)
    assert parse_size(str(e)) == e


def _sizes():
    leaf = st.one_of(st.integers(-3, 9).map(sym), st.sampled_from(["N", "M", "s", "k"]).map(Var))

    def grow(children):
        ops = st.sampled_from(["+", "-", "*", "//", "%", "min", "max", "/"])

        def build(t):
            op, a, b = t
            if op in ("//", "%", "/"):
                b = b * b + 1 if not b.is_const else sym(abs(b.as_int()) + 1)
            if op == "/":
                return (a * b) / b if a.is_const else a / b
            return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if op == "//" else None,
                    "%": a % b if op == "%" else None, "min": smin(a, b),
                    "max": smax(a, b)}[op]

        return st.tuples(ops, children, children).map(build)

    return st.recursive(leaf, grow, max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(_sizes())
def test_size_round_trip_random(e):
    assert parse_size(str(e)) == e


def test_types_round_trip():
    types = [Float, Int, VectorType(Float, 4), VectorType(Float, "v"),
             VectorType(Float, sym("2*v")), array(Float, "N", "M"),
             ArrayType(Float, sym("N/s")), ArrayType(Float, -1),
             TupleType((Float, array(Int, 3))), TupleType((Float,)), TupleType(()),
             ArrayType(TupleType((Float, Float)), sym("min(a, b)"))]
    for t in types:
        assert parse_type(show_type(t)) == t
    assert parse_type("[float](N/s)") == ArrayType(Float, sym("N/s"))
    assert parse_type("[[float]kappa]sigma") == array(Float, "sigma", "kappa")
    assert parse_type(str(array(Float, "N", sym("(M + 2)//4")))) == array(
        Float, "N", sym("(M + 2)//4"))


# -------------------------------------------------------------------- error messages

ERRORS = [
    # (text, line, column, expected part of the message)
    ("X : [float]N\nfoo $ X", 2, 1, "unknown function 'foo'"),
    ("X : [float]N\nmap(frob) $ X", 2, 5, "unknown function 'frob'"),
    ("X : [float]N\nmap(id $ X", 2, 4, "'(' is never closed"),
    ("X : [float]N\njoin $ X)", 2, 9, "')' has no matching '('"),
    ("X : [float]N\njoin o split(4) $", 2, 17, "missing argument after '$'"),
    ("X : [float]N\njoin o split(4) $ )", 2, 19, "unbalanced parenthesis"),
    ("X : [float]N\nmap(join $) $ X", 2, 10, "missing argument after '$' (found ')')"),
    ("X : [float]N\nmapx(id) $ X", 2, 1, "bad map label 'x'"),
    ("X : [float]N\nmapGlbSeq(0)(id) $ X", 2, 1, "bad map label 'Seq'"),
    ("X : [flaot]N\njoin $ X", 1, 6, "unknown type 'flaot'; did you mean 'float'?"),
    ("X : [float]N\ny : float\nmap(\\e -> mult(e, z)) $ X", 3, 19,
     "undeclared parameter 'z'; declared: X, y; lambda parameters in scope: e"),
    ("X : [float]N\nmap(\\e mult(e, e)) $ X", 2, 8, "expected '->'"),
    ("X : [float]N\nmapGlb(3)(id) $ X", 2, 8, "must be 0, 1 or 2"),
    ("X : [float]N\nmapWrg(id) $ X", 2, 8, "dimension of mapWrg"),
    ("X : [float]N\nmapSeq(0)(id) $ X", 2, 8, "mapSeq takes no dimension"),
    ("X : [float]N\njoin $ X X", 2, 10, "after the end of the expression"),
    ("userfun f(x: float) : float = foo(x)\nX", 1, 31, "unknown C function 'foo'"),
    ("userfun f(x: float) : float = x + q\nX", 1, 35, "unknown name 'q'"),
    ("X : [float]N\nX : float\nX", 2, 1, "declared twice"),
    ("X : [float]N\njoin o split(4)", 2, 1, "must be an expression"),
    ("X : [float]N\nX(X)", 2, 1, "'X' is a parameter, not a function"),
    ("X : [float]N\njoin @ X", 2, 6, "unexpected character '@'"),
    ("X : [float]N\njoin $ X\nY : float", 3, 1, "declarations must come before"),
    ("X : [float]N\nmap(\\join -> join) $ X", 2, 6, "reserved word"),
    ("X : [float]N\nsplit(1.5) $ X", 2, 7, "sizes are integers"),
    ("X : [float]N\njoin o o split(2) $ X", 2, 6, "missing function after 'o'"),
    ("X : [float]N\n", 2, 1, "expected an expression after the declarations"),
]


@pytest.mark.parametrize("text,line,col,part", ERRORS, ids=[e[3][:30] for e in ERRORS])
def test_parse_errors(text, line, col, part):
    with pytest.raises(ParseError) as info:
        parse(text)
    err = info.value
    assert (err.line, err.column) == (line, col), str(err)
    assert part in str(err)
    src = text.split("\n")[line - 1]
    assert err.source_line == src
    if src:
        assert f"\n  {src}\n  {' ' * (col - 1)}^" in str(err)


def test_parse_file_names_the_file(tmp_path):
    f = tmp_path / "bad.lift"
    f.write_text("X : [float]N\nfoo $ X\n")
    with pytest.raises(ParseError) as info:
        parse_file(f)
    assert "bad.lift" in str(info.value) and info.value.line == 2


# --------------------------------------------------------------------- show, printing


def test_show_truncates_and_never_fails():
    p = cc22_listing3()
    s = show(p)
    assert s.startswith("\\X y z -> join o mapA(") and "\n" not in s
    short = show(p, max_len=40)
    assert len(short) == 40 and short.endswith("...")
    assert show(p.body.f) in s
    assert show(array(Float, "N", "M")) == "[[float]M]N"
    assert isinstance(show(FunCall(Param("f"), ())), str)  # ill-formed nodes still print


def test_printing_is_deterministic_and_renames_without_capture():
    y = B.param("y", Float)
    X = B.param("X", array(Float, "N"))
    outer = Param("x_1")
    inner = Param("x_2")
    body = FunCall(B.map_(Lambda((inner,), B.add(inner, outer))), (X,))
    prog = Lambda((X, y), FunCall(Lambda((outer,), body), (y,)))
    text = print_program(prog)
    assert "let x = y in map(\\x2 -> add(x2, x)) $ X" in text
    assert alpha_equal(parse(text), prog)
    # a lambda parameter named like a free parameter is renamed away from it
    x = Param("x")
    p2 = Lambda((X, y), FunCall(B.map_(Lambda((x,), B.mult(x, y))), (X,)))
    p3 = Lambda((X, Param("x", Float)),
                FunCall(B.map_(Lambda((Param("x_9"),), B.mult(Param("x_9"), Param("x", Float)))),
                        (X,)))
    assert alpha_equal(parse(print_program(p2)), p2)
    t3 = print_program(p3)
    assert "\\x2 -> mult(x2, x)" in t3 and alpha_equal(parse(t3), p3)


def test_composition_detection():
    X = B.param("X", array(Float, "N"))
    x = Param("x_5")
    # the parameter is used inside a chain element: not a composition
    f = Lambda((x,), B.join()(B.map_(Lambda((Param("e"),), B.add(Param("e"), x)))
                              (B.split(4)(x))))
    text = print_program(Lambda((X,), FunCall(B.map_(f), (B.split(2)(X),))))
    assert " o " not in text.split("\n")[-2]
    assert alpha_equal(parse(text), Lambda((X,), FunCall(B.map_(f), (B.split(2)(X),))))
    # nested compositions keep their structure
    nested = B.compose(B.join(), B.compose(B.join(), B.split(2)), B.split(4))
    t = print_program(Lambda((X,), nested(X)))
    assert "join o (join o split(2)) o split(4) $ X" in t
    assert alpha_equal(parse(t), Lambda((X,), nested(X)))


# -------------------------------------------------------------------- alpha equality


def test_alpha_equal():
    a, b, c = Param("a"), Param("b"), Param("c")
    assert alpha_equal(Lambda((a,), a), Lambda((b,), b))
    assert not alpha_equal(Lambda((a, b), a), Lambda((a, b), b))
    assert alpha_equal(Lambda((a, b), B.add(a, b)), Lambda((b, a), B.add(b, a)))
    assert not alpha_equal(Lambda((a,), c), Lambda((b,), b))  # free vs bound
    assert not alpha_equal(Lambda((a,), c), Lambda((a,), b))  # different free names
    assert alpha_equal(B.map_(Id(), "A"), B.map_(Id(), "A"))  # uids differ
    assert not alpha_equal(B.map_(Id(), "A"), B.map_(Id(), "B"))
    assert not alpha_equal(B.map_(Id()), B.map_seq(Id()))
    assert not alpha_equal(B.map_glb(0, Id()), B.map_glb(1, Id()))
    assert not alpha_equal(Param("X", Float), Param("X", Int))
    # shadowing
    assert alpha_equal(Lambda((a,), B.map_(Lambda((a,), a))(a)),
                       Lambda((b,), B.map_(Lambda((c,), c))(b)))
    assert not alpha_equal(Lambda((a,), B.map_(Lambda((a,), a))(a)),
                           Lambda((b,), B.map_(Lambda((c,), b))(b)))


# --------------------------------------------------------------- generated programs

LABELS = [None, None, "A", "B", "C1", "ND", "X_y"]
Y = B.param("y", Float)


@st.composite
def _map(draw, f):
    kind = draw(st.sampled_from(["map", "map", "mapSeq", "mapGlb", "mapWrg", "mapLcl"]))
    dim = draw(st.integers(0, 2)) if kind in ("mapGlb", "mapWrg", "mapLcl") else None
    if draw(st.integers(0, 4)) == 0:
        f = ToMem(f, draw(st.sampled_from(["global", "local", "private"])))
    return Map(f, kind, dim, draw(st.sampled_from(LABELS)))


def _scalar_funs():
    return st.sampled_from([
        B.lam(lambda x: B.mult(x, Y)), B.idf, Id(), B.lam(lambda x: B.add(x, B.lit(1.5))),
        B.lam(lambda x: B.mult_add(x, x, Y)),
    ])


@st.composite
def _step(draw, dims, depth):
    """One typed step ``[..]dims -> [..]dims'`` (float elements); returns (fun, dims')."""
    d0, rest = dims[0], dims[1:]
    opts = ["split", "pad", "map", "zip", "reorder"]
    if len(dims) >= 2:
        opts += ["join", "transpose"]
    if not d0.is_const:
        opts += ["slide", "split_const"]
    if len(dims) == 1:
        opts += ["reduce"]
        if not d0.is_const:
            opts += ["vector"]
    op = draw(st.sampled_from(opts))
    if op == "split":
        m = Var(draw(st.sampled_from(["s", "t"])))
        return B.split(m), [d0 / m, m, *rest]
    if op == "split_const":
        return B.split(2), [d0 / 2, sym(2), *rest]
    if op == "join":
        return B.join(), [dims[1] * d0, *dims[2:]]
    if op == "transpose":
        return B.transpose(), [dims[1], d0, *dims[2:]]
    if op == "slide":
        size = sym(draw(st.sampled_from([3, "k"])))
        step = sym(draw(st.sampled_from([1, 2, "st"])))
        strict = draw(st.booleans())
        n = (d0 - size) / step + 1 if strict else (d0 - size) // step + 1
        return B.slide(size, step, strict), [n, size, *rest]
    if op == "pad":
        left, right = draw(st.sampled_from([0, 1, "p"])), draw(st.sampled_from([1, 2]))
        value = draw(st.sampled_from([0.0, -1.0]))
        return B.pad(left, right, value), [d0 + left + right, *rest]
    if op == "reorder":
        return B.reorder_stride(Var("r")), dims
    if op == "zip":
        fst = B.lam(lambda p: FunCall(B.get(0), (p,)))
        return B.lam(lambda a: FunCall(draw(_map(fst)), (B.zip_(a, a),))), dims
    if op == "reduce":
        if draw(st.booleans()):
            return B.lam(lambda a: FunCall(B.reduce_(B.add), (B.lit(0.0), a))), [sym(1)]
        f = B.lam(lambda acc, x: B.mult_add(acc, x, Y), arity=2)
        return B.lam(lambda a: FunCall(B.reduce_seq(f), (B.lit(1.0), a))), [sym(1)]
    if op == "vector":
        w = draw(st.sampled_from([4, "v"]))
        vf = B.vectorize(w, draw(st.sampled_from([B.add, B.mult])))
        body = B.lam(lambda v: vf(v, v))
        return B.compose(B.as_scalar(), draw(_map(body)), B.as_vector(w)), dims
    # map
    if len(dims) >= 2 and depth < 2:
        inner, out = draw(_pipeline(rest, depth + 1))
        return draw(_map(inner)), [d0, *out]
    if len(dims) >= 2:  # too deep to nest further: flatten instead
        return B.join(), [dims[1] * d0, *dims[2:]]
    return draw(_map(draw(_scalar_funs()))), dims


@st.composite
def _steps(draw, dims, depth):
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        f, dims = draw(_step(dims, depth))
        steps.append(f)
    return steps, dims


def _apply(steps, arg):
    for f in steps:
        arg = FunCall(f, (arg,))
    return arg


@st.composite
def _pipeline(draw, dims, depth):
    steps, dims = draw(_steps(dims, depth))
    if len(steps) > 1 and draw(st.booleans()):
        return B.compose(*reversed(steps)), dims
    x = B.fresh()
    return Lambda((x,), _apply(steps, x)), dims


@st.composite
def programs(draw):
    two_d = draw(st.booleans())
    X = B.param("X", array(Float, "N", "M") if two_d else array(Float, "N"))
    dims = [sym("N"), sym("M")] if two_d else [sym("N")]
    body = X
    for _ in range(draw(st.integers(1, 2))):
        steps, dims = draw(_steps(dims, 0))
        how = draw(st.sampled_from(["compose", "inline", "let"]))
        if how == "compose":
            body = FunCall(B.compose(*reversed(steps)), (body,))
        elif how == "inline":
            body = _apply(steps, body)
        else:
            body = B.let(body, lambda v, steps=steps: _apply(steps, v))
    return _unique_labels(Lambda((X, Y), body))


def _unique_labels(prog):
    """``prog`` with a label written twice kept on one map only (the text syntax refuses
    a label written twice)."""
    from ir.nodes import rebuild, replace

    seen: set[str] = set()

    def fn(n):
        if isinstance(n, Map) and n.label is not None:
            if n.label in seen:
                return replace(n, label=None)
            seen.add(n.label)
        return None

    return rebuild(prog, fn)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_programs_round_trip(prog):
    typecheck(prog)  # typed by construction
    text = print_program(prog)
    back = parse(text)
    assert alpha_equal(back, prog), text
    assert print_program(back) == text
    assert show(prog, max_len=80)


# ------------------------------------------------------------------------------ speed


@pytest.mark.perf
def test_parses_500_lines_fast():
    lines = ["# a long pipeline", "X : [float]N", "y : float", "", "join o split(4)"]
    k = 0
    while len(lines) < 500:
        lines += [f"o mapL{k}(\\e ->", "    add(e,", "        mult(e,", "             y)))", "",
                  "o join", "o split(s)", "", f"o mapSeqM{k}(toPrivate(_ * y))",
                  "  # comment", ""]
        k += 1
    lines.append("$ X")
    text = "\n".join(lines)
    t0 = time.perf_counter()
    prog = parse(text)
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.5, elapsed
    assert isinstance(prog, Lambda)
    assert alpha_equal(parse(print_program(prog)), prog)


DEEP = {
    "brackets": lambda n: "X : [float]N\nmapA(id) $ " + "(" * n + "X" + ")" * n,
    "maps": lambda n: "X : " + "[" * n + "float" + "]N" * n + "\n" + "map(" * n + "id"
    + ")" * n + " $ X",
    "calls": lambda n: "X : [float]N\nmapA(\\a -> " + "id(" * n + "a" + ")" * n + ") $ X",
    "types": lambda n: "X : " + "[" * n + "float" + "]2" * n + "\nid $ X",
    "c-expression": lambda n: "X : [float]N\nuserfun f(x: float) : float = " + "(" * n + "x"
    + ")" * n + "\nmapA(f) $ X",
    "c-unary": lambda n: "X : [float]N\nuserfun f(x: float) : float = " + "-" * n + "x"
    + "\nmapA(f) $ X",
    "sizes": lambda n: "X : [float](" + "(" * n + "N" + ")" * n + ")\nmapA(id) $ X",
    "composition": lambda n: "X : [float]N\nmapA(id) o " + " o ".join(["id"] * n) + " $ X",
}


@pytest.mark.parametrize("kind", sorted(DEEP))
def test_deep_programs_are_located_errors_not_recursion_errors(kind):
    from ir.syntax import MAX_NESTING

    for n in (MAX_NESTING * 3, 5000):
        with pytest.raises(ParseError, match="levels deep") as e:
            parse(DEEP[kind](n))
        assert e.value.line >= 1 and e.value.column >= 1


@pytest.mark.parametrize("kind", sorted(DEEP))
def test_programs_below_the_depth_limits_parse_and_typecheck(kind):
    from ir.syntax import MAX_NESTING
    from ir.typecheck import typecheck

    def nested(k, f):  # run with a deep caller stack, as under pytest or an application
        return f() if k == 0 else nested(k - 1, f)

    p = parse(DEEP[kind](MAX_NESTING - 5))
    nested(200, lambda: (typecheck(p), print_program(p)))


def test_user_function_bodies_reach_opencl_without_comments():
    from ir.nodes import UserFun, walk

    src = ("X : [float]N\nuserfun f(x: float) : float = (x +   # one\n   1.0f) * x # two\n"
           "mapA(f) $ X")
    (uf,) = [n for n in walk(parse(src)) if isinstance(n, UserFun) and n.name == "f"]
    assert uf.c_body == "return (x + 1.0f) * x;"


@pytest.mark.parametrize("src, what", [
    ("userfun f(kernel: float) : float = kernel", "'kernel' is a word of OpenCL C"),
    ("userfun f(float4: float) : float = float4", "'float4' is a word of OpenCL C"),
    ("userfun global(x: float) : float = x", "'global' is a reserved word"),
    ("userfun f(x: float) : float = x * \u0662.\u0665", "unexpected character"),
])
def test_user_functions_that_would_not_compile_are_refused(src, what):
    with pytest.raises(ParseError, match=what):
        parse(f"X : [float]N\n{src}\nmapA(f) $ X")


@pytest.mark.parametrize("src, what", [
    ("X : [float<0>]N\nmapA(id) $ X", "vector width 0"),
    ("X : [float<-1>]N\nmapA(id) $ X", "vector width -1"),
    ("X : [float5]N\nmapA(id) $ X", "2, 3, 4, 8 or 16 lanes"),
    ("X : [float]" + "9" * 5000 + "\nmapA(id) $ X", "has 5000 digits"),
])
def test_malformed_widths_and_huge_integers_are_located_errors(src, what):
    with pytest.raises(ParseError, match=what) as e:
        parse(src)
    assert e.value.line == 1


# ------------------------------------------------------- source positions (issue 24)


def _positions(src):
    spans: dict[int, tuple[int, int]] = {}
    return parse(src, spans=spans), spans


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.lift")))
def test_every_node_of_a_parsed_program_has_a_position(name):
    from ir.nodes import walk

    prog, spans = _positions((EXAMPLES / name).read_text())
    lines = (EXAMPLES / name).read_text().split("\n")
    for n in walk(prog):
        line, col = spans[id(n)]
        assert 1 <= line <= len(lines) and 1 <= col <= len(lines[line - 1]) + 1


def test_positions_of_macros_compositions_and_parameters():
    from ir.nodes import FunCall, Lambda, Slide, walk

    src = ("X : [[float]W]H\ny : float\n\nmapA(\\r ->\n  mapB(_ * y) $ r)\n"
           "  o slideND(2, (3, 3), (1, 1)) $ X")
    prog, spans = _positions(src)
    assert spans[id(prog.params[0])] == (1, 1) and spans[id(prog.params[1])] == (2, 1)
    slides = [n for n in walk(prog) if isinstance(n, Slide)]
    assert slides and {spans[id(s)] for s in slides} == {(6, 5)}  # inside the macro
    (lam,) = [n for n in walk(prog) if isinstance(n, Lambda) and n.params[0].name == "r"]
    assert spans[id(lam)] == (4, 6) and spans[id(lam.params[0])] == (4, 7)
    calls = [n for n in walk(prog) if isinstance(n, FunCall)]
    assert spans[id(calls[0])] == (4, 1)


@pytest.mark.parametrize("src, line, col, message", [*TYPE_ERRORS,
    ("\\x -> x", 1, 1, "the program is a function, not an expression"),
    ("X : [float]N\njoin o mapA(mapB(id)) $ X", 2, 13, "mapB expects an array, got float"),
    ("X : [[float]4]N\nmapA(join o mapB(join)) $ X", 2, 18, "join expects an array"),
    ("X : [float]N\nmapND(2, id) $ X", 2, 1, "map expects an array, got float"),
    ("X : [float]N\nreduce(add)(0, X)", 2, 1, "user function add argument 1 (a) expects "
     "float, got int"),
    ("X : [float]N\nslide(0, 1) $ X", 2, 1, "slide size 0 needs 0 >= 1"),
    ("id", 1, 1, "cannot typecheck a bare id"),
])
def test_type_errors_name_a_node_with_a_position(src, line, col, message):
    from ir.errors import IRTypeError

    prog, spans = _positions(src)
    with pytest.raises(IRTypeError) as e:
        typecheck(prog)
    assert message in str(e.value) and e.value.root is prog
    assert spans[id(e.value.node)] == (line, col)
    assert "x_0" not in str(e.value).splitlines()[0]


def test_a_label_written_twice_is_a_located_error():
    for src, line, col in (("X : [float]N\nmapA(mapA(id)) $ X", 2, 6),
                           ("X : [float]N\njoin o mapSeqB(mapB(id)) o split(4) $ X", 2, 16),
                           ("X : [float]N\nmapA(id) o\n  mapA(id) $ X", 3, 3)):
        with pytest.raises(ParseError, match="map label '[AB]' is used twice") as e:
            parse(src)
        assert (e.value.line, e.value.column) == (line, col)
        assert "first at line 2" in str(e.value) and "leave the label out" in str(e.value)
    assert "e.g. mapB" in str(pytest.raises(ParseError, parse,
                                            "X : [float]N\nmapA(mapA(id)) $ X").value)


def test_files_read_as_utf8_text(tmp_path):
    from ir.errors import NotUTF8Error
    from ir.syntax import read_source

    path = tmp_path / "p.lift"
    path.write_bytes("\ufeffX : [float]N\n# é λ\nmap(id) $ X\n".encode())
    assert read_source(path).startswith("X : [float]N\n# é λ")
    assert parse_file(path).params[0].name == "X"
    path.write_bytes("X : [float]N\n# é\n".encode() + b"# caf\xe9\n")
    with pytest.raises(NotUTF8Error) as e:
        parse_file(path)
    assert (e.value.line, e.value.column, e.value.byte) == (3, 6, 0xe9)
    assert isinstance(e.value, ParseError) and e.value.path == str(path)
    assert str(e.value) == f"{path} is not UTF-8 text (byte 0xe9 at line 3, column 6); " \
        "save it as UTF-8"


@pytest.mark.parametrize("macro", ["joinND(2147483648)", "mapND(99999999999, id)",
                                   "zipND(5000000000)(X, X)", "slideND(101, (1), (1))",
                                   "padND(3000000000, ((0, 0)))"])
def test_a_macro_of_too_many_dimensions_is_a_located_error(macro):
    with pytest.raises(ParseError, match=r"nested levels; the limit is 100") as e:
        parse(f"X : [float]N\n{macro} $ X")
    assert e.value.line == 2
