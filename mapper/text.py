"""One text form for mapping predicates and constraint instances.

A constraint instance prints as ``[validity rule R] description: predicate``
(:func:`show_constraint`), the predicate with code names (:mod:`mapper.predicate_print`)
after a sound simplification over the finite domains of the map codes
(:mod:`mapper.simplify`), abridged when even simplified it is long
(:func:`show_predicate_short`, :func:`abridge`). What a full mapping does that an instance
forbids is :mod:`mapper.violations`.
"""

from __future__ import annotations

from constraints.expr import And, Or, Pred
from constraints.model import Constraint
from mapper.predicate_print import grouped, operand, show_predicate
from mapper.rule_names import RuleKind, RuleName
from mapper.simplify import Domains, simplify

__all__ = [
    "SHOW_LIMIT",
    "abridge",
    "rule_head",
    "show_constraint",
    "show_predicate_short",
]

SHOW_LIMIT = 280
"""Characters of predicate :func:`show_constraint` prints in full, a longer one abridged
to about this length: three 100-column lines, which every simplified instance of the
examples fits but those of the rules about data exchanged between sibling maps
(cross-thread-dependency, local-memory: 500 to 1,800 characters even simplified)."""


def abridge(p: Pred, budget: int, depth: int = 0) -> str:
    """``p`` in at most about ``budget`` characters: the parts of a long conjunction or
    disjunction that fit (the shorter first, shown in their order; at the top, a long
    compound part abridged in its share of the room), then ``…`` for the rest; ``…``
    alone when nothing fits."""
    full = show_predicate(p)
    if len(full) <= budget:
        return full
    if not isinstance(p, (And, Or)):
        return "…"
    sep = " and " if isinstance(p, And) else " or "
    items = _items(p)
    order = sorted(range(len(items)), key=lambda i: len(items[i][0]))
    shown: dict[int, str] = {}
    left = budget - len(sep) - 1  # room for the final "…"
    for n, i in enumerate(order):
        text, q = items[i]
        if len(text) + len(sep) <= left:
            shown[i] = text
        elif q is not None and depth < 2:  # abridged within its share of what is left
            share = left if n == len(order) - 1 else left // (len(order) - n)
            inner = abridge(q, share - len(sep) - 2, depth + 1)
            if inner != "…":
                shown[i] = f"({inner})"
        if i in shown:
            left -= len(shown[i]) + len(sep)
    if not shown:
        return "…"
    parts = [shown[i] for i in sorted(shown)]
    if len(shown) < len(items):
        parts.append("…")
    return sep.join(parts)


def _items(p: And | Or) -> list[tuple[str, Pred | None]]:
    """The parts of ``p`` as printed (:func:`grouped`), each with its predicate when it is
    a compound part (None for a test or a group of tests)."""
    texts = grouped(p)
    compound = [q for q in p.parts if isinstance(q, (And, Or))]
    out: list[tuple[str, Pred | None]] = []
    for t in texts:
        q = next((q for q in compound if operand(q) == t), None)
        out.append((t, q))
    return out


def rule_head(c: Constraint) -> str:
    """``[validity rule private-memory]``, ``[heuristic local-in-group]``, or ``[name]``
    for a rule this package does not have."""
    rule = RuleName.parse(c.rule)
    if rule is None:
        return f"[{c.rule}]"
    return f"[{'validity rule' if rule.kind is RuleKind.VALIDITY else 'heuristic'} {c.rule}]"


def show_predicate_short(p: Pred, limit: int = SHOW_LIMIT,
                         domains: Domains | None = None) -> str:
    """``p`` simplified (:func:`simplify`) with code names, abridged to about ``limit``
    characters when it is longer, saying so: ``... (abridged from 1,182 characters)``."""
    text = show_predicate(simplify(p, domains))
    if len(text) <= limit:
        return text
    return f"{abridge(simplify(p, domains), limit)} (abridged from {len(text):,} characters)"


def show_constraint(c: Constraint, limit: int = SHOW_LIMIT,
                    domains: Domains | None = None) -> str:
    """``[validity rule R] description: predicate`` (``[heuristic R] ...`` for a
    heuristic rule), the predicate simplified, with code names, abridged past ``limit``
    characters (see :func:`show_predicate_short`)."""
    return f"{rule_head(c)} {c.description}: {show_predicate_short(c.predicate, limit, domains)}"
