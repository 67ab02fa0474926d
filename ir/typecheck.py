"""Type inference: a type for every expression node, and the algorithmic constraints.

The constraints are the ones the types impose (GPGPU'20 Section 5.2): ``split(m)``
needs ``n % m == 0``, ``asVector(v)`` needs ``n % v == 0``, a strict slide needs
``(n - size) % step == 0``, a reorder by stride needs divisibility, sizes are
positive. Each records where it comes from ("split(s0) at node 12 ...").
With concrete ``sizes``, a constraint that fails is a ``ConstraintViolation``.

Every error is an ``IRTypeError`` whose ``node`` is the construct at fault (the primitive
or map given the wrong argument, the application, the expression, the program) and whose
``root`` is the program checked: a parsed program's ``spans`` (``ir.parser.parse``) give
its line and column.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from ir import nodes
from ir.errors import ConstraintViolation, IRTypeError, UnboundParameterError
from ir.printer import show
from ir.sym import Expr, Rel, SymbolicError, assume_divisible, smax, smin, sym
from ir.types import ArrayType, ScalarType, TupleType, Type, VectorType
from ir.visitor import Dispatch

_T = TypeVar("_T", bound=Type)


def _operand(e: Expr) -> str:
    """``e`` as an operand of ``%`` in a message: parenthesised unless a number or a name."""
    return str(e) if e.is_const or e.is_var else f"({e})"


@dataclass(frozen=True)
class AlgConstraint:
    """A constraint the types impose, with its origin."""

    rel: Rel
    kind: str  # split | asVector | slideStrict | slide | reorder | pad | positive | zip
    origin: str

    def __str__(self) -> str:
        return f"{self.rel}    ({self.origin})"

    def free_vars(self) -> frozenset[str]:
        return self.rel.free_vars()


@dataclass
class TypeInfo:
    """Result of type inference over one program."""

    root: nodes.Node
    type: Type
    types: dict[int, Type] = field(default_factory=dict)
    constraints: list[AlgConstraint] = field(default_factory=list)
    node_index: dict[int, int] = field(default_factory=dict)
    map_types: dict[int, tuple[Type, Type]] = field(default_factory=dict)


def program_params(root: nodes.Node) -> tuple[nodes.Param, ...]:
    """The declared inputs of a program (a top-level lambda), else ()."""
    return root.params if isinstance(root, nodes.Lambda) else ()


class _Checker:
    """Infers types: one method per node class, ``infer_*`` for expressions and
    ``apply_*`` for function declarations (applied to argument types)."""

    pass_name = "type checker"

    def __init__(self, root: nodes.Node, sizes: Mapping[str, int] | None):
        self.root = root
        self.sizes = dict(sizes or {})
        # the program's type is set when inference ends (typecheck); nothing reads it before
        self.info = TypeInfo(root, None)  # type: ignore[arg-type]
        self.facts: list[tuple[Expr, Expr]] = []
        self._seen: set[tuple] = set()
        # (call, declaration) being applied, innermost last: an error about ``call`` is
        # located at the declaration (a map inside a map is applied by the outer call)
        self._applying: list[tuple[nodes.Node, nodes.FunDecl]] = []
        for i, n in enumerate(nodes.walk(root)):
            self.info.node_index.setdefault(id(n), i)

    # ------------------------------------------------------------------ helpers
    def where(self, node: nodes.Node) -> str:
        return f"node {self.info.node_index.get(id(node), '?')}"

    def context(self, node: nodes.Node) -> str | None:
        try:
            return show(node, max_len=160)
        except Exception:  # printing must never hide the real error
            return None

    def error(self, msg: str, node: nodes.Node, cls=IRTypeError):
        """An error about ``node`` (its text shown as the context); located at the
        declaration being applied when ``node`` is the call applying it (see ``at``)."""
        return cls(msg, self.at(node), self.context(node), root=self.root)

    def at(self, node: nodes.Node) -> nodes.Node:
        """The construct at fault in an error about ``node``: the primitive, map or lambda
        ``node`` is applying, if it is the innermost call being applied (user functions:
        the call, whose arguments are wrong), else ``node``."""
        if self._applying and self._applying[-1][0] is node:
            decl = self._applying[-1][1]
            if not isinstance(decl, (nodes.UserFun, nodes.Vectorize, nodes.ToMem)):
                return decl
        return node

    def simp(self, e: Expr) -> Expr:
        return assume_divisible(e, self.facts) if self.facts else e

    def add(self, rel: Rel, kind: str, origin: str, node: nodes.Node,
            shown: str | None = None) -> None:
        """Records ``rel`` (a ``kind`` constraint from ``origin``), or raises when it fails;
        ``shown``: ``rel`` as written, before simplification (``4 % 3 == 0``, not
        ``1 == 0``), in the message of a relation that can never hold."""
        if rel.is_trivially_true:
            return
        if rel.is_trivially_false:
            raise self.error(f"{origin} needs {shown or rel}, which can never hold", node,
                             ConstraintViolation)
        key = (rel, kind)
        if key in self._seen:
            return
        self._seen.add(key)
        origin = f"{origin} needs {rel}"
        self.info.constraints.append(AlgConstraint(rel, kind, origin))
        if self.sizes and rel.free_vars() <= self.sizes.keys():
            try:
                holds = rel.evaluate(self.sizes)
            except SymbolicError as e:  # non-integral or division by zero: undefined
                vals = ", ".join(f"{k}={self.sizes[k]}" for k in sorted(rel.free_vars()))
                raise self.error(f"{origin}, which is undefined for {vals} ({e})", node,
                                 ConstraintViolation) from None
            if not holds:
                vals = ", ".join(f"{k}={self.sizes[k]}" for k in sorted(rel.free_vars()))
                raise self.error(f"{origin}, which does not hold for {vals}", node,
                                 ConstraintViolation)

    def positive(self, e: Expr, what: str, node: nodes.Node) -> None:
        for num, den in _exact_divisions(e):
            self.add((num % den).eq(0), "integral", f"{what} must be an integer:", node)
        self.add(e.ge(1), "positive", what, node)

    def same_size(self, a: Expr, b: Expr) -> bool:
        a, b = self.simp(a), self.simp(b)
        if a == b:
            return True
        d = a - b
        if d.is_const:
            return False
        if self.sizes and d.free_vars() <= self.sizes.keys():
            return d.evaluate(self.sizes) == 0
        return True  # symbolic: recorded as a constraint by the caller

    def compatible(self, t: Type, u: Type) -> bool:
        if isinstance(t, ArrayType) and isinstance(u, ArrayType):
            return self.same_size(t.size, u.size) and self.compatible(t.elem, u.elem)
        if isinstance(t, TupleType) and isinstance(u, TupleType):
            return len(t.elems) == len(u.elems) and all(
                self.compatible(a, b) for a, b in zip(t.elems, u.elems)
            )
        if isinstance(t, VectorType) and isinstance(u, VectorType):
            return t.elem == u.elem and self.same_size(t.width, u.width)
        return t == u

    # --------------------------------------------------------------- inference
    _infer = Dispatch("infer", nodes.Node)  # _infer(e, env): the type of an expression
    _apply = Dispatch("apply", nodes.FunDecl)  # _apply(f, arg types, call, env): the result type

    def expr(self, e: nodes.ExprNode, env: dict[str, Type]) -> Type:
        t = self._infer(e, env)
        self.info.types[id(e)] = t
        return t

    def infer_param(self, e: nodes.Param, env: dict[str, Type]) -> Type:
        if e.name in env:
            return env[e.name]
        if e.type is not None:
            return e.type
        raise self.error(
            f"parameter {e.name!r} is not bound by a lambda and has no declared type; "
            f"declare it (e.g. '{e.name}: [float]N')",
            e,
            UnboundParameterError,
        )

    def infer_literal(self, e: nodes.Literal, env: dict[str, Type]) -> Type:
        return e.type

    def infer_fun_call(self, e: nodes.FunCall, env: dict[str, Type]) -> Type:
        arg_types = [self.expr(a, env) for a in e.args]
        return self.apply(e.f, arg_types, e, env)

    def infer_fun_decl(self, e: nodes.FunDecl, env: dict[str, Type]) -> Type:
        raise self.error(f"{type(e).__name__} is not an expression", e)

    def apply(self, f: nodes.FunDecl, args: list[Type], call: nodes.Node,
              env: dict[str, Type]) -> Type:
        self._applying.append((call, f))
        try:
            if len(args) != f.arity:
                raise self.error(
                    f"{describe(f)} takes {f.arity} argument(s) but is given {len(args)}", call
                )
            return self._apply(f, args, call, env)
        finally:
            self._applying.pop()

    def array_arg(self, f: nodes.FunDecl, args: list[Type], call: nodes.Node) -> ArrayType:
        """The one argument of a primitive that takes an array."""
        (t,) = args
        if not isinstance(t, ArrayType):
            raise self.error(f"{describe(f)} expects an array, got {t}", call)
        return t

    def array_of(self, f: nodes.FunDecl, args: list[Type], call: nodes.Node, elem: type[_T],
                 expects: str) -> tuple[ArrayType, _T]:
        """The one argument of a primitive that takes an array of ``elem``, and its element
        type; else an error: ``expects``, and what it got."""
        t = self.array_arg(f, args, call)
        if not isinstance(t.elem, elem):
            raise self.error(f"{expects}, got {t}", call)
        return t, t.elem

    # ---------------------------------------------- functions and user functions
    def apply_lambda(self, f: nodes.Lambda, args: list[Type], call: nodes.Node, env) -> Type:
        inner = dict(env)
        for p, t in zip(f.params, args):
            inner[p.name] = t
        return self.expr(f.body, inner)

    def apply_user_fun(self, f: nodes.UserFun, args: list[Type], call: nodes.Node, env) -> Type:
        return self.userfun(f, args, call, None)

    def apply_vectorize(self, f: nodes.Vectorize, args: list[Type], call: nodes.Node, env) -> Type:
        return self.userfun(f.f, args, call, f.width)

    def apply_to_mem(self, f: nodes.ToMem, args: list[Type], call: nodes.Node, env) -> Type:
        return self.apply(f.f, args, call, env)

    def apply_id(self, f: nodes.Id, args: list[Type], call: nodes.Node, env) -> Type:
        return args[0]

    def apply_zip(self, f: nodes.Zip, args: list[Type], call: nodes.Node, env) -> Type:
        n = None
        elems = []
        for i, a in enumerate(args):
            if not isinstance(a, ArrayType):
                raise self.error(f"zip argument {i + 1} is {a}, not an array", call)
            if n is None:
                n = a.size
            elif not self.same_size(n, a.size):
                raise self.error(
                    f"zip of arrays of unequal lengths: {n} and {a.size}", call
                )
            elif self.simp(n) != self.simp(a.size):
                self.add(n.eq(a.size), "zip", f"zip at {self.where(call)}", call)
            elems.append(a.elem)
        if n is None:
            raise self.error("zip of no arrays", call)
        return ArrayType(TupleType(tuple(elems)), n)

    def apply_get(self, f: nodes.Get, args: list[Type], call: nodes.Node, env) -> Type:
        (t,) = args
        if not isinstance(t, TupleType):
            raise self.error(f"get({f.index}) needs a tuple, got {t}", call)
        if not 0 <= f.index < len(t.elems):
            raise self.error(f"get({f.index}) out of range for {t}", call)
        return t.elems[f.index]

    def apply_map(self, f: nodes.Map, args: list[Type], call: nodes.Node, env) -> Type:
        t = self.array_arg(f, args, call)
        if f.width is not None:  # mapVec(w): w lanes at a time, a tail past the last vector
            what = f"vector width {f.width}"
            self.positive(f.width, what, call)
            self.add(f.width.le(t.size), "mapVec",
                     f"{f.kind_text()}{' ' + f.label if f.label else ''} at {self.where(call)}",
                     call, f"{_operand(f.width)} <= {_operand(t.size)}")
        out_elem = self.apply(f.f, [t.elem], call, env)
        out = ArrayType(out_elem, t.size)
        self.info.map_types[id(f)] = (t, out)
        return out

    def apply_reduce(self, f: nodes.Reduce, args: list[Type], call: nodes.Node, env) -> Type:
        init, arr = args
        if not isinstance(arr, ArrayType):
            raise self.error(f"reduce expects an array as its second argument, got {arr}", call)
        if f.width is not None:  # a reduction in vector lanes: no scalar tail
            self.divides(arr.size, f.width, f"vector width {f.width}", "reduce lanes",
                         f"{f.kind}({f.width})", call)
        acc = self.apply(f.f, [init, arr.elem], call, env)
        if not self.compatible(acc, init):
            raise self.error(
                f"reduce function returns {acc} but the accumulator is {init}", call
            )
        self.info.map_types[id(f)] = (arr, ArrayType(init, sym(1)))
        return ArrayType(init, sym(1))

    def divides(self, n: Expr, m: Expr, what: str, kind: str, origin: str,
                call: nodes.Node) -> None:
        """``m`` (``what``) is positive and divides the length ``n``: a ``kind`` constraint
        from ``origin``, and a fact that simplifies the sizes after it."""
        self.positive(m, what, call)
        self.add((n % m).eq(0), kind, f"{origin} at {self.where(call)}", call,
                 f"{_operand(n)} % {_operand(m)} == 0")
        self.facts.append((n, m))

    # ------------------------------------------------------ layout primitives
    def apply_split(self, f: nodes.Split, args: list[Type], call: nodes.Node, env) -> Type:
        t = self.array_arg(f, args, call)
        n, m = t.size, f.chunk
        self.divides(n, m, f"split chunk {m}", "split", f"split({m})", call)
        return ArrayType(ArrayType(t.elem, m), n / m)

    def apply_join(self, f: nodes.Join, args: list[Type], call: nodes.Node, env) -> Type:
        t, e = self.array_of(f, args, call, ArrayType, "join expects an array of arrays")
        return ArrayType(e.elem, e.size * t.size)

    def apply_transpose(self, f: nodes.Transpose, args: list[Type], call: nodes.Node, env) -> Type:
        t, e = self.array_of(f, args, call, ArrayType, "transpose expects an array of arrays")
        return ArrayType(ArrayType(e.elem, t.size), e.size)

    def apply_slide(self, f: nodes.Slide, args: list[Type], call: nodes.Node, env) -> Type:
        t = self.array_arg(f, args, call)
        n, size, step = t.size, f.size, f.step
        self.positive(size, f"slide size {size}", call)
        self.positive(step, f"slide step {step}", call)
        self.add(n.ge(size), "slide",
                 f"slide({size}, {step}) at {self.where(call)}", call)
        if f.strict:
            self.add(((n - size) % step).eq(0), "slideStrict",
                     f"slideStrict({size}, {step}) at {self.where(call)}", call,
                     f"({n} - {_operand(size)}) % {_operand(step)} == 0")
            self.facts.append((n - size, step))
            count = (n - size) / step + 1
        else:
            count = (n - size) // step + 1
        return ArrayType(ArrayType(t.elem, size), count)

    def apply_pad(self, f: nodes.Pad, args: list[Type], call: nodes.Node, env) -> Type:
        t = self.array_arg(f, args, call)
        out = t.size + f.left + f.right
        self.positive(out, f"padded length {out}", call)
        return ArrayType(t.elem, out)

    def apply_reorder_stride(self, f: nodes.ReorderStride, args: list[Type], call: nodes.Node,
                             env) -> Type:
        t = self.array_arg(f, args, call)
        n, s = t.size, f.stride
        self.divides(n, s, f"reorder stride {s}", "reorder", f"reorder(stride {s})", call)
        return t

    def apply_as_vector(self, f: nodes.AsVector, args: list[Type], call: nodes.Node, env) -> Type:
        v = f.width
        t, e = self.array_of(f, args, call, ScalarType,
                             f"asVector({v}) expects an array of scalars")
        self.divides(t.size, v, f"vector width {v}", "asVector", f"asVector({v})", call)
        return ArrayType(VectorType(e, v), t.size / v)

    def apply_as_scalar(self, f: nodes.AsScalar, args: list[Type], call: nodes.Node, env) -> Type:
        t, e = self.array_of(f, args, call, VectorType, "asScalar expects an array of vectors")
        return ArrayType(e.elem, t.size * e.width)

    # ------------------------------------------------------------- user functions
    def userfun(self, f: nodes.UserFun, args: list[Type], call: nodes.Node,
                width: Expr | None) -> Type:
        bind: dict[str, Expr] = {}
        for i, (decl, actual) in enumerate(zip(f.in_types, args)):
            want = decl
            if width is not None and isinstance(decl, ScalarType):
                want = VectorType(decl, width)
            if not self.match(want, actual, bind):
                raise self.error(
                    f"user function {f.name} argument {i + 1} ({f.param_names[i]}) expects "
                    f"{want}, got {actual}",
                    call,
                )
        out = f.out_type
        if width is not None and isinstance(out, ScalarType):
            out = VectorType(out, width)
        if bind:
            out = out.subs(bind)
        return out

    def match(self, want: Type, actual: Type, bind: dict[str, Expr]) -> bool:
        if isinstance(want, VectorType) and isinstance(actual, VectorType):
            if want.elem != actual.elem:
                return False
            w = want.width
            generic = [v for v in w.free_vars() if v.startswith("_")]
            if generic:
                (g,) = generic
                if g in bind:
                    return self.same_size(bind[g], actual.width)
                bind[g] = actual.width
                return True
            return self.same_size(w, actual.width)
        return self.compatible(want, actual)


def describe(f: nodes.Node) -> str:
    if isinstance(f, nodes.Map):
        return f"map{f.label or ''}" if f.kind == "map" else f.kind_text()
    if isinstance(f, nodes.UserFun):
        return f"user function {f.name}"
    return type(f).__name__[0].lower() + type(f).__name__[1:]


def _from_tree(t) -> Expr:
    k = t[0]
    if k in ("int", "var"):
        return sym(t[1])
    if k == "neg":
        return -_from_tree(t[1])
    if k in ("add", "mul"):
        out = _from_tree(t[1][0])
        for x in t[1][1:]:
            out = out + _from_tree(x) if k == "add" else out * _from_tree(x)
        return out
    a, b = _from_tree(t[1]), _from_tree(t[2])
    return {"div": lambda: a / b, "floordiv": lambda: a // b, "mod": lambda: a % b,
            "min": lambda: smin(a, b), "max": lambda: smax(a, b)}[k]()


def _exact_divisions(e: Expr) -> list[tuple[Expr, Expr]]:
    """(numerator, denominator) of every exact division in ``e`` (sizes must be integers)."""
    out = []

    def go(t) -> None:
        if t[0] == "div":
            out.append((_from_tree(t[1]), _from_tree(t[2])))
        for x in t[1:]:
            if isinstance(x, tuple) and x and isinstance(x[0], str):
                go(x)
            elif isinstance(x, tuple):
                for y in x:
                    if isinstance(y, tuple):
                        go(y)

    go(e.to_tree())
    return out


def _array_lengths(t: Type) -> list[Expr]:
    if isinstance(t, ArrayType):
        return [t.size, *_array_lengths(t.elem)]
    if isinstance(t, TupleType):
        return [n for e in t.elems for n in _array_lengths(e)]
    return []


def typecheck(program: nodes.Node, sizes: Mapping[str, int] | None = None) -> TypeInfo:
    """Infer types for ``program`` (a top-level lambda with typed params, or an expression).

    Collects the algorithmic constraints; with ``sizes``, checks those whose variables
    are all given and raises ``ConstraintViolation`` on the first that fails.
    """
    ch = _Checker(program, sizes)
    if isinstance(program, nodes.Lambda):
        env = {}
        if program.params and all(p.type is None for p in program.params):
            raise ch.error("the program is a function, not an expression: declare its "
                           "inputs with their types (e.g. 'X : [float]N') and apply it to "
                           "them (e.g. 'f $ X')", program, UnboundParameterError)
        for p in program.params:
            if p.type is None:
                raise ch.error(
                    f"program input {p.name!r} has no type; declare it (e.g. "
                    f"'{p.name}: [float]N')", p, UnboundParameterError)
            env[p.name] = p.type
            for n in _array_lengths(p.type):
                ch.positive(n, f"length {n} of input {p.name}", p)
        t = ch.expr(program.body, env)
    elif isinstance(program, nodes.ExprNode):
        t = ch.expr(program, {})
    else:
        raise ch.error(f"cannot typecheck a bare {describe(program)}: declare the inputs "
                       "(e.g. 'X : [float]N') and apply it to them (e.g. 'f $ X')", program)
    ch.info.type = t
    return ch.info
