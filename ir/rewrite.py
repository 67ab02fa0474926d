"""Semantics-preserving simplifications: pure functions from program to program.

Each rule is a named value with a description; ``simplify`` applies them bottom-up until
nothing changes. They are the algebra of the layout primitives (LIFT's simplification
rules), so the interpreter must give the same result before and after (tested).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ir.nodes import (
    AsScalar,
    AsVector,
    FunCall,
    Id,
    Join,
    Lambda,
    Map,
    Node,
    Pad,
    Split,
    Transpose,
    rebuild,
)


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    apply: Callable[[Node], Node | None]


def _call_of(n: Node, cls) -> FunCall | None:
    return n if isinstance(n, FunCall) and isinstance(n.f, cls) and len(n.args) == 1 else None


def _cancelling(outer_cls, inner_cls) -> Callable[[Node], Node | None]:
    """The rule ``outer o inner`` -> the identity: ``outer(inner(x))`` becomes ``x``."""

    def apply(n: Node):
        outer = _call_of(n, outer_cls)
        inner = _call_of(outer.args[0], inner_cls) if outer else None
        return inner.args[0] if inner else None

    return apply


def _map_id(n: Node):
    call = _call_of(n, Map)
    if call and isinstance(call.f, Map) and isinstance(call.f.f, Id):
        return call.args[0]
    return None


def _pad_zero(n: Node):
    call = _call_of(n, Pad)
    if call and isinstance(call.f, Pad) and call.f.left.is_const and call.f.right.is_const and \
            call.f.left.as_int() == 0 and call.f.right.as_int() == 0:
        return call.args[0]
    return None


def _map_fusion(n: Node):
    """``map(f)(map(g)(x))`` -> ``map(\\y -> f(g(y)))(x)`` for plain maps (keeps f's label)."""
    outer = _call_of(n, Map)
    inner = _call_of(outer.args[0], Map) if outer else None
    if not inner:
        return None
    assert outer is not None  # inner is only found inside outer
    fo, fi = outer.f, inner.f
    assert isinstance(fo, Map) and isinstance(fi, Map)  # as _call_of checked
    if fo.kind != "map" or fi.kind != "map":
        return None
    from ir.builders import fresh

    y = fresh("y")
    body = FunCall(fo.f, (FunCall(fi.f, (y,)),))
    return FunCall(Map(Lambda((y,), body), "map", None, fo.label, uid=fo.uid), inner.args)


RULES: tuple[Rule, ...] = (
    Rule("join-split", "join o split(n) is the identity", _cancelling(Join, Split)),
    Rule("transpose-transpose", "transpose o transpose is the identity",
         _cancelling(Transpose, Transpose)),
    Rule("asScalar-asVector", "asScalar o asVector(v) is the identity",
         _cancelling(AsScalar, AsVector)),
    Rule("map-id", "map(id) is the identity", _map_id),
    Rule("pad-zero", "pad(0, 0) is the identity", _pad_zero),
    Rule("map-fusion", "map(f) o map(g) is map(f o g)", _map_fusion),
)


def simplify(program: Node, rules: tuple[Rule, ...] = RULES, max_rounds: int = 50) -> Node:
    """Apply ``rules`` bottom-up until a fixed point (or ``max_rounds``)."""

    def step(n: Node):
        for r in rules:
            out = r.apply(n)
            if out is not None:
                return out
        return None

    for _ in range(max_rounds):
        new = rebuild(program, step)
        if new is program:
            return program
        program = new
    return program
