"""The constraint language: printing, evaluation, compilers (Z3, Python), simplification."""

from __future__ import annotations

import copy
import pickle

import pytest
import z3
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from constraints import (
    FALSE,
    TRUE,
    And,
    BinOp,
    Call,
    Cmp,
    Const,
    Implies,
    In,
    InvalidAssignmentError,
    Neg,
    Not,
    Or,
    Param,
    Pred,
    Str,
    UnknownParameterError,
    conjuncts,
    eq,
    ne,
)
from constraints.errors import ConstraintTypeError
from constraints.scalar import compile_predicate
from constraints.z3_backend import to_z3

A, B, C, D = (Param(n) for n in "ABCD")
NAMES = ("A", "B", "C")


# --- printing -------------------------------------------------------------------------------


def test_paper_style_printing():
    assert str(A // 10 < 1) == "A/10 < 1"
    assert str(Or(A // 10 < 1, ne(A, B))) == "A/10 < 1 or A != B"
    rule6 = Not(And(eq(A // 10, 1), eq(B // 10, 2), eq(B % 10, A % 10)))
    assert str(rule6) == "not (A/10 == 1 and B/10 == 2 and B%10 == A%10)"
    assert str(Or(eq(C, 11), eq(D, 11))) == "C == 11 or D == 11"
    assert str(Implies(eq(A, 0), ne(B, 0))) == "A == 0 => B != 0"
    assert str(In(A, [12, 10, 11, 10])) == "A in {10, 11, 12}"
    assert (str(TRUE), str(FALSE)) == ("true", "false")


def test_printing_precedence():
    assert str((A + 1) * (B - C)) == "(A + 1)*(B - C)"
    assert str(A - (B - C)) == "A - (B - C)"
    assert str(A - B - C) == "A - B - C"
    assert str(A * B // C) == "A*B/C"
    assert str(A * (B // C)) == "A*(B/C)"
    assert str(A - -3) == "A - (-3)"
    assert str(2 - A >= B % 4) == "2 - A >= B%4"
    assert str(Or(And(eq(A, 1), eq(B, 2)), eq(C, 3))) == "(A == 1 and B == 2) or C == 3"
    assert str(And(Or(eq(A, 1), eq(B, 2)), Not(eq(C, 3)))) == "(A == 1 or B == 2) and not (C == 3)"
    assert str(Implies(Implies(eq(A, 1), eq(B, 1)), eq(C, 1))) == "(A == 1 => B == 1) => C == 1"


def test_to_python():
    assert Or(A // 10 < 1, ne(A, B)).to_python() == "A // 10 < 1 or A != B"
    assert Implies(eq(A, 0), ne(B, 0)).to_python() == "not A == 0 or B != 0"
    assert In(A % 10, [1, 0]).to_python() == "A % 10 in {0, 1}"
    assert Not(In(A, [2, 1])).to_python() == "A not in {1, 2}"
    assert (A - -3 < (B + 1) * 2).to_python() == "A - (-3) < (B + 1) * 2"
    assert Or(And(eq(A, 1), eq(B, 2)), eq(C, 3)).to_python() == "(A == 1 and B == 2) or C == 3"
    assert ((-A) ** 2 > A ** B ** C).to_python() == "(-A) ** 2 > A ** B ** C"
    assert ((A ** B) ** C < Call("min", (A, 1.5))).to_python() == "(A ** B) ** C < min(A, 1.5)"
    assert eq(Param("s"), Str("fast")).to_python() == "s == 'fast'"
    assert TRUE.to_python() == "True"


def test_the_restriction_language_is_this_one():
    """Restriction text parses into these nodes; floats, strings, true division, ``**``,
    signs and calls are terms like the others, with Python's meaning."""
    from constraints.predicates import parse_predicate

    names = ["A", "B", "C", "s"]
    assert parse_predicate("A // 10 < 1 or A != B", names) == Or(A // 10 < 1, ne(A, B))
    assert parse_predicate("0 < A <= B", names) == And(Cmp("<", 0, A), A <= B)
    assert parse_predicate("A not in [2, 1]", names) == Not(In(A, [1, 2]))
    assert parse_predicate("-A ** 2 + abs(B) > 2.5", names) == (
        -(A ** 2) + Call("abs", (B,)) > 2.5)
    assert parse_predicate("s == 'x'", names) == eq(Param("s"), Str("x"))
    assert (A / 4).evaluate({"A": 2}) == 0.5 and (A ** -1).evaluate({"A": 2}) == 0.5
    with pytest.raises(ValueError):
        (A ** 0.5).evaluate({"A": -4})  # not a complex number
    with pytest.raises(ConstraintTypeError, match="Z3"):
        to_z3(A / 2 > 1, {"A": z3.Int("A")})
    with pytest.raises(ConstraintTypeError):
        Str("x") + 1


def test_a_deciding_constant_folds_only_after_parts_that_cannot_raise():
    assert Or(eq(A, 1), TRUE) is TRUE and And(eq(A // 3, 1), FALSE) is FALSE
    kept = Or(eq(A // B, 1), TRUE)  # Python raises at B == 0: the constant cannot decide
    assert isinstance(kept, Or) and kept.parts == (eq(A // B, 1), TRUE)
    assert Or(TRUE, eq(A // B, 1)) is TRUE  # Python never evaluates the division
    assert isinstance(And(A ** 2 > 1, FALSE), And)
    assert isinstance(Implies(eq(A % B, 0), TRUE), Implies)
    assert BinOp("//", 1, 0) != Const(0) and isinstance(BinOp("//", A, 0), BinOp)


def test_repr_round_trips():
    p = Not(And(eq(A // 10, 1), In(B, [1, 2]), Implies(A < B, Or(eq(C, 1), ne(C, 2)))))
    assert eval(repr(p)) == p  # noqa: S307
    assert pickle.loads(pickle.dumps(p)) == p
    assert copy.deepcopy(p) is p


# --- structure ------------------------------------------------------------------------------


def test_structural_equality_and_hashing():
    assert Param("A") == A and hash(Param("A")) == hash(A)
    assert (A == B) is False  # == on terms is structural, not a constraint
    assert eq(A + 1, B) == eq(A + 1, B)
    assert eq(A + 1, B) != eq(B, A + 1)
    assert len({Or(A < 1, ne(A, B)), Or(A < 1, ne(A, B)), A < 1}) == 2
    with pytest.raises(AttributeError):
        A.name = "Z"


def test_params():
    p = Implies(In(A % 3, [1]), Or(eq(B * 2, C), TRUE))
    assert p is TRUE and p.params() == frozenset()  # Or(.., TRUE) is TRUE, so is Implies(.., TRUE)
    q = Implies(In(A % 3, [1]), Or(eq(B * 2, C), D > 1))
    assert q.params() == frozenset("ABCD")
    assert Const(3).params() == frozenset() and TRUE.params() == frozenset()


def test_flattening_and_simplification():
    a, b, c = eq(A, 1), eq(B, 2), eq(C, 3)
    assert And(And(a, b), c).parts == (a, b, c)
    assert Or(a, Or(b, Or(c))).parts == (a, b, c)
    assert And(a, Or(b, c)).parts == (a, Or(b, c))
    assert And() is TRUE and Or() is FALSE
    assert And(a) is a and Or(a) is a
    assert And(a, TRUE, b) == And(a, b)
    assert And(a, FALSE) is FALSE and Or(a, TRUE) is TRUE
    assert Or(FALSE, a) is a
    assert And(a, b, a).parts == (a, b)
    assert And([a, b], c) == And(a, b, c)
    assert And(x for x in (a, b)) == And(a, b)
    assert Not(Not(a)) is a and Not(TRUE) is FALSE and Not(FALSE) is TRUE
    assert eq(1, 1) is TRUE and ne(1, 1) is FALSE and (Const(2) < 1) is FALSE
    assert Const(2) + 3 == Const(5) and (Const(-7) // 2) == Const(-4) and Const(-7) % 3 == Const(2)
    assert In(A, []) is FALSE and In(Const(3), [1, 3]) is TRUE
    assert Implies(TRUE, a) is a and Implies(FALSE, a) is TRUE
    assert Implies(a, TRUE) is TRUE and Implies(a, FALSE) == Not(a)
    assert (3 > A) == Cmp("<", A, 3) and (3 + A) == BinOp("+", 3, A)
    assert (a & b) == And(a, b) and (a | b) == Or(a, b) and ~a == Not(a)


def test_conjuncts():
    a, b, c = eq(A, 1), eq(B, 2), Or(eq(C, 3), eq(C, 4))
    assert conjuncts(And(a, b, c)) == [a, b, c]
    assert conjuncts(c) == [c]
    assert conjuncts(Not(And(a, b))) == [Not(And(a, b))]
    assert conjuncts(TRUE) == [] and conjuncts(FALSE) == [FALSE]


def test_clauses_distribute_an_implication_or_a_disjunction_over_a_conjunction():
    import itertools

    from constraints.expr import clauses

    a, b, c, d = eq(A, 2), eq(B, 0), eq(C, 0), eq(D, 1)
    assert clauses(Implies(a, And(b, c, d))) == [Implies(a, b), Implies(a, c), Implies(a, d)]
    assert clauses(Or(a, And(b, c), d)) == [Or(a, b, d), Or(a, c, d)]
    nested = Or(a, And(b, Or(c, And(d, b))))
    assert clauses(nested) == [Or(a, b), Or(a, c, d), Or(a, c, b)]
    for vals in itertools.product((0, 1, 2), repeat=4):
        env = dict(zip("ABCD", vals))
        for p in (Implies(a, And(b, c, d)), Or(a, And(b, c), d), nested):
            assert all(q.evaluate(env) for q in clauses(p)) is p.evaluate(env)
    # nothing to distribute, or a part that can raise (short-circuit decides): unchanged
    assert clauses(Or(a, b)) == [Or(a, b)]
    risky = Or(eq(A, 0), And(eq(B / A, 1), c))
    assert clauses(risky) == [risky]


# --- errors ---------------------------------------------------------------------------------


def test_errors():
    with pytest.raises(TypeError, match="eq"):
        And(A == 1, B < 2)  # a structural bool instead of a predicate
    with pytest.raises(TypeError):
        Or(A)
    with pytest.raises(TypeError, match="truth value"):
        bool(A < B)
    with pytest.raises(TypeError):
        A < B < C  # noqa: B015 - chained comparison needs bool()
    with pytest.raises(TypeError):
        Const(True)
    with pytest.raises(TypeError):
        A + "x"
    with pytest.raises(TypeError):
        (A < 1) + 1
    with pytest.raises(TypeError):
        Param("")
    with pytest.raises(ZeroDivisionError):
        A // 0
    with pytest.raises(ValueError):
        Cmp("=", A, 1)
    with pytest.raises(UnknownParameterError, match="B"):
        compile_predicate(eq(A, B), ("A",))
    with pytest.raises(InvalidAssignmentError, match="B"):
        eq(A, B).evaluate({"A": 1})
    with pytest.raises(UnknownParameterError):
        to_z3(eq(A, B), {"A": z3.Int("A")})
    with pytest.raises(TypeError):
        In(A, [1, None])


# --- evaluation and compilers ---------------------------------------------------------------


def test_evaluate_examples():
    rule6 = Not(And(eq(A // 10, 1), eq(B // 10, 2), eq(B % 10, A % 10)))
    assert rule6.evaluate({"A": 10, "B": 20}) is False
    assert rule6.evaluate({"A": 10, "B": 21}) is True
    assert rule6.evaluate({"A": 20, "B": 10}) is True
    assert (A // 10).evaluate({"A": -1}) == -1  # floor semantics
    assert (A % 10).evaluate({"A": -1}) == 9
    assert (A // -3).evaluate({"A": 7}) == -3 and (A % -3).evaluate({"A": 7}) == -2
    assert In(A + B, [3, 5]).evaluate({"A": 1, "B": 2}) is True
    assert Implies(eq(A, 0), ne(B, 0)).evaluate({"A": 0, "B": 0}) is False


def test_compile_is_cached_and_positional():
    p = Or(A // 10 < 1, ne(A, B))
    f = compile_predicate(p, ("B", "A"))
    assert f is compile_predicate(p, ("B", "A"))
    assert f(20, 20) is False and f(21, 20) is True and f(20, 1) is True
    assert compile_predicate(TRUE, ())() is True
    weird = Param("map-A.0")  # not an identifier: fine, arguments are renamed
    assert compile_predicate(weird < 3, ("map-A.0",))(2) is True


def _terms(names, divisors):
    leaves = st.one_of(st.sampled_from(names).map(Param), st.integers(-6, 35).map(Const))

    def extend(children):
        return st.one_of(
            st.builds(BinOp, st.sampled_from(["+", "-", "*"]), children, children),
            st.builds(BinOp, st.sampled_from(["//", "%"]), children, divisors(children)),
            children.map(Neg),
            st.builds(lambda f, a, b: Call(f, (a, b)), st.sampled_from(["min", "max"]),
                      children, children),
            children.map(lambda t: Call("abs", (t,))),
        )

    return st.recursive(leaves, extend, max_leaves=5)


def _preds(terms):
    atoms = st.one_of(
        st.builds(Cmp, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), terms, terms),
        st.builds(In, terms, st.lists(st.integers(-6, 35), max_size=4)),
        st.sampled_from([TRUE, FALSE]),
    )

    def extend(children):
        return st.one_of(
            st.lists(children, max_size=3).map(lambda ps: And(*ps)),
            st.lists(children, max_size=3).map(lambda ps: Or(*ps)),
            children.map(Not),
            st.builds(Implies, children, children),
        )

    return st.recursive(atoms, extend, max_leaves=6)


# divisors: any non-zero constant, or an arbitrary term (zero divisions are skipped)
_divisors = lambda children: st.one_of(  # noqa: E731
    st.integers(1, 12), st.integers(-12, -1), children.filter(lambda t: t != Const(0))
)
TERMS = _terms(NAMES, _divisors)
PREDS = _preds(TERMS)
ASSIGNMENTS = st.fixed_dictionaries({n: st.integers(-40, 40) for n in NAMES})


def _z3_value(node, assignment):
    e = z3.simplify(to_z3(node, {n: z3.IntVal(v) for n, v in assignment.items()}))
    return z3.is_true(e) if isinstance(node, Pred) else e.as_long()


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _defined_value(node, assignment):
    """``node``'s value at ``assignment``; the example is dropped where it divides by zero."""
    try:
        return node.evaluate(assignment)
    except ZeroDivisionError:
        assume(False)


@FAST
@given(TERMS, ASSIGNMENTS)
def test_terms_agree_across_compilers(t, assignment):
    value = _defined_value(t, assignment)
    assert _z3_value(t, assignment) == value
    assert eval(t.to_python(), {}, dict(assignment)) == value  # noqa: S307


@FAST
@given(PREDS, ASSIGNMENTS)
def test_predicates_agree_across_compilers(p, assignment):
    value = _defined_value(p, assignment)
    assert isinstance(value, bool)
    assert _z3_value(p, assignment) is value
    assert eval(p.to_python(), {}, dict(assignment)) is value  # noqa: S307
    assert compile_predicate(p, NAMES)(*(assignment[n] for n in NAMES)) is value
    assert compile_predicate(p, NAMES[::-1])(*(assignment[n] for n in NAMES[::-1])) is value
    assert And(*conjuncts(p)).evaluate(assignment) is value
    assert p.params() <= set(NAMES)
