"""Tests of ir.sym: canonical forms, simplification rules, printing, relations, properties."""

from __future__ import annotations

import ast
import copy
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ir.sym import (
    Cst,
    Expr,
    NonIntegralError,
    Rel,
    SymbolicError,
    SymbolicZeroDivisionError,
    UnboundSizeError,
    Var,
    assume_divisible,
    parse_expr,
    smax,
    smin,
    sym,
)

N = Var("N", 1, 4096)
M = Var("M", 1, 4096)
s = Var("s", 1, 64)
t = Var("t", 1, 64)
i = Var("i", 0, 63)
j = Var("j", 0, 3)
k = Var("k", 0, 15)
a, b, c, x = Var("a"), Var("b"), Var("c"), Var("x")


# ------------------------------------------------------------------ construction, equality
def test_constructors_and_coercion():
    assert Cst(3) == 3 and Cst(3).is_const and Cst(3).as_int() == 3
    assert Cst(np.int64(7)) == 7
    assert sym(5) == Cst(5)
    assert sym("N") == Var("N") and sym("N").is_var and sym("N").name == "N"
    assert sym("N/s") == Var("N") / Var("s")  # non-identifier text is parsed
    assert sym(N) is N
    assert Expr("2*N - 1") == 2 * N - 1 and Expr(4) == 4
    with pytest.raises(TypeError):
        sym(1.5)
    with pytest.raises(TypeError):
        Cst(2.0)
    with pytest.raises(SymbolicError):
        Var("not a name")
    with pytest.raises(SymbolicError):
        Var("x", 3, 2)
    with pytest.raises(SymbolicError):
        _ = (N + 1).name


def test_same_name_is_same_variable():
    assert Var("q", 0, 3) == Var("q") == Var("q", 5, 9)
    assert hash(Var("q", 0, 3)) == hash(Var("q"))
    assert Var("q", 0, 3).bounds() == (0, 3) and Var("q").bounds() == (None, None)
    assert Var("q", 0, 3) + Var("q") == 2 * Var("q")
    # each Var keeps the range it was given: re-range by substitution
    e = (4 * i + Var("u")) // 4
    assert e == i + Var("u") // 4
    assert e.subs({"u": Var("u", 0, 3)}) == i


def test_equality_hash_and_immutability():
    assert N * s == s * N and hash(N * s) == hash(s * N)
    assert (N + 1) * (N - 1) == N * N - 1
    assert N + N == 2 * N and N - N == 0 and (N - N).is_const
    assert 3 * N - N * 3 == Cst(0)
    assert (N == M) is False and (N != M) is True
    assert N != "N"  # no coercion of strings in ==
    assert Cst(2) == 2 and 2 == Cst(2) and hash(Cst(2)) == hash(2)
    assert len({N + 1, 1 + N, N + 2}) == 2
    with pytest.raises(AttributeError):
        N._t = {}
    assert pickle.loads(pickle.dumps((N // s) + smin(a, b))) == (N // s) + smin(a, b)
    assert copy.deepcopy(N + 1) == N + 1


def test_int_operands_on_both_sides():
    assert 1 + N == N + 1 and 1 - N == -N + 1 and 2 * N == N * 2
    assert 8 / Cst(4) == 2 and 9 // Cst(4) == 2 and 9 % Cst(4) == 1
    assert (-N) * -1 == N and +N is N


# ------------------------------------------------------------------------ exact division
def test_exact_division_monomials():
    assert (N / s) * s == N
    assert s * (N / s) == N
    assert (2 * N) / 2 == N
    assert N / s / t == N / (s * t)
    assert (N * s) / s == N
    assert (4 * N) / 2 == 2 * N
    assert (N / s) * (s / N) == 1
    assert str(N / s) == "N/s"
    n, size, step = Var("n"), Var("size"), Var("step")
    e = (n - size + step) / step
    assert e == (n - size) / step + 1
    assert str(e) == "(n - size)/step + 1"
    assert e.evaluate({"n": 10, "size": 4, "step": 2}) == 4


def test_exact_division_rational_coefficients():
    e = (N + 2) / 4
    assert str(e) == "(N + 2)/4"
    assert e * 4 == N + 2
    assert e.evaluate({"N": 6}) == 2
    with pytest.raises(NonIntegralError) as ei:
        e.evaluate({"N": 3})
    assert "(N + 2)/4" in str(ei.value) and "N=3" in str(ei.value)
    half = Cst(3) / 2
    assert half.is_const
    with pytest.raises(NonIntegralError):
        half.as_int()
    tri = (x * (x + 1)) / 2
    assert all(tri.evaluate({"x": v}) == v * (v + 1) // 2 for v in range(-5, 6))


def test_exact_division_by_polynomials():
    q = a + b
    e = x / q
    assert str(e) == "x/(a + b)"
    assert e * q == x and q * e == x
    assert e.free_vars() == {"x", "a", "b"}
    assert (a * a - b * b) / (a - b) == a + b
    assert (a * b + a * b * b) / (b * b + b) == a
    assert (2 * x) / (2 * a + 2 * b) == x / (a + b)
    assert e.evaluate({"x": 6, "a": 1, "b": 2}) == 2
    with pytest.raises(NonIntegralError):
        e.evaluate({"x": 5, "a": 1, "b": 1})
    with pytest.raises(SymbolicZeroDivisionError):
        e.evaluate({"x": 5, "a": 1, "b": -1})



def test_exact_division_sign_is_canonical():
    # regression: -(N/(N*N+1)) and (-N)/(N*N+1) printed alike but compared unequal
    q = N * N + 1
    e1, e2 = -(N / q), (-N) / q
    assert e1 == e2 and hash(e1) == hash(e2)
    assert e1 - e2 == 0 and str(e1 - e2) == "0" and e1 + N / q == 0
    assert str(e1) == str(e2) == "-N/(N*N + 1)"
    assert parse_expr(str(e1)) == e1
    assert e1.evaluate({"N": 0}) == 0
    for e in (e1, e2, e1 - e2, e1 + e2, e1 - N / q, 2 * e1, (-(N + 1)) / q, -x / (a + b),
              (b - a) / (a + b) - (a - b) / (a + b)):
        assert "--" not in str(e), str(e)
        assert "--" not in e.to_c(), e.to_c()
        assert parse_expr(str(e)) == e, str(e)
    assert (b - a) / (a + b) == -((a - b) / (a + b))
    assert str((b - a) / (a + b)) == "-(a - b)/(a + b)"
    # the denominator's sign is normalised too: x/(-q) == -(x/q)
    assert x / (-a - b) == -(x / (a + b)) == (-x) / (a + b)
    # also when the common monomial factor changes the leading term of the denominator
    d = a * a - 1 / (b * b * b)
    assert x / d == -(x / (-d)) == -((-x) / d)
    assert parse_expr(str(x / d)) == x / d
    assert (x / d).evaluate({"x": 6, "a": 2, "b": 1}) == 2
    # floor division and mod keep the sign of their operands (floor(-a/b) != -floor(a/b))
    assert (-N) // q != -(N // q) and (-N) % q != -(N % q)
    assert ((-N) // q).evaluate({"N": 1}) == -1 and (-(N // q)).evaluate({"N": 1}) == 0


def _small_polys():
    var = st.sampled_from([a, b, c, x])
    mono = st.tuples(st.integers(-3, 3), st.lists(var, max_size=2)).map(
        lambda t: t[0] * _prod(t[1]))
    return st.lists(mono, min_size=1, max_size=3).map(sum).map(sym)


def _prod(vs):
    r = Cst(1)
    for v in vs:
        r = r * v
    return r


@settings(max_examples=100, deadline=None)
@given(p=_small_polys(), q=_small_polys())
def test_property_exact_division_sign(p, q):
    if q.is_const:
        q = q * q + a * b + 1
    if q == 0:
        return
    e = p / q
    assert -e == (-p) / q == p / (-q), (str(p), str(q))
    assert hash(-e) == hash((-p) / q)
    assert e + (-p) / q == 0
    assert "--" not in str(e) and "--" not in str(-e)
    assert parse_expr(str(-e)) == -e, str(-e)


def test_division_by_zero():
    with pytest.raises(SymbolicZeroDivisionError):
        N / 0
    with pytest.raises(SymbolicZeroDivisionError):
        N // 0
    with pytest.raises(SymbolicZeroDivisionError):
        N % (s - s)
    with pytest.raises(SymbolicZeroDivisionError):
        (N // s).evaluate({"N": 3, "s": 0})
    with pytest.raises(SymbolicZeroDivisionError):
        (N / s).evaluate({"N": 3, "s": 0})


# -------------------------------------------------------------------- floor division, mod
def test_floordiv_mod_constants():
    for p in range(-9, 10):
        for q in (-4, -3, -1, 1, 2, 5):
            assert Cst(p) // q == p // q
            assert Cst(p) % q == p % q
    with pytest.raises(NonIntegralError):
        (Cst(3) / 2) // 1 + (Cst(1) / 2) // 3


def test_floordiv_simple_rules():
    assert N // 1 == N and N % 1 == 0
    assert N // -1 == -N and N % -1 == 0
    assert N // N == 1 and N % N == 0
    assert (4 * N) // 2 == 2 * N and (4 * N) % 2 == 0
    assert (N * s + 2 * s) // s == N + 2 and (N * s) % s == 0
    assert (6 * N * s) // (3 * s) == 2 * N
    assert Cst(0) // N == 0 and Cst(0) % N == 0


def test_floordiv_split_and_bounds():
    assert (i * 4 + j) // 4 == i
    assert (i * 4 + j) % 4 == j
    assert ((i * 4) / 4) % 1 == 0
    assert (i * 4 + j + 8) // 4 == i + 2
    assert j // 4 == 0 and j % 4 == j
    assert j % s != j  # s >= 1 only: j may be >= s ...
    # ... with s >= 4 it is not
    assert j % Var("w", 4, 8) == j
    assert (s - 1) // s == 0 and (s - 1) % s == s - 1
    # unknown remainder: the multiple of q is split off
    assert (4 * N + x) // 4 == N + x // 4
    assert (4 * N + x) % 4 == x % 4
    assert (s * N + x) // s == N + x // s


def test_floordiv_known_quotient():
    assert (j + 4) // 4 == 1 and (j + 4) % 4 == j
    assert (j - 4) // 4 == -1 and (j - 4) % 4 == j
    assert Var("y", 1, 3) // -4 == -1 and Var("y", 1, 3) % -4 == Var("y") - 4
    assert (j - 1) // 4 != 0  # j = 0 gives -1


def test_floordiv_nesting():
    assert (x // 2) // 3 == x // 6
    assert (x % 12) % 4 == x % 4
    assert (x % 4) % 4 == x % 4
    assert (x % s) % s == x % s
    assert (x % (2 * s)) % s == x % s
    assert (x % s) // s == 0
    assert (x // s) // t == x // (s * t)


def test_div_mod_recombination():
    assert (x // s) * s + x % s == x
    assert x % 4 + 3 + (x // 4) * 4 == x + 3
    assert 2 * (x % 4) + 8 * (x // 4) == 2 * x
    assert (x // 4) * 4 + x % 5 != x


def test_codegen_index_expression():
    e = (i * 4 + j) // 4 + k * N + (j % 4)
    assert e == i + j + k * N
    assert str(e) == "N*k + i + j"
    assert e.to_c() == "N*k + i + j"


# --------------------------------------------------------------------------------- min/max
def test_min_max():
    assert smin(3, 5) == 3 and smax(3, 5) == 5
    assert smin(N, N) is N or smin(N, N) == N
    assert smin(N, N + 1) == N and smax(N, N + 1) == N + 1
    assert smin(j, Var("w", 4, 8)) == j and smax(j, Var("w", 4, 8)) == Var("w")
    assert smin(a, b) == smin(b, a) and hash(smin(a, b)) == hash(smin(b, a))
    assert str(smin("a", "b")) == "min(a, b)" and str(smax(b, a)) == "max(a, b)"
    assert smin(a, b) != smax(a, b)
    assert smin(a, b).bounds() == (None, None)
    assert smin(j, k).bounds() == (0, 3) and smax(j, k).bounds() == (0, 15)
    assert smin(a, b).evaluate({"a": 4, "b": -2}) == -2
    assert smax(a, b).evaluate({"a": 4, "b": -2}) == 4


# ------------------------------------------------------------------------ queries, bounds
def test_free_vars_is_const_as_int():
    assert (N // s + smin(a, 3)).free_vars() == {"N", "s", "a"}
    assert Cst(4).free_vars() == frozenset()
    assert not N.is_const and (N - N + 4).is_const
    with pytest.raises(SymbolicError):
        N.as_int()


def test_bounds():
    assert (2 * i + j).bounds() == (0, 129)
    assert (i - j).bounds() == (-3, 63)
    assert (i * j).bounds() == (0, 189)
    assert (N + a).bounds() == (None, None)
    assert (N + 1).bounds() == (2, 4097)
    assert (Var("n", 1) + 1).bounds() == (2, None)
    assert (-Var("n", 1)).bounds() == (None, -1)
    assert (i // 4).bounds() == (0, 15)
    assert (a % 4).bounds() == (0, 3)
    assert (i % s).bounds() == (0, 63)
    assert Var("v", -3, 2).bounds() == (-3, 2)
    assert (Var("v", -3, 2) * Var("v", -3, 2)).bounds() == (0, 9)
    assert (N / s).bounds() == (1, 4096)  # [1/64, 4096], rounded inwards: the value is an int
    assert Cst(7).bounds() == (7, 7)


# ---------------------------------------------------------------- substitution, evaluation
def test_subs():
    e = N // s + N % s
    assert e.subs({"N": 17, "s": 5}) == 5
    assert e.subs({"s": 1}) == N
    assert (a - b).subs({"a": b, "b": a}) == b - a  # simultaneous
    assert (N / s).subs({"N": s * M}) == M
    assert (a + 1).subs({"a": "b + 2"}) == b + 3
    assert (a + 1).subs({}) == a + 1 and (a + 1).subs({"zz": 3}) == a + 1
    assert smin(a, b).subs({"a": 1, "b": 2}) == 1
    assert (x / (a + b)).subs({"a": 1, "b": 1}) == x / 2
    with pytest.raises(SymbolicZeroDivisionError):
        (N / s).subs({"s": 0})
    assert (a + b).subs({Var("a"): 1}) == b + 1  # Var keys are accepted too


def test_to_tree():
    assert (2 * N - 1).to_tree() == ("add", (("mul", (("int", 2), ("var", "N"))),
                                             ("neg", ("int", 1))))
    assert (N // s).to_tree() == ("floordiv", ("var", "N"), ("var", "s"))
    assert ((N + 2) / 4).to_tree() == ("div", ("add", (("var", "N"), ("int", 2))), ("int", 4))


def test_evaluate_and_errors():
    e = (i * 4 + x) // 4 + k * N
    assert e.evaluate({"i": 3, "x": 9, "k": 2, "N": 10}) == 3 + 2 + 20
    assert e.evaluate({"i": np.int32(3), "x": np.int64(9), "k": 2, "N": 10}) == 25
    with pytest.raises(UnboundSizeError) as ei:
        e.evaluate({"i": 1})
    msg = str(ei.value)
    assert "N" in msg and "k" in msg and "x" in msg and str(e) in msg
    with pytest.raises(SymbolicError):
        N.evaluate({"N": 2.5})
    with pytest.raises(NonIntegralError) as ni:
        (N / s + 1).evaluate({"N": 7, "s": 2})
    assert "N/s + 1" in str(ni.value) and "N=7" in str(ni.value) and "s=2" in str(ni.value)
    with pytest.raises(NonIntegralError):
        ((N / s) % 4).evaluate({"N": 7, "s": 2})
    assert Cst(5).evaluate({}) == 5
    assert isinstance((N / s).evaluate({"N": 8, "s": 2}), int)


# ------------------------------------------------------------------------------- printing
@pytest.mark.parametrize(
    "expr, text",
    [
        (N / s, "N/s"),
        ((N + 2) // 4, "(N + 2)//4"),
        (N % s, "N % s"),
        (smin(a, b), "min(a, b)"),
        (2 * N - 1, "2*N - 1"),
        (Cst(-3), "-3"),
        (Cst(0), "0"),
        (-N, "-N"),
        (1 - N, "-N + 1"),
        (N * N * s, "N*N*s"),
        (N / (s * s), "N/(s*s)"),
        (3 * N / (2 * s), "3*N/(2*s)"),
        (2 * (N % s), "2*(N % s)"),
        (-(N // 4), "-(N//4)"),
        ((-N) // 4, "-N//4"),
        (N // (s * t), "N//(s*t)"),
        ((N / s) // 4, "(N/s)//4"),
        (x // (a + b), "x//(a + b)"),
        (smax(a, b) * 3 + 1, "3*max(a, b) + 1"),
        (-(N + M) / 2, "-(M + N)/2"),
        ((x * (x + 1)) / 2, "(x*x + x)/2"),
    ],
)
def test_str(expr, text):
    assert str(expr) == text
    assert parse_expr(text) == expr
    assert repr(expr) == f"Expr({text!r})"


def test_printing_is_deterministic():
    e1 = (c + b * 2 + a) // 3 + smin(b, a) * k + N % s
    e2 = N % s + k * smin(a, b) + (a + c + 2 * b) // 3
    assert str(e1) == str(e2)
    code = (
        "from ir.sym import Var, smin\n"
        "a, b, c, k, N, s = (Var(n) for n in 'a b c k N s'.split())\n"
        "print((c + b*2 + a)//3 + smin(b, a)*k + N % s + (N*s*a + b*c*s)/(a + s))\n"
    )
    outs = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, cwd=os.path.dirname(os.path.dirname(__file__)), check=True)
        outs.add(r.stdout)
    assert len(outs) == 1


def test_parse_errors_and_names():
    with pytest.raises(SymbolicError):
        parse_expr("N +")
    with pytest.raises(SymbolicError):
        parse_expr("N $ 2")
    with pytest.raises(SymbolicError):
        parse_expr("min(a)")
    e = parse_expr("(4*i + j)//4", names={"i": i, "j": j})
    assert e == i
    assert parse_expr("n + 1", names={"n": 5}) == 6


def test_to_c():
    assert (N / s).to_c() == "N/s"
    assert ((N + 2) // 4).to_c() == "(N + 2)/4"
    assert (N % s).to_c() == "N % s"
    assert smin(a, b).to_c() == "min(a, b)" and smax(a, b).to_c() == "max(a, b)"
    assert (2 * N - 1).to_c() == "2*N - 1"
    assert ((N / s) // 4).to_c() == "(N/s)/4"
    # fractional terms share one denominator so C's integer '/' stays exact
    assert ((N + 2) / 4 + N / s).to_c() == "(N*s + 4*N + 2*s)/(4*s)"
    assert str((N + 2) / 4 + N / s) == "N/s + (N + 2)/4"
    n, size, step = Var("n"), Var("size"), Var("step")
    assert ((n - size + step) / step).to_c() == "(n - size)/step + 1"
    assert (x // (a + b) * 2).to_c() == "2*(x/(a + b))"


# -------------------------------------------------------------------------------- relations
def test_rel():
    r = (N % s).eq(0)
    assert isinstance(r, Rel) and r.op == "==" and r.lhs == N % s and r.rhs == 0
    assert str(r) == "N % s == 0" and repr(r) == "Rel('N % s == 0')"
    assert r.free_vars() == {"N", "s"}
    assert r.evaluate({"N": 8, "s": 4}) is True and r.evaluate({"N": 9, "s": 4}) is False
    assert r.subs({"s": 1}).is_trivially_true
    assert not r.is_trivially_true and not r.is_trivially_false
    assert r == (N % s).eq(0) and hash(r) == hash((N % s).eq(0)) and r != (N % s).ne(0)
    assert r.to_c() == "N % s == 0"
    assert str(N.ge(M)) == "N >= M" and str(a.lt(3)) == "a < 3"
    for op, meth in [("==", "eq"), ("!=", "ne"), ("<", "lt"), ("<=", "le"), (">", "gt"),
                     (">=", "ge")]:
        rel = getattr(a, meth)(b)
        assert rel.op == op
        for va in range(-2, 3):
            for vb in range(-2, 3):
                assert rel.evaluate({"a": va, "b": vb}) == eval(f"{va} {op} {vb}")
        assert getattr(Cst(2), meth)(2).is_trivially_true == eval(f"2 {op} 2")
        assert getattr(Cst(2), meth)(2).is_trivially_false == (not eval(f"2 {op} 2"))
    # variable ranges decide relations too
    assert N.ge(1).is_trivially_true and N.lt(1).is_trivially_false
    assert j.le(3).is_trivially_true and j.gt(3).is_trivially_false
    assert j.ne(4).is_trivially_true and j.eq(4).is_trivially_false
    assert (N - N).eq(0).is_trivially_true and Cst(1).eq(0).is_trivially_false
    with pytest.raises(SymbolicError):
        Rel("=<", a, b)
    with pytest.raises(TypeError):
        bool(a.eq(b))
    assert pickle.loads(pickle.dumps(r)) == r


# ------------------------------------------------------------------------------ facts
def test_assume_divisible():
    assert (N // s) * s != N
    assert assume_divisible((N // s) * s, [(N, s)]) == N
    assert assume_divisible(N % s, [(N, s)]) == 0
    assert assume_divisible(N - N % s, [(N % s).eq(0)]) == N
    assert assume_divisible((2 * N) // s, [(N, s)]) == 2 * N / s
    assert assume_divisible(N // 2, [(N, 4)]) == N / 2
    assert assume_divisible(N // 8, [(N, 4)]) == N // 8
    assert assume_divisible(smin(N // s, M), [(N, s)]) == smin(N / s, M)
    assert assume_divisible((N / s) // t, [(N / s, t)]) == N / (s * t)
    assert assume_divisible(M // s, [(N, s)]) == M // s
    assert assume_divisible(N + 1, []) == N + 1
    with pytest.raises(SymbolicError):
        assume_divisible(N, [N.ge(s)])


# ------------------------------------------------------------------- property-based tests
VARS = ("a", "b", "c")


@st.composite
def ranges(draw):
    out = {}
    for v in VARS:
        lo = draw(st.integers(-6, 6))
        hi = lo + draw(st.integers(0, 8))
        kind = draw(st.sampled_from(["both", "both", "lo", "hi", "none"]))
        out[v] = (lo if kind in ("both", "lo") else None, hi if kind in ("both", "hi") else None,
                  lo, hi)
    return out


def divisors(tree, nonneg):
    consts = st.integers(1, 5) if nonneg else st.integers(-5, 5).filter(bool)
    return st.one_of(
        st.tuples(st.just("cst"), consts),
        st.just(("s",)),
        st.tuples(st.just("pos"), tree),
        st.tuples(st.just("nz"), tree),
    )


def trees(nonneg=False):
    leaves = st.one_of(
        st.tuples(st.just("var"), st.sampled_from(VARS)),
        st.tuples(st.just("cst"), st.integers(0 if nonneg else -6, 6)),
        st.just(("s",)),
        st.just(("N",)),
        st.just(("ns",)),
    )

    def extend(tr):
        binops = ["add", "mul", "min", "max"] + ([] if nonneg else ["sub"])
        nodes = [
            st.tuples(st.sampled_from(binops), tr, tr),
            st.tuples(st.sampled_from(["fdiv", "mod", "exact"]), tr, divisors(tr, nonneg)),
            st.tuples(st.just("tri"), tr),
        ]
        if not nonneg:
            nodes.append(st.tuples(st.just("neg"), tr))
        return st.one_of(*nodes)

    return st.recursive(leaves, extend, max_leaves=10)


# A tree's operators, on symbolic expressions (``build``) and on Python ints (``ref``, the
# reference semantics: exact division is plain integer division there).
_SYM_OPS = {
    "pos": lambda x: smax(x, 1), "nz": lambda y: y * y + 1, "neg": lambda x: -x,
    "tri": lambda y: (y * (y + 1)) / 2, "ns": lambda n, s: n / s,
    "add": lambda p, q: p + q, "sub": lambda p, q: p - q, "mul": lambda p, q: p * q,
    "min": smin, "max": smax,
    "fdiv": lambda p, q: p // q, "mod": lambda p, q: p % q, "exact": lambda p, q: (p * q) / q,
}
_REF_OPS = {
    **_SYM_OPS,
    "pos": lambda x: max(x, 1), "tri": lambda y: y * (y + 1) // 2, "ns": lambda n, s: n // s,
    "min": min, "max": max, "exact": lambda p, q: p,
}


def _interpret(n, ops, values, const):
    """The value of the tree ``n``: a variable's (``s`` and ``N`` too) is in ``values``, a
    constant's is ``const(c)``, an operator's is ``ops[tag]`` of its operands' values."""
    tag = n[0]
    if tag == "var":
        return values[n[1]]
    if tag == "cst":
        return const(n[1])
    if tag in ("s", "N"):
        return values[tag]
    if tag == "ns":
        return ops["ns"](values["N"], values["s"])
    return ops[tag](*(_interpret(a, ops, values, const) for a in n[1:]))


def build(n, vs):
    return _interpret(n, _SYM_OPS, vs, Cst)


def ref(n, env):
    return _interpret(n, _REF_OPS, env, int)


def make_vars(rg):
    vs = {v: Var(v, lo, hi) for v, (lo, hi, _, _) in rg.items()}
    vs["s"] = Var("s", 1, 4)
    vs["N"] = Var("N", -20, 20)
    return vs


@st.composite
def envs(draw, rg, nonneg=False):
    env = {v: draw(st.integers(max(lo, 0) if nonneg else lo, hi))
           for v, (_, _, lo, hi) in rg.items()}
    env["s"] = draw(st.integers(1, 4))
    env["N"] = env["s"] * draw(st.integers(0 if nonneg else -5, 5))  # s divides N
    return env


PROPS = settings(max_examples=250, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPS
@given(tree=trees(), rg=ranges(), data=st.data())
def test_property_evaluate_matches_reference(tree, rg, data):
    vs = make_vars(rg)
    e = build(tree, vs)
    for _ in range(3):
        env = data.draw(envs(rg))
        want = ref(tree, env)
        assert e.evaluate(env) == want, (str(e), env)
        # substituting some variables, then evaluating the rest, agrees
        part = {v: env[v] for v in data.draw(st.sets(st.sampled_from(sorted(env))))}
        rest = {v: val for v, val in env.items() if v not in part}
        assert e.subs(part).evaluate(rest) == want, (str(e), part)
        lo, hi = e.bounds()
        assert (lo is None or lo <= want) and (hi is None or want <= hi), (str(e), lo, hi)
    # printing re-parses to the same canonical expression
    assert parse_expr(str(e), names=vs) == e, str(e)
    assert str(build(tree, vs)) == str(e)


class _CEval(ast.NodeVisitor):
    """Evaluates the to_c() text with C semantics (truncating / and %)."""

    def __init__(self, env):
        self.env = env

    def visit_Expression(self, n):  # noqa: N802
        return self.visit(n.body)

    def visit_Constant(self, n):  # noqa: N802
        return n.value

    def visit_Name(self, n):  # noqa: N802
        return self.env[n.id]

    def visit_UnaryOp(self, n):  # noqa: N802
        assert isinstance(n.op, ast.USub)
        return -self.visit(n.operand)

    def visit_Call(self, n):  # noqa: N802
        args = [self.visit(x) for x in n.args]
        return {"min": min, "max": max}[n.func.id](*args)

    def visit_BinOp(self, n):  # noqa: N802
        lv, rv = self.visit(n.left), self.visit(n.right)
        if isinstance(n.op, ast.Add):
            return lv + rv
        if isinstance(n.op, ast.Sub):
            return lv - rv
        if isinstance(n.op, ast.Mult):
            return lv * rv
        quo = abs(lv) // abs(rv) * (1 if (lv >= 0) == (rv >= 0) else -1)
        if isinstance(n.op, ast.Div):
            return quo
        assert isinstance(n.op, ast.Mod)
        return lv - rv * quo


@PROPS
@given(tree=trees(nonneg=True), rg=ranges(), data=st.data())
def test_property_to_c_matches_reference(tree, rg, data):
    rg = {v: (lo, hi, max(lo2, 0), max(hi2, 0)) for v, (lo, hi, lo2, hi2) in rg.items()}
    rg = {v: (None if lo is None else lo2, None if hi is None else hi2, lo2, hi2)
          for v, (lo, hi, lo2, hi2) in rg.items()}
    vs = make_vars(rg)
    e = build(tree, vs)
    code = e.to_c()
    assert "//" not in code
    for _ in range(3):
        env = data.draw(envs(rg, nonneg=True))
        got = _CEval(env).visit(ast.parse(code, mode="eval"))
        assert got == ref(tree, env), (code, env)


def test_an_expression_evaluated_again_runs_compiled_with_the_same_values_and_errors():
    """From its second evaluation an expression runs as compiled Python: the same values,
    and the same typed errors (the interpreter raises them)."""
    e = (a * b + 3) // c + (a % c) * smin(a, b) - smax(b, 2) + (a * c) / c + 2 * a * a
    envs = [{"a": 7, "b": 5, "c": 3}, {"a": -9, "b": 4, "c": 2}, {"a": 0, "b": 1, "c": 5}]
    first = [e.evaluate(env) for env in envs]
    assert e._compiled() is not None  # evaluated before: compiled now
    want = [(va * vb + 3) // vc + (va % vc) * min(va, vb) - max(vb, 2) + va + 2 * va * va
            for va, vb, vc in ((d["a"], d["b"], d["c"]) for d in envs)]
    assert [e.evaluate(env) for env in envs] == first == want
    with pytest.raises(UnboundSizeError, match="no value for c"):
        e.evaluate({"a": 1, "b": 2})
    with pytest.raises(SymbolicZeroDivisionError):
        e.evaluate({"a": 1, "b": 2, "c": 0})
    with pytest.raises(SymbolicError, match="must be an integer"):
        e.evaluate({"a": 1.5, "b": 2, "c": 3})
    assert e.evaluate({"a": np.int64(7), "b": True, "c": 3}) == e.evaluate({"a": 7, "b": 1,
                                                                             "c": 3})
    exact = (a + 1) / b
    assert exact.evaluate({"a": 5, "b": 3}) == 2 and exact.evaluate({"a": 8, "b": 3}) == 3
    with pytest.raises(NonIntegralError):
        exact.evaluate({"a": 6, "b": 4})
    # Fraction coefficients and negative powers: a numerator over a denominator, exact
    half, per = (a + 1) / 2, a * c / b + c
    assert [half.evaluate({"a": 5}), half.evaluate({"a": 7})] == [3, 4]
    got = [per.evaluate({"a": 6, "b": 4, "c": 2}), per.evaluate({"a": 3, "b": 9, "c": 3})]
    assert half._compiled() is not None and per._compiled() is not None and got == [5, 4]
    with pytest.raises(NonIntegralError):
        half.evaluate({"a": 4})
    with pytest.raises(NonIntegralError):
        per.evaluate({"a": 3, "b": 4, "c": 1})
    with pytest.raises(SymbolicZeroDivisionError):
        per.evaluate({"a": 3, "b": 0, "c": 1})
