"""Types, type inference, algorithmic constraints and type errors."""

import numpy as np
import pytest

import ir.builders as b
from ir.errors import ConstraintViolation, IRTypeError, UnboundParameterError
from ir.interp import evaluate
from ir.nodes import FunCall, Lambda, Map, maps_in
from ir.programs import cc22_listing1, cc22_listing3
from ir.sym import Var
from ir.typecheck import typecheck
from ir.types import ArrayType, Float, TupleType, VectorType, array


def rels(info):
    return {str(c.rel) for c in info.constraints}


def test_listing3_type_and_constraints():
    info = typecheck(cc22_listing3())
    assert info.type == array(Float, "N")
    r = rels(info)
    assert "N % s0 == 0" in r
    assert any("s1" in x and "%" in x for x in r)
    kinds = {c.kind for c in info.constraints}
    assert {"split", "positive"} <= kinds
    origins = [c.origin for c in info.constraints if c.kind == "split"]
    assert any(o.startswith("split(s0) at node") for o in origins)


def test_listing3_labels_and_uids():
    p = cc22_listing3()
    ms = maps_in(p)
    assert [m.label for m in ms] == ["A", "B", "C", "D"]
    assert len({m.uid for m in ms}) == 4
    m = ms[0]
    assert Map(m.f, m.kind, m.dim, m.label) == m  # equality ignores the uid
    assert Map(m.f, m.kind, m.dim, m.label).uid != m.uid


def test_listing1_types():
    info = typecheck(cc22_listing1())
    assert info.type == array(Float, "I", "J", "K")


def test_split_join_exact_division():
    X = b.param("X", array(Float, "N"))
    p = Lambda((X,), b.compose(b.join(), b.split("s"))(X))
    assert typecheck(p).type == array(Float, "N")  # (N/s)*s == N


def test_split_non_divisor_with_concrete_sizes():
    X = b.param("X", array(Float, "N"))
    p = Lambda((X,), b.split(4)(X))
    with pytest.raises(ConstraintViolation, match=r"split\(4\).*N % 4 == 0.*N=10"):
        typecheck(p, {"N": 10})
    typecheck(p, {"N": 12})


def test_zip_unequal_lengths():
    A, B = b.param("A", array(Float, 8)), b.param("B", array(Float, 9))
    with pytest.raises(IRTypeError, match="unequal lengths: 8 and 9"):
        typecheck(Lambda((A, B), b.zip_(A, B)))


def test_zip_symbolic_lengths_checked_with_sizes():
    A, B = b.param("A", array(Float, "N")), b.param("B", array(Float, "M"))
    p = Lambda((A, B), b.zip_(A, B))
    info = typecheck(p)
    assert "N == M" in rels(info) or "M == N" in rels(info)
    with pytest.raises(IRTypeError, match="unequal"):
        typecheck(p, {"N": 3, "M": 4})


def test_map_over_non_array():
    y = b.param("y", Float)
    with pytest.raises(IRTypeError, match="expects an array, got float"):
        typecheck(Lambda((y,), b.map_(b.lam(lambda e: FunCall(b.add, (e, e))))(y)))


def test_userfun_arity_and_type_mismatch():
    X = b.param("X", array(Float, "N"))
    with pytest.raises(IRTypeError, match="takes 2 argument"):
        typecheck(Lambda((X,), b.map_(b.lam(lambda e: FunCall(b.add, (e,))))(X)))
    Y = b.param("Y", array(Float, "N", "M"))
    with pytest.raises(IRTypeError, match=r"argument 1 \(a\) expects float, got \[float\]M"):
        typecheck(Lambda((Y,), b.map_(b.lam(lambda e: FunCall(b.add, (e, e))))(Y)))


def test_undeclared_parameter():
    X = b.param("X")
    with pytest.raises(UnboundParameterError, match="declare it"):
        typecheck(Lambda((X,), b.join()(X)))


def test_type_error_names_node_and_context():
    """The error carries the node (the CLI locates it in the source) and the expression
    around it, not internal node numbers."""
    X = b.param("X", array(Float, "N"))
    with pytest.raises(IRTypeError) as e:
        typecheck(Lambda((X,), b.join()(X)))
    assert e.value.node is not None and "in: join $ X" in str(e.value)
    assert "(node" not in str(e.value)


def test_slide_strict_and_vector_types():
    X = b.param("X", array(Float, "N"))
    info = typecheck(Lambda((X,), b.slide(3, "st", strict=True)(X)))
    assert "(N - 3) % st == 0" in rels(info) or any("st" in r and "%" in r for r in rels(info))
    info = typecheck(Lambda((X,), b.as_vector(4)(X)))
    assert info.type == ArrayType(VectorType(Float, 4), Var("N") / 4)
    info = typecheck(Lambda((X,), b.compose(b.as_scalar(), b.as_vector("v"))(X)))
    assert info.type == array(Float, "N")


def test_reduce_type_and_mismatch():
    X = b.param("X", array(Float, "N"))
    from ir.builders import lit

    p = Lambda((X,), FunCall(b.reduce_(b.add), (lit(0.0), X)))
    assert typecheck(p).type == array(Float, 1)
    bad = Lambda((X,), FunCall(b.reduce_(b.add), (X, X)))
    with pytest.raises(IRTypeError):
        typecheck(bad)


def test_transpose_pad_tuple_types():
    X = b.param("X", array(Float, "N", "M"))
    assert typecheck(Lambda((X,), b.transpose()(X))).type == array(Float, "M", "N")
    assert typecheck(Lambda((X,), b.pad(1, 2)(X))).type == ArrayType(array(Float, "M"),
                                                                  Var("N") + 3)
    A = b.param("A", array(Float, "N"))
    assert typecheck(Lambda((A,), b.zip_(A, A))).type == ArrayType(TupleType((Float, Float)),
                                                                Var("N"))


def test_map_kinds_validated():
    with pytest.raises(ValueError, match="dimension"):
        Map(b.add, "mapGlb", None)
    with pytest.raises(ValueError, match="label"):
        Map(b.add, "map", None, "Seqx")


# ---------------------------------------------------------------- interpreter basics


def test_interp_listing3_matches_numpy():
    rng = np.random.default_rng(0)
    X = rng.standard_normal(48).astype(np.float32)
    out = evaluate(cc22_listing3(), {"X": X, "y": 3.0, "z": -1.0}, {"s0": 12, "s1": 4})
    np.testing.assert_allclose(out, X * 3 - 1, rtol=1e-6)


def test_interp_listing1_matches_numpy():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    out = evaluate(cc22_listing1(), {"input": x})
    np.testing.assert_allclose(out, (x * 2 + 1) ** 2, rtol=1e-5)


def test_interp_rejects_bad_sizes():
    X = np.zeros(10, np.float32)
    with pytest.raises(ConstraintViolation):
        evaluate(cc22_listing3(), {"X": X, "y": 1.0, "z": 1.0}, {"s0": 4, "s1": 2})


def test_interp_reduce_slide_pad_transpose():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    A = b.param("A", array(Float, "N", "M"))
    total = b.lam(lambda r: FunCall(b.reduce_(b.add), (b.lit(0.0), r)))
    p = Lambda((A,), b.compose(b.join(), b.map_(total))(b.transpose()(A)))
    np.testing.assert_allclose(evaluate(p, {"A": a}), a.sum(0), rtol=1e-5)
    p = Lambda((A,), b.map_(b.slide(3, 2))(b.pad(1, 1)(A)))
    ref = np.pad(a, ((1, 1), (0, 0)))
    got = evaluate(p, {"A": a})
    assert got.shape == (7, 3, 3)
    np.testing.assert_array_equal(got[2, 1], ref[2, 2:5])


def test_interp_mult_vectors():
    A = b.param("A", array(Float, "N"))
    from ir.builders import dot

    p = Lambda((A,), b.map_(b.lam(lambda v: FunCall(dot, (v, v))))(b.as_vector(4)(A)))
    a = np.arange(8, dtype=np.float32)
    np.testing.assert_allclose(evaluate(p, {"A": a}), [14, 126])
    assert typecheck(p).type == array(Float, Var("N") / 4)
