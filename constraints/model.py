"""Constraint models: integer parameters with finite domains and named rule constraints."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from constraints.errors import (
    ConstraintTypeError,
    DuplicateNameError,
    EmptyDomainError,
    InvalidAssignmentError,
    UnknownParameterError,
)
from constraints.expr import Pred, clauses

__all__ = ["Parameter", "Constraint", "Model"]


def _is_int(v: object) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


@dataclass(frozen=True)
class Parameter:
    """An integer parameter; `domain` is stored sorted, without duplicates, and is non-empty."""

    name: str
    domain: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConstraintTypeError(
                f"a parameter name must be a non-empty str, got {self.name!r}")
        values = list(self.domain)
        bad = [v for v in values if not _is_int(v)]
        if bad:
            raise ConstraintTypeError(
                f"domain of parameter {self.name!r} has non-int values {bad!r}")
        if not values:
            raise EmptyDomainError(f"parameter {self.name!r} has an empty domain")
        object.__setattr__(self, "domain", tuple(sorted({int(v) for v in values})))

    def __str__(self) -> str:
        return f"{self.name} in {{{', '.join(map(str, self.domain))}}}"


@dataclass(frozen=True)
class Constraint:
    """A predicate produced by a rule (e.g. ``private-memory``) about some `subjects` (maps).

    `formatter`, when given, is how the constraint prints (``str``): a layer above this
    one names its parameters' values its own way (``mapper.rules`` sets
    ``mapper.text.show_constraint``). It takes no part in comparisons, hashing or ``repr``.
    """

    rule: str
    predicate: Pred
    description: str
    subjects: tuple[str, ...] = ()
    formatter: Callable[[Constraint], str] | None = field(
        default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.predicate, Pred):
            raise ConstraintTypeError(
                f"constraint {self.rule!r}: predicate must be a Pred, got {self.predicate!r}"
            )
        object.__setattr__(self, "subjects", tuple(self.subjects))

    @property
    def params(self) -> frozenset[str]:
        """The parameters the predicate mentions."""
        return self.predicate.params()

    def holds(self, assignment: Mapping[str, int]) -> bool:
        """Whether the predicate is true under `assignment` (plain Python evaluation)."""
        return bool(self.predicate.evaluate(assignment))

    def __str__(self) -> str:
        if self.formatter is not None:
            return self.formatter(self)
        return f"[{self.rule}] {self.description}: {self.predicate}"


class Model:
    """Parameters (unique names) and constraints over them (only declared parameters)."""

    def __init__(self, parameters: Sequence[Parameter], constraints: Sequence[Constraint]):
        self.parameters: tuple[Parameter, ...] = tuple(parameters)
        self.constraints: tuple[Constraint, ...] = tuple(constraints)
        self._by_name: dict[str, Parameter] = {}
        for p in self.parameters:
            if not isinstance(p, Parameter):
                raise ConstraintTypeError(f"expected a Parameter, got {p!r}")
            if p.name in self._by_name:
                raise DuplicateNameError(f"parameter {p.name!r} is declared twice")
            self._by_name[p.name] = p
        for c in self.constraints:
            if not isinstance(c, Constraint):
                raise ConstraintTypeError(f"expected a Constraint, got {c!r}")
            unknown = c.params - self._by_name.keys()
            if unknown:
                raise UnknownParameterError(
                    f"undeclared parameter(s) {', '.join(sorted(unknown))} in constraint {c}"
                )

    @property
    def names(self) -> tuple[str, ...]:
        """Parameter names in declaration order."""
        return tuple(self._by_name)

    def param(self, name: str) -> Parameter:
        """The parameter called `name`."""
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownParameterError(f"no parameter named {name!r}") from None

    def count_by_rule(self) -> dict[str, int]:
        """Number of constraints per rule, in order of first appearance."""
        counts: dict[str, int] = {}
        for c in self.constraints:
            counts[c.rule] = counts.get(c.rule, 0) + 1
        return counts

    def check_assignment(self, assignment: Mapping[str, int], *, complete: bool) -> None:
        """Raise InvalidAssignmentError unless `assignment` names only declared parameters,
        gives each a value in its domain and, if `complete`, covers every parameter."""
        unknown = [k for k in assignment if k not in self._by_name]
        if unknown:
            raise InvalidAssignmentError(f"unknown parameter(s): {', '.join(map(str, unknown))}")
        if complete:
            missing = [n for n in self._by_name if n not in assignment]
            if missing:
                raise InvalidAssignmentError(f"no value for parameter(s): {', '.join(missing)}")
        for k, v in assignment.items():
            domain = self._by_name[k].domain
            if not _is_int(v) or v not in domain:
                raise InvalidAssignmentError(
                    f"value {v!r} of parameter {k!r} is not in its domain {{"
                    f"{', '.join(map(str, domain))}}}"
                )

    def violated(self, assignment: Mapping[str, int]) -> list[Constraint]:
        """The constraints a complete, in-domain `assignment` violates (in model order)."""
        self.check_assignment(assignment, complete=True)
        return [c for c in self.constraints if not c.holds(assignment)]

    def restricted(self, fixed: Mapping[str, int]) -> Model:
        """The same model with each parameter in `fixed` narrowed to its fixed value."""
        self.check_assignment(fixed, complete=False)
        params = [
            Parameter(p.name, (fixed[p.name],)) if p.name in fixed else p for p in self.parameters
        ]
        return Model(params, self.constraints)

    def decomposed(self) -> Model:
        """The same model with each constraint split into its clauses
        (:func:`~constraints.expr.clauses`: the top-level And's parts, an implication or
        disjunction of a conjunction distributed over it), each a constraint of the same
        rule, description and subjects; constraints that are TRUE disappear."""
        out: list[Constraint] = []
        for c in self.constraints:
            parts = clauses(c.predicate)
            if len(parts) == 1 and parts[0] is c.predicate:
                out.append(c)
            else:
                out.extend(Constraint(c.rule, p, c.description, c.subjects, c.formatter)
                           for p in parts)
        return Model(self.parameters, out)

    def with_constraints(self, constraints: Iterable[Constraint]) -> Model:
        """The same parameters with `constraints` instead of this model's constraints."""
        return Model(self.parameters, tuple(constraints))

    def __repr__(self) -> str:
        return f"Model({len(self.parameters)} parameters, {len(self.constraints)} constraints)"

    def __str__(self) -> str:
        lines = [f"parameters: {', '.join(str(p) for p in self.parameters) or '(none)'}"]
        lines += [str(c) for c in self.constraints]
        return "\n".join(lines)
