"""Public API: enumerate, count, check and explain parallel mappings of an expression."""

from __future__ import annotations

import functools
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from collections.abc import Mapping as AbcMapping
from dataclasses import dataclass, field
from functools import cached_property
from numbers import Integral
from typing import TYPE_CHECKING, Any, TypeVar, cast

from constraints import bruteforce, cp_backend, z3_backend
from constraints.counting import CountLimitError, count_solutions
from constraints.model import Constraint, Model, Parameter
from constraints.scalar import compile_predicate
from ir.errors import IRTypeError
from ir.nodes import Node, size_names
from ir.source_map import SourceMap, parse_mapped
from mapper.apply import WidthPlan, apply_mapping, width_plan
from mapper.encoding import CODES, FUSED, MapCodes, code_name, parse_code
from mapper.errors import (
    ArgumentError,
    ConfigurationError,
    ContradictoryFixedError,
    InvalidMappingError,
    MappingError,
    value_text,
)
from mapper.nesting import MapNestingTree, label_maps
from mapper.rule_names import RuleKind, RuleName
from mapper.rules import FUSION_STRATEGIES, RULES, generate, rule_kind
from mapper.text import rule_head, show_constraint

if TYPE_CHECKING:
    from codegen.target import Device
    from mapper.kernel import CompiledKernel, RunResult

F = TypeVar("F", bound=Callable[..., Any])

BACKENDS = {"cp": cp_backend, "z3": z3_backend, "brute": bruteforce}
MAPPED_KEPT = 256  # mapped programs a problem keeps (``MappingProblem.lower``)


def _program(expr) -> tuple[Node, SourceMap | None]:
    """A program node from a node, program text or a ``.lift`` path, and the source map
    of the text (None for a node)."""
    if isinstance(expr, (str, os.PathLike)):
        return parse_mapped(expr)
    if not isinstance(expr, Node):
        raise ArgumentError(f"problem() takes a program: a .lift path, the program's text, a "
                            f"program node or a MappingProblem; got {value_text(expr)}")
    return expr, None


def _locating(method: F) -> F:
    """A method of ``MappingProblem`` whose type errors name the file, line and column
    of the problem's text (where it was given as text or a path)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except IRTypeError as e:
            if self.source is not None:
                self.source.attach(e)
            raise
    return cast(F, wrapper)


@dataclass
class MappingProblem:
    """A program, its map-nesting tree and its constraint model."""

    program: Node
    tree: MapNestingTree
    fusion: str
    constraints: list[Constraint]
    heuristics: bool = True
    device: str | Device | None = None  # what kernels are built and run for (None: default)
    # where the program's nodes are in its text (None: the program was given as a node)
    source: SourceMap | None = field(default=None, repr=False, compare=False)
    # the mapped programs ``lower`` made, by (mapping, checked): each mapping is checked
    # and applied once, however many sizes it is built for
    _mapped: dict[tuple[tuple[tuple[str, int], ...], bool], Node] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    # the sizes each mapping adds and their defaults (``width_plan``), by mapping
    _plans: dict[tuple[tuple[str, int], ...], WidthPlan] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_mapped": {}, "_plans": {}}  # caches

    @cached_property
    def program_sizes(self) -> frozenset[str]:
        """Every size the program names (``ir.nodes.size_names``), computed once."""
        return size_names(self.program)

    def width_plan(self, mapping) -> WidthPlan:
        """The sizes ``mapping`` adds to the program (vector widths, unroll counts) and
        their defaults (``mapper.apply.WidthPlan``), made once per mapping."""
        m = self.mapping(mapping)
        key = tuple(m.items())
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= MAPPED_KEPT:
                self._plans.clear()
            plan = self._plans[key] = width_plan(self.program, m, self.tree)
        return plan

    @cached_property
    def model(self) -> Model:
        params = []
        for m in self.tree.labels:
            dom = [c for c in CODES if c != FUSED or (
                self.fusion != "never" and self.tree.maps[m].perfectly_nested)]
            params.append(Parameter(m, tuple(dom)))
        return Model(params, self.constraints)

    @property
    def labels(self) -> list[str]:
        return self.tree.labels

    def per_rule(self) -> dict[RuleName, int]:
        """Constraint instances per rule, in rule order (CC'22 Table 4 style)."""
        counts = Counter(c.rule for c in self.constraints)
        return {r.name: counts[r.name] for r in RULES if counts[r.name]}

    def per_kind(self) -> dict[RuleKind, int]:
        """Constraint instances per kind of rule (``validity``, ``heuristic``)."""
        counts = Counter(rule_kind(c.rule) for c in self.constraints)
        return {k: counts[k] for k in RuleKind if counts[k]}

    def mapping(self, m) -> MapCodes:
        """Validate and normalise a mapping given as text, dict, (label, code) pairs or
        MapCodes."""
        if isinstance(m, str):
            m = MapCodes.parse(m)
        elif isinstance(m, (tuple, list)) and m and all(
                isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) for x in m):
            m = dict(m)  # (label, code) pairs, as dict() takes them
        if not isinstance(m, (MapCodes, AbcMapping)) or not all(isinstance(k, str) for k in m):
            raise ArgumentError(f"a mapping is its text ('A=G0 B=S'), a dict from map labels "
                                f"to codes ({{'A': 'G0', 'B': 'S'}}), (label, code) pairs or "
                                f"a MapCodes; got {value_text(m)}")
        if not isinstance(m, MapCodes):
            m = MapCodes({k: parse_code(str(v)) if not isinstance(v, int) else v
                         for k, v in dict(m).items()})
        unknown = [k for k in m if k not in self.tree.maps]
        if unknown:
            raise MappingError(f"unknown map(s) {', '.join(unknown)}; the maps are "
                               f"{', '.join(self.labels)}")
        for k, v in m.items():
            if v not in self.model.param(k).domain:
                why = ("it is not perfectly nested in its parent" if v == FUSED and
                       self.fusion != "never" else "fusion is 'never'" if v == FUSED else "")
                raise MappingError(f"map {k} cannot be {code_name(v)}" + (f": {why}" if why
                                                                        else ""))
        return MapCodes({k: m[k] for k in self.labels if k in m})

    # the library's functions as methods of the problem (its configuration applies)

    @_locating
    def enumerate(self, *, backend: str = "cp", order: str = "solver", seed: int | None = None,
                  limit: int | None = None, fixed=None) -> Iterator[MapCodes]:
        """Every valid mapping (see ``enumerate_mappings``)."""
        return enumerate_mappings(self, backend=backend, order=order, seed=seed, limit=limit,
                                  fixed=fixed)

    @_locating
    def count(self, *, backend: str = "cp", fixed=None) -> int:
        """The number of valid mappings."""
        return count_mappings(self, backend=backend, fixed=fixed)

    @_locating
    def check(self, mapping) -> list[Constraint]:
        """The constraint instances ``mapping`` violates (empty when it is valid)."""
        return check_mapping(self, mapping)

    @_locating
    def explain(self, partial) -> Explanation:
        """Why ``partial`` cannot be part of a valid mapping, or a valid completion."""
        return explain(self, partial)

    @_locating
    def lower(self, mapping, *, check: bool = True) -> Node:
        """The program with ``mapping`` applied (the low-level IR; raises if invalid),
        checked and applied once per mapping (nodes are immutable: the result is shared)."""
        m = self.mapping(mapping)
        key = (tuple(m.items()), check)
        low = self._mapped.get(key)
        if low is None:
            if len(self._mapped) >= MAPPED_KEPT:
                self._mapped.clear()
            low = self._mapped[key] = lower_mapping(self, m, check=check)
        return low

    @_locating
    def build(self, mapping, sizes: AbcMapping[str, int], *, force: bool = False,
              flops: int | None = None, name: str = "kernel") -> CompiledKernel:
        """``mapping`` lowered to OpenCL for ``sizes`` (every size of the program): a
        ``CompiledKernel`` with its source, launch sizes and resources, ready to ``run``.
        ``force``: skip the mapping rules (only the lowering's checks and the run judge
        it; ``CompiledKernel.overridden`` lists the rule instances it violates).
        ``flops``: the FLOP count (default: derived from the program); ``name``: the
        kernel's name (a program of several kernels numbers them after it)."""
        from mapper.kernel import build

        return build(self, mapping, sizes, force=force, flops=flops, name=name)

    @_locating
    def run(self, mapping, sizes: AbcMapping[str, int], inputs=None, **options) -> RunResult:
        """``build(mapping, sizes).run(inputs, **options)``: one call, a typed result."""
        return self.build(mapping, sizes).run(inputs, **options)


def problem(expr, *, fusion: str | None = None, heuristics: bool | None = None,
            device: str | Device | None = None) -> MappingProblem:
    """The mapping problem of ``expr`` (a program node, its text, a ``.lift`` path, or a
    ``MappingProblem``): the validity rules of ``fusion`` (default ``always``), the
    heuristic rules when ``heuristics`` (default True), and the ``device`` kernels are
    built and run for (an OpenCL device spec, a preset name such as ``h100``, a JSON
    description path, or a ``codegen.target.Device``; default: the live default device).

    Given a ``MappingProblem``, it is returned as it is; a keyword that contradicts its
    configuration raises ``ConfigurationError`` (build another problem from
    ``p.program`` instead)."""
    if isinstance(expr, MappingProblem):
        given = {"fusion": fusion, "heuristics": heuristics, "device": device}
        clash = [f"{k}={v!r} (the problem has {getattr(expr, k)!r})"
                 for k, v in given.items() if v is not None and v != getattr(expr, k)]
        if clash:
            raise ConfigurationError(
                "the problem was built with another configuration: " + ", ".join(clash)
                + "; build a new one with problem(p.program, ...)")
        return expr
    fusion = "always" if fusion is None else fusion
    heuristics = True if heuristics is None else heuristics
    if fusion not in FUSION_STRATEGIES:
        raise ConfigurationError(f"fusion must be one of {FUSION_STRATEGIES}, got {fusion!r}")
    if not isinstance(heuristics, bool):
        raise ConfigurationError(f"heuristics must be True or False, got {heuristics!r}")
    prog, source = _program(expr)
    try:
        prog = label_maps(prog)
        tree = MapNestingTree(prog)
        return MappingProblem(prog, tree, fusion, generate(tree, fusion, heuristics),
                              heuristics, device, source)
    except IRTypeError as e:
        if source is not None:
            source.attach(e)
        raise


def _backend(name: str):
    try:
        return BACKENDS[name]
    except KeyError:
        raise ConfigurationError(f"backend must be one of {sorted(BACKENDS)}, "
                                 f"got {name!r}") from None


def _fixed(p: MappingProblem, fixed) -> dict[str, int]:
    if not fixed:
        return {}
    f = dict(p.mapping(fixed))
    if not z3_backend.is_satisfiable(p.model, fixed=f):
        core = z3_backend.unsat_core(p.model, f)
        lines = "\n".join(f"  - {c}" for c in core)
        raise ContradictoryFixedError(
            f"no valid mapping has {MapCodes(f)}; these constraints cannot all hold:\n{lines}",
            core,
        )
    return f


def enumerate_mappings(
    expr,
    *,
    backend: str = "cp",
    order: str = "solver",
    seed: int | None = None,
    limit: int | None = None,
    fusion: str | None = None,
    fixed=None,
    heuristics: bool | None = None,
) -> Iterator[MapCodes]:
    """Yield every valid mapping of ``expr`` (or the first ``limit``).

    ``order="random"`` yields them in a seeded uniformly random order (the valid set is
    enumerated first). ``fixed`` pins some maps (``"A=20"`` or ``{"A": 20}``); a
    contradictory ``fixed`` raises ``ContradictoryFixedError`` with the reason.
    """
    if order not in ("solver", "random"):
        raise ConfigurationError(f"order must be 'solver' or 'random', got {order!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, Integral)
                              or limit < 0):
        raise ConfigurationError(f"limit must be a non-negative integer or None, got {limit!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, Integral)):
        raise ConfigurationError(f"seed must be an integer or None, got {seed!r}")
    p = problem(expr, fusion=fusion, heuristics=heuristics)
    f = _fixed(p, fixed)
    solver = _backend(backend)
    sols = solver.iter_solutions(p.model, fixed=f or None)
    if order == "random":
        sols = list(sols)
        random.Random(None if seed is None else int(seed)).shuffle(sols)
    n = 0
    for s in sols:
        if limit is not None and n >= limit:
            return
        n += 1
        yield MapCodes({m: s[m] for m in p.labels})


def count_mappings(expr, *, backend: str = "cp", fusion: str | None = None, fixed=None,
                   heuristics: bool | None = None) -> int:
    """The number of valid mappings."""
    p = problem(expr, fusion=fusion, heuristics=heuristics)
    return _backend(backend).count(p.model, fixed=_fixed(p, fixed) or None)


def check_mapping(expr, mapping, *, fusion: str | None = None,
                  heuristics: bool | None = None) -> list[Constraint]:
    """The constraint instances ``mapping`` violates (empty when it is valid); see
    ``rejected_by`` for whether a validity rule or only heuristics reject it."""
    p = problem(expr, fusion=fusion, heuristics=heuristics)
    m = p.mapping(mapping)
    missing = [k for k in p.labels if k not in m]
    if missing:
        raise MappingError(f"the mapping gives no code for map(s) {', '.join(missing)}")
    return p.model.violated(dict(m))


def rejected_by(violations) -> RuleKind | None:
    """``validity`` when a validity rule is among ``violations`` (the mapping is wrong
    OpenCL), ``heuristic`` when only heuristics reject it (it would lower and run, but is
    pruned), None when there is none."""
    kinds = {rule_kind(c.rule) for c in violations}
    if not kinds:
        return None
    return RuleKind.VALIDITY if RuleKind.VALIDITY in kinds else RuleKind.HEURISTIC


def describe_violation(c: Constraint) -> str:
    """``[validity rule private-memory] map B ...`` / ``[heuristic local-in-group] ...``."""
    return f"{rule_head(c)} {c.description}"


@dataclass(frozen=True)
class Explanation:
    """Why a partial mapping is impossible: a minimal set of rule instances."""

    partial: MapCodes
    core: tuple[Constraint, ...]
    example: MapCodes | None  # a valid completion when the partial mapping is possible

    @property
    def possible(self) -> bool:
        return not self.core

    @property
    def kind(self) -> RuleKind | None:
        """``validity`` when a validity rule is in the core (the partial mapping cannot
        give correct OpenCL), ``heuristic`` when only heuristics forbid it, None if
        possible."""
        return rejected_by(self.core)

    def __str__(self) -> str:
        if self.possible:
            return f"{self.partial} is possible, e.g. {self.example}"
        if self.kind is RuleKind.VALIDITY:
            lines = [f"{self.partial} is impossible (a validity rule rejects it) because of "
                     "these rule instances:"]
        else:  # correct OpenCL that the heuristics prune as unlikely: not impossible
            rules = ", ".join(dict.fromkeys(c.rule for c in self.core))
            lines = [f"{self.partial} is ruled out by heuristic rules only ({rules}), not "
                     "by validity: --no-heuristics (heuristics=False) allows it; the rule "
                     "instances:"]
        lines += [f"  {show_constraint(c)}" for c in self.core]
        return "\n".join(lines)


def explain(expr, partial, *, fusion: str | None = None,
            heuristics: bool | None = None) -> Explanation:
    """Why can't ``partial`` (e.g. ``"A=20 C=30"``) be part of a valid mapping?

    Returns a minimal set of constraint instances (a Z3 unsat core, minimised) or, when
    the partial mapping is possible, an example completion.
    """
    p = problem(expr, fusion=fusion, heuristics=heuristics)
    part = p.mapping(partial)
    core = z3_backend.unsat_core(p.model, dict(part))
    if core and p.heuristics and rejected_by(core) is RuleKind.HEURISTIC:
        # a heuristic core: say "validity" if the validity rules alone also reject it
        pv = problem(p.program, fusion=p.fusion, heuristics=False)
        vcore = z3_backend.unsat_core(pv.model, dict(part))
        if vcore:
            core = vcore
    example = None
    if not core:
        sol = next(z3_backend.iter_solutions(p.model, fixed=dict(part)), None)
        example = MapCodes({m: sol[m] for m in p.labels}) if sol else None
    return Explanation(part, tuple(core), example)


def constraints_of(expr, *, fusion: str | None = None,
                   heuristics: bool | None = None) -> MappingProblem:
    """The constraint instances of ``expr`` (``.constraints``) with ``.per_rule()`` counts."""
    return problem(expr, fusion=fusion, heuristics=heuristics)


def lower_mapping(expr, mapping, *, fusion: str | None = None, check: bool = True,
                  heuristics: bool | None = None) -> Node:
    """Apply a valid mapping to ``expr``: the low-level program (raises if invalid)."""
    p = problem(expr, fusion=fusion, heuristics=heuristics)
    m = p.mapping(mapping)
    if check:
        bad = p.model.violated(dict(m)) if len(m) == len(p.labels) else None
        if bad is None:
            raise MappingError("the mapping must give a code to every map: "
                               + ", ".join(p.labels))
        if bad:
            raise InvalidMappingError(
                f"{m} is not valid:\n" + "\n".join(f"  - {c}" for c in bad), bad)
    return apply_mapping(p.program, m, p.tree)


def random_assignment_validity(expr, samples: int = 100_000, *, seed: int = 0,
                               fusion: str | None = None,
                               heuristics: bool | None = None) -> tuple[int, int]:
    """How many of ``samples`` uniformly random code assignments are valid (the paper's
    random baseline). Returns (valid, samples)."""
    p = problem(expr, fusion=fusion, heuristics=heuristics)
    rng = random.Random(seed)
    doms = [(m, p.model.param(m).domain) for m in p.labels]
    funcs = [(compile_predicate(c.predicate, tuple(sorted(c.params))), tuple(sorted(c.params)))
             for c in p.constraints]
    ok = 0
    for _ in range(samples):
        a = {m: rng.choice(d) for m, d in doms}
        if all(fn(*(a[x] for x in names)) for fn, names in funcs):
            ok += 1
    return ok, samples


__all__ = [
    "MappingProblem", "problem", "enumerate_mappings", "count_mappings", "check_mapping",
    "count_valid_mappings", "CountLimitError",
    "explain", "Explanation", "rejected_by", "describe_violation", "constraints_of",
    "lower_mapping", "random_assignment_validity",
    "AbcMapping", "Model",
]


# ------------------------------------------------------------------ counting by states


def count_valid_mappings(expr, *, fusion: str | None = None, fixed=None,
                         heuristics: bool | None = None,
                         timeout_s: float | None = None, max_states: int = 1_000_000,
                         progress=None) -> int:
    """The number of valid mappings, counted without listing them
    (``constraints.counting.count_solutions`` on the mapping problem's model, the maps in
    tree order: partial assignments that leave the same remaining problem are merged).

    ``fixed`` pins maps to codes. ``progress(done, total, states)`` is called after each
    map. Past ``timeout_s`` seconds (building the problem included) or ``max_states``
    states at one level it raises ``CountLimitError``.
    """
    t0 = time.monotonic()
    p = problem(expr, fusion=fusion, heuristics=heuristics)
    f = _fixed(p, fixed)
    model = p.model.restricted(f) if f else p.model
    return count_solutions(model, order=p.labels, timeout_s=timeout_s,
                           max_states=max_states, progress=progress, started=t0, what="maps")
