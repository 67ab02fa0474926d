"""Destination passing through lambdas: which arguments of a lambda the lowering may leave
unevaluated (a :class:`Thunk`), so that their single use writes them directly into its
destination (through the output views of the layout primitives on the way).

:class:`codegen.builder.Builder` binds a lambda argument that needs a destination (it
computes) to a :class:`Thunk` when :func:`single_spine_use` holds for its parameter. The
analysis is a pass over node classes (:class:`_Spine`, dispatched by :mod:`ir.visitor`).
"""

from __future__ import annotations

from codegen.views import View
from ir import nodes
from ir.computes import computes
from ir.nodes import ExprNode, FunCall, FunDecl, Node, Param, walk
from ir.visitor import Dispatch


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
    return uses == 1 and _SPINE.on_spine(body, name)


class _Spine:
    """Whether an expression writes a parameter through views only (so the parameter's
    value can be written directly into the expression's destination): one method per
    node class."""

    pass_name = "write-through analysis"
    on_spine = Dispatch("on_spine", Node)  # on_spine(e, name): of an expression
    through = Dispatch("through", FunDecl)  # through(f, call, name): of a call of f

    def on_spine_param(self, e: nodes.Param, name: str) -> bool:
        return e.name == name

    def on_spine_fun_call(self, e: FunCall, name: str) -> bool:
        return self.through(e.f, e, name)

    def _never(self, node: Node, *args: object) -> bool:
        return False

    on_spine_literal = on_spine_fun_decl = _never

    def through_zip(self, f: nodes.Zip, call: FunCall, name: str) -> bool:
        return any(self.on_spine(a, name) for a in call.args)

    def _through_arg(self, f: FunDecl, call: FunCall, name: str) -> bool:
        """A function whose result is a view of its argument."""
        return self.on_spine(call.args[0], name)

    through_id = through_split = through_join = through_transpose = _through_arg
    through_slide = through_pad = through_reorder_stride = _through_arg
    through_as_vector = through_as_scalar = _through_arg

    def through_map(self, f: nodes.Map, call: FunCall, name: str) -> bool:
        return not computes(f.f) and self.on_spine(call.args[0], name)

    def through_lambda(self, f: nodes.Lambda, call: FunCall, name: str) -> bool:
        for p, a in zip(f.params, call.args):
            if any(isinstance(n, Param) and n.name == name for n in walk(a)):
                return self.on_spine(a, name) and single_spine_use(p.name, f.body)
        return False

    # functions that compute or select: their result is no view of the parameter
    through_user_fun = through_vectorize = through_reduce = through_to_mem = _never
    through_get = _never


_SPINE = _Spine()
