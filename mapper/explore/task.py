"""What is explored: a program (or one stage of a pipeline), its fixed sizes, its data.

A ``Task`` gives the strategies a joint mapping x tuning space (``mapper.tuning.JointSpace``)
and the evaluator a picklable lowering function per candidate, the inputs, the reference
result, the FLOP count and the comparison tolerance.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codegen.program import CompiledProgram
from codegen.target import Device
from mapper.data import conv2d_reference
from mapper.errors import InputError
from mapper.explore.store import content_hash
from mapper.tuning import JointSpace


@dataclass
class Task:
    """One exploration problem. Build it with ``from_program`` or ``from_pipeline``."""

    name: str
    text: str  # the program text: part of every key
    program: Any  # the explored program (a Lambda): its maps are the mapping parameters
    sizes: dict[str, int]  # fixed sizes; the other size variables are tuning parameters
    inputs: dict[str, np.ndarray]
    reference: np.ndarray | None
    flops: int | None
    tolerance: dict[str, float]
    fusion: str = "always"
    heuristics: bool = True  # False: the mappings only the heuristic rules reject are in
    max_value: int | None = None
    pipeline: Any = None
    stage: str | None = None
    stage_mappings: dict[str, dict[str, int]] = field(default_factory=dict)
    _joint: JointSpace | None = None
    device: Device | None = None  # what the space is built and candidates lowered for

    @property
    def program_hash(self) -> str:
        return content_hash(self.text)

    @property
    def explored_text(self) -> str:
        """The explored program's text (stored in the store's meta table for replay)."""
        from ir.syntax import print_program

        return print_program(self.program)

    def joint(self, device: Device | None = None) -> JointSpace:
        """The joint space (built once; ``device`` adds its limits as constraints and is the
        device candidates are lowered for)."""
        if device is not None and device != self.device:
            self.device, self._joint = device, None
        if self._joint is None:
            self._joint = JointSpace(self.program, self.sizes, fusion=self.fusion,
                                     device=self.device, max_value=self.max_value,
                                     heuristics=self.heuristics, flops=self.flops)
        return self._joint

    def lower_fn(self, mapping: Mapping[str, int], tuning: Mapping[str, int]
                 ) -> Callable[[], CompiledProgram]:
        """A picklable function that builds one candidate (runs in a worker) through the
        public build path (``mapper.candidates.build_candidate``, or ``build_pipeline`` for
        a pipeline's stage), its mapping judged by the task's rules (the heuristic ones
        only when ``heuristics``) once per worker."""
        from mapper.candidates import build_candidate, build_pipeline

        sizes = {**self.sizes, **{k: int(v) for k, v in tuning.items()}}
        if self.pipeline is not None:
            assert self.stage is not None  # a pipeline's task explores one of its stages
            maps = dict(self.stage_mappings, **{self.stage: dict(mapping)})
            return functools.partial(build_pipeline, self.pipeline, maps, sizes,
                                     flops=self.flops, heuristics=self.heuristics,
                                     device=self.device, explored=self.stage)
        return functools.partial(build_candidate, self.program, dict(mapping), sizes,
                                 fusion=self.fusion, flops=self.flops,
                                 heuristics=self.heuristics, device=self.device)

    # ------------------------------------------------------------------ builders

    @classmethod
    def from_program(cls, program, sizes: Mapping[str, int], *, fusion: str = "always",
                     name: str | None = None, inputs: Mapping[str, np.ndarray] | None = None,
                     reference: np.ndarray | None = None, flops: int | None = None,
                     max_value: int | None = None, seed: int = 0,
                     heuristics: bool = True) -> Task:
        """A single-kernel program (a ``Lambda``, its text, or a ``.lift`` path). Inputs
        default to seeded random data, the reference to the interpreter's result.
        ``heuristics=False``: the heuristic rules neither prune the space nor reject a
        candidate's mapping."""
        from ir.nodes import Lambda
        from ir.syntax import parse, parse_file, print_program
        from mapper.api import problem
        from mapper.data import check_inputs, random_inputs, reduction_tolerance
        from mapper.sizes import check_input_sizes

        if isinstance(program, str):
            if program.endswith(".lift"):
                name = name or program
                program = parse_file(program)
            else:
                program = parse(program)
        sizes = {k: int(v) for k, v in sizes.items()}
        prog = problem(program, fusion=fusion).program
        if not isinstance(prog, Lambda):
            raise InputError("the explored program must declare its inputs (e.g. X : [float]N)")
        text = print_program(prog)
        check_input_sizes(prog, sizes)
        task = cls(name or "program", text, prog, sizes, {}, None, flops, {},
                   fusion=fusion, heuristics=heuristics, max_value=max_value)
        task.inputs = check_inputs(prog, sizes, random_inputs(prog, sizes, seed=seed)
                                   if inputs is None else inputs)
        if reference is None:
            reference = task._interpret()
        task.reference = reference
        task.tolerance = reduction_tolerance(reference)
        if flops is None:
            task.flops = task._derived_flops()
        return task

    def _derived_flops(self) -> int | None:
        """The program's FLOP count (``ir.flops``) for the fixed sizes or, where it needs
        tuning sizes, for the valid configuration the reference uses (a tuning that
        changes the work, e.g. overlapping tiles, is not counted: give ``flops``); None
        where the program's functions cannot be counted."""
        from ir.flops import FlopsError, count_flops

        try:
            return count_flops(self.program, self.sizes)
        except FlopsError:
            sizes = self._configuration_sizes()
        try:
            return count_flops(self.program, sizes) if sizes is not None else None
        except FlopsError:
            return None

    def _configuration_sizes(self) -> dict[str, int] | None:
        """The fixed sizes with the tuning sizes of a valid configuration (the first
        mapping's first), or None when no mapping has one."""
        js = self.joint()
        for m in js.mappings:
            tp = js.tuning(m)
            if tp.params and tp.count():
                return dict(tp.sizes_for(tp.space[0]))
        return None

    def _interpret(self) -> np.ndarray:
        """The interpreter's result; tuning sizes the interpreter needs come from a valid
        configuration (the result does not depend on them)."""
        from ir.interp import evaluate
        from ir.sym import UnboundSizeError

        scalars = {q.name for q in self.program.params if not hasattr(q.type, "size")}
        args = {k: (v.reshape(-1)[0] if k in scalars else v) for k, v in self.inputs.items()}
        try:
            return np.asarray(evaluate(self.program, args, self.sizes))
        except UnboundSizeError:
            sizes = self._configuration_sizes()
            if sizes is None:
                raise
            return np.asarray(evaluate(self.program, args, sizes))

    @classmethod
    def from_pipeline(cls, pipeline, sizes: Mapping[str, int], *, stage: str | None = None,
                      stage_mappings: Mapping[str, Mapping[str, int]] | None = None,
                      inputs: Mapping[str, np.ndarray], reference: np.ndarray,
                      flops: int | None = None, max_value: int | None = None,
                      fusion: str = "always", heuristics: bool = True,
                      name: str | None = None) -> Task:
        """One stage of a ``Pipeline`` explored, the other stages with fixed mappings
        (default: ``mapper.candidates.default_stage_mappings``). ``fusion`` and ``heuristics``
        set the rules of the explored stage's space."""
        from ir.syntax import print_program
        from mapper.api import problem
        from mapper.candidates import default_stage_mappings, reduction_tolerance

        if stage is None:
            stage = max(pipeline.stages,
                        key=lambda s: len(problem(s.program, fusion=fusion).labels)).name
        st = pipeline.stage(stage)
        maps = {k: dict(v) for k, v in
                (stage_mappings or default_stage_mappings(pipeline, skip=(stage,))).items()}
        text = "\n".join(f"# stage {s.name} {s.sources}"
                         + ("" if s.name == stage else f" mapping {sorted(maps[s.name].items())}")
                         + "\n" + print_program(s.program) for s in pipeline.stages)
        return cls(name or f"{pipeline.name}:{stage}", text, st.program,
                   {k: int(v) for k, v in sizes.items()},
                   {k: np.asarray(v) for k, v in inputs.items()}, reference, flops,
                   reduction_tolerance(reference), fusion=fusion, heuristics=heuristics,
                   max_value=max_value, pipeline=pipeline, stage=stage, stage_mappings=maps)

    @classmethod
    def conv_layer(cls, layer, *, seed: int = 0, fusion: str = "always",
                   heuristics: bool = True, name: str | None = None,
                   coalesce: bool = False, vectorise: str = "window") -> Task:
        """The GPGPU'20 convolution pipeline on a ``ConvLayer``: random data, a float64
        numpy reference, the partial-convolution stage explored under ``fusion`` and
        ``heuristics``. ``name`` defaults to ``conv:<layer's name>``. ``coalesce`` picks the
        partial stage's layout (``ir.programs.conv_partial_stage``): False (the default)
        gives each work-item contiguous chunks, what a CPU device wants; True is the
        paper's GPU layout (consecutive work-items read consecutive vectors).
        ``vectorise="kernels"`` explores the partial stage vectorised across kernels
        (``ir.programs.conv_partial_kvec_stage``; the weights are passed in KKCM layout)."""
        from ir.programs import gpgpu20_conv_pipeline
        from mapper.candidates import default_stage_mappings

        x, w, ref = conv_data(layer, seed)
        # the window variant vectorises the window (C*K*K), which may need zero channels
        cp = layer.C if vectorise == "kernels" else conv_channels(layer)
        if cp != layer.C:  # zero channels: the same result, a reduction that vectorises
            x = np.concatenate([x, np.zeros((layer.H, layer.W, cp - layer.C), np.float32)], 2)
            w = np.concatenate([w, np.zeros((*w.shape[:3], cp - layer.C), np.float32)], 3)
        sizes = {**layer.sizes(), "C": cp}
        if vectorise == "kernels":
            w = np.ascontiguousarray(w.transpose(1, 2, 3, 0))
        pipeline = gpgpu20_conv_pipeline(coalesce, vectorise)
        # the pad, final-sum and crop passes are maps over channels: in vector lanes
        # (the final sum of a 5x5 layer's partials: 4x faster than scalar)
        maps = default_stage_mappings(pipeline, skip=("partial",), lanes=True)
        return cls.from_pipeline(
            pipeline, sizes, stage="partial", stage_mappings=maps,
            inputs={"inputData": x, "kernelsWeights": w}, reference=ref,
            flops=layer.flops, max_value=2 * layer.H, fusion=fusion, heuristics=heuristics,
            name=name or f"conv:{layer.name}" + ("" if not coalesce else ":coalesced")
            + ("" if vectorise == "window" else f":{vectorise}"))


def winograd_task(layer, *, m: int = 2, seed: int = 0, fusion: str = "always",
                  heuristics: bool = True, name: str | None = None) -> Task:
    """``layer`` computed by Winograd's F(m x m, 3 x 3) (``ir.winograd``; m = 2 or 4): the
    same random data and float64 reference as :meth:`Task.conv_layer` (direct), the
    weights transformed once on the host, the matrix products' stage (``gemm``) explored,
    the transforms' stages mapped as the library maps a stage it does not explore, their
    innermost maps in vector lanes (``default_stage_mappings(lanes=True)``) at the device's
    native width. GFLOP/s count the direct convolution's FLOPs (comparable with the direct
    variants'). The task's name ends in ``:winograd`` (m = 2) or ``:winograd4``.

    The comparison tolerance is the direct one's scaled by ``WINOGRAD_ERRORS[m]``: the
    transforms add and subtract up to n*n inputs (and products at the output) before and
    after the float32 channel sums, which rounds more than the direct sum of C*9 products
    does. In numpy's float32, the largest error against the float64 reference was
    0.43-1.0x the direct convolution's for F(2x2) and 7-27x for F(4x4) (five shapes, 3-512
    channels; ``ir.winograd``); each factor leaves room for the device's own order of
    summation. ``InvalidOptionError`` where F(m x m, 3 x 3) does not apply
    (``ir.winograd.applies``)."""
    from ir.errors import InvalidOptionError
    from ir.winograd import (
        input_matrix,
        output_matrix,
        transform_weights,
        winograd_pipeline,
    )
    from ir.winograd import sizes as winograd_sizes
    from ir.winograd import why_not as winograd_why_not
    from mapper.data import reduction_tolerance

    why = winograd_why_not(layer.K, layer.S, layer.P, layer.H, layer.W, m)
    if why is not None:
        raise InvalidOptionError(f"layer {layer.name}: {why}")
    x, w, ref = conv_data(layer, seed)
    inputs = {"inputData": x, "BT": input_matrix(m), "U": transform_weights(w, m),
              "AT": output_matrix(m)}
    sizes = winograd_sizes(layer.H, layer.W, layer.C, layer.M, m)
    from mapper.candidates import default_stage_mappings

    pipeline = winograd_pipeline(m)
    # the transforms' passes are maps over channels and kernels: in vector lanes
    maps = default_stage_mappings(pipeline, skip=("gemm",), lanes=True)
    task = Task.from_pipeline(pipeline, sizes, stage="gemm", stage_mappings=maps,
                              inputs=inputs, reference=ref, flops=layer.flops,
                              max_value=2 * layer.H, fusion=fusion, heuristics=heuristics,
                              name=name or f"conv:{layer.name}:{WINOGRAD_VARIANTS[m]}")
    tol = reduction_tolerance(ref)
    task.tolerance = {k: v * WINOGRAD_ERRORS[m] for k, v in tol.items()}
    return task


# how much looser Winograd's comparison is than the direct convolution's, by output tile
# (see winograd_task), and each tile's variant name
WINOGRAD_ERRORS = {2: 4.0, 4: 32.0}
WINOGRAD_ERROR = WINOGRAD_ERRORS[2]
WINOGRAD_VARIANTS = {2: "winograd", 4: "winograd4"}


def program_variants(program, sizes: Mapping[str, int], *, name: str = "program",
                     tiling: str = "auto", layout: str = "auto",
                     unfused: tuple[str, ...] = (), flops: int | None = None,
                     **options: Any) -> dict[str, Task]:
    """The tasks ``mapper explore FILE`` explores for a program (a ``Lambda``), by variant
    name: as written (``unfused``) and, with ``tiling`` (``auto``, ``local``, ...), fused
    through tiling (``ir.tiling.tiling_variants``; ``unfused`` stages left out of the
    tiles), then with ``layout="auto"`` its layout variants (:func:`layout_variants`).
    GFLOP/s count the unfused program's work (``flops``; derived where None): a tiling's
    recomputed halo is no progress. ``options`` go to :meth:`Task.from_program`."""
    from ir.errors import InvalidOptionError
    from ir.tiling import tiling_variants

    if layout not in ("auto", "declared"):
        raise InvalidOptionError(f"layout is auto or declared, not {layout!r}")
    programs = tiling_variants(program, tiling, unfused=unfused)
    if flops is None and (len(programs) > 1 or "unfused" not in programs):
        from ir.flops import FlopsError, count_flops

        try:
            flops = count_flops(program, sizes)
        except FlopsError:
            flops = None
    tasks = {v: Task.from_program(p, sizes, name=name if v == "unfused" else f"{name}:{v}",
                                  flops=flops, **options)
             for v, p in programs.items()}
    if layout == "auto" and "unfused" in tasks:
        tasks.update(layout_variants(tasks["unfused"]))
    return tasks


def layout_variants(task: Task) -> dict[str, Task]:
    """The layout variants of a single-kernel program's ``task`` (``mapper.layouts.
    preparation_plans``): for each plan of input layouts and paddings worth a variant, the
    program as a pipeline whose first kernels prepare those inputs (their maps as the
    library maps a stage it does not explore: the innermost in lanes, the others on global
    work-items) and whose last, ``main``, the explored one, computes from the copies; the
    same inputs, reference and FLOP count. Named after the plan (``layout-<input>-<dim>``,
    ``b<block>`` when blocked, ``+pad-<input>`` for each padding); empty for a pipeline's
    stage."""
    from ir.layout import prepared_pipeline
    from ir.nodes import Lambda
    from mapper.candidates import default_stage_mappings
    from mapper.layouts import preparation_plans

    if task.pipeline is not None or not isinstance(task.program, Lambda) \
            or task.reference is None:
        return {}
    lanes = int(_device_of(task).preferred_vector_width_float or 0)
    out = {}
    for plan in preparation_plans(task.program, task.sizes, task.flops, lanes):
        pl = prepared_pipeline(task.program, plan, name=task.name)
        vname = pl.name.split(":")[-1]
        out[vname] = Task.from_pipeline(
            pl, task.sizes, stage="main",
            stage_mappings=default_stage_mappings(pl, skip=("main",), lanes=True),
            inputs=task.inputs, reference=task.reference, flops=task.flops,
            max_value=task.max_value, fusion=task.fusion, heuristics=task.heuristics,
            name=f"{task.name}:{vname}")
    return out


def _device_of(task: Task) -> Device:
    """The device ``task`` is mapped for: its own, else the one ``--device`` would default
    to (``codegen.target.resolve``), else the library's default description."""
    from codegen.target import DEFAULT_DEVICE, DeviceDescriptionError, resolve

    if task.device is not None:
        return task.device
    try:
        return resolve(None)
    except DeviceDescriptionError:
        return DEFAULT_DEVICE


def conv_variants(layer, *, winograd: bool = True, **options: Any) -> dict[str, Task]:
    """The convolution's variants, as ``mapper explore conv`` explores them by default
    (``mapper.explore.variants``): the direct convolution's vectorisations
    (``ir.programs.CONV_VECTORISE``, the window's first), then, with ``winograd``,
    Winograd's F(2x2, 3x3) and F(4x4, 3x3) where each applies (:func:`winograd_task`,
    variants ``winograd`` and ``winograd4``). ``options`` go to :meth:`Task.conv_layer`
    (and to :func:`winograd_task`, but ``coalesce``)."""
    from ir.programs import CONV_VECTORISE

    tasks = {v: Task.conv_layer(layer, vectorise=v, **options) for v in CONV_VECTORISE}
    if winograd:
        wopts = {k: v for k, v in options.items() if k != "coalesce"}
        for m, name in WINOGRAD_VARIANTS.items():
            if winograd_applies(layer, m):
                tasks[name] = winograd_task(layer, m=m, **wopts)
    return tasks


def conv_task(layer, variant: str, **options: Any) -> Task:
    """The task of one convolution variant by its name: a direct vectorisation
    (``window``, ``kernels``: :meth:`Task.conv_layer`) or a Winograd variant
    (``winograd``, ``winograd4``: :func:`winograd_task`); ``InvalidOptionError`` for
    another name or a layer the variant does not take."""
    from ir.errors import InvalidOptionError
    from ir.programs import CONV_VECTORISE

    tiles = {name: m for m, name in WINOGRAD_VARIANTS.items()}
    if variant in tiles:
        return winograd_task(layer, m=tiles[variant],
                             **{k: v for k, v in options.items() if k != "coalesce"})
    if variant not in CONV_VECTORISE:
        raise InvalidOptionError(f"no convolution variant {variant!r}: give one of "
                                 f"{', '.join((*CONV_VECTORISE, *tiles))}")
    return Task.conv_layer(layer, vectorise=variant, **options)


def winograd_applies(layer, m: int = 2) -> bool:
    """Whether :func:`winograd_task` takes ``layer`` with output tiles m x m
    (``ir.winograd.applies``)."""
    from ir.winograd import applies

    return applies(layer.K, layer.S, layer.P, layer.H, layer.W, m)


def conv_data(layer, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded random data of ``layer`` (HWC input, MKKC weights) and its float64
    reference (:func:`conv_reference`): computed once for every variant of a layer (the
    arrays are copies: a caller may write them)."""
    return tuple(a.copy() for a in _conv_data(layer, seed))


@functools.lru_cache(maxsize=1)
def _conv_data(layer, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((layer.H, layer.W, layer.C)).astype(np.float32)
    w = rng.standard_normal((layer.M, layer.K, layer.K, layer.C)).astype(np.float32)
    return x, w, conv_reference(x, w, layer)


def conv_channels(layer) -> int:
    """The channels a convolution task runs with: ``layer.C``, or the fewest more (zero
    channels, in the input's and the weights' layout, as oneDNN's blocked layouts pad
    them) that make the reduction's length C*K*K a multiple of 4, so that it can be
    vectorised at all (the partial stage vectorises the flattened window: 3 RGB channels
    of a 3x3 kernel give 27, which only v=1 divides). The FLOP count stays the layer's."""
    c = layer.C
    while (c * layer.K * layer.K) % 4:
        c += 1
    return c


def conv_reference(x: np.ndarray, w: np.ndarray, layer) -> np.ndarray:
    """A direct float64 convolution of ``layer`` (HWC input, MKKC weights) -> float32
    (H', W', M): ``mapper.data.conv2d_reference`` with the layer's stride and padding."""
    return conv2d_reference(x, w, layer.S, layer.P)
