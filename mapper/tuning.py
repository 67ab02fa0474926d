"""Tuning parameters inferred from a program, its mapping and the device (GPGPU'20 5.1-5.3).

Every size variable of the program that the caller does not fix is a tuning parameter.
Its natural domain comes from how the types use it: the chunk of a ``split`` of a
length known from the sizes ranges over that length's divisors, an ``asVector`` width
over powers of two, anything else over a range. The constraints are the types'
algorithmic constraints (``split(s0) at node 12 needs N % s0 == 0``), the launch
constraints of a mapping (work-group size within the device's limits) and the device's
memory limits; each keeps its origin. They are passed on as typed predicates
(``constraints.predicates``, translated from the IR's size relations by :func:`to_predicate`),
not as text. The result is a ``constraints.space.SearchSpace``: counted exactly, iterated,
sampled uniformly.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from codegen.lanes import row_block_sizes
from codegen.target import DEFAULT_DEVICE, Device
from constraints.expr import FALSE, And, BinOp, Call, Cmp, Const, Neg, Param, Pred, Term
from constraints.predicates import CMP_OPS
from constraints.space import SearchSpace
from ir.errors import LiftmapError
from ir.nodes import AsVector, FunCall, Map, Node, Reduce, Slide, Split, walk
from ir.sym import Expr
from ir.typecheck import TypeInfo, typecheck
from ir.types import ArrayType, Type, VectorType, shape_of
from mapper.errors import ConfigurationError

VECTOR_WIDTHS = (1, 2, 4, 8, 16)
LANE_WIDTHS = (2, 4, 8, 16)  # a mapVec's width (width 1 would be its mapSeq)


@dataclass
class TuningParam:
    """A tuning parameter, its domain and why it has that domain."""

    name: str
    domain: tuple[int, ...]
    why: str


@dataclass
class TuningProblem:
    """Tuning parameters and their restrictions for one program: predicates
    (``constraints.expr``) with their origins."""

    _program: Node | None
    sizes: dict[str, int]
    params: dict[str, TuningParam]
    predicates: list[tuple[Pred, str]] = field(default_factory=list)
    resource_note: str = ""  # why the device's resource constraints are missing, if they are
    # the lowered kernels' features in the program's sizes and the tuning parameters
    # (codegen.resources.program_features: work-items, work-group size, private/local/global
    # bytes, kernels; codegen.intensity: the hot loop), as the lowering gave them; the
    # ``features`` property substitutes the sizes when first read
    _feature_exprs: dict[str, Expr] | None = field(default=None, repr=False)
    # spaces built for other problems with the same domains and restrictions (shared by the
    # mappings of a JointSpace: most of them have the same tuning space)
    space_cache: dict | None = field(default=None, repr=False, compare=False)
    _space: SearchSpace | None = None
    _features: dict[str, Expr] | None = field(default=None, repr=False, compare=False)
    # a problem shared from another mapping's (JointSpace): its program and features are
    # computed on first use, by these
    _lower: Callable[[], Node] | None = field(default=None, repr=False, compare=False)
    _collect: Callable[[Node], dict[str, Expr]] | None = field(default=None, repr=False,
                                                               compare=False)
    probe: dict[str, int] | None = None  # the configuration the features were lowered at
    # each map in lanes' width parameter -> the map's length (in the sizes and parameters):
    # a width that does not divide it computes fewer elements per vector (a tail)
    lane_lengths: dict[str, Expr] = field(default_factory=dict)

    @property
    def program(self) -> Node:
        """The mapped (low-level) program."""
        if self._program is None:
            assert self._lower is not None  # a shared problem lowers its own mapping
            self._program = self._lower()
        return self._program

    @property
    def feature_exprs(self) -> dict[str, Expr]:
        """The lowered kernels' features in the sizes and the tuning parameters."""
        if self._feature_exprs is None:
            self._feature_exprs = self._collect(self.program) if self._collect else {}
        return self._feature_exprs

    @feature_exprs.setter
    def feature_exprs(self, value: dict[str, Expr]) -> None:
        self._feature_exprs = value

    def shared(self, lower: Callable[[], Node],
               collect: Callable[[Node], dict[str, Expr]]) -> TuningProblem:
        """This problem's parameters, restrictions and space for another mapping whose
        tuning problem is the same (``JointSpace``: the mapping with its OpenCL dimensions
        renamed); its program (``lower()``) and features (``collect(program)``) are its
        own, computed on first use."""
        out = TuningProblem(None, self.sizes, self.params, list(self.predicates),
                            self.resource_note, space_cache=self.space_cache, _lower=lower,
                            _collect=collect, probe=self.probe,
                            lane_lengths=self.lane_lengths)
        out._space = self._space
        return out

    @property
    def features(self) -> dict[str, Expr]:
        """The lowered kernels' features in the tuning parameters (the sizes substituted;
        computed on first use: a search reads them for few of a joint space's mappings)."""
        if self._features is None:
            self._features = {k: e.subs(self.sizes) for k, e in self.feature_exprs.items()}
        return self._features

    @property
    def restrictions(self) -> list[tuple[str, str]]:
        """The restrictions as (text, origin), for display."""
        return [(p.to_python(), o) for p, o in self.predicates]

    @property
    def space(self) -> SearchSpace:
        if self._space is None:
            if not self.params:
                raise ConfigurationError("the program has no tuning parameter: every size is given")
            key = (tuple((p.name, p.domain) for p in self.params.values()),
                   tuple(self.restrictions))
            cache = self.space_cache if self.space_cache is not None else {}
            if key not in cache:
                cache[key] = SearchSpace(
                    {p.name: p.domain for p in self.params.values()},
                    [pred for pred, _ in self.predicates],
                    origins={i: o for i, (_, o) in enumerate(self.predicates)},
                )
            self._space = cache[key]
        return self._space

    def count(self) -> int:
        """Valid configurations; without tuning parameters 1 (or 0 when a resource of the
        fixed sizes is over the device's limit)."""
        if not self.params:
            return 0 if any(p == FALSE for p, _ in self.predicates) else 1
        return self.space.count()

    def sample(self, k: int, seed: int | None = None) -> list[dict[str, int]]:
        """``k`` uniformly drawn configurations (``{}`` without tuning parameters)."""
        if not self.params:
            return [{} for _ in range(k)] if self.count() else []
        return self.space.sample(k, seed=seed)

    def sizes_for(self, config: Mapping[str, int]) -> dict[str, int]:
        """Layer sizes plus one tuning configuration: what lowering needs."""
        return {**self.sizes, **{k: int(v) for k, v in config.items()}}


# ----------------------------------------------------------------------- translation

def to_predicate(rel) -> Pred:
    """A size relation (``ir.sym.Rel``) as a restriction predicate with integer semantics:
    exact divisions become ``//`` guarded by divisibility, and every divisor is guarded
    against zero (the guards first: ``s != 0 and N % s == 0 and (N // s) >= 2``)."""
    if rel.op not in CMP_OPS:
        raise ValueError(  # builtin: ir.sym.Rel has only CMP_OPS; another is a bug
            f"unknown relation {rel.op!r} in {rel}")
    guards: list[Pred] = []
    body = Cmp(rel.op, _term(rel.lhs.to_tree(), guards), _term(rel.rhs.to_tree(), guards))
    return And(*guards, body)  # And drops repeated guards


def _term(t, guards: list[Pred]) -> Term:
    k = t[0]
    if k == "int":
        return Const(t[1])
    if k == "var":
        return Param(t[1])
    if k == "neg":
        return Neg(_term(t[1], guards))
    if k in ("add", "mul"):
        parts = [_term(x, guards) for x in t[1]]
        op = "+" if k == "add" else "*"
        out = parts[0]
        for x in parts[1:]:
            out = BinOp(op, out, x)
        return out
    if k in ("div", "floordiv", "mod"):
        a, b = _term(t[1], guards), _term(t[2], guards)
        guards.append(Cmp("!=", b, 0))
        if k == "div":
            guards.append(Cmp("==", BinOp("%", a, b), 0))
            return BinOp("//", a, b)
        return BinOp("//" if k == "floordiv" else "%", a, b)
    if k in ("min", "max"):
        return Call(k, (_term(t[1], guards), _term(t[2], guards)))
    raise ValueError(  # builtin: Expr.to_tree's nodes are all above; another is a bug
        f"unknown expression node {k!r}")


# -------------------------------------------------------------------------- inference


def _divisors(n: int) -> tuple[int, ...]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))


def _known(e: Expr, sizes: Mapping[str, int]) -> int | None:
    if e.free_vars() <= sizes.keys():
        try:
            return e.evaluate(sizes)
        except (LiftmapError, ArithmeticError):  # non-integral, undefined: no length
            return None
    return None


def _elements(t: Type) -> Expr | None:
    dims, inner = shape_of(t)
    n: Expr | None = None
    for d in dims:
        n = d if n is None else n * d
    if isinstance(inner, VectorType):
        n = inner.width if n is None else n * inner.width
    return n


def infer_tuning(
    program: Node,
    sizes: Mapping[str, int],
    *,
    device: Device | None = None,
    domains: Mapping[str, tuple[int, ...] | range] | None = None,
    max_value: int | None = None,
    info: TypeInfo | None = None,
    space_cache: dict | None = None,
) -> TuningProblem:
    """The tuning problem of ``program`` for the given (layer) sizes.

    ``domains`` overrides inferred domains; ``max_value`` bounds the ranges of parameters
    with no better domain (default: twice the largest given size); ``space_cache`` shares
    built spaces between problems with the same domains and restrictions.
    """
    sizes = {k: int(v) for k, v in sizes.items()}
    info = info or typecheck(program)
    device = device or DEFAULT_DEVICE
    domains = dict(domains or {})
    free = sorted(set().union(*(c.free_vars() for c in info.constraints)) - sizes.keys(),
                  key=str)
    if isinstance(program, Node) and hasattr(program, "params"):
        for p in program.params:
            free += [v for v in sorted(p.type.free_vars()) if v not in sizes and v not in free]
    unknown = sorted(set(domains) - set(free) - sizes.keys())
    if unknown:
        raise ConfigurationError(f"domains given for unknown parameter(s) {', '.join(unknown)}; "
                         f"the tuning parameters are {', '.join(free) or 'none'}")
    hi = max_value or 2 * max([*sizes.values(), 1])
    params: dict[str, TuningParam] = {}
    # natural domains from the primitives that use each variable
    uses: dict[str, list[tuple[str, int | None]]] = {v: [] for v in free}
    for decl, in_type in _applications(program, info):
        if isinstance(decl, Split) and decl.chunk.is_var and decl.chunk.name in uses:
            length = _known(in_type.size, sizes) if isinstance(in_type, ArrayType) else None
            uses[decl.chunk.name].append(("split", length))
        if isinstance(decl, AsVector) and decl.width.is_var and decl.width.name in uses:
            uses[decl.width.name].append(("vector", None))
        if isinstance(decl, Slide) and decl.step.is_var and decl.step.name in uses \
                and (decl.size - decl.step).is_const and isinstance(in_type, ArrayType):
            # overlapped tiles of side v (windows of v plus a halo, step v): v tiles the
            # number of windows of one step (the length at v = 1, less the halo)
            v = decl.step.name
            halo = (decl.size - decl.step).as_int()
            length = _known(in_type.size.subs({v: 1}), sizes)
            if length is not None and length - halo >= 1:
                uses[v].append(("tile", length - halo))
    # a variable that must divide a known number (x % v == 0 with x known) divides it
    for c in info.constraints:
        r = c.rel
        if r.op == "==" and r.rhs.is_const and r.rhs.as_int() == 0:
            t = r.lhs.to_tree()
            if t[0] != "mod":
                continue
            from ir.typecheck import _from_tree

            num, den = t[1], t[2]
            # (L/y) % (x/y) == 0 (a chunk of x/y elements of L/y vectors of width y):
            # x divides L, so x's natural domain is L's divisors too
            if den[0] == "div" and num[0] == "div" and den[2] == num[2]:
                num, den = num[1], den[1]
            if den[0] == "var" and den[1] in uses:
                known = _known(_from_tree(num), sizes)
                if known:
                    uses[den[1]].append(("split", known))
    for n in walk(program):
        if isinstance(n, Map) and n.width is not None and n.width.is_var \
                and n.width.name in uses:
            uses[n.width.name].append(("lanes", None))
        if isinstance(n, Map) and n.is_parallel and isinstance(n.f, Map) \
                and n.f.width is not None and n.f.width.is_var and n.f.width.name in uses:
            uses[n.f.width.name].append(("strip", None))  # width 1: the map as written
        if isinstance(n, Reduce) and n.width is not None and n.width.is_var \
                and n.width.name in uses:
            uses[n.width.name].append(("strip", None))  # width 1: the scalar reduction
    for v in row_block_sizes(program) & uses.keys():
        uses[v].append(("rows", None))  # a row block: rows per work-item
    strips = {v for v, ks in uses.items() if any(k == "strip" for k, _ in ks)}
    for n in walk(program):
        if isinstance(n, Split) and n.chunk.free_vars() & strips:
            for v in n.chunk.free_vars() - strips:
                if v in uses:
                    uses[v].append(("unroll", None))  # a strip's vectors per iteration
    ranges = _declared_ranges(program)
    for v in free:
        if v in domains:
            dom = tuple(sorted(set(int(x) for x in domains[v])))
            params[v] = TuningParam(v, dom, "given")
            continue
        kinds = uses[v]
        lengths = [n for k, n in kinds if k == "split" and n]
        tiled = sorted({n for k, n in kinds if k == "tile" and n})
        if any(k == "rows" for k, _ in kinds):  # pixels: 7, 14, 28... as well as 2^k
            dom = tuple(d for d in _divisors(math.gcd(*lengths)) if d <= ROWS_MAX) \
                if lengths else VECTOR_WIDTHS
            why = f"rows per work-item (a register block): 1 to {ROWS_MAX}, dividing"
        elif any(k == "unroll" for k, _ in kinds):
            dom, why = VECTOR_WIDTHS, "vectors per work-item (a register block): 1 to 16"
        elif any(k == "strip" for k, _ in kinds):  # a strip-mined parallel map
            dom, why = VECTOR_WIDTHS, "lanes width: 1 (none) or an OpenCL vector width"
        elif any(k == "lanes" for k, _ in kinds):
            dom, why = LANE_WIDTHS, "lanes width: the OpenCL vector widths 2 to 16"
        elif any(k == "vector" for k, _ in kinds):
            dom, why = VECTOR_WIDTHS, "asVector width: powers of two up to 16"
        elif lengths:
            dom = _divisors(math.gcd(*lengths))
            why = f"divides {math.gcd(*lengths)}: its divisors"
        elif tiled:
            dom = tuple(sorted({d for n in tiled for d in _divisors(n)}
                               | {1 << k for k in range(tiled[-1].bit_length())}))
            why = (f"a tile side over {', '.join(map(str, tiled))}: their divisors and the "
                   "powers of two")
        else:
            lo = 0 if ranges.get(v, (None, None))[0] == 0 else 1
            dom, why = tuple(range(lo, hi + 1)), f"range {lo}..{hi}"
        params[v] = TuningParam(v, dom, why)
    problem = TuningProblem(program, sizes, params, space_cache=space_cache)
    for n in walk(program):
        if isinstance(n, Map) and n.width is not None and n.width.is_var \
                and n.width.name in params:
            arr = info.map_types.get(id(n), (None,))[0]
            if isinstance(arr, ArrayType):
                problem.lane_lengths[n.width.name] = arr.size
    for c in info.constraints:
        rel = c.rel.subs(sizes)
        if rel.is_trivially_true:
            continue
        if rel.is_trivially_false:
            problem.predicates.append((FALSE, c.origin))
            continue
        problem.predicates.append((to_predicate(rel), c.origin))
    _lane_nesting(problem, program, sizes)
    _resource_constraints(problem, device, info)
    return problem


ROWS_MAX = 16  # a row block's rows per work-item: codegen.lanes.JAM_MAX


def _lane_nesting(problem: TuningProblem, program: Node, sizes: Mapping[str, int]) -> None:
    """One level of lanes: a reduction inside a map in lanes (mapVec) keeps its width 1
    (``codegen.lanes`` vectorises one loop of a nest)."""
    for n in walk(program):
        if not (isinstance(n, Map) and n.width is not None):
            continue
        for r in walk(n.f):
            if isinstance(r, Reduce) and r.width is not None:
                rel = ((n.width - 1) * (r.width - 1)).eq(0).subs(sizes)
                if rel.is_trivially_true:
                    continue
                problem.predicates.append(
                    (FALSE if rel.is_trivially_false else to_predicate(rel),
                     f"one level of lanes: {n.kind_text()} or the reduction inside it "
                     f"({r.width}) has width 1"))


def _applications(program: Node, info: TypeInfo):
    """(declaration, input type) for every split/asVector/slide, applied directly or as a
    map's function."""
    for n in walk(program):
        if isinstance(n, FunCall) and isinstance(n.f, (Split, AsVector, Slide)) and n.args:
            yield n.f, info.types.get(id(n.args[0]))
        elif isinstance(n, Map) and isinstance(n.f, (Split, AsVector, Slide)) \
                and id(n) in info.map_types:
            arr = info.map_types[id(n)][0]
            assert isinstance(arr, ArrayType)  # typecheck records a map's input array type
            yield n.f, arr.elem


def _declared_ranges(program: Node) -> dict[str, tuple[int | None, int | None]]:
    """The ranges size variables were declared with (e.g. ρ in ``Var("rho", 0, None)``)."""
    out: dict[str, tuple[int | None, int | None]] = {}
    for n in walk(program):
        exprs = [getattr(n, a) for a in ("chunk", "size", "step", "left", "right", "width",
                                          "stride") if isinstance(getattr(n, a, None), Expr)]
        t = getattr(n, "type", None)
        if t is not None:
            exprs += shape_of(t)[0]
        for e in exprs:
            for v, r in e.var_ranges().items():
                out.setdefault(v, r)
    return out


RESOURCE_PROBES = 1  # configurations lowered per mapping to collect its resources


def _resource_constraints(problem: TuningProblem, device: Device, info: TypeInfo) -> None:
    """The device's limits as constraints: the lowering's resource checks in symbolic form
    (``codegen.resources``), collected by lowering :data:`RESOURCE_PROBES` configurations
    of the space (the first, then seeded random ones; the constraints of every probe are
    kept). The optional vector accumulators (``codegen.accumulate``) are not among them:
    the lowering gives them only the private memory the budgets leave."""
    from codegen.errors import LoweringError
    from codegen.lower import program_resources
    from ir.errors import ConstraintViolation
    from ir.nodes import Lambda
    from ir.sym import SymbolicError

    if not isinstance(problem.program, Lambda):
        return
    probes: list[dict] = [{}]
    if problem.params:
        try:
            probes = [problem.space[0], *problem.space.sample(RESOURCE_PROBES - 1, seed=0)]
        except (IndexError, ValueError):  # the algorithmic constraints leave nothing
            return
    seen = {text for text, _ in problem.restrictions}
    # the translation of a relation is the same in every mapping of a joint space (the
    # global buffers' sizes, say): cached with the spaces, keyed by the relation, as
    # (predicate, its text)
    texts = problem.space_cache.setdefault("relations", {}) \
        if problem.space_cache is not None else {}
    added = False
    for probe in probes:
        # the features of the first probe that lowers are kept: later probes need none
        feats: dict[str, Expr] | None = None if problem._feature_exprs else {}
        try:
            res = program_resources(problem.program, problem.sizes_for(probe), device=device,
                                    info=info, features=feats)
        except (LoweringError, ConstraintViolation, SymbolicError) as e:
            problem.resource_note = f"resource constraints incomplete: lowering {probe} " \
                f"failed ({e})"
            continue
        if feats is not None:
            problem.feature_exprs = feats
            problem.probe = dict(probe)
        for r in res:
            key = r.rel  # (hashed by value: its text would cost more than the lookup)
            if key not in texts:
                rel = r.rel.subs(problem.sizes)
                pred = None if rel.is_trivially_true else \
                    FALSE if rel.is_trivially_false else to_predicate(rel)
                texts[key] = None if pred is None else (pred, pred.to_python())
            if texts[key] is None:
                continue
            pred, text = texts[key]
            if text in seen:
                continue
            seen.add(text)
            origin = r.origin if r.exact else f"{r.origin} (estimated at {probe})"
            problem.predicates.append((pred, origin))
            added = True
    if added:
        problem._space = None


def dims_renamed(mapping: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """``mapping`` with its OpenCL dimensions numbered in order of first use (``A=G1 B=L1
    C=G0`` -> ``A=G0 B=L0 C=G1``): the mappings with the same result differ only in which
    dimension each parallel map takes."""
    order: dict[int, int] = {}
    out = []
    for label, code in dict(mapping).items():
        if code >= 10:
            code = code // 10 * 10 + order.setdefault(code % 10, len(order))
        out.append((label, code))
    return tuple(out)


def _features_at(program: Node, *, sizes: Mapping[str, int], device: Device
                 ) -> dict[str, Expr]:
    """The lowered kernels' features of ``program`` lowered at ``sizes`` (empty when that
    lowering fails): what ``_resource_constraints`` records for the problem it builds."""
    from codegen.errors import LoweringError
    from codegen.lower import program_resources
    from ir.errors import ConstraintViolation
    from ir.nodes import Lambda
    from ir.sym import SymbolicError

    feats: dict[str, Expr] = {}
    if isinstance(program, Lambda):
        try:
            program_resources(program, sizes, device=device, features=feats)
        except (LoweringError, ConstraintViolation, SymbolicError):
            return {}
    return feats


def _no_features(program: Node) -> dict[str, Expr]:
    return {}


class JointSpace:
    """Mapping x tuning: every valid mapping of a program and, for each, its tuning space.

    ``count()`` is exact (the sum over mappings); ``sample`` draws uniformly over the joint
    space (a mapping with probability proportional to its tuning count, then a uniform
    configuration of it) or, with ``per_mapping=True``, a uniform mapping first.
    ``heuristics=False`` keeps the mappings that only the heuristic rules reject.
    ``enumerate_s`` is the time the valid mappings took to enumerate. ``flops``: the
    program's FLOP count at these sizes, when known (what every candidate must compute at
    least: the cost prior's measure of redundant work).
    """

    def __init__(self, program: Node, sizes: Mapping[str, int], *, fusion: str = "always",
                 device: Device | None = None, domains=None, max_value: int | None = None,
                 heuristics: bool = True, flops: int | None = None):
        import time

        from mapper.api import enumerate_mappings, problem

        t0 = time.perf_counter()
        self.problem = problem(program, fusion=fusion, heuristics=heuristics)
        self.sizes = dict(sizes)
        self.flops = flops
        self.device = device or DEFAULT_DEVICE
        self.options = dict(device=self.device, domains=domains, max_value=max_value)
        self.mappings = list(enumerate_mappings(self.problem, fusion=fusion))
        self.enumerate_s = time.perf_counter() - t0
        self._tuning: dict = {}
        self._spaces: dict = {}  # shared by the mappings' tuning problems
        # mappings with their dimensions renamed -> the first one's tuning problem
        self._classes: dict = {}
        sizes_per_dim = set(self.device.max_work_item_sizes[:self.device.max_work_item_dimensions])
        self._symmetric = len(sizes_per_dim) <= 1

    builds_tuning_spaces = True  # a mapping's first ``tuning`` lowers it (~50 ms on conv)

    @property
    def heuristics(self) -> bool:
        """Whether the heuristic rules prune the mappings."""
        return self.problem.heuristics

    def tuning(self, mapping) -> TuningProblem:
        """The tuning problem of ``mapping``. Mappings that differ only in which OpenCL
        dimension each parallel map takes share one (on a device whose dimensions have the
        same limits, renaming the dimensions renames nothing the restrictions mention):
        the first of them is lowered and its restrictions inferred; the others get its
        parameters and space, and their own program and features when first read."""
        from mapper.api import lower_mapping

        key = frozenset(dict(mapping).items())
        if key in self._tuning:
            return self._tuning[key]

        def lower() -> Node:
            return lower_mapping(self.problem, mapping, fusion=self.problem.fusion)

        cls = dims_renamed(mapping) if self._symmetric else key
        rep = self._classes.get(cls)
        if rep is None:
            tp = infer_tuning(lower(), self.sizes, space_cache=self._spaces, **self.options)
            self._classes[cls] = tp
        else:
            # the features at the configuration the first one's were lowered at (none
            # where that lowering failed)
            collect = functools.partial(_features_at, sizes=rep.sizes_for(rep.probe),
                                        device=self.device) if rep.probe is not None \
                else _no_features
            tp = rep.shared(lower, collect)
        self._tuning[key] = tp
        return tp

    def counts(self) -> list[int]:
        return [self.tuning(m).count() for m in self.mappings]

    def count(self) -> int:
        return sum(self.counts())

    def sample(self, k: int, seed: int | None = None, per_mapping: bool = False):
        """``k`` (mapping, configuration) pairs (fewer only when the space is empty)."""
        import random

        rng = random.Random(seed)
        if not per_mapping:
            weights = self.counts()
            if not any(weights):
                return []
            out = []
            for _ in range(k):
                m = rng.choices(self.mappings, weights=weights)[0]
                out.append((m, self.tuning(m).sample(1, seed=rng.randrange(2**31))[0]))
            return out
        # a uniform mapping among those with a configuration (tuning spaces are built only
        # for the mappings drawn: a mapping without one is dropped and another drawn)
        pool = list(self.mappings)
        out = []
        while len(out) < k and pool:
            i = int(rng.random() * len(pool))  # as rng.choices draws: same seed, same sample
            tp = self.tuning(pool[i])
            if tp.count():
                out.append((pool[i], tp.sample(1, seed=rng.randrange(2**31))[0]))
            else:
                pool[i] = pool[-1]
                pool.pop()
        return out
