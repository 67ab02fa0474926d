"""From a mapping and tuning values to a compiled OpenCL program (one kernel or a pipeline),
through the public build path (``MappingProblem.build``).

``build_candidate`` and ``build_pipeline`` are picklable entry points (``functools.partial``
of them), so a worker process builds a candidate itself: a crash while lowering or
compiling then costs a worker, not the caller.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import replace

from codegen.lanes import DEFAULT_LANES
from codegen.program import Buffer, CompiledProgram, Kernel
from codegen.target import DEFAULT_DEVICE, Device
from ir.nodes import Lambda, Node
from ir.pipeline import PREVIOUS, Pipeline, Stage, source_stage
from mapper.api import MappingProblem, enumerate_mappings, problem
from mapper.data import reduction_tolerance  # noqa: F401  (its callers import it here)
from mapper.errors import InvalidMappingError


@functools.lru_cache(maxsize=64)
def _problem(program: Node, fusion: str, heuristics: bool, device: Device) -> MappingProblem:
    """The mapping problem of ``program``, built once per process (nodes are frozen, so a
    program is its own key): a worker building many candidates of one program builds its
    nesting tree and constraints once, and checks and applies each mapping once
    (``MappingProblem.lower`` keeps the mapped programs)."""
    return problem(program, fusion=fusion, heuristics=heuristics, device=device)


@functools.lru_cache(maxsize=16)
def _folded(stage: Stage, program: Lambda) -> Lambda:
    """``program`` with ``stage``'s layout folded in (``Stage.fold``), once per process."""
    assert stage.fold is not None
    return stage.fold(program)


def build_candidate(program: Node, mapping, sizes: Mapping[str, int], *,
                    fusion: str = "always", heuristics: bool = True,
                    device: Device | None = None, flops: int | None = None,
                    force: bool = False, name: str = "kernel") -> CompiledProgram:
    """The OpenCL program of one candidate: ``problem(program, fusion=, heuristics=,
    device=).build(mapping, sizes, force=, flops=, name=).compiled``, the public build
    path, with the problem kept per process. A picklable entry point (a
    ``functools.partial`` of it is what a worker runs).

    ``sizes``: every size of the program (the fixed ones and the tuning values);
    ``force``: the mapping rules do not judge it (the lowering's checks do);
    ``heuristics=False``: the validity rules only; ``device``: the description kernels are
    lowered for (default ``codegen.target.DEFAULT_DEVICE``; a worker never starts a
    device of its own to read limits)."""
    p = _problem(program, fusion, heuristics, device or DEFAULT_DEVICE)
    # as lowered: its FLOP count as given (a worker does not count them per candidate)
    return p.build(mapping, sizes, force=force, flops=flops, name=name).compiled


_STAGES: OrderedDict[tuple, tuple[MappingProblem, CompiledProgram]] = OrderedDict()
STAGES_KEPT = 64  # built stages a process keeps (the stages a search does not explore)


def _stage_built(p: MappingProblem, mapping: tuple[tuple[str, int], ...],
                 sizes: tuple[tuple[str, int], ...], name: str) -> CompiledProgram:
    """One stage built at the sizes it names, once per process: the stages an exploration
    does not explore have one mapping and one set of sizes throughout. Keyed by the
    problem's identity (``_problem`` keeps one per program; the entry holds it alive)."""
    key = (id(p), mapping, sizes, name)
    hit = _STAGES.get(key)
    if hit is not None and hit[0] is p:
        _STAGES.move_to_end(key)
        return hit[1]
    cp = p.build(dict(mapping), dict(sizes), name=name).compiled
    _STAGES[key] = (p, cp)
    if len(_STAGES) > STAGES_KEPT:
        _STAGES.popitem(last=False)
    return cp


def stage_sizes(p: MappingProblem, mapping: Mapping[str, int], sizes: Mapping[str, int], *,
                widths: bool = True) -> tuple[tuple[str, int], ...]:
    """The ``sizes`` one stage of a pipeline (its problem ``p``) names, sorted: the sizes
    of its program (a pipeline's sizes hold every stage's, and stages share a size by its
    name) and, with ``widths``, the vector widths and unroll counts its mapping adds
    (named after its own maps and reductions: another stage's may have the same names;
    without ``widths`` the build takes its defaults)."""
    names = p.program_sizes | p.width_plan(mapping).names if widths else p.program_sizes
    return tuple(sorted((k, int(v)) for k, v in sizes.items() if k in names))


def native_lanes(device: Device) -> tuple[int, ...]:
    """The vector widths a stage nobody tunes takes, widest first: the device's preferred
    float width (16 on an AVX-512 CPU, 8 on AVX2), then the public defaults (8, 4, 2)."""
    pref = max(1, int(device.preferred_vector_width_float))
    return tuple(sorted({pref, *DEFAULT_LANES}, reverse=True)) if pref > 1 else DEFAULT_LANES


def build_pipeline(pipeline: Pipeline, mappings: Mapping[str, Mapping[str, int]],
                   sizes: Mapping[str, int], *, flops: int | None = None,
                   fusion: str = "free", heuristics: bool = True,
                   device: Device | None = None,
                   explored: str | None = None) -> CompiledProgram:
    """Every stage of ``pipeline`` built with its own mapping (:func:`build_candidate`,
    the public build path) and chained into one program: a stage's output buffer is the
    next stage's ``<previous>`` input; a stage that copies its input unchanged at
    ``sizes`` (``Stage.identity_at``) is left out. Each mapping is checked against the
    rules of ``fusion`` (the heuristic rules too when ``heuristics``). ``explored``: the
    stage whose vector widths ``sizes`` holds (its tuning values); the other stages take
    their default widths, a V map the device's native width where it divides
    (:func:`native_lanes`; None: every stage takes those ``sizes`` names). A picklable
    entry point, like :func:`build_candidate`."""
    device = device or DEFAULT_DEVICE
    kernels: list[Kernel] = []
    buffers: dict[str, Buffer] = {}
    prev_out: str | None = None
    outs: dict[str, str] = {}  # stage name -> its output buffer
    out_shape: tuple[int, ...] = ()
    stages = pipeline.stages
    for i, st in enumerate(stages):
        if (prev_out is not None and st.reads_only_previous
                and (st.identity_at(sizes) or st.folds_at(sizes))):
            continue  # it would copy (or lay out) its input: the stage before did
        after = stages[i + 1] if i + 1 < len(stages) else None
        program = st.program
        if after is not None and after.reads_only_previous and after.folds_at(sizes):
            program = _folded(after, st.program)  # written through the next's layout
        mapping = tuple(dict(mappings[st.name]).items())
        p = _problem(program, fusion, heuristics, device)
        tuned = explored is None or st.name == explored
        own = stage_sizes(p, dict(mapping), sizes, widths=tuned)
        if not tuned:  # its V maps at the device's native width, where it divides
            at = dict(own)
            own = tuple(sorted({**at, **p.width_plan(dict(mapping)).defaults(
                at, native_lanes(device))}.items()))
        cp = _stage_built(p, mapping, own, st.name)
        rename: dict[str, str] = {}
        for name, src in st.sources:
            earlier = source_stage(src)
            if src == PREVIOUS:
                assert prev_out is not None, f"the first stage {st.name} reads <previous>"
                rename[name] = prev_out
            elif earlier is not None:
                assert earlier in outs, f"stage {st.name} reads {earlier}, not built before"
                rename[name] = outs[earlier]
            else:
                rename[name] = src
        for name, b in cp.buffers.items():
            rename.setdefault(name, f"s{i}_{name}")
            new = rename[name]
            if new not in buffers:
                buffers[new] = replace(b, name=new,
                                       role="input" if new in pipeline.inputs else "temp")
        kernels += [replace(k, args=tuple(rename[a] for a in k.args)) for k in cp.kernels]
        prev_out, out_shape = rename[cp.output], cp.output_shape
        outs[st.name] = prev_out
    assert prev_out is not None, "a pipeline has at least one stage"
    buffers[prev_out] = replace(buffers[prev_out], role="output")
    return CompiledProgram(tuple(kernels), buffers, tuple(pipeline.inputs), prev_out,
                           out_shape, flops=flops)


def first_mapping(program: Node, fixed: Mapping[str, str | int], *,
                  rest_sequential: bool = True, fusion: str = "free") -> dict[str, int]:
    """The first valid mapping with ``fixed`` maps pinned and (by default) every other map
    sequential or fused."""
    labels = problem(program, fusion=fusion).labels
    for m in enumerate_mappings(program, fixed=fixed, fusion=fusion):
        if not rest_sequential or all(m[k] in (0, 1) for k in labels if k not in fixed):
            return dict(m)
    raise InvalidMappingError(f"no valid mapping with {dict(fixed)} and the other maps sequential")


def default_stage_mappings(pipeline: Pipeline, *, skip: Collection[str] = (),
                           lanes: bool = False) -> dict[str, dict[str, int]]:
    """A mapping for each stage of ``pipeline`` not in ``skip``, as the library maps the
    stages it does not explore: the stage's outermost maps (up to three) to mapGlb(2),
    mapGlb(1), mapGlb(0) in that order, the other maps sequential. With ``lanes``, the
    innermost map the rules let run in vector lanes (code V; its width the build's
    default) is taken out first and the others mapped so; a stage with no such map is
    mapped as without ``lanes``."""
    out = {}
    for st in pipeline.stages:
        if st.name in skip:
            continue
        labels = problem(st.program, fusion="free").labels
        out[st.name] = _lane_mapping(st.program, labels) if lanes else None
        if out[st.name] is None:
            fixed = {m: f"mapGlb({2 - i})" for i, m in enumerate(labels[:3])}
            out[st.name] = first_mapping(st.program, fixed)
    return {k: v for k, v in out.items() if v is not None}


def _lane_mapping(program: Node, labels: list[str]) -> dict[str, int] | None:
    """The first valid mapping with the innermost possible map in lanes and the outermost
    (up to three) of the others on mapGlb(2), (1), (0); None when no map can be. A map of
    one iteration at any size (over a reduction's one value) is never the one: it has no
    lanes to fill."""
    from ir.types import ArrayType

    tree = problem(program, fusion="free").tree

    def once(m: str) -> bool:
        t = (tree.info.map_types.get(id(tree.maps[m].node)) or (None,))[0]
        return isinstance(t, ArrayType) and t.size.is_const and t.size.as_int() == 1

    for v in [m for m in reversed(labels) if not once(m)]:
        rest = [m for m in labels if m != v]
        fixed = {m: f"mapGlb({2 - i})" for i, m in enumerate(rest[:3])}
        try:
            return first_mapping(program, {**fixed, v: "mapVec"})
        except InvalidMappingError:
            continue
    return None
