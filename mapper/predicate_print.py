"""A mapping predicate printed with code names: ``A != mapWrg(0)``, ``level(A) < mapLcl``,
``dim(A)``, several maps tested against the same codes read together (``none of A, B is
mapWrg(0)``). The form as built; :mod:`mapper.simplify` shortens a predicate first and
:mod:`mapper.text` prints constraint instances.

``level(A)`` is ``A/10`` (seq < mapLcl < mapWrg < mapGlb), ``dim(A)`` is ``A%10``.
"""

from __future__ import annotations

from constraints.expr import (
    And,
    BinOp,
    BoolConst,
    Cmp,
    Const,
    Implies,
    In,
    Not,
    Or,
    Param,
    Pred,
    Term,
)
from mapper.encoding import CODES, code_name

__all__ = ["grouped", "operand", "show_predicate"]

_LEVEL_NAMES = {0: "seq", 1: "mapLcl", 2: "mapWrg", 3: "mapGlb"}


def _term(t: Term) -> str:
    """``level(A)`` for ``A/10``, ``dim(A)`` for ``A%10``, else the term as printed."""
    if isinstance(t, BinOp) and isinstance(t.left, Param) and t.right == Const(10):
        if t.op == "//":
            return f"level({t.left.name})"
        if t.op == "%":
            return f"dim({t.left.name})"
    return str(t)


def _const(c: Const, other: Term) -> str:
    """A constant compared with ``other``: a code name next to a map, a level name next to
    ``level(map)``, else the number."""
    v = c.value
    if isinstance(v, int) and isinstance(other, Param) and v in CODES:
        return code_name(v)
    if isinstance(v, int) and isinstance(other, BinOp) and _term(other).startswith(
            "level(") and v in _LEVEL_NAMES:
        return _LEVEL_NAMES[v]
    return str(v)


def _in(p: In, word: str) -> str:
    vals = [_const(Const(v), p.term) if not isinstance(v, str) else repr(v) for v in p.values]
    return f"{_term(p.term)} {word} {{{', '.join(vals)}}}"


def show_predicate(p: Pred) -> str:
    """A mapping predicate with code names: ``A != mapWrg(0)``, ``level(A) < mapLcl``,
    ``B not in {mapSeq, fused}`` (as built; :func:`simplify` first for a short form)."""
    if isinstance(p, BoolConst):
        return str(p)
    if isinstance(p, Cmp):
        left = _const(p.left, p.right) if isinstance(p.left, Const) else _term(p.left)
        right = _const(p.right, p.left) if isinstance(p.right, Const) else _term(p.right)
        return f"{left} {p.op} {right}"
    if isinstance(p, In):
        return _in(p, "in")
    if isinstance(p, Not):
        if isinstance(p.arg, In):
            return _in(p.arg, "not in")
        return f"not ({show_predicate(p.arg)})"
    if isinstance(p, (And, Or)):
        word = " and " if isinstance(p, And) else " or "
        return word.join(grouped(p))
    if isinstance(p, Implies):
        return f"({show_predicate(p.lhs)}) => ({show_predicate(p.rhs)})"
    return str(p)


def _group_key(q: Pred, conj: bool) -> tuple[str, str] | None:
    """(map, what) when ``q`` tests one map against codes the way a group prints: in a
    conjunction ``A != c`` ("is c") or ``A not in S`` ("in S"), in a disjunction ``A == c``
    or ``A in S``."""
    if conj and isinstance(q, Not):
        q, conj = q.arg, False
        if not isinstance(q, In):
            return None
    elif isinstance(q, In) and conj:
        return None
    if isinstance(q, Cmp) and q.op == ("!=" if conj else "==") and isinstance(q.left, Param) \
            and isinstance(q.right, Const) and isinstance(q.right.value, int) \
            and q.right.value in CODES:
        return q.left.name, f"is {code_name(q.right.value)}"
    if isinstance(q, In) and isinstance(q.term, Param):
        return q.term.name, _in(q, "in").split(" ", 1)[1]
    return None


def grouped(p: And | Or) -> list[str]:
    """The texts of the parts of ``p``; several maps tested against the same codes read
    together: ``none of A, B is mapWrg(0)``, ``none of A, B in {...}`` (a conjunction of
    ``!=``, ``not in``), ``any of A, B is mapLcl(0)``, ``any of A, B in {...}`` (a
    disjunction of ``==``, ``in``)."""
    conj = isinstance(p, And)
    words = "none of" if conj else "any of"
    maps: dict[str, list[str]] = {}
    for q in p.parts:
        got = _group_key(q, conj)
        if got is not None:
            maps.setdefault(got[1], []).append(got[0])
    out: list[str] = []
    done: set[str] = set()
    for q in p.parts:
        got = _group_key(q, conj)
        if got is not None and len(maps[got[1]]) > 1:
            if got[1] not in done:
                done.add(got[1])
                out.append(f"{words} {', '.join(sorted(maps[got[1]]))} {got[1]}")
            continue
        out.append(operand(q))
    return out


def operand(q: Pred) -> str:
    """``q`` as a part of a conjunction or disjunction (in parentheses if compound)."""
    if isinstance(q, (And, Or)):
        items = grouped(q)
        text = (" and " if isinstance(q, And) else " or ").join(items)
        return text if len(items) == 1 else f"({text})"
    text = show_predicate(q)
    return f"({text})" if isinstance(q, Implies) else text
