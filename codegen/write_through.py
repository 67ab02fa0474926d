"""Destination passing through lambdas: which arguments of a lambda the lowering may leave
unevaluated (a :class:`Thunk`), so that their single use writes them directly into its
destination (through the output views of the layout primitives on the way).

:class:`codegen.builder.Builder` binds a lambda argument that needs a destination (it
computes) to a :class:`Thunk` when :func:`single_spine_use` holds for its parameter;
``LAYOUT`` is the set of layout primitives (they build views and emit nothing).
"""

from __future__ import annotations

from codegen.views import View
from ir import nodes
from ir.computes import computes
from ir.nodes import ExprNode, FunCall, Id, Lambda, Map, Param, Zip, walk

LAYOUT = (nodes.Split, nodes.Join, nodes.Transpose, nodes.Slide, nodes.Pad, nodes.ReorderStride,
          nodes.AsVector, nodes.AsScalar)


class Thunk:
    """A lambda argument kept unevaluated so its single use can write through a view."""

    __slots__ = ("expr", "env", "value", "consumed")

    def __init__(self, expr: ExprNode, env: dict):
        self.expr, self.env = expr, env
        self.value: View | None = None
        self.consumed = False


def single_spine_use(name: str, body: ExprNode) -> bool:
    """True when ``body`` uses the parameter ``name`` once, and only through views."""
    uses = sum(1 for n in walk(body) if isinstance(n, Param) and n.name == name)
    return uses == 1 and _on_spine(name, body)


def _on_spine(name: str, e: ExprNode) -> bool:
    """True when ``e`` writes the parameter ``name`` through views only (so its value can
    be written directly into ``e``'s destination)."""
    if isinstance(e, Param):
        return e.name == name
    if not isinstance(e, FunCall):
        return False
    f = e.f
    if isinstance(f, Zip):
        return any(_on_spine(name, a) for a in e.args)
    if isinstance(f, (*LAYOUT, Id)) or (isinstance(f, Map) and not computes(f.f)):
        return _on_spine(name, e.args[0])
    if isinstance(f, Lambda):
        for p, a in zip(f.params, e.args):
            if any(isinstance(n, Param) and n.name == name for n in walk(a)):
                return _on_spine(name, a) and single_spine_use(p.name, f.body)
    return False
