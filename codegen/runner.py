"""Builds, runs, times and validates a ``CompiledProgram`` on one OpenCL device.

``Runner.evaluate`` turns every failure of a candidate into an ``Outcome``. It runs in
the calling process: a kernel that hangs or a compiler that aborts takes the process
with it, so explorations go through ``codegen.worker``, which runs a ``Runner`` in a
worker process with a time limit.
"""

from __future__ import annotations

import hashlib
import re
import statistics
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from codegen.device import DeviceFeatureError, check_features, device_limits, select_device
from codegen.errors import InvalidArgumentError, KernelInputError
from codegen.opencl_env import ensure_pocl_environment
from codegen.program import DTYPES, CompiledProgram, Outcome, Status
from ir.errors import LiftmapError

_FILL = {"float": np.float32(np.nan), "int": np.int32(-0x7F7F7F7F)}


def source_hash(source: str, options: tuple[str, ...] = ()) -> str:
    """The build-cache key: SHA-256 of the source and the build options."""
    h = hashlib.sha256(source.encode())
    h.update(b"\0" + " ".join(options).encode())
    return h.hexdigest()


_COMMENT = re.compile(r"[ \t]*//[^\n]*")


def without_comments(source: str) -> str:
    """``source`` with its ``//`` comments cut, each line kept in its place (a build log's
    line and column numbers stay those of ``source``). The emitted code has no string
    literals, the only place a ``//`` would not start a comment; a source with a double
    quote is returned as it is."""
    return source if '"' in source else _COMMENT.sub("", source)


def build_key(source: str, options: tuple[str, ...] = ()) -> str:
    """The build-cache key: ``source_hash`` of the code of ``source`` (its comments and
    blank lines left out: ``without_comments``) and the build options. Mappings of a
    program often lower to the same code and differ only in the comments (the mapping and
    sizes in the header, the map codes beside the loops; Listing 3 with private memory has
    63 valid mappings and 46 codes): they share one build."""
    code = "\n".join(ln for ln in without_comments(source).split("\n") if ln.strip())
    return source_hash(code, options)


def program_hash(program: CompiledProgram) -> str:
    """Hash of all kernel sources and the build options of ``program`` (16 hex digits)."""
    h = hashlib.sha256()
    for k in program.kernels:
        h.update(source_hash(k.source, program.build_options).encode())
    return h.hexdigest()[:16]


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def check_launch(program: CompiledProgram, limits: Mapping) -> tuple[str, str] | None:
    """``(check, reason)`` if ``program`` cannot be launched on a device with ``limits``.

    Checks, before any build: work-group size and shape (``work-group-size``), global size a
    multiple of the local size (``global-size``), local memory per group
    (``local-memory``), each buffer against the maximum allocation (``max-allocation``)
    and all global buffers against the device memory (``global-memory``).
    """
    for k in program.kernels:
        if len(k.global_size) > limits["max_work_item_dimensions"]:
            return ("work-group-size",
                    f"kernel {k.name}: {len(k.global_size)} dimensions > "
                    f"{limits['max_work_item_dimensions']}")
        if any(g <= 0 for g in k.global_size):
            return "global-size", f"kernel {k.name}: global size {k.global_size} has a zero"
        if k.local_size is not None:
            if len(k.local_size) != len(k.global_size):
                return ("global-size", f"kernel {k.name}: local size {k.local_size} and global "
                        f"size {k.global_size} differ in dimensions")
            wg = _prod(k.local_size)
            if wg > limits["max_work_group_size"]:
                return ("work-group-size", f"kernel {k.name}: work-group size {wg} "
                        f"{tuple(k.local_size)} > device max {limits['max_work_group_size']}")
            for d, (ls, mx) in enumerate(zip(k.local_size, limits["max_work_item_sizes"])):
                if ls > mx:
                    return ("work-group-size", f"kernel {k.name}: local size {ls} in dimension "
                            f"{d} > device max {mx}")
            for d, (g, ls) in enumerate(zip(k.global_size, k.local_size)):
                if ls <= 0 or g % ls:
                    return ("global-size", f"kernel {k.name}: global size {g} is not a multiple "
                            f"of local size {ls} in dimension {d}")
        local = sum(b.nbytes for b in k.local_buffers)
        if local > limits["local_mem_size"]:
            return ("local-memory", f"kernel {k.name}: {local} bytes of local memory > device "
                    f"{limits['local_mem_size']}")
    for b in program.buffers.values():
        if b.space == "global" and b.nbytes > limits["max_mem_alloc_size"]:
            return ("max-allocation", f"buffer {b.name}: {b.nbytes} bytes > max allocation "
                    f"{limits['max_mem_alloc_size']}")
    total = program.memory_report()["global_total"]
    if total > limits["global_mem_size"]:
        return ("global-memory", f"{total} bytes of global buffers > device memory "
                f"{limits['global_mem_size']}")
    return None


class BuildError(LiftmapError, RuntimeError):
    """The OpenCL compiler rejected a kernel; ``log`` holds the build log."""

    def __init__(self, kernel: str, log: str):
        super().__init__(f"build of kernel {kernel} failed:\n{log}")
        self.kernel = kernel
        self.log = log


@dataclass
class Measurement:
    """What one ``Runner.run`` measured: output, per-repeat kernel times, build time."""

    output: np.ndarray
    times_s: tuple[float, ...]  # per repeat: sum of all kernels' profiled times
    kernel_times_s: dict[str, tuple[float, ...]] = field(default_factory=dict)
    build_s: float = 0.0  # time spent building now (0 when every kernel was cached)
    cache_hits: int = 0
    cache_misses: int = 0

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s) if self.times_s else float("nan")


class _Common(TypedDict, total=False):
    """The fields of every outcome of one evaluated program."""

    memory: dict[str, int]
    source_hash: str
    run_window: tuple[float, float]


class _Timing(TypedDict):
    """The timing fields of an outcome whose program ran."""

    time_s: float
    times_s: tuple[float, ...]
    gflops: float | None
    build_s: float


def build_log_of(message: str) -> str:
    """The compiler's log out of pyopencl's build error (drops the repeated headline)."""
    m = re.search(r"^Build on .*?:\s*$", message, re.M)
    return message[m.end():].strip() if m else message.strip()


def _first_lines(text: str, n: int = 12) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    more = f"\n... ({len(lines) - n} more lines)" if len(lines) > n else ""
    return "\n".join(lines[:n]) + more


class Runner:
    """A context and a profiling queue on one device, with a build cache.

    ``device`` is a ``pyopencl.Device``, a spec string (see ``codegen.device``) or ``None``
    (``LIFTMAP_DEVICE``, else the default of ``select_device``). Builds are cached in memory
    by the hash of the code (comments left out: ``build_key``) and options (the
    ``cache_size`` most recently used programs: a built program holds 0.3-1 MB in PoCL, so
    512 of them grew a worker by hundreds of MB over an exploration); PoCL also keeps its
    own on-disk cache in ``POCL_CACHE_DIR``, from which a dropped program is rebuilt
    quickly.
    """

    def __init__(self, device=None, *, cache_size: int = 64):
        ensure_pocl_environment()
        import pyopencl as cl

        self.cl = cl
        self.device = device if isinstance(device, cl.Device) else select_device(device)
        self.limits = device_limits(self.device)
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(
            self.context, self.device, properties=cl.command_queue_properties.PROFILING_ENABLE
        )
        self.cache_size = cache_size  # programs kept (least recently used dropped)
        self._programs: OrderedDict[str, object] = OrderedDict()
        self._kernels: dict[tuple[int, str], object] = {}
        self.cache_hits = 0
        self.cache_misses = 0

    # ---------------------------------------------------------------- building

    def build(self, source: str, options: tuple[str, ...] = ("-cl-mad-enable",)):
        """Returns ``(cl.Program, seconds spent, cache hit)``; raises ``BuildError``.

        What is built is the code (``without_comments``): a source whose code was built
        before gets that build (its kernels have the same names and code), here from the
        cache (``build_key``) and in another process from PoCL's own cache."""
        key = build_key(source, tuple(options))
        prg = self._programs.get(key)
        if prg is not None:
            self._programs.move_to_end(key)
            self.cache_hits += 1
            return prg, 0.0, True
        cl = self.cl
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # CompilerWarning: ABI notes, etc.
                prg = cl.Program(self.context, without_comments(source)).build(
                    options=list(options))
        except cl.RuntimeError as e:
            raise BuildError("?", build_log_of(str(e))) from None
        dt = time.perf_counter() - t0
        self.cache_misses += 1
        self._programs[key] = prg
        while len(self._programs) > self.cache_size:
            _, old = self._programs.popitem(last=False)
            for kk in [kk for kk in self._kernels if kk[0] == id(old)]:
                del self._kernels[kk]
        return prg, dt, False

    def _build_all(self, program: CompiledProgram):
        kernels, build_s, hits, misses = [], 0.0, 0, 0
        for k in program.kernels:
            try:
                prg, dt, hit = self.build(k.source, program.build_options)
            except BuildError as e:
                raise BuildError(k.name, e.log) from None
            build_s += dt
            hits, misses = hits + hit, misses + (not hit)
            kkey = (id(prg), k.name)
            kern = self._kernels.get(kkey)
            if kern is None:
                try:
                    kern = self.cl.Kernel(prg, k.name)
                except self.cl.Error:
                    raise BuildError(k.name, f"source defines no kernel named {k.name!r}") from None
                self._kernels[kkey] = kern
            kernels.append(kern)
        return kernels, build_s, hits, misses

    # ---------------------------------------------------------------- running

    def _buffers(self, program: CompiledProgram, inputs: Mapping[str, np.ndarray]):
        cl, mf = self.cl, self.cl.mem_flags
        bufs = {}
        for name, b in program.buffers.items():
            if b.space != "global":
                continue
            dt = DTYPES[b.dtype]
            if name in program.inputs:
                if name not in inputs:
                    raise KernelInputError(f"missing input {name!r}; given {sorted(inputs)}")
                a = np.ascontiguousarray(inputs[name], dtype=dt).reshape(-1)
                if a.size != b.count:
                    raise KernelInputError(
                        f"input {name!r} has {a.size} elements, buffer {b.count}")
                bufs[name] = cl.Buffer(self.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a)
            else:
                # outputs and temporaries start as NaN (or a sentinel): unwritten elements show
                fill = np.full(b.count, _FILL[b.dtype], dtype=dt)
                bufs[name] = cl.Buffer(self.context, mf.READ_WRITE | mf.COPY_HOST_PTR,
                                       hostbuf=fill)
        return bufs

    def _enqueue(self, k, kern, bufs, inputs):
        """Enqueues kernel ``k`` (built as ``kern``) on ``bufs``; returns its event."""
        args = []
        for a in k.args:
            if a in bufs:
                args.append(bufs[a])
            else:  # a scalar argument given as a 0-d input
                v = np.asarray(inputs[a])
                args.append(v.astype(np.int32 if v.dtype.kind in "iu" else np.float32)[()])
        kern.set_args(*args)
        gs = tuple(int(g) for g in k.global_size)
        ls = None if k.local_size is None else tuple(int(x) for x in k.local_size)
        return self.cl.enqueue_nd_range_kernel(self.queue, kern, gs, ls)

    def _enqueue_all(self, program: CompiledProgram, kernels, bufs, inputs):
        events = [self._enqueue(k, kern, bufs, inputs)
                  for k, kern in zip(program.kernels, kernels)]
        self.queue.finish()
        return [(e.profile.end - e.profile.start) * 1e-9 for e in events]

    def _first_execution(self, program: CompiledProgram, kernels, bufs, inputs,
                         on_kernel: Callable[[bool], None]) -> list[float]:
        """The first execution, one kernel at a time, calling ``on_kernel(True)`` once a
        kernel runs on the device and ``on_kernel(False)`` once it is done: what comes
        before a kernel runs (PoCL compiles a kernel for its work-group size at its first
        launch, seconds for a large one) is told apart from the kernel's own time, which
        is what the early cut compares with the best candidate's kernel time."""
        cl = self.cl
        running = cl.command_execution_status.RUNNING
        ts: list[float] = []
        for k, kern in zip(program.kernels, kernels):
            ev = self._enqueue(k, kern, bufs, inputs)
            while ev.command_execution_status > running:  # queued, or being compiled
                time.sleep(0.0005)
            on_kernel(True)
            ev.wait()
            on_kernel(False)
            ts.append((ev.profile.end - ev.profile.start) * 1e-9)
        return ts

    def run(self, program: CompiledProgram, inputs: Mapping[str, np.ndarray], *,
            repeats: int = 5, warmup: int = 1) -> Measurement:
        """Builds (cached), uploads ``inputs``, runs the kernels ``warmup + repeats`` times.

        The output is read after the first execution; warm-up executions are not timed
        (with ``warmup=0`` the first execution is timed too). Raises ``BuildError`` and
        pyopencl errors; ``evaluate`` turns them into outcomes.
        """
        return self._run_built(program, self._build_all(program), inputs, repeats, warmup)

    def _run_built(self, program: CompiledProgram, built, inputs, repeats: int,
                   warmup: int, budget_s: float | None = None,
                   on_kernel: Callable[[bool], None] | None = None) -> Measurement:
        """``budget_s``: time the repeats may take in all, judged by the first execution:
        fewer repeats (at least one) when they would exceed it, and when the first
        execution alone takes longer, it is the only (timed) one. ``on_kernel``: see
        ``_first_execution``."""
        kernels, build_s, hits, misses = built
        bufs = self._buffers(program, inputs)
        out_b = program.buffers[program.output]
        names = [k.name for k in program.kernels]
        per_kernel: dict[str, list[float]] = {n: [] for n in names}
        totals: list[float] = []
        output: np.ndarray | None = None
        runs = max(warmup, 1) + repeats - (0 if warmup else 1)
        i = 0
        while i < runs:
            if i == 0 and on_kernel is not None:
                ts = self._first_execution(program, kernels, bufs, inputs, on_kernel)
            else:
                ts = self._enqueue_all(program, kernels, bufs, inputs)
            if i == 0:
                output = np.empty(out_b.count, dtype=DTYPES[out_b.dtype])
                self.cl.enqueue_copy(self.queue, output, bufs[program.output])
                self.queue.finish()
                if budget_s is not None and warmup:
                    first = sum(ts)
                    if first >= budget_s:  # too slow to repeat: the first one counts
                        warmup, runs = 0, 1
                    else:
                        runs = warmup + max(1, min(repeats, int(budget_s / max(first, 1e-9))))
            if i >= warmup:
                totals.append(sum(ts))
                for n, t in zip(names, ts):
                    per_kernel[n].append(t)
            i += 1
        assert output is not None
        try:
            output = output.reshape(program.output_shape)
        except ValueError:
            pass
        return Measurement(output, tuple(totals), {n: tuple(v) for n, v in per_kernel.items()},
                         build_s, hits, misses)

    # ---------------------------------------------------------------- judging

    def evaluate(self, program: CompiledProgram, inputs: Mapping[str, np.ndarray],
                 reference: np.ndarray | None = None, *, rtol: float = 1e-4,
                 atol: float = 1e-4, repeats: int = 5, warmup: int = 1,
                 flops: int | None = None,
                 before_run: Callable[[], None] | None = None,
                 run_budget_s: float | None = None,
                 on_kernel: Callable[[bool], None] | None = None) -> Outcome:
        """Judges one candidate: launch checks, build, run, compare, time. Never raises for
        the candidate's failures (missing inputs are the caller's error and do raise).
        ``before_run`` is called between the build and the timed runs (a worker waits there
        for its turn on the device). ``run_budget_s`` bounds the timed repeats of a slow
        candidate (see ``_run_built``); the outcome's ``times_s`` has those taken.
        ``on_kernel`` is told when each kernel of the first execution starts and ends on
        the device (see ``_first_execution``: a worker's early cut times only that)."""
        if repeats < 1:
            raise InvalidArgumentError("evaluate needs repeats >= 1")
        cl = self.cl
        h = program_hash(program)
        memory = program.memory_report()
        common = _Common(memory=memory, source_hash=h)
        bad = check_launch(program, self.limits)
        if bad is not None:
            return Outcome(Status.REJECTED, bad[1], check=bad[0], **common)
        try:
            for k in program.kernels:
                check_features(k.source, self.limits)
        except DeviceFeatureError as e:
            return Outcome(Status.REJECTED, str(e), check=e.check, **common)
        try:
            built = self._build_all(program)
            kernels, build_s = built[0], built[1]
        except BuildError as e:
            return Outcome(Status.COMPILE_ERROR, f"kernel {e.kernel}: " + _first_lines(e.log),
                           **common)
        for k, kern in zip(program.kernels, kernels):
            if k.local_size is None:
                continue
            kmax = kern.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE,
                                            self.device)
            if _prod(k.local_size) > kmax:
                return Outcome(Status.REJECTED, f"kernel {k.name}: work-group size "
                               f"{_prod(k.local_size)} > this kernel's max {kmax}",
                               check="work-group-size", **common)
        if before_run is not None:
            before_run()
        started = time.time()
        try:
            res = self._run_built(program, built, inputs, repeats, warmup, run_budget_s,
                                  on_kernel)
        except cl.Error as e:
            return Outcome(Status.REJECTED, f"launch failed: {e}", check="launch", **common)
        common["run_window"] = (started, time.time())
        med = res.median_s
        fl = flops if flops is not None else program.flops
        gflops = fl / med / 1e9 if fl and med > 0 else None
        timing = _Timing(time_s=med, times_s=res.times_s, gflops=gflops, build_s=build_s)
        if reference is not None:
            ok, err, why = compare(res.output, reference, rtol=rtol, atol=atol)
            if not ok:
                return Outcome(Status.WRONG_RESULT, why, max_abs_error=err, **timing, **common)
            return Outcome(Status.OK, f"max abs error {err:.3g}", max_abs_error=err, **timing,
                           **common)
        return Outcome(Status.OK, "not compared (no reference)", **timing, **common)


def compare(output: np.ndarray, reference: np.ndarray, *, rtol: float = 1e-4,
            atol: float = 1e-4) -> tuple[bool, float, str]:
    """``(matches, max abs error, explanation)``: ``|out - ref| <= atol + rtol * |ref|``
    where both are finite; where the reference is not finite, the output must be the same
    value (NaN where it is NaN, an infinity of the same sign where it is one); a non-finite
    output where the reference is finite is a mismatch. The max abs error is over the
    finite pairs, ``inf`` when a non-finite value differs. Shapes must agree up to a reshape
    of the same size. Never warns (numpy's floating-point warnings are silenced)."""
    out = np.asarray(output)
    ref = np.asarray(reference)
    if isinstance(reference, tuple) or ref.dtype == object:
        return False, float("inf"), "reference is not a single array"
    if out.size != ref.size:
        return (False, float("inf"),
                f"output has {out.size} elements {out.shape}, reference {ref.size} {ref.shape}")
    with np.errstate(all="ignore"):
        out = out.reshape(ref.shape).astype(np.float64)
        ref = ref.astype(np.float64)
        finite = np.isfinite(out) & np.isfinite(ref)
        same = (np.isnan(out) & np.isnan(ref)) | (np.isinf(ref) & (out == ref))
        diff = np.where(finite, np.abs(out - ref), 0.0)
        unfinite = ~finite & ~same  # a non-finite value on one side only, or two different
        close = diff <= atol + rtol * np.where(finite, np.abs(ref), 0.0)
    bad = unfinite | (finite & ~close)
    err = float(np.inf if unfinite.any() else diff.max()) if diff.size else 0.0
    if not bad.any():
        return True, err, ""
    n = int(bad.sum())
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    what = (f"{n} of {out.size} elements differ (first at {first}: got {out[first]:.6g}, "
            f"expected {ref[first]:.6g}); max abs error {err:.3g} > tolerance "
            f"atol={atol:g} + rtol={rtol:g}*|ref|")
    if unfinite.any():
        what += (f"; {int(unfinite.sum())} elements not finite on one side only, or "
                 f"different non-finite values (unwritten?)")
    return False, err, what
