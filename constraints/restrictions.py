"""Restrictions of a tuning search space: predicates (typed or as text) and callables.

A restriction is a :class:`Restriction`: its text, the parameters it reads, its origin and
two compiled forms. Predicates (:mod:`constraints.predicates`) are the typed form: the
library builds them as data (``mapper.tuning.to_predicate``), and the user's restriction
strings are parsed into them. A restriction string is a Python expression over parameter
names, in the form auto-tuners use (``"32 <= block_size_x * block_size_y <= 1024"``).
Allowed syntax: int/float literals, parameter names, ``+ - * / // % **``, unary ``- +``,
comparisons (chained too), ``and``/``or``/``not``, parentheses and calls to ``min``, ``max``,
``abs``. The text is parsed with :mod:`ast` against that whitelist into a predicate, which is
compiled twice (:mod:`constraints.vectorise`):

* a scalar function (positional arguments in :attr:`Restriction.params` order) -> ``bool``;
* a numpy function over column arrays (same order) -> boolean array, where ``and``/``or``/
  ``not`` and chained comparisons become element-wise ``& | ~``.

Semantics of failures: a restriction whose evaluation raises (division or modulo by zero,
``0 ** -1``, a negative number to a fractional power, float overflow in ``**``) is *false*
for that configuration.  Short-circuiting is kept: ``b == 0 or a % b == 0`` is true for
``b == 0``.  The vectorised form reproduces this exactly with an error mask per
sub-expression.  It computes in int64/float64: integer results beyond 2**63 wrap (the scalar
form uses Python integers), which realistic tuning spaces never reach.

Callables (``fn`` or ``(fn, names)``) have no vectorised form; their "vector" function calls
``fn`` row by row (``np.frompyfunc``) on the original Python values.  An exception a callable
raises is an error, not a false result: it becomes :class:`RestrictionEvaluationError` naming
the restriction and the values (``MemoryError`` passes through).

Kernel Tuner's form, a callable of one argument that is not a parameter name
(``lambda p: p["block_size_x"] > 1``), is called with a configuration dict
(:func:`restriction_from_dict_callable`).  The keys it reads are taken from its source when
every use of the argument is ``p["name"]`` or ``p.get("name")`` with a constant string;
otherwise it reads all parameters.  A ``KeyError`` for a key that is not a parameter becomes
:class:`UnknownNameError`.

The errors are defined in :mod:`constraints.errors` and re-exported here.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from constraints.errors import (
    EmptyParameterDomainError,
    EmptySpaceError,
    LateRestrictionWarning,
    NotAPredicateError,
    RestrictionEvaluationError,
    RestrictionSyntaxError,
    SpaceError,
    SpaceTooLargeError,
    UnknownNameError,
)
from constraints.predicates import (
    TRUTH,
    Expression,
    name_hints,
    normalise,
    parse_predicate,
    unknown_name,
)
from constraints.vectorise import SCALAR_ERRORS, compile_scalar, compile_vector

__all__ = [
    "SpaceError",
    "UnknownNameError",
    "NotAPredicateError",
    "RestrictionSyntaxError",
    "EmptyParameterDomainError",
    "EmptySpaceError",
    "RestrictionEvaluationError",
    "SpaceTooLargeError",
    "LateRestrictionWarning",
    "Restriction",
    "parse_restriction",
    "restriction_from_predicate",
    "restriction_from_callable",
    "restriction_from_dict_callable",
]


@dataclass(frozen=True)
class Restriction:
    """One restriction: its text, the parameters it reads, where it comes from, both compiled
    forms.  ``scalar(*values)`` and ``vector(*columns)`` take arguments in ``params`` order.
    ``predicate`` is its typed form (None for a callable)."""

    source: str
    params: tuple[str, ...]
    origin: str
    scalar: Callable[..., bool]
    vector: Callable[..., np.ndarray]
    vectorised: bool = True
    takes_dict: bool = False
    """The underlying callable takes one configuration dict (Kernel Tuner's convention)."""
    keys_inferred: bool = False
    """For ``takes_dict``: ``params`` was read from the callable's source (else: all
    parameters, because the keys it reads are unknown)."""
    predicate: Expression | None = None

    def __call__(self, config: dict[str, Any]) -> bool:
        """Evaluate on a configuration (a mapping holding at least ``params``)."""
        return bool(self.scalar(*(config[p] for p in self.params)))

    def with_origin(self, origin: str) -> Restriction:
        """The same restriction with another origin string."""
        return replace(self, origin=origin)

    def __str__(self) -> str:
        return f"{self.source}  [{self.origin}]"


_unknown = unknown_name


def restriction_from_predicate(
    pred: Expression, names: Sequence[str], origin: str = "user", source: str | None = None
) -> Restriction:
    """Compile a predicate over the parameter ``names``; its text is ``source`` (the user's
    string it was parsed from) or the predicate printed.

    Raises :class:`NotAPredicateError` for a number and :class:`UnknownNameError` for a name
    that is not a parameter.
    """
    if not isinstance(pred, Expression):
        raise TypeError(f"a predicate (constraints.predicates.Expression) is needed, got {pred!r}")
    text = str(pred) if source is None else source
    if pred.kind != TRUTH:
        raise NotAPredicateError(
            f"restriction {text!r} is not a predicate: it computes a number; "
            f"write a comparison, e.g. '{text} > 0' or '{text} == 0'"
        )
    used = pred.names()
    known = set(names)
    for n in used:
        if n not in known:
            raise _unknown(text, n, list(names), max(text.find(n), 0) + 1)
    vector = compile_vector(pred, used)
    compiled: list[Callable[..., Any]] = []  # the scalar form is compiled on first use

    def scalar(*values: Any) -> bool:
        if not compiled:
            compiled.append(compile_scalar(pred, used, text))
        try:
            return bool(compiled[0](*values))
        except SCALAR_ERRORS:
            return False

    return Restriction(text, used, origin, scalar, vector, True, predicate=pred)


def parse_restriction(source: str, names: Sequence[str], origin: str = "user") -> Restriction:
    """Parse and compile a restriction string over the parameter ``names``.

    Raises :class:`RestrictionSyntaxError`, :class:`UnknownNameError` or
    :class:`NotAPredicateError` with the offending text and column.
    """
    pred = parse_predicate(source, names)
    return restriction_from_predicate(pred, names, origin, normalise(source))


def _short(values: dict[str, Any], limit: int = 300) -> str:
    text = repr(values)
    return text if len(text) <= limit else text[: limit - 5] + " ...}"


def _guarded(
    fn: Callable[..., Any], source: str, names: Sequence[str] | None
) -> Callable[..., bool]:
    """``bool(fn(...))`` whose exceptions (other than ``MemoryError``) become
    :class:`RestrictionEvaluationError` naming ``source`` and the values: ``names`` are the
    positional arguments' parameter names, None for a callable taking one configuration dict."""

    def call(*args: Any) -> bool:
        try:
            return bool(fn(*args))
        except (MemoryError, SpaceError):
            raise
        except Exception as e:
            values = args[0] if names is None else dict(zip(names, args, strict=True))
            raise RestrictionEvaluationError(
                f"restriction {source} raised {type(e).__name__}: {e} for configuration "
                f"{_short(values)}"
            ) from e

    return call


def restriction_from_callable(
    fn: Callable[..., Any],
    names: Sequence[str] | None,
    known: Sequence[str],
    origin: str = "user",
) -> Restriction:
    """Wrap a callable taking parameter values positionally (in ``names`` order).

    Without ``names`` they are the callable's parameter names (``inspect.signature``), except
    for Kernel Tuner's form: a callable of exactly one positional parameter whose name is not
    a parameter is called with a configuration dict (:func:`restriction_from_dict_callable`)
    -- unless its source uses that argument only as a number (``lambda q: q > 1``), which is
    an :class:`UnknownNameError` as before.  Evaluation is row by row; an exception raised by
    ``fn`` becomes :class:`RestrictionEvaluationError`.
    """
    if not callable(fn):
        raise TypeError(f"a callable is needed, got {type(fn).__name__}")
    label = getattr(fn, "__qualname__", None) or repr(fn)
    known_set = set(known)
    if names is None:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            raise SpaceError(
                f"callable {label}: cannot read its signature; pass (fn, names)"
            ) from None
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        if any(p.kind not in kinds for p in sig.parameters.values()):
            raise SpaceError(
                f"callable {label}: *args/**kwargs or keyword-only parameters; pass (fn, names)"
            )
        names = list(sig.parameters)
        if len(names) == 1 and names[0] not in known_set:
            found = _find_function_node(fn)
            if found is None or _argument_use(found[0], names[0])[1] != "number":
                return restriction_from_dict_callable(fn, known, origin)
            source = f"<callable {label}({names[0]})>"
            err = _unknown(source, names[0], list(known), 1)
            raise UnknownNameError(
                f"{err}\n(a callable of one argument that is not a parameter is called with a "
                f"configuration dict, Kernel Tuner's convention, but it uses {names[0]!r} as a "
                f"number)"
            )
    names = tuple(names)
    source = f"<callable {label}({', '.join(names)})>"
    for n in names:
        if n not in known_set:
            raise _unknown(source, n, list(known), 1)
    guarded = _guarded(fn, source, names)
    ufunc = np.frompyfunc(guarded, len(names), 1) if names else None

    def scalar(*values: Any) -> bool:
        return bool(guarded(*values))

    scalar.__wrapped_fn__ = fn  # type: ignore[attr-defined]  # for cache fingerprints

    def vector(*cols: Any) -> np.ndarray:
        if ufunc is None:
            return np.asarray(bool(guarded()))
        return np.asarray(ufunc(*cols), dtype=bool)

    return Restriction(source, names, origin, scalar, vector, False)


# ----------------------------------------------------------------------------- dict callables
# Kernel Tuner calls a restriction function with the configuration as a dict.  Which keys it
# reads is read from its source: the function's AST node is found in its file (linecache)
# from the positions of its bytecode, and every use of the argument must be ``p["name"]`` or
# ``p.get("name", ...)`` with a constant string; anything else means "all parameters".

_FunctionNode = ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef
_DYNAMIC = frozenset({"eval", "exec", "locals", "vars", "globals"})


@functools.lru_cache(maxsize=16)
def _parse_module(text: str) -> tuple[_FunctionNode, ...] | None:
    """The function-like nodes of a module's source, or None if it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    return tuple(n for n in ast.walk(tree) if isinstance(n, _FunctionNode))


def _node_args(node: _FunctionNode) -> list[str]:
    assert isinstance(node, _FunctionNode)
    a = node.args
    return [x.arg for x in [*a.posonlyargs, *a.args]]


def _find_function_node(fn: Callable[..., Any]) -> tuple[_FunctionNode, str] | None:
    """The AST node of a plain Python function or lambda and its module's text, or None when
    the source is unavailable or the node cannot be identified unambiguously."""
    if not inspect.isfunction(fn):
        return None
    code = fn.__code__
    try:
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (TypeError, OSError):
        return None
    lines = linecache.getlines(filename, fn.__globals__)
    if not lines:
        return None
    text = "".join(lines)
    nodes = _parse_module(text)
    if not nodes:
        return None
    args = list(code.co_varnames[: code.co_argcount])  # co_argcount counts positional-only
    is_lambda = fn.__name__ == "<lambda>"
    cands = [
        n
        for n in nodes
        if isinstance(n, ast.Lambda) == is_lambda
        and (is_lambda or getattr(n, "name", None) == fn.__name__)
        and _node_args(n) == args
    ]
    positions = getattr(code, "co_positions", None)
    if positions is not None:  # Python >= 3.11: the node spanning all instructions
        spans = [
            (l0, c0, l1, c1)
            for l0, l1, c0, c1 in positions()
            if None not in (l0, l1, c0, c1) and (l0, c0) != (l1, c1)
        ]
        if not spans:
            return None

        def end(n: _FunctionNode) -> tuple[int, int]:
            # ast.parse sets the end positions of every node
            assert n.end_lineno is not None and n.end_col_offset is not None
            return n.end_lineno, n.end_col_offset

        def contains(n: _FunctionNode) -> bool:
            start = (n.lineno, n.col_offset)
            stop = end(n)
            return all(start <= (l0, c0) and (l1, c1) <= stop for l0, c0, l1, c1 in spans)

        cands = [n for n in cands if contains(n)]
        if not cands:
            return None
        best = min(cands, key=lambda n: (end(n)[0] - n.lineno, end(n)[1]))
        return best, text
    first = code.co_firstlineno  # Python 3.10: by line; ambiguous means unknown
    cands = [
        n
        for n in cands
        if first == min([n.lineno, *(d.lineno for d in getattr(n, "decorator_list", []))])
    ]
    return (cands[0], text) if len(cands) == 1 else None


def _argument_use(node: ast.AST, arg: str) -> tuple[list[tuple[str, ast.AST]] | None, str]:
    """How a function's body uses its argument ``arg``: the constant keys it reads with
    their nodes (None when some use is not a constant key) and a verdict, ``"dict"``,
    ``"number"`` (only as an operand of arithmetic or an ordering/equality comparison) or
    ``"other"``."""
    assert isinstance(node, _FunctionNode)
    body = [node.body] if isinstance(node, ast.Lambda) else list(node.body)
    parent: dict[int, ast.AST] = {}
    inner: list[ast.AST] = []
    for b in body:
        for n in ast.walk(b):
            inner.append(n)
            for c in ast.iter_child_nodes(n):
                parent[id(c)] = n
    keys: list[tuple[str, ast.AST]] = []
    unknown = False
    numeric = dictlike = 0
    for n in inner:
        if isinstance(n, ast.arg) and n.arg == arg:
            unknown = True  # rebound in a nested scope
        elif isinstance(n, (ast.Global, ast.Nonlocal)) and arg in n.names:
            unknown = True
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _DYNAMIC:
            unknown = True
        if not (isinstance(n, ast.Name) and n.id == arg):
            continue
        up = parent.get(id(n))
        if not isinstance(n.ctx, ast.Load):
            unknown = True
        elif isinstance(up, ast.Subscript) and up.value is n:
            dictlike += 1
            k = up.slice
            if isinstance(up.ctx, ast.Load) and isinstance(k, ast.Constant):
                if isinstance(k.value, str):
                    keys.append((k.value, k))
                    continue
            unknown = True
        elif isinstance(up, ast.Attribute) and up.value is n:
            dictlike += 1
            call = parent.get(id(up))
            if (
                up.attr == "get"
                and isinstance(call, ast.Call)
                and call.func is up
                and 1 <= len(call.args) <= 2
                and not call.keywords
                and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[0].value, str)
            ):
                keys.append((call.args[0].value, call.args[0]))
                continue
            unknown = True
        elif isinstance(up, (ast.BinOp, ast.UnaryOp)):
            numeric += 1
            unknown = True
        elif isinstance(up, ast.Compare):
            ops = up.ops
            where = [up.left, *up.comparators].index(n)
            beside = [ops[i] for i in (where - 1, where) if 0 <= i < len(ops)]
            if any(isinstance(o, (ast.In, ast.NotIn, ast.Is, ast.IsNot)) for o in beside):
                dictlike += 1
            else:
                numeric += 1
            unknown = True
        else:
            unknown = True
    verdict = "number" if numeric and not dictlike else "dict" if dictlike else "other"
    return (None if unknown else keys), verdict


def _lambda_text(node: ast.AST, text: str, limit: int = 120) -> str | None:
    if not isinstance(node, ast.Lambda):
        return None
    seg = ast.get_source_segment(text, node)
    if not seg:
        return None
    seg = " ".join(seg.split())
    return seg if len(seg) <= limit else seg[: limit - 3] + "..."


def restriction_from_dict_callable(
    fn: Callable[..., Any], known: Sequence[str], origin: str = "user"
) -> Restriction:
    """Wrap a callable taking one configuration dict (Kernel Tuner's form,
    ``lambda p: p["block_size_x"] * p["block_size_y"] <= 1024``).

    Its :attr:`Restriction.params` are the keys read in its source (``p["name"]`` or
    ``p.get("name"...)`` with constant strings, when that is its only use of ``p``), else all
    of ``known``; a constant key that is not a parameter is an :class:`UnknownNameError`.
    The callable receives a dict of exactly those parameters.  At evaluation a ``KeyError``
    for a name that is not a parameter becomes :class:`UnknownNameError`; any other
    exception :class:`RestrictionEvaluationError`.
    """
    label = getattr(fn, "__qualname__", None) or repr(fn)
    try:
        arg = next(iter(inspect.signature(fn).parameters))
    except (TypeError, ValueError, StopIteration):
        arg = "p"
    found = _find_function_node(fn)
    keys: list[tuple[str, ast.AST]] | None = None
    text = None
    if found is not None:
        node, module = found
        keys = _argument_use(node, arg)[0]
        text = _lambda_text(node, module)
    source = f"<{text}>" if text else f"<callable {label}({arg})>"
    known = list(known)
    known_set = set(known)
    if keys is None:
        names = tuple(known)
    else:
        for k, _ in keys:
            if k not in known_set:
                raise _unknown_key(source, k, known)
        names = tuple(dict.fromkeys(k for k, _ in keys))
    guarded = _guarded(fn, source, None)

    def call(config: dict[str, Any]) -> bool:
        try:
            return guarded(config)
        except RestrictionEvaluationError as e:
            cause = e.__cause__
            if isinstance(cause, KeyError) and cause.args:
                k = cause.args[0]
                if isinstance(k, str) and k not in known_set:
                    raise _unknown_key(source, k, known) from None
            if keys is None and isinstance(cause, TypeError):
                raise RestrictionEvaluationError(
                    f"{e} (a callable of one argument that is not a parameter is called with "
                    f"a configuration dict, Kernel Tuner's convention; name its arguments after "
                    f"parameters to receive values)"
                ) from cause
            raise

    def scalar(*values: Any) -> bool:
        return bool(call(dict(zip(names, values, strict=True))))

    scalar.__wrapped_fn__ = fn  # type: ignore[attr-defined]  # for cache fingerprints
    ufunc = np.frompyfunc(scalar, len(names), 1) if names else None

    def vector(*cols: Any) -> np.ndarray:
        if ufunc is None:
            return np.asarray(scalar())
        return np.asarray(ufunc(*cols), dtype=bool)

    return Restriction(
        source,
        names,
        origin,
        scalar,
        vector,
        False,
        takes_dict=True,
        keys_inferred=keys is not None,
    )


def _unknown_key(source: str, name: str, known: Sequence[str]) -> UnknownNameError:
    hint, listed = name_hints(name, known)
    return UnknownNameError(
        f"restriction {source}: reads key {name!r}, which is not a parameter{hint} "
        f"(parameters: {listed})"
    )
