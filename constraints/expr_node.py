"""The base class of the constraint language's nodes (see :mod:`constraints.expr`).

A :class:`Node` is immutable, hashable and compared structurally (type and fields); it is
evaluated on an assignment and rendered as a Python expression (``_py``, which compiling a
predicate and :meth:`Node.to_python` use). The terms are in :mod:`constraints.expr_terms`,
the predicates in :mod:`constraints.expr_preds`.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

__all__ = ["Node"]


def _check_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an int, got {value!r} ({type(value).__name__})")
    return int(value)


# ---------------------------------------------------------------------------------------------
# Base node


class Node:
    """Immutable, hashable node compared structurally (type and fields)."""

    __slots__ = ("_hash", "_params")
    _fields: tuple[str, ...] = ()
    # the slots, set once (lazily) through object.__setattr__
    _hash: int
    _params: frozenset[str]

    def _key(self) -> tuple:
        return tuple(getattr(self, f) for f in self._fields)

    def _args(self) -> tuple:
        """Arguments that rebuild this node through its constructor (used for pickling)."""
        return self._key()

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(self) is not type(other):
            return NotImplemented if not isinstance(other, Node) else False
        return hash(self) == hash(other) and self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            h = hash((type(self).__name__, self._key()))
            object.__setattr__(self, "_hash", h)
            return h

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self):
        return (type(self), self._args())

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(repr(a) for a in self._args())})"

    def params(self) -> frozenset[str]:
        """Names of the parameters this node mentions."""
        try:
            return self._params
        except AttributeError:
            ps = self._compute_params()
            object.__setattr__(self, "_params", ps)
            return ps

    def _compute_params(self) -> frozenset[str]:
        return frozenset()

    # subclasses implement these
    def evaluate(self, assignment: Mapping[str, int]) -> int | bool:
        """Value of this node when each parameter takes its value in `assignment`."""
        raise NotImplementedError

    def to_python(self) -> str:
        """A Python expression over the parameter names, e.g. ``(A // 10 < 1) or (A != B)``."""
        return self._py(None)

    def _py(self, rename: Mapping[str, str] | None) -> str:
        raise NotImplementedError

    def _atomic_py(self) -> bool:
        """Whether `_py` output needs no parentheses when used as an operand."""
        return False


def _new(cls, **fields):
    obj = object.__new__(cls)
    for k, v in fields.items():
        object.__setattr__(obj, k, v)
    return obj


def _wrap_py(node: Node, rename: Mapping[str, str] | None) -> str:
    s = node._py(rename)
    return s if node._atomic_py() else f"({s})"

