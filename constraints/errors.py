"""Errors raised by the constraint language, the model and the solvers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from constraints.model import Constraint


class ConstraintError(Exception):
    """Base class of every error raised by the `constraints` package."""


class UnknownParameterError(ConstraintError):
    """A constraint (or a compile request) mentions a parameter that is not declared."""


class EmptyDomainError(ConstraintError):
    """A parameter was declared with no possible value."""


class InvalidAssignmentError(ConstraintError):
    """An assignment (or a set of fixed values) is incomplete, names unknown parameters,
    or gives a parameter a value outside its domain."""


class UnsatisfiableError(ConstraintError):
    """No assignment satisfies the model; `core` is a minimal set of conflicting constraints.

    The domains and the fixed values (`fixed`) are taken as given and are not part of `core`.
    """

    def __init__(
        self,
        core: Sequence[Constraint],
        fixed: Mapping[str, int] | None = None,
    ) -> None:
        self.core: list[Constraint] = list(core)
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
