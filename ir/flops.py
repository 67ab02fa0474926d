"""Work counts of a program: its floating-point operations and its compulsory global traffic,
what a GFLOP/s and a GB/s figure divide by a run time.

:func:`count_flops` counts by the program's semantics, statically, over the typed program:
every user-function application once per element of each enclosing ``map`` (also where the
reference interpreter computes a value once and broadcasts it: a map whose body does not
depend on its element still applies that body once per element in a kernel), once per
element of each enclosing ``reduce`` (``reduce(f)(init, xs)`` applies ``f`` ``len(xs)``
times, so a sum of n numbers with ``init`` 0 is n additions), and a let-bound value once
where it is bound. The lengths are the types' array lengths evaluated for the sizes given,
so a full-size convolution costs as little to count as a small one.

Counting convention for one application of a user function (:func:`user_fun_flops`, read
from its C body, expression or statement block):

* a binary ``+ - * /`` on floating-point operands is 1 (``%`` on floating-point operands,
  C's ``fmod``, is 1 too; compound assignments ``+= -= *= /=`` and ``++``/``--`` on a float
  are 1 each);
* ``fma``, ``mad`` and ``fmad`` calls are 2; ``dot`` of two vectors of v lanes is ``2v - 1``
  (v multiplications, v - 1 additions); every other call of a math built-in (``sqrt``,
  ``exp``, ``log``, ``sin``, ``cos``, ``tanh``, ``pow``, ``fmax``, ``fmin``, ``max``,
  ``min``, ``fabs``, ``clamp``, ``floor``, ...) on a floating-point argument is 1;
* 0: unary minus and plus (``-1.0f`` and ``1e-3`` are numbers, not subtractions),
  comparisons, logical and bitwise operators, selects (``select``, ``is*``), conversions
  (casts, ``convert_*``, ``as_*``), swizzles, and all integer arithmetic (an operation whose
  operands are all integers, such as index arithmetic, is not floating point: a user
  function over ints counts 0);
* vectors: an operation on vectors of v lanes counts v times its scalar cost; the widths
  come from the parameters' types (``float4``), from ``Vectorize(v, f)``, or from the types
  of the arguments at the call (``dot``'s generic width);
* data-dependent control flow: a conditional ``c ? a : b`` and an ``if``/``else`` count
  their condition and the costlier of the two branches (an upper bound: the branch taken
  depends on the data). Loops in a C body are not counted (:class:`FlopsError`).

:func:`count_bytes` is the compulsory global traffic: the bytes of every array input (read
once) plus the bytes of the output (written once), 4 bytes per ``float`` or ``int`` lane, as
the interpreter stores them. Scalar inputs travel as kernel arguments and are not counted.
"""

from __future__ import annotations

import functools
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ir import nodes
from ir.errors import IRError
from ir.interp import DTYPES
from ir.sym import Expr, SymbolicError
from ir.typecheck import TypeInfo, _Checker, typecheck
from ir.types import ArrayType, ScalarType, TupleType, Type, VectorType, base_scalar

__all__ = ["FlopsError", "Work", "count_bytes", "count_flops", "count_work", "user_fun_flops"]


class FlopsError(IRError):
    """A program's work cannot be counted (a size without a value, a C body the counter
    cannot read); the message says what to change."""


# ------------------------------------------------------------------ the C body counter

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<num>0[xX][0-9a-fA-F]+[uUlL]*
      |(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?[fFhHlL]?
      |\d+[eE][+-]?\d+[fFhHlL]?
      |\d+[uUlL]*)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op><<=|>>=|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||->|[-+*/%&|^]=|[-+*/%<>=!~&|^?:;,.()\[\]{}])
    """,
    re.X | re.S | re.ASCII,
)
_TYPE_RE = re.compile(
    r"(float|half|double|int|uint|char|uchar|short|ushort|long|ulong|bool|size_t)(2|3|4|8|16)?")
_REAL_BASES = ("float", "half", "double")
_QUALIFIERS = frozenset(("const", "private", "__private", "volatile", "restrict", "register",
                         "static", "signed", "unsigned"))
_BINARY_PREC = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, ">": 7,
                "<=": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}
_ARITH = frozenset("+-*/%")
_ASSIGN = frozenset(("=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="))
_FMA_FUNS = frozenset(("fma", "mad", "fmad"))
_FREE_FUNS = frozenset(("select", "bitselect", "isequal", "isnotequal", "isgreater",
                        "isgreaterequal", "isless", "islessequal", "islessgreater", "isfinite",
                        "isinf", "isnan", "isnormal", "isordered", "isunordered", "signbit",
                        "any", "all", "shuffle", "shuffle2"))
_LOOPS = frozenset(("for", "while", "do", "goto", "switch"))


@dataclass(frozen=True)
class _V:
    """A counted C expression: floating point or not, its lanes, its operations."""

    real: bool
    width: int
    cost: int


class _CBody:
    """Counts the operations of one C body (recursive descent over C's precedence levels)."""

    def __init__(self, name: str, body: str, env: dict[str, tuple[bool, int]]):
        self.name, self.body, self.env = name, body, env
        self.toks: list[tuple[str, str]] = []
        pos = 0
        while pos < len(body):
            m = _TOKEN_RE.match(body, pos)
            if m is None:
                raise self.error(f"unexpected character {body[pos]!r}")
            if m.lastgroup != "ws":
                self.toks.append((m.lastgroup or "", m.group()))
            pos = m.end()
        self.toks.append(("eof", ""))
        self.i = 0

    # ------------------------------------------------------------------ helpers
    def error(self, msg: str) -> FlopsError:
        return FlopsError(f"user function {self.name}: cannot count the operations of its C "
                          f"body {self.body!r}: {msg}")

    def peek(self, k: int = 0) -> tuple[str, str]:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> tuple[str, str]:
        t = self.toks[self.i]
        if t[0] != "eof":
            self.i += 1
        return t

    def at(self, text: str, k: int = 0) -> bool:
        kind, t = self.peek(k)
        return kind in ("op", "name") and t == text

    def expect(self, text: str) -> None:
        if not self.at(text):
            found = self.peek()[1] or "the end of the body"
            raise self.error(f"expected {text!r}, found {found!r}")
        self.next()

    def is_type(self, k: int = 0) -> bool:
        kind, t = self.peek(k)
        return kind == "name" and (t in _QUALIFIERS or _TYPE_RE.fullmatch(t) is not None)

    def type_(self) -> tuple[bool, int]:
        """A declaration's or cast's type: (floating point, lanes)."""
        seen = False
        out = (False, 1)
        while self.is_type():
            t = self.next()[1]
            m = _TYPE_RE.fullmatch(t)
            if m:
                out = (m[1] in _REAL_BASES, int(m[2] or 1))
            seen = True
        if not seen:
            raise self.error(f"expected a type, found {self.peek()[1]!r}")
        return out

    # --------------------------------------------------------------- statements
    def count(self) -> int:
        cost = 0
        while self.peek()[0] != "eof":
            cost += self.statement()
        return cost

    def end_statement(self) -> None:
        if self.at(";"):
            self.next()
        elif self.peek()[0] != "eof":  # a bare expression body ends at the end
            raise self.error(f"expected ';', found {self.peek()[1]!r}")

    def statement(self) -> int:
        kind, t = self.peek()
        if self.at(";"):
            self.next()
            return 0
        if self.at("{"):
            self.next()
            cost = 0
            while not self.at("}"):
                if self.peek()[0] == "eof":
                    raise self.error("a '{' is not closed")
                cost += self.statement()
            self.next()
            return cost
        if kind == "name" and t in _LOOPS:
            raise self.error(f"'{t}' loops (and jumps) are not counted: their trip count is "
                             "not static; write the body without a loop")
        if kind == "name" and t in ("break", "continue"):
            raise self.error(f"'{t}' is outside a loop the counter reads")
        if kind == "name" and t == "return":
            self.next()
            cost = 0 if self.at(";") else self.expr().cost
            self.end_statement()
            return cost
        if kind == "name" and t == "if":
            self.next()
            self.expect("(")
            cond = self.expr().cost
            self.expect(")")
            then = self.statement()
            other = 0
            if self.at("else"):
                self.next()
                other = self.statement()
            return cond + max(then, other)
        if self.is_type():
            return self.declaration()
        cost = self.expr().cost
        self.end_statement()
        return cost

    def declaration(self) -> int:
        real, width = self.type_()
        cost = 0
        while True:
            kind, name = self.next()
            if kind != "name":
                raise self.error(f"expected a variable name, found {name!r}")
            while self.at("["):
                self.next()
                cost += self.expr().cost
                self.expect("]")
            self.env[name] = (real, width)
            if self.at("="):
                self.next()
                cost += self.initializer()
            if not self.at(","):
                break
            self.next()
        self.end_statement()
        return cost

    def initializer(self) -> int:
        if not self.at("{"):
            return self.assignment().cost
        self.next()
        cost = 0
        while not self.at("}"):
            cost += self.initializer()
            if not self.at(","):
                break
            self.next()
        self.expect("}")
        return cost

    # -------------------------------------------------------------- expressions
    def expr(self) -> _V:
        v = self.assignment()
        while self.at(","):
            self.next()
            w = self.assignment()
            v = _V(w.real, w.width, v.cost + w.cost)
        return v

    def assignment(self) -> _V:
        lhs = self.conditional()
        kind, op = self.peek()
        if kind != "op" or op not in _ASSIGN:
            return lhs
        self.next()
        rhs = self.assignment()
        extra = lhs.width if op[0] in _ARITH and op != "=" and (lhs.real or rhs.real) else 0
        return _V(lhs.real, lhs.width, lhs.cost + rhs.cost + extra)

    def conditional(self) -> _V:
        c = self.binary(1)
        if not self.at("?"):
            return c
        self.next()
        a = self.expr()
        self.expect(":")
        b = self.conditional()
        return _V(a.real or b.real, max(a.width, b.width), c.cost + max(a.cost, b.cost))

    def binary(self, least: int) -> _V:
        left = self.unary()
        while True:
            kind, op = self.peek()
            prec = _BINARY_PREC.get(op) if kind == "op" else None
            if prec is None or prec < least:
                return left
            self.next()
            right = self.binary(prec + 1)
            width = max(left.width, right.width)
            cost = left.cost + right.cost
            if op in _ARITH:
                real = left.real or right.real
                left = _V(real, width, cost + (width if real else 0))
            else:  # comparison, logical, bitwise, shift: not floating-point arithmetic
                left = _V(False, width, cost)

    def unary(self) -> _V:
        kind, op = self.peek()
        if kind == "op" and op in ("-", "+", "!", "~", "*", "&"):
            self.next()
            v = self.unary()
            return _V(False, v.width, v.cost) if op in "!~" else v
        if kind == "op" and op in ("++", "--"):
            self.next()
            v = self.unary()
            return _V(v.real, v.width, v.cost + (v.width if v.real else 0))
        if self.at("(") and self.is_type(1):  # a cast (a vector literal is a cast of a list)
            self.next()
            real, width = self.type_()
            self.expect(")")
            v = self.unary()
            return _V(real, width, v.cost)
        return self.postfix()

    def postfix(self) -> _V:
        v = self.primary()
        while True:
            if self.at("["):
                self.next()
                i = self.expr()
                self.expect("]")
                v = _V(v.real, v.width, v.cost + i.cost)
            elif self.at(".") or self.at("->"):
                self.next()
                kind, member = self.next()
                if kind != "name":
                    raise self.error(f"expected a vector component after '.', found {member!r}")
                v = _V(v.real, self._swizzle(member, v.width), v.cost)
            elif self.at("++") or self.at("--"):
                self.next()
                v = _V(v.real, v.width, v.cost + (v.width if v.real else 0))
            else:
                return v

    def _swizzle(self, member: str, width: int) -> int:
        if member in ("lo", "hi", "even", "odd"):
            return max(1, (width + 1) // 2)
        if member[0] in "sS" and len(member) > 1 and all(c in "0123456789abcdefABCDEF"
                                                         for c in member[1:]):
            return len(member) - 1
        if all(c in "xyzw" for c in member) or all(c in "rgba" for c in member):
            return len(member)
        raise self.error(f"unknown vector component .{member}")

    def primary(self) -> _V:
        kind, t = self.next()
        if kind == "num":
            real = not t.lower().startswith("0x") and any(c in t for c in ".eEfFhH")
            return _V(real, 1, 0)
        if kind == "op" and t == "(":
            v = self.expr()
            self.expect(")")
            return v
        if kind == "name":
            if self.at("("):
                return self.call(t)
            real, width = self.env.get(t, (False, 1))  # a named constant: no operation
            return _V(real, width, 0)
        raise self.error(f"unexpected {t!r}" if t else "the body ends too early")

    def call(self, fname: str) -> _V:
        self.expect("(")
        args: list[_V] = []
        if not self.at(")"):
            args.append(self.assignment())
            while self.at(","):
                self.next()
                args.append(self.assignment())
        self.expect(")")
        cost = sum(a.cost for a in args)
        real = any(a.real for a in args)
        width = max((a.width for a in args), default=1)
        if fname == "dot":
            return _V(True, 1, cost + (2 * width - 1 if real else 0))
        if fname in _FMA_FUNS:
            return _V(real, width, cost + (2 * width if real else 0))
        conv = re.fullmatch(r"(?:convert|as)_([a-z]+(?:2|3|4|8|16)?)(?:_sat)?(?:_rt[enpz])?",
                            fname)
        if conv and (m := _TYPE_RE.fullmatch(conv[1])):
            return _V(m[1] in _REAL_BASES, int(m[2] or 1), cost)
        if fname in ("select", "bitselect"):
            return _V(any(a.real for a in args[:2]), width, cost)
        if fname in _FREE_FUNS or fname.startswith(("vload", "vstore")):
            return _V(False, 1 if fname in ("any", "all") else width, cost)
        return _V(real, width, cost + (width if real else 0))


@functools.lru_cache(maxsize=4096)
def _body_flops(name: str, body: str, params: tuple[str, ...], reals: tuple[bool, ...],
                widths: tuple[int, ...]) -> int:
    env = {p: (r, w) for p, r, w in zip(params, reals, widths)}
    return _CBody(name, body, env).count()


def user_fun_flops(uf: nodes.UserFun | nodes.Vectorize,
                   arg_widths: Sequence[int] | None = None) -> int:
    """The floating-point operations of one application of ``uf``, counted from its C body
    (the convention is the module's docstring).

    ``arg_widths`` are the lanes of each argument (1 for a scalar); by default they come from
    the parameter types (``float4`` is 4) and, for ``Vectorize(v, f)``, from its width. A
    symbolic width (``float<v>``, ``dot``'s generic one) needs ``arg_widths``.
    """
    vec_width: Expr | None = None
    if isinstance(uf, nodes.Vectorize):
        vec_width = uf.width
        uf = uf.f
    reals = []
    for p, t in zip(uf.param_names, uf.in_types):
        base = base_scalar(t)
        if base is None or not isinstance(t, (ScalarType, VectorType)):
            raise FlopsError(f"user function {uf.name}: parameter {p} has the type {t}; only "
                             "scalar and vector parameters can be counted")
        reals.append(base.name != "int")
    if arg_widths is None:
        widths = []
        for p, t in zip(uf.param_names, uf.in_types):
            w: Expr | None = t.width if isinstance(t, VectorType) else vec_width
            if w is None:
                widths.append(1)
            elif w.is_const:
                widths.append(w.as_int())
            else:
                raise FlopsError(f"user function {uf.name}: parameter {p} has {w} lanes, a "
                                 "symbolic width; pass arg_widths (the lanes of each argument)")
    else:
        widths = list(arg_widths)
        if len(widths) != uf.arity or any(
                isinstance(w, bool) or not isinstance(w, numbers.Integral) or w < 1
                for w in widths):
            raise FlopsError(f"user function {uf.name}: arg_widths {tuple(arg_widths)} must "
                             f"give {uf.arity} lane count(s), each a positive integer")
    return _body_flops(uf.name, uf.c_body, uf.param_names, tuple(reals),
                       tuple(int(w) for w in widths))


# ------------------------------------------------------------------ program counts


def _size_values(sizes: Mapping[str, int], what: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for k, v in sizes.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise FlopsError(f"{what}: size {k}={v!r} is not an integer; give sizes as whole "
                             "numbers")
        out[k] = int(v)
    return out


def _typed(program: nodes.Node, sizes: Mapping[str, int], what: str
           ) -> tuple[TypeInfo, dict[str, int]]:
    """The program's (symbolic) types, and the sizes, checked to give every size it has."""
    env = _size_values(sizes, what)
    info = typecheck(program)
    needed: set[str] = set()
    for t in info.types.values():
        needed |= t.free_vars()
    for c in info.constraints:
        needed |= c.free_vars()
    for p in nodes.walk(program):
        if isinstance(p, nodes.Param) and p.type is not None:
            needed |= p.type.free_vars()
    missing = sorted(v for v in needed - env.keys() if not v.startswith("_"))
    if missing:
        given = ", ".join(sorted(env)) or "none"
        raise FlopsError(
            f"{what} needs a value for every size of the program: {', '.join(missing)} "
            f"missing (given: {given}); pass them in sizes, e.g. sizes={{"
            + ", ".join(f"{m!r}: ..." for m in missing) + "}")
    return info, env


class _FlopCounter(_Checker):
    """The type checker, counting user-function applications as it applies functions:
    each map and reduce multiplies what its function does by its input's length."""

    pass_name = "flop counter"

    def __init__(self, root: nodes.Node, sizes: Mapping[str, int]):
        super().__init__(root, sizes)
        self.flops = 0
        self.times = 1  # applications per evaluation of the current expression

    def count(self) -> int:
        root = self.root
        if isinstance(root, nodes.Lambda):
            self.expr(root.body, {p.name: p.type for p in root.params if p.type is not None})
        elif isinstance(root, nodes.ExprNode):
            self.expr(root, {})
        return self.flops

    def value(self, e: Expr, what: str) -> int:
        try:
            return e.evaluate(self.sizes)
        except SymbolicError as ex:
            raise FlopsError(f"cannot evaluate {what} {e} for the sizes given ({ex}); pass "
                             "sizes that satisfy the program's constraints") from None

    def widths(self, args: list[Type]) -> list[int]:
        return [self.value(t.width, "the vector width") if isinstance(t, VectorType) else 1
                for t in args]

    def apply_map(self, f: nodes.Map, args: list[Type], call: nodes.Node, env) -> Type:
        t = self.array_arg(f, args, call)
        outer = self.times
        self.times = outer * self.value(t.size, "the length of the map's input")
        try:
            return super().apply_map(f, args, call, env)
        finally:
            self.times = outer

    def apply_reduce(self, f: nodes.Reduce, args: list[Type], call: nodes.Node, env) -> Type:
        arr = args[1]
        outer = self.times
        if isinstance(arr, ArrayType):
            self.times = outer * self.value(arr.size, "the length of the reduced array")
        try:
            return super().apply_reduce(f, args, call, env)
        finally:
            self.times = outer

    def apply_user_fun(self, f: nodes.UserFun, args: list[Type], call: nodes.Node,
                       env) -> Type:
        out = super().apply_user_fun(f, args, call, env)
        self.flops += self.times * user_fun_flops(f, self.widths(args))
        return out

    def apply_vectorize(self, f: nodes.Vectorize, args: list[Type], call: nodes.Node,
                        env) -> Type:
        out = super().apply_vectorize(f, args, call, env)
        self.flops += self.times * user_fun_flops(f.f, self.widths(args))
        return out


def count_flops(program: nodes.Node, sizes: Mapping[str, int]) -> int:
    """The floating-point operations ``program`` performs for the ``sizes`` given (every size
    of the program; see the module docstring for what is counted)."""
    _, env = _typed(program, sizes, "count_flops")
    return _FlopCounter(program, env).count()


def _type_bytes(t: Type, sizes: Mapping[str, int]) -> int:
    if isinstance(t, ScalarType):
        return int(np.dtype(DTYPES.get(t.name, np.float32)).itemsize)
    if isinstance(t, VectorType):
        return t.width.evaluate(sizes) * _type_bytes(t.elem, sizes)
    if isinstance(t, ArrayType):
        return t.size.evaluate(sizes) * _type_bytes(t.elem, sizes)
    if isinstance(t, TupleType):
        return sum(_type_bytes(e, sizes) for e in t.elems)
    raise FlopsError(f"cannot count the bytes of a value of type {t}")


def count_bytes(program: nodes.Node, sizes: Mapping[str, int]) -> int:
    """The compulsory global traffic of ``program`` for the ``sizes`` given: the bytes of
    every array input plus those of the output (scalar inputs are kernel arguments)."""
    info, env = _typed(program, sizes, "count_bytes")
    typecheck(program, env)  # the sizes satisfy the program's constraints
    params = program.params if isinstance(program, nodes.Lambda) else ()
    try:
        inputs = sum(_type_bytes(p.type, env) for p in params if isinstance(p.type, ArrayType))
        return inputs + _type_bytes(info.type, env)
    except SymbolicError as ex:
        raise FlopsError(f"count_bytes: cannot evaluate an array length for the sizes given "
                         f"({ex}); pass sizes that satisfy the program's constraints") from None


@dataclass(frozen=True)
class Work:
    """A program's work for one set of sizes: floating-point operations and global bytes."""

    flops: int
    bytes: int

    def gflops(self, seconds: float) -> float:
        """GFLOP/s for a run of ``seconds``."""
        return self.flops / _positive(seconds) / 1e9

    def gbytes_per_s(self, seconds: float) -> float:
        """GB/s (1e9 bytes per second) of compulsory traffic for a run of ``seconds``."""
        return self.bytes / _positive(seconds) / 1e9

    @property
    def intensity(self) -> float:
        """Floating-point operations per byte of compulsory traffic."""
        return self.flops / self.bytes if self.bytes else float("inf")


def _positive(seconds: float) -> float:
    if not seconds > 0:
        raise FlopsError(f"a rate needs a positive run time, got {seconds!r} seconds")
    return seconds


def count_work(program: nodes.Node, sizes: Mapping[str, int]) -> Work:
    """:func:`count_flops` and :func:`count_bytes` of ``program`` for ``sizes``."""
    return Work(count_flops(program, sizes), count_bytes(program, sizes))
