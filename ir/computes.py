"""The one definition of "a map that computes", shared by the mapper and the lowering.

A map computes when evaluating its function emits code: it contains a user function, a
vectorised user function, an ``id`` copy, a reduction or a memory annotation
(``toGlobal``/``toLocal``/``toPrivate``, which copies). Every other map (``map(transpose)``,
``map(split(4))``, ``map(\\x -> value(2.0, float))``) only rearranges or produces values
that the lowering folds into views: it generates no loop and is no mapping parameter.
"""

from __future__ import annotations

from ir.nodes import Id, Node, Reduce, ToMem, UserFun, Vectorize, walk

COMPUTING_NODES = (UserFun, Vectorize, Id, Reduce, ToMem)


def computes(node: Node) -> bool:
    """True when evaluating ``node`` (a function or an expression) emits code."""
    return any(isinstance(n, COMPUTING_NODES) for n in walk(node))
