"""IR nodes.

An expression is a ``Param``, a ``Literal`` or a ``FunCall`` of a function
declaration (``FunDecl``) to argument expressions, as in LIFT. Function
declarations are lambdas, user functions and the primitives (patterns).

Nodes are immutable. Structural equality ignores a map's ``uid`` (a stable
identity handed out at creation and kept by rewrites) but compares its label.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import Field, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from ir.cexpr import RETURN_RE, c_meaning
from ir.errors import InvalidNodeError, NotAFunctionError
from ir.sym import Expr, sym
from ir.types import Type

_last_uid = 0


def _next_uid() -> int:
    global _last_uid
    _last_uid += 1
    return _last_uid


def _unpickled_map(f, kind, dim, label, uid, width) -> Map:
    """A map from a pickle (another process): later maps made here get larger uids, so a
    map built in a worker never takes the uid of one the program brought with it."""
    global _last_uid
    _last_uid = max(_last_uid, uid)
    return Map(f, kind, dim, label, uid, width)


# a node class's dataclass field names (``dataclasses.fields`` is slow on the hot path)
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def field_names(node: Any) -> tuple[str, ...]:
    """The dataclass field names of ``node``'s class, in order (cached per class)."""
    names = _FIELD_NAMES.get(type(node))
    if names is None:
        names = _FIELD_NAMES[type(node)] = tuple(f.name for f in fields(node))
    return names


class Node:
    """Base of expressions and function declarations."""

    __slots__ = ()
    if TYPE_CHECKING:  # every concrete node class is a dataclass (read by dataclasses.fields)
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def children(self) -> Iterator[Node]:
        for name in field_names(self):
            v = getattr(self, name)
            if isinstance(v, Node):
                yield v
            elif isinstance(v, tuple):
                for x in v:
                    if isinstance(x, Node):
                        yield x

    def __call__(self, *args: ExprNode) -> FunCall:
        if not isinstance(self, FunDecl):
            raise NotAFunctionError(
                f"{type(self).__name__} is not a function and cannot be applied")
        return FunCall(self, tuple(args))


# --------------------------------------------------------------------- expressions


class ExprNode(Node):
    """An expression (has a value)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True, eq=True)
class Param(ExprNode):
    """A named parameter: a program input (typed) or a lambda parameter."""

    name: str
    type: Type | None = None

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True, eq=True)
class Literal(ExprNode):
    """A constant; with an array type it is an array filled with ``value``."""

    value: float | int
    type: Type


@dataclass(frozen=True, slots=True, eq=True)
class FunCall(ExprNode):
    """Application of a function declaration to arguments."""

    f: FunDecl
    args: tuple[ExprNode, ...]


# ------------------------------------------------------------ function declarations


class FunDecl(Node):
    """Anything that can be applied: lambdas, user functions, primitives."""

    __slots__ = ()

    @property
    def arity(self) -> int:
        """The number of arguments the function takes."""
        return 1


@dataclass(frozen=True, slots=True, eq=True)
class Lambda(FunDecl):
    """``\\x y -> body``."""

    params: tuple[Param, ...]
    body: ExprNode

    @property
    def arity(self) -> int:
        return len(self.params)


@dataclass(frozen=True, slots=True, eq=True)
class UserFun(FunDecl):
    """A scalar function with a C body (for OpenCL) and a numpy meaning (for the interpreter).

    ``c_body`` is a C statement block or expression over ``param_names`` returning the
    result (e.g. ``"return a + b;"``). ``py`` takes numpy arrays and broadcasts
    element-wise.
    """

    name: str
    param_names: tuple[str, ...]
    in_types: tuple[Type, ...]
    out_type: Type
    c_body: str = field(compare=False)
    py: Callable = field(compare=False, repr=False)

    @property
    def arity(self) -> int:
        return len(self.param_names)

    def __reduce__(self):
        # The numpy meaning is often a lambda: for a body ``return <expr>;`` pickle the
        # declaration and rebuild the meaning from the C body (as the text syntax does), so
        # programs can go to workers. A statement body has no derivable meaning: its numpy
        # function is pickled itself (a module-level function pickles, a lambda does not).
        # ir.builders registers a reducer that keeps its standard functions themselves.
        if RETURN_RE.fullmatch(self.c_body):
            return (userfun_from_c,
                    (self.name, self.param_names, self.in_types, self.out_type, self.c_body))
        return (UserFun, (self.name, self.param_names, self.in_types, self.out_type,
                          self.c_body, self.py))


def userfun_from_c(name: str, param_names, in_types, out_type: Type, c_body: str) -> UserFun:
    """A user function from its C body ``return <expr>;``, its numpy meaning derived from
    the expression (as for declarations in program files; see ``ir.cexpr``)."""
    body, py = c_meaning(name, param_names, c_body)
    return UserFun(name, tuple(param_names), tuple(in_types), out_type, body, py)


@dataclass(frozen=True, slots=True, eq=True)
class Vectorize(FunDecl):
    """``vectorize(v, f)``: the user function ``f`` applied lane-wise to vectors of width v."""

    width: Expr
    f: UserFun

    def __post_init__(self) -> None:
        object.__setattr__(self, "width", sym(self.width))

    @property
    def arity(self) -> int:
        return self.f.arity


def valid_label(label: str) -> bool:
    """Labels read unambiguously in ``mapWrgA(0)``: ``[A-Z][A-Za-z0-9_]*``, no kind prefix
    (Seq, Vec, Glb, Wrg, Lcl)."""
    return (
        bool(label)
        and label[0].isupper()
        and label.replace("_", "").isalnum()
        and label.isascii()
        and not label.startswith(("Seq", "Vec", "Glb", "Wrg", "Lcl"))
    )


MAP_KINDS = ("map", "mapSeq", "mapVec", "mapGlb", "mapWrg", "mapLcl")
PARALLEL_KINDS = ("mapGlb", "mapWrg", "mapLcl")


@dataclass(frozen=True, slots=True, eq=True)
class Map(FunDecl):
    """``map(f)`` and its low-level variants: mapSeq, mapVec(w), mapGlb(d), mapWrg(d),
    mapLcl(d).

    ``label`` names the map for users ("map C"); ``uid`` is a stable identity kept
    by rewrites (not part of equality). ``width`` is mapVec's vector width (a size
    expression, usually a tuning parameter): its iterations run ``width`` at a time in the
    lanes of one work-item (CC'22's level V).
    """

    f: FunDecl
    kind: str = "map"
    dim: int | None = None
    label: str | None = None
    uid: int = field(default_factory=_next_uid, compare=False)
    width: Expr | None = None

    def __post_init__(self) -> None:
        if self.kind not in MAP_KINDS:
            raise InvalidNodeError(f"unknown map kind {self.kind!r}; expected one of {MAP_KINDS}")
        if self.kind in PARALLEL_KINDS:
            if self.dim not in (0, 1, 2):
                raise InvalidNodeError(f"{self.kind} needs a dimension 0, 1 or 2, got {self.dim!r}")
        elif self.dim is not None:
            raise InvalidNodeError(f"{self.kind} takes no dimension")
        if (self.kind == "mapVec") != (self.width is not None):
            raise InvalidNodeError("mapVec takes a vector width and the other maps none")
        if self.label is not None and not valid_label(self.label):
            raise InvalidNodeError(
                f"map label {self.label!r} must start with an upper-case letter, continue with "
                "letters, digits or '_', and not start with Seq, Vec, Glb, Wrg or Lcl"
            )

    def __reduce__(self):
        return (_unpickled_map, (self.f, self.kind, self.dim, self.label, self.uid,
                                 self.width))

    @property
    def is_parallel(self) -> bool:
        return self.kind in PARALLEL_KINDS

    def kind_text(self) -> str:
        if self.width is not None:
            return f"{self.kind}({self.width})"
        return f"{self.kind}({self.dim})" if self.dim is not None else self.kind


@dataclass(frozen=True, slots=True, eq=True)
class Reduce(FunDecl):
    """``reduce(f)`` applied to ``(init, array)``; ``f`` is ``(acc, x) -> acc'``.

    The result is ``[T]1``. ``width``, where given (a reduction whose ``f`` is an
    associative and commutative operator of the accumulator and a value,
    ``mapper.apply``), runs the reduction ``width`` elements at a time in vector lanes,
    with a vector accumulator and a horizontal step at the end (LIFT's
    partialReduceVectorize); 1 is the scalar reduction."""

    f: FunDecl
    kind: str = "reduce"
    width: Expr | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("reduce", "reduceSeq"):
            raise InvalidNodeError(f"unknown reduce kind {self.kind!r}")

    @property
    def arity(self) -> int:
        return 2


@dataclass(frozen=True, slots=True, eq=True)
class Split(FunDecl):
    """``split(m)``: ``[T]n -> [[T]m]n/m``; needs ``n % m == 0``."""

    chunk: Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "chunk", sym(self.chunk))


@dataclass(frozen=True, slots=True, eq=True)
class Join(FunDecl):
    """``join``: ``[[T]m]n -> [T]m*n``."""


@dataclass(frozen=True, slots=True, eq=True)
class Zip(FunDecl):
    """``zip``: ``([T]n, [U]n, ...) -> [(T, U, ...)]n``."""

    n: int = 2

    @property
    def arity(self) -> int:
        return self.n


@dataclass(frozen=True, slots=True, eq=True)
class Slide(FunDecl):
    """``slide(size, step)``: ``[T]n -> [[T]size](n-size)//step+1``.

    The strict variant (tiling) needs ``(n - size) % step == 0`` and uses exact division.
    """

    size: Expr
    step: Expr
    strict: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", sym(self.size))
        object.__setattr__(self, "step", sym(self.step))


@dataclass(frozen=True, slots=True, eq=True)
class Pad(FunDecl):
    """``pad(l, r, value)``: ``[T]n -> [T]l+n+r``; negative amounts crop."""

    left: Expr
    right: Expr
    value: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "left", sym(self.left))
        object.__setattr__(self, "right", sym(self.right))


@dataclass(frozen=True, slots=True, eq=True)
class Transpose(FunDecl):
    """``transpose``: ``[[T]n]m -> [[T]m]n``."""


@dataclass(frozen=True, slots=True, eq=True)
class ReorderStride(FunDecl):
    """``reorder(stride(s))``: element ``a*(n/s) + b`` moves to position ``a + s*b``.

    Needs ``n % s == 0``."""

    stride: Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "stride", sym(self.stride))


@dataclass(frozen=True, slots=True, eq=True)
class Get(FunDecl):
    """``get(i)``: projection of a tuple."""

    index: int


@dataclass(frozen=True, slots=True, eq=True)
class Id(FunDecl):
    """``id``: the identity (a copy when lowered, e.g. ``toPrivate(id)``)."""


@dataclass(frozen=True, slots=True, eq=True)
class AsVector(FunDecl):
    """``asVector(v)``: ``[T]n -> [Tv]n/v``; needs ``n % v == 0``."""

    width: Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "width", sym(self.width))


@dataclass(frozen=True, slots=True, eq=True)
class AsScalar(FunDecl):
    """``asScalar``: ``[Tv]n -> [T]n*v``."""


ADDRESS_SPACES = ("global", "local", "private")


@dataclass(frozen=True, slots=True, eq=True)
class ToMem(FunDecl):
    """``toGlobal(f)``, ``toLocal(f)``, ``toPrivate(f)``: f writes its result into that space."""

    f: FunDecl
    space: str

    def __post_init__(self) -> None:
        if self.space not in ADDRESS_SPACES:
            raise InvalidNodeError(f"unknown address space {self.space!r}")

    @property
    def arity(self) -> int:
        return self.f.arity


# -------------------------------------------------------------------- traversal


def walk(node: Node) -> Iterator[Node]:
    """All nodes, pre-order (a node before its children, children left to right)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(n.children())))


def size_names(prog: Node) -> frozenset[str]:
    """Every size variable the program mentions (input types, split/slide/pad sizes...)."""
    out: set[str] = set()

    def visit(v: object) -> None:
        if isinstance(v, (Expr, Type)):
            out.update(v.free_vars())
        elif isinstance(v, tuple):
            for x in v:
                visit(x)

    for node in walk(prog):
        for name in field_names(node):
            visit(getattr(node, name))
    return frozenset(x for x in out if not x.startswith("_"))


def maps_in(node: Node) -> list[Map]:
    """Every map node, pre-order."""
    return [n for n in walk(node) if isinstance(n, Map)]


def rebuild(node: Node, fn: Callable[[Node], Node | None]) -> Node:
    """Bottom-up rewrite: ``fn`` returns a replacement for a node (children already
    rewritten) or None to keep it. Map uids survive."""
    changes: dict[str, Node | tuple] = {}
    for name in field_names(node):
        v = getattr(node, name)
        if isinstance(v, Node):
            nv = rebuild(v, fn)
            if nv is not v:
                changes[name] = nv
        elif isinstance(v, tuple) and any(isinstance(x, Node) for x in v):
            nt = tuple(rebuild(x, fn) if isinstance(x, Node) else x for x in v)
            if any(a is not b for a, b in zip(nt, v)):
                changes[name] = nt
    if changes:
        node = _replace(node, changes)
    out = fn(node)
    return node if out is None else out


def _replace(node: Node, changes: dict) -> Node:
    kwargs = {name: getattr(node, name) for name in field_names(node)}
    kwargs.update(changes)
    return type(node)(**kwargs)


def replace(node: Node, **changes) -> Node:
    """A copy of ``node`` with some fields changed (a map keeps its uid unless given)."""
    return _replace(node, changes)
