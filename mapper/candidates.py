"""From a mapping and tuning values to a compiled OpenCL program (one kernel or a pipeline).

These functions are picklable entry points (``functools.partial`` of them), so a worker
process can lower a candidate itself: a crash while lowering or compiling then costs a
worker, not the caller.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from dataclasses import replace

from codegen.program import Buffer, CompiledProgram, Kernel
from codegen.target import Device
from ir.nodes import Node, size_names
from ir.pipeline import Pipeline
from mapper.api import MappingProblem, enumerate_mappings, lower_mapping, problem
from mapper.data import reduction_tolerance  # noqa: F401  (its callers import it here)
from mapper.errors import InvalidMappingError


@functools.lru_cache(maxsize=64)
def _problem(program: Node | str, fusion: str, heuristics: bool) -> MappingProblem:
    """The mapping problem of ``program``, built once per process (nodes are frozen, so a
    program is its own key): a worker lowering many candidates of one program builds its
    nesting tree and constraints once."""
    return problem(program, fusion=fusion, heuristics=heuristics)


def lower_candidate(program: Node, mapping, sizes: Mapping[str, int], *,
                    fusion: str = "always", name: str = "kernel",
                    flops: int | None = None, check: bool = True,
                    heuristics: bool = True, device: Device | None = None) -> CompiledProgram:
    """Apply ``mapping`` to ``program`` and lower it for ``sizes`` (layer + tuning values).

    ``check=False`` skips the mapping constraints, so the lowering's own checks judge it;
    ``heuristics=False`` checks the validity rules only (a mapping that only a heuristic
    rejects lowers); ``device`` supplies the limits (default:
    ``codegen.target.DEFAULT_DEVICE``)."""
    from codegen.lower import lower

    low = lower_mapping(_problem(program, fusion, heuristics), mapping, fusion=fusion,
                        check=check, heuristics=heuristics)
    cp = lower(low, dict(sizes), name=name, device=device)
    return replace(cp, flops=flops) if flops is not None else cp


@functools.lru_cache(maxsize=64)
def _mapped(program: Node, mapping: tuple[tuple[str, int], ...], fusion: str,
            heuristics: bool) -> tuple[Node, frozenset[str]]:
    """A stage's mapped program (the mapping checked) and the sizes it mentions, once per
    process: the stages an exploration does not explore have one mapping throughout."""
    low = lower_mapping(_problem(program, fusion, heuristics), dict(mapping), fusion=fusion,
                        heuristics=heuristics)
    return low, size_names(low)


@functools.lru_cache(maxsize=64)
def _lowered(low: Node, sizes: tuple[tuple[str, int], ...], name: str,
             device: Device | None) -> CompiledProgram:
    """``codegen.lower.lower`` of a mapped stage at the sizes it mentions, once per process:
    a stage's kernels do not depend on another stage's tuning values."""
    from codegen.lower import lower

    return lower(low, dict(sizes), name=name, device=device)


def lower_pipeline(pipeline: Pipeline, mappings: Mapping[str, Mapping[str, int]],
                   sizes: Mapping[str, int], *, flops: int | None = None,
                   fusion: str = "free", heuristics: bool = True,
                   device: Device | None = None) -> CompiledProgram:
    """Every stage of ``pipeline`` with its own mapping, chained into one program: a
    stage's output buffer is the next stage's ``<previous>`` input; a stage that copies its
    input unchanged at ``sizes`` (``Stage.identity_at``) is left out. Each mapping is
    checked against the rules of ``fusion`` (the heuristic rules too when ``heuristics``)."""
    kernels: list[Kernel] = []
    buffers: dict[str, Buffer] = {}
    prev_out: str | None = None
    out_shape: tuple[int, ...] = ()
    for i, st in enumerate(pipeline.stages):
        if (prev_out is not None and [src for _, src in st.sources] == ["<previous>"]
                and st.identity_at(sizes)):
            continue  # it would copy its input unchanged: the next stage reads that
        low, names = _mapped(st.program, tuple(dict(mappings[st.name]).items()), fusion,
                             heuristics)
        cp = _lowered(low, tuple(sorted((k, v) for k, v in sizes.items() if k in names)),
                      st.name, device)
        rename: dict[str, str] = {}
        for name, src in st.sources:
            if src == "<previous>":
                assert prev_out is not None, f"the first stage {st.name} reads <previous>"
                rename[name] = prev_out
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


def default_stage_mappings(pipeline: Pipeline, *, skip: Collection[str] = ()
                           ) -> dict[str, dict[str, int]]:
    """A mapping for each stage of ``pipeline`` not in ``skip``, as the library maps the
    stages it does not explore: the stage's outermost maps (up to three) to mapGlb(2),
    mapGlb(1), mapGlb(0) in that order, the other maps sequential."""
    out = {}
    for st in pipeline.stages:
        if st.name in skip:
            continue
        labels = problem(st.program, fusion="free").labels
        fixed = {m: f"mapGlb({2 - i})" for i, m in enumerate(labels[:3])}
        out[st.name] = first_mapping(st.program, fixed)
    return out


