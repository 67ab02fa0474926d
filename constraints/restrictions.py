"""Restrictions of a tuning search space: predicates (typed or as text) and callables.

A restriction is a :class:`Restriction`: its text, the parameters it reads, its origin and
two compiled forms. Predicates (:mod:`constraints.predicates`) are the typed form: the
library builds them as data (``mapper.tuning.to_predicate``), and the user's restriction
strings are parsed into them. A restriction string is a Python expression over parameter
names, in the form auto-tuners use (``"32 <= block_size_x * block_size_y <= 1024"``).
Allowed syntax: int/float/string literals, parameter names, ``+ - * / // % **``, unary
``- +``, comparisons (chained too), ``in``/``not in`` a literal list
(``"block_size_x in [32, 64, 128]"``), ``and``/``or``/``not``, parentheses and calls to
``min``, ``max``, ``abs``. String-valued parameters and string literals can be compared
(``"precision == 'float' or block_size_x <= 64"``), not computed with; a parameter taking
only ``True``/``False`` or ``0``/``1`` stands as a truth value (``"use_shmem or
block_size_x >= 64"``), as in Python and Kernel Tuner. The text is parsed with :mod:`ast`
against that whitelist into a predicate, which is compiled twice (:mod:`constraints.vectorise`):

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

python-constraint's constraint objects, which Kernel Tuner passes to its solver
(``MaxProdConstraint(256)``: bare on all parameters, or ``(constraint, names)``), are
converted into predicates where the class has a clear meaning, else refused with
:class:`UnsupportedConstraintError` (:func:`restriction_from_constraint`).

The errors are defined in :mod:`constraints.errors` and re-exported here.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from constraints.errors import (
    ConstraintTypeError,
    EmptyParameterDomainError,
    EmptySpaceError,
    LateRestrictionWarning,
    NotAPredicateError,
    RestrictionEvaluationError,
    RestrictionSyntaxError,
    SpaceError,
    SpaceTooLargeError,
    UnknownNameError,
    UnsupportedConstraintError,
)
from constraints.expr import (
    SCALAR_ERRORS,
    TRUE,
    And,
    BinOp,
    Cmp,
    Const,
    In,
    Node,
    Not,
    Param,
    Pred,
)
from constraints.predicates import (
    name_hints,
    normalise,
    parse_predicate,
    unknown_name,
)
from constraints.scalar import compile_scalar
from constraints.vectorise import compile_vector

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
    "restriction_from_constraint",
    "is_python_constraint",
    "UnsupportedConstraintError",
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
    predicate: Pred | None = None

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
    pred: Node, names: Sequence[str], origin: str = "user", source: str | None = None
) -> Restriction:
    """Compile a predicate over the parameter ``names``; its text is ``source`` (the user's
    string it was parsed from) or the predicate printed.

    Raises :class:`NotAPredicateError` for a number and :class:`UnknownNameError` for a name
    that is not a parameter.
    """
    if not isinstance(pred, Node):
        raise ConstraintTypeError(
            f"a predicate (constraints.expr.Pred) is needed, got {pred!r}")
    text = pred.to_python() if source is None else source
    if not isinstance(pred, Pred):
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


def parse_restriction(
    source: str,
    names: Sequence[str],
    origin: str = "user",
    kinds: Mapping[str, str] | None = None,
) -> Restriction:
    """Parse and compile a restriction string over the parameter ``names``, whose value
    kinds are ``kinds`` (``constraints.predicates.value_kinds``; without them every
    parameter is a number).

    Raises :class:`RestrictionSyntaxError`, :class:`UnknownNameError` or
    :class:`NotAPredicateError` with the offending text and column.
    """
    pred = parse_predicate(source, names, kinds)
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
        raise ConstraintTypeError(f"a callable is needed, got {type(fn).__name__}")
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


# ----------------------------------------------------------------------------- python-constraint
# Kernel Tuner passes python-constraint's constraint objects (``MaxProdConstraint(256)``)
# through to its solver: bare, they apply to all parameters in declaration order (Kernel
# Tuner adds them without variables); python-constraint's ``(constraint, variables)`` pair
# names them.  Each class with a clear meaning on a complete configuration is converted into
# a predicate (or, for ``SomeInSet``/``SomeNotInSet``, a callable); python-constraint rounds
# float sums and products to 10 decimals, which these predicates do not.

_PC_CMP = {"Max": "<=", "Min": ">=", "Exact": "=="}


def is_python_constraint(obj: object) -> bool:
    """Whether ``obj`` is a python-constraint ``Constraint`` object."""
    return any(
        c.__name__ == "Constraint" and c.__module__.startswith("constraint")
        for c in type(obj).__mro__
    )


def restriction_from_constraint(
    obj: Any,
    names: Sequence[str] | None,
    known: Sequence[str],
    origin: str = "user",
    kinds: Mapping[str, str] | None = None,
) -> Restriction:
    """Convert a python-constraint constraint object on the parameters ``names`` (None: all
    of ``known``, in order, as Kernel Tuner applies a bare one) into a :class:`Restriction`.

    Converted: ``Max/Min/ExactSumConstraint`` (with multipliers), ``Max/Min/ExactProd
    Constraint``, their ``Variable...`` forms, ``AllDifferent``/``AllEqualConstraint``,
    ``InSet``/``NotInSetConstraint``, ``SomeInSet``/``SomeNotInSetConstraint``,
    ``FunctionConstraint`` (its function) and ``CompilableFunctionConstraint`` (its string).
    Anything else raises :class:`UnsupportedConstraintError`, which says what to write
    instead; a name that is not a parameter raises :class:`UnknownNameError`.
    """
    cls = type(obj).__name__
    variables = list(known) if names is None else list(names)
    label = f"{cls} on ({', '.join(variables)})"

    def refuse(why: str) -> UnsupportedConstraintError:
        return UnsupportedConstraintError(
            f"restriction {label}: {why}; write it as a restriction string (e.g. "
            f"'block_size_x * block_size_y <= 1024') or a function of the parameters it reads"
        )

    def check(vs: Sequence[Any]) -> None:
        for v in vs:
            if not isinstance(v, str) or v not in known:
                raise _unknown(label, str(v), list(known), 1)

    def number(x: Any, what: str) -> Const:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise refuse(f"its {what} {x!r} is not a number")
        return Const(x)

    def combine(op: str, vs: Sequence[str], mults: Sequence[Any] | None) -> Any:
        terms: list[Any] = []
        for i, v in enumerate(vs):
            m = None if mults is None else mults[i]
            if m is None or (m == 1 and op == "+"):
                terms.append(Param(v))
            else:
                terms.append(Param(v) * number(m, "multiplier"))
        if not terms:
            return Const(0 if op == "+" else 1)
        return functools.reduce(lambda a, b: BinOp(op, a, b), terms)

    def done(pred: Any) -> Restriction:
        return restriction_from_predicate(pred, known, origin, f"{label}: {pred.to_python()}")

    check(variables)
    if cls in ("FunctionConstraint",):
        fn = getattr(obj, "_func", None)
        if not callable(fn):
            raise refuse("it holds no function")
        by_name: Sequence[str] | None = variables
        if names is None:  # Kernel Tuner calls it with every parameter, in order
            try:
                params = list(inspect.signature(fn).parameters)
            except (TypeError, ValueError):
                params = []
            if params and all(p in known for p in params):
                by_name = None  # its arguments are named after parameters: those
        made = restriction_from_callable(fn, by_name, known, origin)
        return replace(made, source=f"<FunctionConstraint({made.source.strip('<>')})>")
    if cls == "CompilableFunctionConstraint":
        expr = _compiled_function_text(getattr(obj, "_func", None))
        if expr is None:
            raise refuse("its text is not 'def r(...): return <expression>'")
        return parse_restriction(expr, known, origin, kinds)
    for bound, op in _PC_CMP.items():
        for what, arith in (("Sum", "+"), ("Prod", "*")):
            if cls == f"{bound}{what}Constraint":
                limit = number(getattr(obj, f"_{bound.lower()}{what.lower()}"), "bound")
                mults = getattr(obj, "_multipliers", None) if what == "Sum" else None
                if mults is not None and len(mults) != len(variables):
                    raise refuse(f"{len(mults)} multipliers for {len(variables)} variables")
                return done(Cmp(op, combine(arith, variables, mults), limit))
            if cls == f"Variable{bound}{what}Constraint":
                target = getattr(obj, "target_var", None)
                others = list(getattr(obj, "sum_vars" if what == "Sum" else "product_vars", []))
                check([target, *others])
                label = f"{cls}({target!r}, {others!r})"
                mults = getattr(obj, "_multipliers", None) if what == "Sum" else None
                expr = combine(arith, others, None if not mults else list(mults)[: len(others)])
                return done(Cmp(op, expr, Param(str(target))))
    if cls == "AllDifferentConstraint":
        pairs = [
            Cmp("!=", Param(a), Param(b))
            for i, a in enumerate(variables)
            for b in variables[i + 1 :]
        ]
        return done(And(*pairs))
    if cls == "AllEqualConstraint":
        if len(variables) < 2:
            return done(TRUE)
        return done(And(*(Cmp("==", Param(a), Param(b))
                          for a, b in zip(variables, variables[1:], strict=False))))
    if cls in ("InSetConstraint", "NotInSetConstraint"):
        values = _set_values(getattr(obj, "_set", ()), refuse)
        negated = cls == "NotInSetConstraint"
        return done(And(*(Not(In(Param(v), values)) if negated else In(Param(v), values)
                          for v in variables)))
    if cls in ("SomeInSetConstraint", "SomeNotInSetConstraint"):
        values = _set_values(getattr(obj, "_set", ()), refuse)
        n, exact = int(getattr(obj, "_n", 1)), bool(getattr(obj, "_exact", False))
        inside = cls == "SomeInSetConstraint"
        pool = frozenset(values)

        def some(*args: Any) -> bool:
            found = sum((a in pool) == inside for a in args)
            return found == n if exact else found >= n

        text = (
            f"{cls}({list(values)!r}, n={n}{', exact=True' if exact else ''}) on "
            f"({', '.join(variables)})"
        )
        made = restriction_from_callable(some, variables, known, origin)
        return replace(made, source=f"<{text}>")
    raise refuse(
        f"{cls} is not one of python-constraint's classes liftmap converts (Max/Min/Exact "
        f"Sum and Prod, their Variable forms, AllDifferent, AllEqual, InSet, NotInSet, "
        f"SomeInSet, SomeNotInSet, FunctionConstraint)"
    )


def _set_values(values: Any, refuse: Callable[[str], Exception]) -> tuple[int | float | str, ...]:
    out = []
    for v in values:
        if not isinstance(v, (int, float, str)):
            raise refuse(f"its set holds {v!r}, not a number or a string")
        out.append(v)
    return tuple(sorted(out, key=repr)) if isinstance(values, (set, frozenset)) else tuple(out)


def _compiled_function_text(text: Any) -> str | None:
    """The expression of python-constraint's compiled restriction text
    ``def r(a, b): return <expression>``, or None."""
    if not isinstance(text, str):
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        return None
    body = tree.body[0].body
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    return ast.get_source_segment(text, body[0].value)
