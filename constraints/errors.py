"""Errors raised by the constraint language, the model, the solvers and the tuning space.

:class:`ConstraintError` is the root of the package's errors; it derives from the library's
root, ``ir.errors.LiftmapError`` (the one import from ``ir``: ``constraints`` is otherwise
independent of the IR). The search space's errors derive from :class:`SpaceError`, which is
also a ``ValueError`` (as it always was).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Generic, TypeVar

from ir.errors import LiftmapError

# what an UnsatisfiableError's core holds: the constraints of the model (the model's
# ``Constraint``, which this module, below the model, does not import)
_C = TypeVar("_C")


class ConstraintError(LiftmapError):
    """Base class of every error raised by the `constraints` package."""


class UnknownParameterError(ConstraintError):
    """A constraint (or a compile request) mentions a parameter that is not declared."""


class EmptyDomainError(ConstraintError):
    """A parameter was declared with no possible value."""


class InvalidAssignmentError(ConstraintError):
    """An assignment (or a set of fixed values) is incomplete, names unknown parameters,
    or gives a parameter a value outside its domain."""


class CountLimitError(ConstraintError):
    """Counting (``constraints.counting.count_solutions``) stopped before the end (time
    limit or state limit): ``done`` of ``total`` parameters were counted through, with
    ``states`` partial states at the last level."""

    def __init__(self, message: str, *, done: int, total: int, states: int,
                 elapsed_s: float):
        super().__init__(message)
        self.done, self.total, self.states, self.elapsed_s = done, total, states, elapsed_s


class ConstraintTypeError(ConstraintError, TypeError):
    """A value of the wrong type where the constraint languages, the model or the search
    space need another: a predicate where a term is needed (or the reverse), a bool, a
    non-int constant, a name that is not a string, a restriction that is neither a string,
    a predicate nor a callable. The message names what was expected and what was given."""


class PredicateTruthError(ConstraintError, TypeError):
    """A predicate is used as a Python truth value (``if p``, ``p and q``, a chained
    comparison): combine predicates with And/Or/Not (``&``, ``|``, ``~``) instead."""


class MalformedExpressionError(ConstraintError, ValueError):
    """An expression node built by hand names an operator, comparison, sign or function the
    language does not have, or gives one the wrong number of operands."""


class DuplicateNameError(ConstraintError, ValueError):
    """A name that must be unique is given twice (a parameter of a model, a name of the
    positional arguments a predicate is compiled for)."""


class UnsatisfiableError(ConstraintError, Generic[_C]):
    """No assignment satisfies the model; `core` is a minimal set of conflicting constraints
    (``UnsatisfiableError[Constraint]``; each prints as a line of the message).

    The domains and the fixed values (`fixed`) are taken as given and are not part of `core`.
    """

    def __init__(
        self,
        core: Sequence[_C],
        fixed: Mapping[str, int] | None = None,
    ) -> None:
        self.core: list[_C] = list(core)
        self.fixed: dict[str, int] = dict(fixed or {})
        super().__init__(self._message())

    def _message(self) -> str:
        head = "no valid assignment"
        if self.fixed:
            head += " with " + ", ".join(f"{k} = {v}" for k, v in self.fixed.items())
        if not self.core:
            return head
        lines = [f"{head}; these {len(self.core)} constraint(s) cannot hold together:"]
        lines += [f"  {c}" for c in self.core]
        return "\n".join(lines)


# ----------------------------------------------------------------------------- search space


class SpaceError(ConstraintError, ValueError):
    """Base class of the errors raised by the tuning search space."""


class UnknownNameError(SpaceError):
    """A restriction (or a configuration) mentions a name that is not a parameter."""


class NotAPredicateError(SpaceError):
    """A restriction computes a number where a truth value is needed (``"a + b"``)."""


class RestrictionSyntaxError(SpaceError):
    """A restriction string is not valid Python or uses syntax outside the whitelist."""


class EmptyParameterDomainError(SpaceError):
    """A parameter was given no value."""


class EmptySpaceError(SpaceError):
    """The space has no valid configuration; the message explains which restriction emptied it."""


class RestrictionEvaluationError(SpaceError):
    """A callable restriction raised while being evaluated; the message names the restriction
    and the values it was given, ``__cause__`` is the original exception."""


class UnsupportedConstraintError(SpaceError):
    """A python-constraint constraint object that has no clear meaning as a restriction on
    complete configurations (a user-defined ``Constraint`` subclass, a malformed one)."""


class SpaceTooLargeError(SpaceError):
    """A group of dependent parameters has more valid rows than the space may materialise
    (``max_rows``), or ran out of memory while enumerating them."""


class LateRestrictionWarning(UserWarning):
    """A restriction depends on every parameter of a large space, so it can only be checked
    once all of them are bound: the whole Cartesian product is filtered row by row."""
