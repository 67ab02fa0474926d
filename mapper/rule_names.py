"""The names of the mapping rules and their kinds, as typed keys.

A rule's name is the key its constraints carry (``Constraint.rule``), that ``--rules``,
the REPL and the JSON outputs take, and that decides its kind: ``validity`` (the OpenCL
model: a mapping that breaks it is wrong) or ``heuristic`` (it prunes mappings that would
run correctly but are unlikely to be fast). The members are strings too (they compare,
hash, print and serialise as their value), so text read from a user or a store looks
them up (:meth:`RuleName.parse`); a misspelt name in the code is an ``AttributeError`` at
import, not a rule that silently matches nothing.
"""

from __future__ import annotations

from enum import Enum


class _Key(str, Enum):
    """A string-valued key: ``str()``, ``format()`` and JSON give its value."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class RuleKind(_Key):
    """What a rule guards: correctness, or speed."""

    VALIDITY = "validity"
    HEURISTIC = "heuristic"


class RuleName(_Key):
    """Every mapping rule (``mapper.rules.RULES`` has one entry each, in this order)."""

    PRIVATE_MEMORY = "private-memory"
    LOCAL_MEMORY = "local-memory"
    LOCAL_IN_GROUPS = "local-in-groups"
    DUPLICATE_SCHEDULING = "duplicate-scheduling"
    LOCAL_DIMENSIONALITY = "local-dimensionality"
    LOCAL_HIERARCHY = "local-hierarchy"
    LOCAL_IN_GROUP = "local-in-group"
    EXHAUSTIVE_INDEXING = "exhaustive-indexing"
    SHARED_DIMENSION = "shared-dimension"
    SEQUENTIAL_FUSION = "sequential-fusion"
    GLOBAL_XOR_GROUPS = "global-xor-groups"
    CROSS_THREAD_DEPENDENCY = "cross-thread-dependency"
    VECTOR_INNERMOST = "vector-innermost"
    VECTOR_LANES = "vector-lanes"

    @property
    def kind(self) -> RuleKind:
        """Whether the rule guards correctness or speed."""
        return RuleKind.HEURISTIC if self in _HEURISTICS else RuleKind.VALIDITY

    @classmethod
    def parse(cls, text: str) -> RuleName | None:
        """The rule named ``text`` (a plain string, from a user or a store); None where no
        rule has that name."""
        try:
            return cls(text)
        except ValueError:
            return None


_HEURISTICS = frozenset({RuleName.LOCAL_IN_GROUPS, RuleName.LOCAL_DIMENSIONALITY,
                         RuleName.LOCAL_IN_GROUP, RuleName.SEQUENTIAL_FUSION,
                         RuleName.GLOBAL_XOR_GROUPS})
