"""One dispatch over IR node classes, for every pass that treats node classes differently.

A pass is a class with one method per node class, named ``<prefix>_<snake name of the
class>`` (``eval_fun_call`` for ``FunCall``, ``apply_reorder_stride`` for
``ReorderStride``), in the style of pymbolic's and loopy's mappers. A :class:`Dispatch`
attribute is the entry point that picks the method::

    class Interpreter:
        expr = Dispatch("eval", Node)        # self.expr(e, env, b) calls self.eval_param(e, env, b)
        apply = Dispatch("apply", FunDecl)   # self.apply(f, ...) calls self.apply_map(f, ...)

The method is looked up along the node class's MRO (``eval_fun_decl`` handles every
function declaration that has no method of its own), once per (pass class, node class),
and cached. A node that no method handles raises :class:`UnhandledNodeError`, naming the
pass and the node class. :func:`dispatches` lists every dispatch defined so far and
:func:`unhandled` the node classes one of them misses, so a test can require that every
pass handles every node class of ``ir.nodes``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ir.errors import IRError

__all__ = ["Dispatch", "UnhandledNodeError", "dispatches", "snake_name", "unhandled"]

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def snake_name(cls: type) -> str:
    """``ReorderStride`` -> ``reorder_stride`` (the method suffix for a node class)."""
    return _CAMEL.sub("_", cls.__name__).lower()


class UnhandledNodeError(IRError):
    """A pass was given a node of a class it has no method for."""

    def __init__(self, pass_name: str, method: str, node_class: type):
        self.pass_name, self.method, self.node_class = pass_name, method, node_class
        super().__init__(
            f"the {pass_name} does not handle {node_class.__name__} nodes (no method "
            f"{method} nor one for a base class of {node_class.__name__})")


_DISPATCHES: list[Dispatch] = []


class Dispatch:
    """A pass's entry point: calls the pass's method for the class of the node given.

    ``prefix`` names the methods (``<prefix>_<snake name>``); ``root`` is the class of
    the nodes the entry point is meant for (what :func:`unhandled` checks). Set as a class
    attribute, it puts its entry function there (``entry(self, node, *args)``, with this
    object as its ``dispatch``). The pass may set ``pass_name`` (a class attribute) for
    error messages; else its class name is used.
    """

    def __init__(self, prefix: str, root: type = object):
        self.prefix = prefix
        self.root = root
        self.owner: type | None = None
        self.name = ""
        self._cache: dict[tuple[type, type], Callable[..., Any]] = {}

    def __set_name__(self, owner: type, name: str) -> None:
        # The class gets a plain function in place of this object: calls bind as fast as
        # a method's (no __get__ per call); the function's ``dispatch`` is this object.
        self.owner, self.name = owner, name
        _DISPATCHES.append(self)
        cache = self._cache
        resolve = self._resolve_cached

        def entry(obj: object, node: object, /, *args: Any, **kwargs: Any) -> Any:
            try:
                fn = cache[type(obj), type(node)]
            except KeyError:
                fn = resolve(type(obj), type(node))
            return fn(obj, node, *args, **kwargs)

        entry.__name__ = name
        entry.__qualname__ = f"{owner.__qualname__}.{name}"
        entry.__doc__ = f"Calls the method ``{self.prefix}_<snake name>`` for the node's class."
        # an attribute on a function object, which the checker does not model
        entry.dispatch = self  # type: ignore[attr-defined]
        setattr(owner, name, entry)

    if TYPE_CHECKING:  # what the class attribute is once the class exists
        def __get__(self, obj: object, objtype: type | None = None) -> Callable[..., Any]: ...

    def method_for(self, pass_class: type, node_class: type) -> Callable[..., Any] | None:
        """The method of ``pass_class`` that handles ``node_class`` (None if there is none)."""
        for klass in node_class.__mro__:
            fn = getattr(pass_class, f"{self.prefix}_{snake_name(klass)}", None)
            if fn is not None:
                return fn
        return None

    def pass_name(self, pass_class: type) -> str:
        return getattr(pass_class, "pass_name", pass_class.__name__)

    def _resolve_cached(self, pass_class: type, node_class: type) -> Callable[..., Any]:
        fn = self.method_for(pass_class, node_class)
        if fn is None:
            raise UnhandledNodeError(self.pass_name(pass_class),
                                     f"{self.prefix}_{snake_name(node_class)}", node_class)
        self._cache[pass_class, node_class] = fn
        return fn

    def __repr__(self) -> str:
        owner = self.owner.__qualname__ if self.owner else "?"
        return f"<Dispatch {owner}.{self.name}: {self.prefix}_* over {self.root.__name__}>"


def dispatches() -> list[Dispatch]:
    """Every dispatch defined in the modules imported so far."""
    return list(_DISPATCHES)


def unhandled(dispatch: Dispatch, node_classes: list[type]) -> list[type]:
    """The classes among ``node_classes`` (those under the dispatch's root) that its pass
    has no method for."""
    owner = dispatch.owner
    assert owner is not None, "a Dispatch is used as a class attribute"
    return [c for c in node_classes
            if issubclass(c, dispatch.root) and dispatch.method_for(owner, c) is None]
