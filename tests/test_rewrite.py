"""Simplification rewrites keep the interpreter's result (hypothesis-generated programs)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ir import builders as B
from ir.interp import evaluate
from ir.nodes import FunCall, Id, Lambda, Literal, Map, walk
from ir.randprog import random_program, sizes_for
from ir.rewrite import simplify
from ir.typecheck import typecheck
from ir.types import Float

WRAPS = ("join-split", "transpose-transpose", "vector", "map-chain", "pad-zero", "map-id")


def wrap(body, kind: str, size: int):
    if kind == "join-split":
        return FunCall(B.join(), (FunCall(B.split(2), (body,)),))
    if kind == "transpose-transpose":
        sp = FunCall(B.split(2), (body,))
        tt = FunCall(B.transpose(), (FunCall(B.transpose(), (sp,)),))
        return FunCall(B.join(), (tt,))
    if kind == "vector":
        return FunCall(B.as_scalar(), (FunCall(B.as_vector(2), (body,)),))
    if kind == "map-chain":
        f = B.lam(lambda e: FunCall(B.add, (e, Literal(1.0, Float))))
        g = B.lam(lambda e: FunCall(B.mult, (e, Literal(3.0, Float))))
        return FunCall(B.map_(f), (FunCall(B.map_(g), (body,)),))
    if kind == "pad-zero":
        return FunCall(B.pad(0, 0), (body,))
    return FunCall(B.map_(Id()), (body,))


def work(p) -> int:
    """Maps plus layout calls: what the rewrites remove."""
    from ir.nodes import AsScalar, AsVector, Join, Map, Pad, Split, Transpose

    layout = (Join, Split, Transpose, AsVector, AsScalar, Pad)
    return sum(1 for n in walk(p) if isinstance(n, Map) or
               (isinstance(n, FunCall) and isinstance(n.f, layout)))


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.sampled_from(WRAPS), min_size=1, max_size=4))
def test_simplify_keeps_meaning(seed, wraps):
    p = random_program(seed, max_maps=4, memory=False)
    body = p.body
    for w in wraps:
        body = wrap(body, w, 2)
    q = Lambda(p.params, body)
    s = sizes_for(q)
    X = np.random.default_rng(seed).standard_normal(s["N"]).astype(np.float32)
    simple = simplify(q)
    typecheck(simple, s)
    np.testing.assert_allclose(evaluate(simple, {"X": X}, s), evaluate(q, {"X": X}, s),
                               rtol=1e-5, atol=1e-5)
    assert work(simple) < work(q)


def test_each_rule_fires():
    from ir.types import array

    X = B.param("X", array(Float, "N"))
    for kind in WRAPS:
        q = Lambda((X,), wrap(X, kind, 2))
        s = simplify(q)
        if kind == "map-chain":
            maps = [n for n in walk(s) if isinstance(n, Map)]
            assert len(maps) == 1, kind
        else:
            assert s.body == X, kind
