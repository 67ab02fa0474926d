"""Models and the three solvers (cp, Z3, brute force), which must agree exactly."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from constraints import (
    FALSE,
    TRUE,
    And,
    BinOp,
    Cmp,
    Constraint,
    ConstraintError,
    EmptyDomainError,
    Implies,
    In,
    InvalidAssignmentError,
    Model,
    Not,
    Or,
    Param,
    Parameter,
    UnknownParameterError,
    UnsatisfiableError,
    bruteforce,
    cp_backend,
    eq,
    ne,
    z3_backend,
)

BACKENDS = [cp_backend, z3_backend, bruteforce]
ENCODING = (0, 1, 10, 11, 12, 20, 21, 22, 30, 31, 32)  # CC'22 Table 2
A, B, C, D = (Param(n) for n in "ABCD")


def _key(solution):
    return tuple(sorted(solution.items()))


def _solution_set(backend, model, **kw):
    solutions = list(backend.iter_solutions(model, **kw))
    keys = [_key(s) for s in solutions]
    assert len(keys) == len(set(keys)), f"{backend.__name__} repeated a solution"
    for s in solutions:
        assert tuple(s) == model.names  # complete, in model order
    return set(keys)


def _assert_backends_agree(model, fixed=None):
    expected = _solution_set(bruteforce, model, fixed=fixed)
    for backend in BACKENDS:
        assert _solution_set(backend, model, fixed=fixed) == expected, backend.__name__
        assert backend.count(model, fixed=fixed) == len(expected), backend.__name__
    assert z3_backend.is_satisfiable(model, fixed) == bool(expected)
    return expected


# --- CC'22 Listing 3: join o mapA(mapB(_ + z) o join o mapC(mapD(_ * y)) o split) o split ---


def _dup(m, inner):
    return Constraint(
        "duplicate-scheduling",
        Or(m // 10 < 1, ne(m, inner)),
        f"maps {m} and {inner} are not parallelised identically",
        (str(m), str(inner)),
    )


def _hierarchy(m, inner):
    return Constraint(
        "local-hierarchy",
        Not(And(eq(m // 10, 1), eq(inner // 10, 2), eq(inner % 10, m % 10))),
        f"mapLcl {m} does not nest mapWrg {inner} in the same dimension",
        (str(m), str(inner)),
    )


def listing3_model() -> Model:
    cs = [_dup(m, i) for m, i in [(A, B), (A, C), (A, D), (C, D)]]
    cs += [_hierarchy(m, i) for m, i in [(A, B), (A, C), (A, D), (C, D)]]
    cs.append(Constraint("private-memory", D // 10 < 1, "mapD writes to private memory", ("D",)))
    cs.append(Constraint("fusion", Not(And(eq(C, 0), eq(D, 0))), "fuse C and D", ("C", "D")))
    cs.append(
        Constraint(
            "exhaustive-local",
            And(*(Implies(eq(B, 10 + d), Or(eq(C, 10 + d), eq(D, 10 + d))) for d in range(3))),
            "a mapLcl dimension used in chain A-B is used in chain A-C-D",
            ("B", "C", "D"),
        )
    )
    cs.append(Constraint("no-fusion", ne(A, 1), "mapA has no outer map", ("A",)))
    return Model([Parameter(n, ENCODING) for n in "ABCD"], cs)


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
def test_listing3_backends_agree():
    model = listing3_model()
    solutions = _assert_backends_agree(model)
    assert _key({"A": 20, "B": 10, "C": 10, "D": 0}) in solutions
    assert _key({"A": 10, "B": 20, "C": 10, "D": 0}) not in solutions  # local-hierarchy
    assert _key({"A": 20, "B": 10, "C": 11, "D": 0}) not in solutions  # exhaustive-local
    assert _key({"A": 20, "B": 10, "C": 10, "D": 10}) not in solutions  # private-memory
    fixed = {"A": 20, "B": 10}
    restricted = _assert_backends_agree(model, fixed)
    assert restricted == {s for s in solutions if dict(s)["A"] == 20 and dict(s)["B"] == 10}


def test_listing3_model_api():
    model = listing3_model()
    assert model.names == ("A", "B", "C", "D")
    assert model.param("D").domain == ENCODING
    assert model.count_by_rule() == {
        "duplicate-scheduling": 4,
        "local-hierarchy": 4,
        "private-memory": 1,
        "fusion": 1,
        "exhaustive-local": 1,
        "no-fusion": 1,
    }
    assert str(model.constraints[1]) == (
        "[duplicate-scheduling] maps A and C are not parallelised identically: A/10 < 1 or A != C"
    )
    bad = {"A": 10, "B": 20, "C": 10, "D": 10}
    assert [c.rule for c in model.violated(bad)] == [
        "duplicate-scheduling",
        "duplicate-scheduling",
        "duplicate-scheduling",
        "local-hierarchy",
        "private-memory",
    ]
    assert model.violated({"A": 20, "B": 10, "C": 10, "D": 0}) == []
    dec = model.decomposed()
    assert len(dec.constraints) == len(model.constraints) + 2
    assert dec.count_by_rule()["exhaustive-local"] == 3
    assert {c.subjects for c in dec.constraints if c.rule == "exhaustive-local"} == {
        ("B", "C", "D")
    }
    assert _solution_set(bruteforce, dec) == _solution_set(bruteforce, model)
    narrowed = model.restricted({"A": 20})
    assert narrowed.param("A").domain == (20,) and narrowed.param("B").domain == ENCODING


def test_seeded_order_differs_but_set_is_the_same():
    model = listing3_model()
    base = [_key(s) for s in cp_backend.iter_solutions(model)]
    assert base == [_key(s) for s in cp_backend.iter_solutions(model)]  # deterministic
    orders = [[_key(s) for s in cp_backend.iter_solutions(model, seed=k)] for k in range(3)]
    assert orders[0] == [_key(s) for s in cp_backend.iter_solutions(model, seed=0)]
    for order in orders:
        assert len(order) == len(set(order)) and set(order) == set(base)
    assert any(order != base for order in orders)
    assert orders[0] != orders[1]


# --- edge cases -----------------------------------------------------------------------------


def test_zero_parameter_models():
    for constraints, expected in [
        ([], [{}]),
        ([Constraint("t", TRUE, "always")], [{}]),
        ([Constraint("f", FALSE, "never")], []),
    ]:
        model = Model([], constraints)
        for backend in BACKENDS:
            assert list(backend.iter_solutions(model)) == expected
            assert backend.count(model) == len(expected)


def test_constant_and_unary_constraints():
    ps = [Parameter("A", (1, 2, 3)), Parameter("B", (1, 2))]
    never = Model(ps, [Constraint("f", FALSE, "never")])
    empty = Model(ps, [Constraint("u", A > 5, "A is big")])
    for model in (never, empty):
        for backend in BACKENDS:
            assert list(backend.iter_solutions(model)) == []
            assert backend.count(model) == 0
    unary = Model(ps, [Constraint("u", In(A, [1, 3]), "odd A")])
    assert _assert_backends_agree(unary) == {_key({"A": a, "B": b}) for a in (1, 3) for b in (1, 2)}
    assert _assert_backends_agree(Model(ps, [])) == {
        _key({"A": a, "B": b}) for a in (1, 2, 3) for b in (1, 2)
    }


def test_parameter_and_model_errors():
    assert Parameter("A", (3, 1, 3, 2)).domain == (1, 2, 3)
    with pytest.raises(EmptyDomainError, match="'A'"):
        Parameter("A", ())
    with pytest.raises(TypeError):
        Parameter("A", (1, "x"))
    with pytest.raises(UnknownParameterError, match=r"C.*\[r\]"):
        Model([Parameter("A", (1,))], [Constraint("r", eq(A, C), "uses C")])
    with pytest.raises(ConstraintError, match="twice"):
        Model([Parameter("A", (1,)), Parameter("A", (2,))], [])
    with pytest.raises(TypeError):
        Constraint("r", A == B, "structural bool")
    model = listing3_model()
    with pytest.raises(UnknownParameterError):
        model.param("Z")
    with pytest.raises(InvalidAssignmentError, match="D"):
        model.violated({"A": 20, "B": 10, "C": 10})  # incomplete
    with pytest.raises(InvalidAssignmentError, match="domain"):
        model.violated({"A": 20, "B": 10, "C": 10, "D": 5})
    with pytest.raises(InvalidAssignmentError, match="Z"):
        model.violated({"A": 20, "B": 10, "C": 10, "D": 0, "Z": 1})
    with pytest.raises(InvalidAssignmentError, match="domain"):
        model.restricted({"A": 2})
    for backend in BACKENDS:
        with pytest.raises(InvalidAssignmentError):
            backend.count(model, fixed={"A": 2})
        with pytest.raises(InvalidAssignmentError):
            list(backend.iter_solutions(model, fixed={"Z": 0}))


# --- unsat cores ----------------------------------------------------------------------------


def _assert_minimal_unsat_core(model, fixed, core):
    """Checked with brute force: the core is unsatisfiable, each proper subset is not."""
    assert core and all(c in model.constraints for c in core)
    assert len(set(core)) == len(core)
    assert bruteforce.count(model.with_constraints(core), fixed=fixed) == 0
    for i in range(len(core)):
        rest = core[:i] + core[i + 1 :]
        assert bruteforce.count(model.with_constraints(rest), fixed=fixed) > 0


def test_unsat_core_is_minimal():
    ps = [Parameter(n, range(10)) for n in "ABC"]
    cs = [
        Constraint("big", A > 6, "A is big"),
        Constraint("noise", B < 9, "B is not 9"),
        Constraint("small", A < 8, "A is small"),
        Constraint("not7", ne(A, 7), "A is not 7"),
        Constraint("sum", eq(A + B, 12), "A + B is 12"),
        Constraint("also-small", A < 5, "A is smaller"),
    ]
    model = Model(ps, cs)
    core = z3_backend.unsat_core(model)
    _assert_minimal_unsat_core(model, None, core)
    # deterministic, preferring earlier constraints: {big, also-small} is another minimal core
    assert [c.rule for c in core] == ["big", "small", "not7"]
    assert all(z3_backend.unsat_core(model) == core for _ in range(3))
    reordered = model.with_constraints(cs[::-1])
    assert [c.rule for c in z3_backend.unsat_core(reordered)] == ["also-small", "big"]
    assert z3_backend.unsat_core(model.with_constraints(cs[:2])) == []
    assert z3_backend.explain_unsat(model.with_constraints(cs[:2])) is None


def test_unsat_core_with_fixed_values():
    model = listing3_model()
    fixed = {"A": 10, "B": 20}
    core = z3_backend.unsat_core(model, fixed)
    _assert_minimal_unsat_core(model, fixed, core)
    assert [c.rule for c in core] == ["local-hierarchy"]
    err = z3_backend.explain_unsat(model, fixed)
    assert isinstance(err, UnsatisfiableError) and err.core == core
    assert "A = 10, B = 20" in str(err) and "[local-hierarchy]" in str(err)
    assert z3_backend.unsat_core(model, {"A": 20}) == []


# --- random models --------------------------------------------------------------------------

NAMES = ("A", "B", "C", "D", "E")
VALUES = (-3, -1, 0, 1, 2, 5, 7, 10, 11, 12, 20, 21, 30, 32)


def _terms(names, values):
    params = st.sampled_from(names).map(Param)
    leaves = st.one_of(params, params, st.sampled_from(values), st.integers(-4, 32))

    def extend(children):
        return st.one_of(
            st.builds(BinOp, st.sampled_from(["+", "-", "*"]), children, children),
            st.builds(BinOp, st.sampled_from(["//", "%"]), children, st.integers(1, 11)),
        )

    # ints are coerced to Const by BinOp; a bare int is not a term
    return st.recursive(leaves, extend, max_leaves=4).filter(lambda t: not isinstance(t, int))


def _preds(names, values):
    """Random predicates; `values` (the domains' values) make comparisons often undecided."""
    terms = _terms(names, values)
    params = st.sampled_from(names).map(Param)
    ops = st.sampled_from(["==", "!=", "<", "<=", ">", ">="])
    vals = st.sampled_from(values)
    informative = [
        st.builds(Cmp, ops, terms, terms),
        st.builds(Cmp, ops, params, vals),
        st.builds(Cmp, ops, terms, vals),
        st.builds(Cmp, ops, params, params),
        st.builds(In, st.one_of(params, terms), st.lists(vals, max_size=6)),
    ]
    atoms = st.one_of(*informative, *informative, st.sampled_from([TRUE, FALSE]))

    def extend(children):
        return st.one_of(
            st.lists(children, min_size=1, max_size=3).map(lambda ps: And(*ps)),
            st.lists(children, min_size=1, max_size=3).map(lambda ps: Or(*ps)),
            children.map(Not),
            st.builds(Implies, children, children),
        )

    return st.recursive(atoms, extend, max_leaves=5)


@st.composite
def models(draw):
    """2-5 parameters with small domains (at most 243 points) and 1-4 random constraints."""
    n = draw(st.integers(2, 5))
    names = NAMES[:n]
    max_size = {2: 7, 3: 5, 4: 4, 5: 3}[n]
    params = [
        Parameter(name, draw(st.sets(st.sampled_from(VALUES), min_size=2, max_size=max_size)))
        for name in names
    ]
    values = sorted({v for p in params for v in p.domain})
    non_constant = _preds(names, values).filter(lambda p: p.params())
    preds = draw(st.lists(non_constant, min_size=1, max_size=4))
    rules = ("private-memory", "duplicate-scheduling", "fusion")
    constraints = [Constraint(rules[i % 3], p, f"random #{i}") for i, p in enumerate(preds)]
    return Model(params, constraints)


RANDOM = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@RANDOM
@given(models(), st.data())
def test_random_models_backends_agree(model, data):
    solutions = _assert_backends_agree(model)
    size = math.prod(len(p.domain) for p in model.parameters)
    assert len(solutions) <= size
    event("no solution" if not solutions else "all points" if len(solutions) == size else "some")
    name = data.draw(st.sampled_from(model.names))
    value = data.draw(st.sampled_from(model.param(name).domain))
    expected = {s for s in solutions if dict(s)[name] == value}
    assert _assert_backends_agree(model, {name: value}) == expected
    # the plain-Python check agrees with the solvers
    for s in list(solutions)[:5]:
        assert model.violated(dict(s)) == []
    # seeds: same set, no duplicates; with 2+ solutions some seed changes the order
    base = [_key(s) for s in cp_backend.iter_solutions(model)]
    seeded = [[_key(s) for s in cp_backend.iter_solutions(model, seed=k)] for k in range(24)]
    for order in seeded:
        assert len(order) == len(set(order)) and set(order) == solutions
    if len(solutions) >= 2:
        assert any(order != base for order in seeded)


@pytest.mark.slow
@RANDOM
@given(models(), st.data())
def test_random_unsat_cores_are_minimal(model, data):
    name = data.draw(st.sampled_from(model.names))
    fixed = data.draw(st.sampled_from([None, {name: model.param(name).domain[0]}]))
    core = z3_backend.unsat_core(model, fixed)
    if bruteforce.count(model, fixed=fixed) > 0:
        assert core == [] and z3_backend.explain_unsat(model, fixed) is None
    else:
        _assert_minimal_unsat_core(model, fixed, core)
        assert z3_backend.explain_unsat(model, fixed).core == core


# ------------------------------------------------------------------ counting by states


def test_counting_by_states_agrees_with_brute_force_on_listing3():
    from constraints.counting import count_solutions

    model = listing3_model()
    n = bruteforce.count(model)
    assert n > 0
    for order in ("ABCD", "DCBA", "BDAC"):
        assert count_solutions(model, order=tuple(order)) == n, order
    for name, value in (("A", 20), ("D", 0), ("B", 11)):
        fixed = {name: value}
        assert count_solutions(model.restricted(fixed)) == bruteforce.count(model, fixed=fixed)
    seen = []
    count_solutions(model, progress=lambda done, total, states: seen.append((done, total)))
    assert seen == [(k, 4) for k in range(1, 5)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models(), st.data())
def test_counting_by_states_agrees_with_brute_force_on_random_models(model, data):
    from constraints.counting import count_solutions

    order = data.draw(st.permutations(model.names))
    assert count_solutions(model, order=order) == bruteforce.count(model)


def test_counting_by_states_stops_at_its_limits_with_a_typed_error():
    from constraints import CountLimitError
    from constraints.counting import count_solutions

    model = Model([Parameter(n, range(8)) for n in "ABCD"],
                  [Constraint("r", ne(A + B + C + D, 5), "not five")])
    with pytest.raises(CountLimitError, match=r"after 1 of 4 parameters") as e:
        count_solutions(model, max_states=2)
    assert (e.value.done, e.value.total) == (1, 4) and e.value.states > 2
    with pytest.raises(CountLimitError, match=r"time limit \(1 s\).* of 4 maps"):
        count_solutions(model, timeout_s=1.0, started=-1e9, what="maps")
    with pytest.raises(InvalidAssignmentError, match="each parameter once"):
        count_solutions(model, order=("A", "B", "C"))
    with pytest.raises(InvalidAssignmentError, match="each parameter once"):
        count_solutions(model, order=("A", "B", "C", "C"))
