"""One mapping built and run: the public build/run API behind ``MappingProblem.build``.

``build`` checks the sizes, applies the mapping (the problem's rules judge it unless
forced), lowers it to OpenCL for the problem's device and returns a ``CompiledKernel``:
its source, launch sizes, resources and FLOP/byte counts. ``CompiledKernel.run`` runs it
in a persistent worker process (a crash or hang costs the worker, not the caller), checks
the output against the reference interpreter and returns a typed ``RunResult``.

This module does not import ``mapper.api``: the problem is passed in (``Problem``).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from codegen.program import CompiledProgram, Kernel, Outcome, Status
from codegen.target import PRESETS, Device
from constraints.model import Constraint
from ir.errors import LiftmapError
from mapper.apply import WidthPlan
from mapper.data import check_inputs, random_inputs, reduction_tolerance, reference_result
from mapper.encoding import MapCodes
from mapper.errors import ConfigurationError, DeviceUseError, InputError
from mapper.sizes import check_sizes, sizes_argument

if TYPE_CHECKING:
    from codegen.worker import WorkerPool
    from ir.nodes import Lambda, Node
    from mapper.nesting import MapNestingTree


class Problem(Protocol):
    """What ``build`` needs of a problem (``mapper.api.MappingProblem`` has it; this
    module does not import the API, which imports this module)."""

    program: Node
    device: str | Device | None
    tree: MapNestingTree

    @property
    def labels(self) -> list[str]: ...

    def mapping(self, m) -> MapCodes: ...

    def check(self, mapping) -> list[Constraint]: ...

    def lower(self, mapping, *, check: bool = True) -> Node: ...

    @property
    def program_sizes(self) -> frozenset[str]: ...

    def width_plan(self, mapping) -> WidthPlan: ...

DEFAULT_REPEATS = 5
DEFAULT_TIMEOUT_S = 60.0

_pools: dict[str | None, WorkerPool] = {}


def pool_for(spec: str | None) -> WorkerPool:
    """The persistent worker pool of a live OpenCL device spec (``None``: the default
    device), started on first use and closed at exit."""
    pool = _pools.get(spec)
    if pool is None:
        import atexit

        from codegen.worker import WorkerPool

        pool = _pools[spec] = WorkerPool(spec)
        atexit.register(pool.close)
    return pool


def is_description(device: str | Device | None) -> bool:
    """Whether ``device`` describes a device (a ``Device``, a preset name, a JSON path)
    rather than naming a live OpenCL device to run on."""
    if isinstance(device, Device):
        return True
    return device is not None and (device.lower() in PRESETS or device.endswith(".json")
                                   or os.path.sep in device)


def target_device(device: str | Device | None) -> Device:
    """The ``Device`` kernels are lowered for: a description as given, or the limits of
    the live device (which starts its worker)."""
    if is_description(device):
        from codegen.target import resolve

        return resolve(device)
    assert not isinstance(device, Device)
    return Device.from_limits(pool_for(device).device_info().get("limits", {}))


@dataclass(frozen=True)
class RunResult:
    """What one run of a kernel gave: ``status`` (``ok``, ``rejected``, ``compile-error``,
    ``wrong-result``, ``timeout``, ``crash``), ``reason`` in words, every timed execution
    (seconds, all kernels of the program together), the work counts, the largest error
    against the reference interpreter and the device memory used."""

    status: Status
    reason: str
    check: str | None
    times_s: tuple[float, ...]
    flops: int | None
    bytes: int
    max_abs_error: float | None
    memory: dict[str, int]
    build_s: float | None
    device: str
    tolerance: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if type(self.status) is not Status:  # given as its text
            object.__setattr__(self, "status", Status.of(self.status))

    @property
    def ok(self) -> bool:
        """Ran, and matched the reference."""
        return self.status == "ok"

    @property
    def label(self) -> str:
        """``ok``, ``rejected:<check>``, ``wrong-result``, ..."""
        return f"rejected:{self.check}" if self.status == "rejected" and self.check \
            else self.status

    @property
    def time_s(self) -> float | None:
        """The median execution time."""
        return statistics.median(self.times_s) if self.times_s else None

    @property
    def spread(self) -> tuple[float, float] | None:
        """The fastest and the slowest execution."""
        return (min(self.times_s), max(self.times_s)) if self.times_s else None

    @property
    def gflops(self) -> float | None:
        """FLOPs per nanosecond of the median time (None without a FLOP count)."""
        t = self.time_s
        return self.flops / t / 1e9 if t and self.flops else None

    @property
    def gbs(self) -> float | None:
        """Compulsory global traffic (inputs + output) per nanosecond of the median."""
        t = self.time_s
        return self.bytes / t / 1e9 if t and self.bytes else None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field and derived figure."""
        return {"status": self.status, "label": self.label, "ok": self.ok,
                "reason": self.reason, "check": self.check, "time_s": self.time_s,
                "times_s": list(self.times_s), "flops": self.flops, "bytes": self.bytes,
                "gflops": self.gflops, "gbs": self.gbs,
                "max_abs_error": self.max_abs_error, "tolerance": self.tolerance,
                "memory": self.memory, "build_s": self.build_s, "device": self.device}

    def __str__(self) -> str:
        if not self.ok or self.time_s is None:
            return f"{self.label}: {self.reason}"
        lo, hi = self.spread or (0.0, 0.0)
        parts = [f"ok: median {_us(self.time_s)} over {len(self.times_s)} run(s) "
                 f"(min {_us(lo)}, max {_us(hi)})"]
        if self.gflops is not None:
            parts.append(f"{self.gflops:.3g} GFLOP/s")
        if self.gbs is not None:
            parts.append(f"{self.gbs:.3g} GB/s")
        parts.append(f"max abs error {self.max_abs_error or 0:.2g}")
        return ", ".join(parts)


def _us(t: float) -> str:
    return f"{t * 1e3:.3g} ms" if t >= 1e-3 else f"{t * 1e6:.3g} us"


@dataclass(frozen=True)
class CompiledKernel:
    """A mapping lowered to OpenCL for fixed sizes: ``program`` (the kernels, buffers and
    launch sizes; ``compiled`` as the lowering made it), what it computes
    (``source_program``, ``sizes``), its work counts (``flops``, ``bytes``: derived when
    first asked), the
    device it was lowered for (``live``: whether it is a live OpenCL device to run on,
    ``spec`` the device spec given, None for the default), and the rule instances a
    forced build overrode."""

    compiled: CompiledProgram  # as lowered (its FLOP count only where build was given one)
    mapping: MapCodes
    sizes: dict[str, int]
    source_program: Lambda
    device: Device
    live: bool
    spec: str | None
    overridden: tuple[Constraint, ...] = ()
    given_flops: int | None = field(default=None, repr=False)  # build's flops=

    @cached_property
    def program(self) -> CompiledProgram:
        """The kernels, buffers and launch sizes, with the FLOP count (``flops``)."""
        if self.compiled.flops is None and self.flops is not None:
            return replace(self.compiled, flops=self.flops)
        return self.compiled

    @cached_property
    def flops(self) -> int | None:
        """The FLOP count: as given to ``build``, else derived from the program
        (``ir.flops.count_flops``; None where its functions cannot be counted) when first
        asked: a worker that builds a candidate does not pay for it."""
        if self.given_flops is not None:
            return self.given_flops
        return derived_flops(self.source_program, self.sizes)

    @cached_property
    def bytes(self) -> int:
        """The compulsory global traffic (inputs + output), derived from the program
        (``ir.flops.count_bytes``) when first asked: a worker that builds a candidate for
        its program does not pay for it."""
        from ir.flops import count_bytes

        return count_bytes(self.source_program, self.sizes)

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        """The OpenCL kernels, in launch order."""
        return self.compiled.kernels

    @property
    def source(self) -> str:
        """The OpenCL source of every kernel (each compiles on its own)."""
        return "\n".join(k.source.rstrip("\n") + "\n" for k in self.compiled.kernels)

    @property
    def launch(self) -> tuple[tuple[str, tuple[int, ...], tuple[int, ...] | None], ...]:
        """(kernel name, global size, local size) per kernel."""
        return tuple((k.name, k.global_size, k.local_size) for k in self.compiled.kernels)

    @property
    def resources(self) -> dict[str, int]:
        """Bytes by address space (``global_total``, ``local_per_group``,
        ``private_per_item``, ...)."""
        return self.compiled.memory_report()

    def __str__(self) -> str:
        launch = ", ".join(f"{n} {g}/{loc}" for n, g, loc in self.launch)
        return (f"{self.mapping}: {len(self.kernels)} kernel(s), launch {launch}, "
                f"{self.resources['global_total']:,} bytes of global memory")

    def run(self, inputs: Mapping[str, Any] | None = None, *, repeats: int = DEFAULT_REPEATS,
            timeout_s: float = DEFAULT_TIMEOUT_S, seed: int = 0,
            reference: np.ndarray | None = None) -> RunResult:
        """Runs the kernel(s) ``repeats`` times in an isolated worker on the live device
        and checks the output against the reference interpreter (or ``reference``).
        ``inputs``: arrays by input name (default: seeded random data)."""
        if not self.live:
            raise DeviceUseError(
                f"this kernel was built for the description {self.device.name!r} "
                f"({self.device.source}), which cannot run kernels; build it on a problem "
                "whose device is a live OpenCL device (device=None or a device spec)")
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise ConfigurationError(f"repeats must be 1 or more, got {repeats!r}")
        if not timeout_s > 0:
            raise ConfigurationError(f"timeout_s must be more than 0 seconds, got {timeout_s!r}")
        data = check_inputs(self.source_program, self.sizes,
                            random_inputs(self.source_program, self.sizes, seed=seed)
                            if inputs is None else inputs)
        ref = reference_result(self.source_program, data, self.sizes) \
            if reference is None else np.asarray(reference)
        tol = reduction_tolerance(ref)
        pool = pool_for(self.spec)
        o = pool.evaluate(self.program, data, ref, timeout_s=timeout_s, repeats=repeats,
                          **tol)
        name = str(pool.device_info().get("limits", {}).get("name", pool.spec or ""))
        return result_of(o, self.flops, self.bytes, name, tol)


def result_of(o: Outcome, flops: int | None, nbytes: int, device: str,
              tolerance: Mapping[str, float] | None = None) -> RunResult:
    """The typed result of a runner ``Outcome``."""
    return RunResult(o.status, o.reason, o.check, tuple(o.times_s), flops, nbytes,
                     o.max_abs_error, dict(o.memory), o.build_s, device,
                     dict(tolerance or {}))


def derived_flops(program: Lambda, sizes: Mapping[str, int]) -> int | None:
    """The FLOPs of ``program`` for ``sizes``, derived from the program (``ir.flops``);
    None where the program's functions cannot be counted."""
    from ir.flops import count_flops

    try:
        return count_flops(program, sizes)
    except LiftmapError:
        return None


def build(p: Problem, mapping, sizes: Mapping[str, int], *, force: bool = False,
          flops: int | None = None, name: str = "kernel") -> CompiledKernel:
    """``mapping`` of problem ``p`` lowered to OpenCL for ``sizes`` (see
    ``MappingProblem.build``). This is the one way a candidate becomes OpenCL: the
    exploration's workers (``mapper.candidates.build_candidate``), the oracle, the
    witnesses and the benchmarks call it too. The mapping is checked and applied once per
    problem (``MappingProblem.lower`` keeps the result), not once per set of sizes."""
    from codegen.lower import lower
    from ir.nodes import Lambda

    prog = p.program
    if not isinstance(prog, Lambda):
        raise InputError("a program that is built declares its inputs (e.g. X : [float]N)")
    sizes = {k: int(v) if isinstance(v, (int, np.integer)) else v
             for k, v in sizes_argument(sizes).items()}
    m = p.mapping(mapping)
    plan = p.width_plan(m)
    sizes = {**plan.defaults(sizes), **sizes}
    check_sizes(prog, sizes, complete=True, flag="sizes", extra=plan.names,
                names=p.program_sizes)
    if flops is not None and (isinstance(flops, bool) or not isinstance(flops, int)
                              or flops < 0):
        raise ConfigurationError(f"flops must be a non-negative integer, got {flops!r}")
    overridden = tuple(p.check(m)) if force and len(m) == len(p.labels) else ()
    low = p.lower(m, check=not force)
    device = target_device(p.device)
    cp = lower(low, sizes, name=name, device=device)
    if flops is not None:
        cp = replace(cp, flops=flops)
    live = not is_description(p.device)
    spec = p.device if isinstance(p.device, str) and live else None
    return CompiledKernel(cp, m, sizes, prog, device, live, spec, overridden, flops)
