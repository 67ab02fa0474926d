"""Brute-force solver: the independent witness the other backends are checked against.

Every point of the product of the domains is evaluated with the predicates' plain-Python
:meth:`~constraints.expr.Node.evaluate`; no propagation, no compilation, no cleverness.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping

from constraints.model import Model

__all__ = ["iter_solutions", "count"]


def iter_solutions(
    model: Model, *, fixed: Mapping[str, int] | None = None
) -> Iterator[dict[str, int]]:
    """All satisfying assignments, in lexicographic order of the (sorted) domains."""
    if fixed:
        model = model.restricted(fixed)
    names = model.names
    for values in itertools.product(*(p.domain for p in model.parameters)):
        assignment = dict(zip(names, values, strict=True))
        if all(c.predicate.evaluate(assignment) for c in model.constraints):
            yield assignment


def count(model: Model, *, fixed: Mapping[str, int] | None = None) -> int:
    """Number of satisfying assignments."""
    return sum(1 for _ in iter_solutions(model, fixed=fixed))
