"""Restrictions of a tuning search space: Python-expression strings and callables.

A restriction string is a Python expression over parameter names, in the form auto-tuners use
(``"32 <= block_size_x * block_size_y <= 1024"``).  Allowed syntax: int/float literals,
parameter names, ``+ - * / // % **``, unary ``- +``, comparisons (chained too),
``and``/``or``/``not``, parentheses and calls to ``min``, ``max``, ``abs``.  The text is parsed
with :mod:`ast` against that whitelist and compiled twice:

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
"""

from __future__ import annotations

import ast
import difflib
import functools
import inspect
import linecache
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

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
    "restriction_from_callable",
    "restriction_from_dict_callable",
]


class SpaceError(ValueError):
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


class SpaceTooLargeError(SpaceError):
    """A group of dependent parameters has more valid rows than the space may materialise
    (``max_rows``), or ran out of memory while enumerating them."""


class LateRestrictionWarning(UserWarning):
    """A restriction depends on every parameter of a large space, so it can only be checked
    once all of them are bound: the whole Cartesian product is filtered row by row."""


FUNCTIONS = ("min", "max", "abs")
_NUM, _BOOL = "number", "truth value"


@dataclass(frozen=True)
class Restriction:
    """One restriction: its text, the parameters it reads, where it comes from, both compiled
    forms.  ``scalar(*values)`` and ``vector(*columns)`` take arguments in ``params`` order."""

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

    def __call__(self, config: dict[str, Any]) -> bool:
        """Evaluate on a configuration (a mapping holding at least ``params``)."""
        return bool(self.scalar(*(config[p] for p in self.params)))

    def with_origin(self, origin: str) -> Restriction:
        """The same restriction with another origin string."""
        return replace(self, origin=origin)

    def __str__(self) -> str:
        return f"{self.source}  [{self.origin}]"


# ----------------------------------------------------------------------------- errors helpers


def _caret(source: str, col: int) -> str:
    return f"\n    {source}\n    {' ' * max(col - 1, 0)}^"


def _syntax(source: str, node: ast.AST | None, what: str) -> RestrictionSyntaxError:
    col = getattr(node, "col_offset", 0) + 1
    return RestrictionSyntaxError(
        f"restriction {source!r}: {what} at column {col}{_caret(source, col)}"
    )


def _unknown(source: str, name: str, known: Sequence[str], col: int) -> UnknownNameError:
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listed = ", ".join(list(known)[:12]) + (", ..." if len(known) > 12 else "")
    return UnknownNameError(
        f"restriction {source!r}: unknown name {name!r} at column {col}{hint} "
        f"(parameters: {listed}){_caret(source, col)}"
    )


# ----------------------------------------------------------------------------- vector helpers
# Each compiled sub-expression maps the column tuple to (value, err); err is None when the
# sub-expression cannot fail, else a boolean mask of the rows where Python would raise.
# Invariant for truth values: value is False wherever err is True.


def _eor(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def _none_if_clear(err: Any) -> Any:
    return None if err is None or not np.any(err) else err


def _const(value: Any) -> Any:
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        try:
            return np.int64(value)
        except OverflowError:
            return value
    return np.float64(value)


def _is_int(x: Any) -> bool:
    return np.asarray(x).dtype.kind in "iu"


def _vpow(a: Any, b: Any) -> tuple[Any, Any]:
    if _is_int(a) and _is_int(b) and not np.any(np.asarray(b) < 0):
        return np.power(a, b), None
    af = np.asarray(a, dtype=np.float64)
    bf = np.asarray(b, dtype=np.float64)
    err = ((af < 0) & (bf != np.floor(bf))) | ((af == 0) & (bf < 0))
    err = np.asarray(err)
    safe_a = np.where(err, 1.0, af)
    val = np.power(safe_a, bf)
    if not (_is_int(a) and _is_int(b)):  # Python float ** raises OverflowError
        err = err | (np.isinf(val) & np.isfinite(af) & np.isfinite(bf))
    return val, _none_if_clear(err)


def _spow(a: Any, b: Any) -> Any:
    """Scalar ``**`` with the same failure rules as the vectorised form."""
    if a < 0 and b != math.floor(b):
        raise ValueError("negative base to a fractional power")
    return a**b


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.true_divide,
    ast.FloorDiv: np.floor_divide,
    ast.Mod: np.remainder,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
}
_FUNCS: dict[str, Callable[..., Any]] = {
    "min": lambda *xs: functools.reduce(np.minimum, xs),
    "max": lambda *xs: functools.reduce(np.maximum, xs),
    "abs": np.abs,
}


class _Compiler:
    """Type-checks the whitelisted AST and builds the vectorised closure."""

    def __init__(self, source: str, known: Sequence[str]) -> None:
        self.source = source
        self.known = list(known)
        self.known_set = set(known)
        self.used: list[str] = []

    def check_names(self, tree: ast.AST) -> None:
        """Collect parameter names in first-appearance order; reject unknown ones."""
        callees: set[int] = set()
        names: list[ast.Name] = []
        for n in ast.walk(tree):  # breadth first: a call is seen before its callee name
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                callees.add(id(n.func))
            elif isinstance(n, ast.Name) and id(n) not in callees:
                names.append(n)
        for n in sorted(names, key=lambda n: (n.lineno, n.col_offset)):
            if n.id not in self.known_set:
                raise _unknown(self.source, n.id, self.known, n.col_offset + 1)
            if n.id not in self.used:
                self.used.append(n.id)

    def kind(self, node: ast.AST) -> str:
        """Static kind of a node (number or truth value), validating the whitelist."""
        src = self.source
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return _BOOL
            if isinstance(node.value, (int, float)):
                return _NUM
            raise _syntax(src, node, f"unsupported literal {node.value!r}")
        if isinstance(node, ast.Name):
            return _NUM
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _BINOPS and not isinstance(node.op, ast.Pow):
                raise _syntax(src, node, f"unsupported operator {type(node.op).__name__}")
            self.need(node.left, _NUM, "operand of an arithmetic operator")
            self.need(node.right, _NUM, "operand of an arithmetic operator")
            return _NUM
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                self.need(node.operand, _BOOL, "operand of 'not'")
                return _BOOL
            if isinstance(node.op, (ast.USub, ast.UAdd)):
                self.need(node.operand, _NUM, "operand of a sign")
                return _NUM
            raise _syntax(src, node, f"unsupported operator {type(node.op).__name__}")
        if isinstance(node, ast.BoolOp):
            word = "and" if isinstance(node.op, ast.And) else "or"
            for v in node.values:
                self.need(v, _BOOL, f"operand of '{word}'")
            return _BOOL
        if isinstance(node, ast.Compare):
            for op in node.ops:
                if type(op) not in _CMPOPS:
                    raise _syntax(src, node, f"unsupported comparison {type(op).__name__}")
            for v in [node.left, *node.comparators]:
                self.need(v, _NUM, "operand of a comparison")
            return _BOOL
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                fname = node.func.id if isinstance(node.func, ast.Name) else "this"
                raise _syntax(
                    src, node, f"unsupported function {fname!r} (allowed: {', '.join(FUNCTIONS)})"
                )
            if node.keywords or not node.args:
                raise _syntax(src, node, f"{node.func.id}() takes positional arguments only")
            if node.func.id == "abs" and len(node.args) != 1:
                raise _syntax(src, node, "abs() takes exactly one argument")
            if any(isinstance(a, ast.Starred) for a in node.args):
                raise _syntax(src, node, "unsupported syntax Starred")
            for a in node.args:
                self.need(a, _NUM, f"argument of {node.func.id}()")
            return _NUM
        raise _syntax(src, node, f"unsupported syntax {type(node).__name__}")

    def need(self, node: ast.AST, kind: str, where: str) -> None:
        got = self.kind(node)
        if got == kind:
            return
        text = ast.get_source_segment(self.source, node) or ast.unparse(node)
        col = node.col_offset + 1
        if kind == _BOOL:
            raise NotAPredicateError(
                f"restriction {self.source!r}: {where} {text!r} at column {col} is a number, "
                f"not a truth value; compare it, e.g. '{text} > 0'{_caret(self.source, col)}"
            )
        raise _syntax(self.source, node, f"{where} {text!r} is a truth value, not a number")

    # -- closures ------------------------------------------------------------------------
    def build(self, node: ast.AST) -> Callable[[tuple], tuple[Any, Any]]:
        if isinstance(node, ast.Constant):
            c = _const(node.value)
            return lambda cols: (c, None)
        if isinstance(node, ast.Name):
            i = self.used.index(node.id)
            return lambda cols: (cols[i], None)
        if isinstance(node, ast.UnaryOp):
            f = self.build(node.operand)
            if isinstance(node.op, ast.Not):

                def _not(cols: tuple) -> tuple[Any, Any]:
                    v, e = f(cols)
                    return (~v if e is None else ~v & ~e), e

                return _not
            if isinstance(node.op, ast.USub):
                return lambda cols: _map1(np.negative, f(cols))
            return f
        if isinstance(node, ast.BinOp):
            lf, rf = self.build(node.left), self.build(node.right)
            if isinstance(node.op, ast.Pow):

                def _pow(cols: tuple) -> tuple[Any, Any]:
                    (a, ea), (b, eb) = lf(cols), rf(cols)
                    v, e = _vpow(a, b)
                    return v, _eor(_eor(ea, eb), e)

                return _pow
            op = _BINOPS[type(node.op)]
            divides = isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod))
            const_rhs = isinstance(node.right, ast.Constant) and node.right.value != 0

            def _bin(cols: tuple) -> tuple[Any, Any]:
                (a, ea), (b, eb) = lf(cols), rf(cols)
                err = _eor(ea, eb)
                if divides and not const_rhs:
                    err = _eor(err, _none_if_clear(b == 0))
                return op(a, b), err

            return _bin
        if isinstance(node, ast.Call):
            fs = [self.build(a) for a in node.args]
            fn = _FUNCS[node.func.id]

            def _call(cols: tuple) -> tuple[Any, Any]:
                parts = [f(cols) for f in fs]
                err = None
                for _, e in parts:
                    err = _eor(err, e)
                return fn(*[v for v, _ in parts]), err

            return _call
        if isinstance(node, ast.Compare):
            fs = [self.build(v) for v in [node.left, *node.comparators]]
            ops = [_CMPOPS[type(o)] for o in node.ops]

            def _cmp(cols: tuple) -> tuple[Any, Any]:
                a, ea = fs[0](cols)
                val, err = None, None
                for op, f in zip(ops, fs[1:], strict=True):
                    b, eb = f(cols)
                    cv = op(a, b)
                    ce = _eor(ea, eb)
                    if ce is not None:
                        cv = cv & ~ce
                    if val is None:
                        val, err = cv, ce
                    else:  # and-chaining with short-circuit
                        if ce is not None:
                            err = _eor(err, val & ce)
                        val = val & cv
                    a, ea = b, None  # errors of b are already counted
                return val, err

            return _cmp
        if isinstance(node, ast.BoolOp):
            fs = [self.build(v) for v in node.values]
            is_and = isinstance(node.op, ast.And)

            def _boolop(cols: tuple) -> tuple[Any, Any]:
                val, err = fs[0](cols)
                for f in fs[1:]:
                    v2, e2 = f(cols)
                    if is_and:
                        if e2 is not None:
                            err = _eor(err, val & e2)
                        val = val & v2
                    else:
                        if e2 is not None:
                            alive = ~val if err is None else ~val & ~err
                            err = _eor(err, alive & e2)
                            v2 = v2 & ~e2
                        val = val | (v2 if err is None else v2 & ~err)
                return val, err

            return _boolop
        raise _syntax(self.source, node, f"unsupported syntax {type(node).__name__}")


def _map1(fn: Callable[[Any], Any], ve: tuple[Any, Any]) -> tuple[Any, Any]:
    return fn(ve[0]), ve[1]


class _Rename(ast.NodeTransformer):
    """Renames parameters to positional ``_p<i>`` and ``**`` to the checked ``_pow``."""

    def __init__(self, used: list[str]) -> None:
        self.index = {n: i for i, n in enumerate(used)}

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node.args = [self.visit(a) for a in node.args]
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.index:
            return ast.copy_location(ast.Name(id=f"_p{self.index[node.id]}", ctx=ast.Load()), node)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Pow):
            call = ast.Call(ast.Name("_pow", ast.Load()), [node.left, node.right], [])
            return ast.copy_location(call, node)
        return node


_SCALAR_ERRORS = (ArithmeticError, ValueError, TypeError)


def _compile_scalar(text: str, used: list[str]) -> Callable[..., Any]:
    renamed = _Rename(used).visit(ast.parse(text, mode="eval"))
    lam = ast.Expression(
        ast.Lambda(
            ast.arguments(
                posonlyargs=[],
                args=[ast.arg(f"_p{i}") for i in range(len(used))],
                kwonlyargs=[],
                kw_defaults=[],
                defaults=[],
            ),
            renamed.body,
        )
    )
    ast.fix_missing_locations(lam)
    env = {"__builtins__": {}, "min": min, "max": max, "abs": abs, "_pow": _spow}
    return eval(compile(lam, f"<restriction {text}>", "eval"), env)  # noqa: S307 - whitelisted


def parse_restriction(source: str, names: Sequence[str], origin: str = "user") -> Restriction:
    """Parse and compile a restriction string over the parameter ``names``.

    Raises :class:`RestrictionSyntaxError`, :class:`UnknownNameError` or
    :class:`NotAPredicateError` with the offending text and column.
    """
    if not isinstance(source, str):
        raise TypeError(f"a restriction string is needed, got {type(source).__name__}")
    text = " ".join(source.strip().split()) if "\n" in source else source.strip()
    if not text:
        raise RestrictionSyntaxError("restriction '': empty restriction")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        col, msg = e.offset or 0, e.msg
        if not 0 < col <= len(text):  # CPython reports 0 at the end of the input
            col, msg = len(text) + 1, f"{msg} (the expression is incomplete)"
        raise RestrictionSyntaxError(
            f"restriction {text!r}: {msg} at column {col}{_caret(text, col)}"
        ) from None
    comp = _Compiler(text, names)
    body = tree.body
    kind = comp.kind(body)  # whitelist first: 'a.b' is a syntax error, not an unknown name
    comp.check_names(body)
    if kind != _BOOL:
        raise NotAPredicateError(
            f"restriction {text!r} is not a predicate: it computes a number; "
            f"write a comparison, e.g. '{text} > 0' or '{text} == 0'"
        )
    used = list(comp.used)
    vec_body = comp.build(body)

    def vector(*cols: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            val, err = vec_body(cols)
        if err is not None:
            val = val & ~err
        if cols:
            return np.broadcast_to(np.asarray(val, dtype=bool), np.shape(cols[0]))
        return np.asarray(val, dtype=bool)

    compiled: list[Callable[..., Any]] = []  # the scalar form is compiled on first use

    def scalar(*values: Any) -> bool:
        if not compiled:
            compiled.append(_compile_scalar(text, used))
        try:
            return bool(compiled[0](*values))
        except _SCALAR_ERRORS:
            return False

    return Restriction(text, tuple(used), origin, scalar, vector, True)


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
def _parse_module(text: str) -> tuple[ast.AST, ...] | None:
    """The function-like nodes of a module's source, or None if it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    return tuple(n for n in ast.walk(tree) if isinstance(n, _FunctionNode))


def _node_args(node: ast.AST) -> list[str]:
    assert isinstance(node, _FunctionNode)
    a = node.args
    return [x.arg for x in [*a.posonlyargs, *a.args]]


def _find_function_node(fn: Callable[..., Any]) -> tuple[ast.AST, str] | None:
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

        def contains(n: ast.AST) -> bool:
            start = (n.lineno, n.col_offset)
            end = (n.end_lineno, n.end_col_offset)
            return all(start <= (l0, c0) and (l1, c1) <= end for l0, c0, l1, c1 in spans)

        cands = [n for n in cands if contains(n)]
        if not cands:
            return None
        best = min(cands, key=lambda n: (n.end_lineno - n.lineno, n.end_col_offset))
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
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listed = ", ".join(list(known)[:12]) + (", ..." if len(known) > 12 else "")
    return UnknownNameError(
        f"restriction {source}: reads key {name!r}, which is not a parameter{hint} "
        f"(parameters: {listed})"
    )
