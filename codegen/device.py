"""OpenCL device selection, device limits and the PoCL cache-directory pitfall.

By default the first device that builds and runs a probe kernel (``PROBE_SOURCE``: what
generated kernels use) in a child process is chosen, trying platforms other than pip's PoCL
(``pocl-binary-distribution``) first and CPU devices before others; ``describe_choice()``
says in one line which device was chosen and why the others were not. Another
platform/device is chosen by a spec ``"SUBSTRING[:INDEX]"``, given to ``select_device`` or
in the environment variable ``LIFTMAP_DEVICE`` (not probed). The substring is matched,
case-insensitively, against the platform's name, vendor and version (INDEX: that
platform's device), so two platforms with the same name (Debian's PoCL and pip's) are told
apart by version: ``"PoCL 3.1"`` or ``"3.0-rc2"``; a substring no platform has is matched
against device names (``"pthread"``, ``"EPYC"``; INDEX: among those devices).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from codegen.device_description import Device
from codegen.errors import Check
from ir.errors import LiftmapError

ENV_VAR = "LIFTMAP_DEVICE"

log = logging.getLogger(__name__)

_INSTALL_ADVICE = (
    "install a system OpenCL ICD listed in /etc/OpenCL/vendors (Debian: apt-get install "
    "pocl-opencl-icd, PoCL 3.1 or newer), or as a last resort pip install pyopencl[pocl] "
    "(PoCL 3.0 from PyPI: 3-10x slower, and on AMD Zen 4/5 it fails the probe kernel)"
)


class DeviceError(LiftmapError, RuntimeError):
    """Base class of the device errors; the message says what to do."""


class NoPlatformError(DeviceError):
    """No OpenCL platform is visible, or none matches the requested spec."""


class NoDeviceError(DeviceError):
    """A platform was found but it lists no (matching) device."""


class DeviceFeatureError(DeviceError):
    """A kernel needs a feature (double, half, an extension) that the device lacks."""

    check = Check.DEVICE_FEATURE


# ------------------------------------------------------------------ PoCL's cache directory


def _writable_dir(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            pass
        return True
    except OSError:
        return False


def pocl_default_cache_dir() -> str:
    """Where PoCL puts its kernel cache when ``POCL_CACHE_DIR`` is unset."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return os.path.join(xdg, "pocl", "kcache")
    return os.path.join(os.path.expanduser("~"), ".cache", "pocl", "kcache")


def ensure_pocl_cache_dir() -> str:
    """Makes PoCL's kernel cache writable; returns the directory used.

    If ``POCL_CACHE_DIR`` is unset and the default location is not writable, PoCL
    lists *zero* devices; then ``POCL_CACHE_DIR`` is pointed at a fresh temporary
    directory. Must run before the first OpenCL call of the process (child processes
    inherit the variable, so workers share the on-disk cache).
    """
    cur = os.environ.get("POCL_CACHE_DIR")
    if cur and _writable_dir(cur):
        return cur
    default = pocl_default_cache_dir()
    if not cur and _writable_dir(default):
        return default
    tmp = tempfile.mkdtemp(prefix="liftmap-pocl-cache-")
    os.environ["POCL_CACHE_DIR"] = tmp
    return tmp


def pin_pocl_threads() -> bool:
    """Asks PoCL to pin its worker threads one per core (``POCL_AFFINITY=1``) unless the
    user set ``POCL_AFFINITY`` or the process may not run on every core; returns whether
    the pinning is asked for. Must run before the first OpenCL call of the process (child
    processes inherit it).

    Unpinned, Linux sometimes wakes both of PoCL's workers on one core of a 2-core
    machine and leaves them there for the whole kernel: the same kernel then takes twice
    as long, in runs of several executions (a 2 x 98 work-item convolution 8.5 or 17 ms,
    a 180 work-group one 0.9 or 1.8 ms; pinned, 8.5-9.6 and 0.82-0.93 ms). The search
    would rank candidates by which mode they met."""
    if "POCL_AFFINITY" in os.environ:
        return os.environ["POCL_AFFINITY"] not in ("", "0")
    n = os.cpu_count() or 1
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):  # not Linux: PoCL pins on Linux only
        return False
    if allowed != set(range(n)):  # pinning thread i to core i would leave the allowed set
        return False
    os.environ["POCL_AFFINITY"] = "1"
    return True


def ensure_pocl_environment() -> str:
    """PoCL's environment for this library: a writable kernel cache
    (:func:`ensure_pocl_cache_dir`, whose directory is returned) and worker threads pinned
    one per core (:func:`pin_pocl_threads`). Runs before the first OpenCL call."""
    pin_pocl_threads()
    return ensure_pocl_cache_dir()


# ------------------------------------------------------------------ selection


def _cl():
    ensure_pocl_environment()
    import pyopencl as cl

    return cl


def _platforms() -> list:
    cl = _cl()
    try:
        return list(cl.get_platforms())
    except cl.Error as e:  # PLATFORM_NOT_FOUND_KHR when no ICD at all
        raise NoPlatformError(f"no OpenCL platform found ({e}); {_INSTALL_ADVICE}") from e


def _devices(platform) -> list:
    cl = _cl()
    try:
        return list(platform.get_devices())
    except cl.Error:
        return []


def _describe_platform(p) -> str:
    return f"{p.name!r} ({p.version.strip()})"


def _no_device_error(platform_desc: str) -> NoDeviceError:
    cache = os.environ.get("POCL_CACHE_DIR") or pocl_default_cache_dir()
    return NoDeviceError(
        f"platform {platform_desc} lists no device. For PoCL this happens when its kernel cache "
        f"directory is not writable (now {cache!r}): set POCL_CACHE_DIR (and XDG_CACHE_HOME) to a "
        "writable directory before the first OpenCL call"
    )


def build_log_of(message: str) -> str:
    """The compiler's log out of pyopencl's build error (drops the repeated headline)."""
    m = re.search(r"^Build on .*?:\s*$", message, re.M)
    return message[m.end():].strip() if m else message.strip()


# ------------------------------------------------------------------ the probe

PROBE_TIMEOUT_S = 60.0
PROBE_LOCAL_SIZE = 8
PROBE_GROUPS = 4
PROBE_BUILD_OPTIONS = ("-cl-mad-enable",)  # what ``Runner.build`` uses
PROBE_CACHE_ENV = "LIFTMAP_PROBE_CACHE"  # "0": no verdicts on disk
PROBE_TIMEOUT_TTL_S = 24 * 3600.0  # how long a timeout stays on disk (a load spike passes)

# What the lowering and the hand-written kernels use: 16/8/4-lane vectors, fma and mad (and
# ``a * b + c``, which -cl-mad-enable contracts to fma), vload/vstore, local memory written,
# a barrier, and a neighbour's value read back. pip's PoCL 3.0 (LLVM 14) on AMD Zen 4 spends
# minutes in LLVM on this kernel's work-group function and then dies (SIGSEGV after 478 s seen;
# float16 fma alone: 142 s); on Zen 5 it builds nothing ("unknown target CPU").
PROBE_SOURCE = r"""
kernel void probe(global const float* restrict x, global float* restrict y) {
    local float tile[16 * LSZ];
    const int g = get_global_id(0), l = get_local_id(0);
    const float16 a = vload16(g, x);
    const float16 b = fma(a, (float16)(0.5f), (float16)(1.0f));
    const float16 p = a * b + b;
    const float8 c = mad(b.lo, b.hi, (float8)(0.25f));
    const float4 d = fma(vload4(0, x + 16 * g), c.lo, c.hi.wzyx);
    vstore16(p, l, tile);
    barrier(CLK_LOCAL_MEM_FENCE);
    float16 r = vload16((l + 1) % LSZ, tile);
    r.lo = fma(r.lo, c, (float8)(d, d));
    vstore16(r, g, y);
}
"""

# Runs in a child process: argv = platform index, device index, platform version, device
# name, local size, groups, build options; the kernel source on stdin. Exit 0 and PROBE-OK
# when the numbers match numpy; 3 build error, 4 wrong numbers, 5 not the expected device.
_PROBE_CHILD = r"""
import sys, warnings
import numpy as np
import pyopencl as cl

pi, di, pver, dname, lsz, groups, opts = sys.argv[1:8]
pi, di, lsz, groups = int(pi), int(di), int(lsz), int(groups)
src = sys.stdin.read()
p = cl.get_platforms()[pi]
dev = p.get_devices()[di]
if p.version.strip() != pver or dev.name.strip() != dname:
    print(f"PROBE-FAIL device {pi}:{di} is {dev.name.strip()!r} on {p.version.strip()!r}")
    sys.exit(5)
n = lsz * groups
x = (0.5 + ((np.arange(16 * n) * 37) % 101) / 101.0).astype(np.float32)
ctx = cl.Context([dev])
q = cl.CommandQueue(ctx)
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prg = cl.Program(ctx, src).build(options=[f"-DLSZ={lsz}"] + opts.split())
except cl.Error as e:
    print("PROBE-FAIL build failed: " + " ".join(str(e).split())[-400:])
    sys.exit(3)
mf = cl.mem_flags
xb = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
yb = cl.Buffer(ctx, mf.WRITE_ONLY, x.nbytes)
prg.probe(q, (n,), (lsz,), xb, yb)
y = np.empty_like(x)
cl.enqueue_copy(q, y, yb)
q.finish()
a = x.reshape(n, 16).astype(np.float64)
b = a * 0.5 + 1.0
pp = a * b + b
c = b[:, :8] * b[:, 8:] + 0.25
d = a[:, :4] * c[:, :4] + c[:, 4:8][:, ::-1]
i = np.arange(n)
r = pp[(i // lsz) * lsz + (i % lsz + 1) % lsz].copy()
r[:, :8] = r[:, :8] * c + np.concatenate([d, d], axis=1)
err = float(np.max(np.abs(y.reshape(n, 16) - r) / np.abs(r)))
if not err <= 1e-4:
    print(f"PROBE-FAIL wrong result: max relative error {err:.3g} against numpy")
    sys.exit(4)
print("PROBE-OK")
"""

_probe_cache: dict[tuple[str, str, str], str] = {}


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]


def _stderr_tail(text: str) -> str:
    """The informative end of a dead child's output: its ``LLVM ERROR`` line if any."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for k, ln in enumerate(lines):
        if "LLVM ERROR" in ln:
            return _one_line(" ".join(lines[k:k + 2]))
    return _one_line(" ".join(lines[-3:])) if lines else "(no output)"


def _signal_text(code: int) -> str:
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"process aborted ({name})" if name == "SIGABRT" else f"process killed ({name})"


def _probe_in_child(platform_index: int, device_index: int, platform_version: str,
                    device_name: str, source: str, *, timeout: float = PROBE_TIMEOUT_S,
                    child_prelude: str = "") -> tuple[str, str]:
    """Builds and runs ``source`` (kernel ``probe``) on one device in a child process.

    Returns ``(reason, kind)``: ``reason`` is ``""`` when the child built the kernel and its
    numbers matched numpy; ``kind`` is ``"verdict"``, ``"timeout"`` (the child was killed;
    pip's PoCL 3.0 spends minutes in LLVM on 16-lane kernels) or ``"none"`` (no verdict on
    the device: the child could not start or found another device). ``child_prelude`` is
    Python run in the child first (a test hook, e.g. ``"import os; os.abort()"``).
    """
    args = [sys.executable or "python3", "-c", child_prelude + "\n" + _PROBE_CHILD,
            str(platform_index), str(device_index), platform_version, device_name,
            str(PROBE_LOCAL_SIZE), str(PROBE_GROUPS), " ".join(PROBE_BUILD_OPTIONS)]
    try:
        res = subprocess.run(args, input=source, capture_output=True, text=True,
                             timeout=timeout, env=dict(os.environ), errors="replace")
    except subprocess.TimeoutExpired:
        return f"no answer within {timeout:g} s (child killed)", "timeout"
    except OSError as e:
        return f"could not start the probe process: {e}", "none"
    out = res.stdout + "\n" + res.stderr
    if res.returncode == 0 and "PROBE-OK" in res.stdout:
        return "", "verdict"
    fail = [ln for ln in res.stdout.splitlines() if ln.startswith("PROBE-FAIL ")]
    if fail and res.returncode in (3, 4):
        return _one_line(fail[-1][len("PROBE-FAIL "):]), "verdict"
    if fail:  # not the expected device: the listing changed; not a verdict on the device
        return _one_line(fail[-1][len("PROBE-FAIL "):]), "none"
    if res.returncode < 0:
        return f"{_signal_text(res.returncode)}: {_stderr_tail(out)}", "verdict"
    return f"process exited with status {res.returncode}: {_stderr_tail(out)}", "verdict"


def _cpu_identity() -> str:
    """The host CPU (vendor, family, model, name, flags): verdicts differ between CPUs that
    a device name does not tell apart (pip's PoCL calls Zen 4 and Zen 5 'pthread-AMD EPYC')."""
    try:
        with open("/proc/cpuinfo") as f:
            block = f.read().split("\n\n", 1)[0]
    except OSError:
        return platform.processor() or platform.machine()
    keep = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags")
    fields = dict(ln.split(":", 1) for ln in block.splitlines() if ":" in ln)
    return "|".join(f"{k}={fields[k].strip()}" for k in fields if k.strip() in keep)


def _verdict_key(device, source: str) -> dict[str, str]:
    """What a probe verdict depends on; the on-disk entry is valid only for equal fields."""
    import pyopencl as cl

    return {
        "platform_version": device.platform.version.strip(),
        "platform_name": device.platform.name.strip(),
        "device_name": device.name.strip(),
        "device_version": device.version.strip(),
        "driver_version": device.driver_version.strip(),
        "cpu": hashlib.sha256(_cpu_identity().encode()).hexdigest(),
        "pyopencl": cl.VERSION_TEXT,
        "probe": hashlib.sha256("\0".join(
            [source, _PROBE_CHILD, " ".join(PROBE_BUILD_OPTIONS),
             str(PROBE_LOCAL_SIZE), str(PROBE_GROUPS)]).encode()).hexdigest(),
    }


def _verdict_path(key: dict[str, str]) -> str | None:
    if os.environ.get(PROBE_CACHE_ENV, "1") == "0":
        return None
    base = os.environ.get("POCL_CACHE_DIR") or pocl_default_cache_dir()
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
    return os.path.join(base, "liftmap-probe", f"{digest}.json")


def _read_verdict(key: dict[str, str]) -> str | None:
    path = _verdict_path(key)
    if path is None:
        return None
    try:
        with open(path) as f:
            entry = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    if entry.get("kind") == "timeout":
        age = time.time() - entry.get("time", 0) if isinstance(entry.get("time"), float) else -1
        if not 0 <= age < PROBE_TIMEOUT_TTL_S:
            return None
    reason = entry.get("reason")
    return reason if isinstance(reason, str) else None


def _write_verdict(key: dict[str, str], reason: str, kind: str = "verdict") -> None:
    """Atomically (a temporary file renamed), so concurrent processes read whole entries."""
    path = _verdict_path(key)
    if path is None:
        return
    tmp = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"key": key, "reason": reason, "kind": kind, "time": time.time()}, f)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def _indices_of(device) -> tuple[int, int]:
    """(platform index, device index) of ``device`` in this process's listing."""
    for pi, p in enumerate(_platforms()):
        if p.int_ptr == device.platform.int_ptr:
            ptrs = [d.int_ptr for d in _devices(p)]
            if device.int_ptr in ptrs:
                return pi, ptrs.index(device.int_ptr)
    raise NoDeviceError(f"{device.name!r} is not in this process's OpenCL listing")


def probe_device(device, source: str | None = None, *, timeout: float = PROBE_TIMEOUT_S,
                 child_prelude: str = "") -> str:
    """Builds and runs a probe kernel on ``device`` in a child process; ``""`` if it worked,
    else the reason (e.g. ``process aborted (SIGABRT): LLVM ERROR: Cannot select ...``).

    The default ``source`` is ``PROBE_SOURCE``, which exercises what generated kernels use.
    An LLVM abort kills only the child. Verdicts are cached per (platform version, device
    name, probe) in this process, and on disk next to PoCL's kernel cache (keyed also by the
    host CPU and driver versions; ``LIFTMAP_PROBE_CACHE=0`` turns that off); a timeout is
    kept on disk for ``PROBE_TIMEOUT_TTL_S`` only. ``child_prelude`` is a test hook (Python
    run in the child first; nothing is cached on disk then).
    """
    source = PROBE_SOURCE if source is None else source
    tag = hashlib.sha256((child_prelude + "\0" + source).encode()).hexdigest()
    mem_key = (device.platform.version.strip(), device.name.strip(), tag)
    if mem_key in _probe_cache:
        return _probe_cache[mem_key]
    disk_key = _verdict_key(device, source) if not child_prelude else None
    if disk_key is not None:
        reason = _read_verdict(disk_key)
        if reason is not None:
            _probe_cache[mem_key] = reason
            return reason
    pi, di = _indices_of(device)
    reason, kind = _probe_in_child(pi, di, mem_key[0], mem_key[1], source,
                                   timeout=timeout, child_prelude=child_prelude)
    if kind != "none":
        _probe_cache[mem_key] = reason
        if disk_key is not None:
            _write_verdict(disk_key, reason, kind)
    return reason


# ------------------------------------------------------------------ default selection

CL_DEVICE_TYPE_CPU = 1 << 1
CL_DEVICE_TYPE_GPU = 1 << 2

_pip_ptrs: set[int] | None = None


def _pip_pocl_platform_ptrs() -> set[int] | None:
    """Platform handles of pip's PoCL (``pocl-binary-distribution``) in this process.

    Asks that package's own ``libpocl`` (found from its installed-file record, opened only
    if the ICD loader already loaded it) for its platform: ocl-icd hands out the vendor's
    handles unchanged, so they equal ``Platform.int_ptr``. ``set()`` when the package is
    absent or its library not loaded; ``None`` when the answer cannot be had this way.
    """
    global _pip_ptrs
    if _pip_ptrs is not None:
        return _pip_ptrs
    try:
        files = importlib.metadata.files("pocl-binary-distribution") or []
    except importlib.metadata.PackageNotFoundError:
        _pip_ptrs = set()
        return _pip_ptrs
    libs = [str(f.locate()) for f in files
            if os.path.basename(str(f)).startswith("libpocl") and ".so" in str(f)]
    if not libs:
        return None
    try:
        _platforms()  # the ICD loader loads every ICD when it first lists platforms
    except DeviceError:
        return set()
    found: set[int] = set()
    for path in libs:
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            continue  # not loaded: not one of this process's platforms
        fn = getattr(lib, "clIcdGetPlatformIDsKHR", None) or getattr(
            lib, "POclIcdGetPlatformIDsKHR", None)
        if fn is None:
            return None
        fn.restype = ctypes.c_int32
        fn.argtypes = [ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p),
                       ctypes.POINTER(ctypes.c_uint32)]
        n = ctypes.c_uint32(0)
        if fn(0, None, ctypes.byref(n)) != 0 or n.value == 0:
            return None
        arr = (ctypes.c_void_p * n.value)()
        if fn(n.value, arr, None) != 0:
            return None
        found.update(int(a) for a in arr if a)
    _pip_ptrs = found
    return _pip_ptrs


def _is_pip_pocl(p) -> bool:
    """True for the PoCL of ``pocl-binary-distribution``.

    Identified by platform handle (see ``_pip_pocl_platform_ptrs``); failing that, by the
    package's version in the platform version (``"PoCL 3.0"`` matches ``"PoCL 3.0-rc2"``,
    not ``"PoCL 3.1+debian"``). Not by ``DISTRO``: Debian's PoCL says it too.
    """
    if "Portable Computing Language" not in p.name:
        return False
    ptrs = _pip_pocl_platform_ptrs()
    if ptrs is not None:
        return p.int_ptr in ptrs
    try:
        ver = importlib.metadata.version("pocl-binary-distribution")
    except importlib.metadata.PackageNotFoundError:
        return False
    short = ".".join(ver.split(".")[:2])
    return re.search(rf"PoCL {re.escape(short)}(?![\d.])", p.version) is not None


def rank_devices(platforms: list, is_pip: Callable[[Any], bool] | None = None) -> list[tuple]:
    """``(platform, device, is_pip)`` in the order the default selection tries them:
    platforms other than pip's PoCL first, CPU devices before others, then listing order."""
    is_pip = _is_pip_pocl if is_pip is None else is_pip
    rows = []
    for pi, p in enumerate(platforms):
        pip = bool(is_pip(p))
        for di, d in enumerate(_devices(p)):
            cpu = bool(int(d.type) & CL_DEVICE_TYPE_CPU)
            rows.append(((pip, not cpu, pi, di), p, d, pip))
    rows.sort(key=lambda r: r[0])
    return [(p, d, pip) for _, p, d, pip in rows]


def platform_label(p, pip: bool | None = None) -> str:
    """Short name of a platform: ``"PoCL 3.1+debian"``, ``"PoCL 3.0-rc2 (pip)"``."""
    m = re.search(r"PoCL \S+", p.version)
    label = m.group(0) if m else f"{p.name.strip()} ({p.version.strip()})"
    pip = _is_pip_pocl(p) if pip is None else pip
    return label + (" (pip)" if pip else "")


def _device_label(p, d, pip: bool) -> str:
    return f"{d.name.strip()} on {platform_label(p, pip)}"


_report: tuple[Any, list[str]] | None = None


def _default_device_report(platforms: list, is_pip: Callable[[Any], bool] | None = None,
                           probe: Callable[[Any], str] | None = None) -> tuple[Any, list[str]]:
    """The first device in ``rank_devices`` order that passes ``probe``, and one line per
    other device: why it failed, or that it was not needed (ranked after the chosen one)."""
    probe = probe_device if probe is None else probe
    ranked = rank_devices(platforms, is_pip)
    if not ranked:
        raise _no_device_error(", ".join(_describe_platform(p) for p in platforms))
    chosen, notes, failures = None, [], []
    for p, d, pip in ranked:
        label = _device_label(p, d, pip)
        if chosen is not None:
            notes.append(f"{label}: not probed, ranked after the chosen device")
            continue
        err = probe(d)
        if err:
            notes.append(f"{label}: {err}")
            failures.append(f"{label}: {err}")
        else:
            chosen = d
    for p in platforms:
        if not _devices(p):
            notes.append(f"{platform_label(p, bool((is_pip or _is_pip_pocl)(p)))}: no device")
    if chosen is None:
        raise NoDeviceError(
            "no OpenCL device here builds and runs the probe kernel (vector types, fma, local "
            "memory, a barrier): " + "; ".join(failures) + ". pip's PoCL 3.0 (LLVM 14) aborts "
            "on float16 fma and cannot compile for CPUs newer than its LLVM (e.g. AMD Zen 5); "
            "install a newer PoCL (Debian: apt-get install pocl-opencl-icd)"
        )
    return chosen, notes


def default_device_report() -> tuple[Any, list[str]]:
    """``(device, notes)``: the default device (``LIFTMAP_DEVICE`` ignored) and, for every
    other device, why it was not chosen. Computed once per process."""
    global _report
    if _report is None:
        platforms = _platforms()
        if not platforms:
            raise NoPlatformError(f"no OpenCL platform found; {_INSTALL_ADVICE}")
        _report = _default_device_report(platforms)
        log.info("%s", _choice_line(*_report))
    return _report


def _choice_line(device, notes: list[str], is_pip: Callable[[Any], bool] | None = None) -> str:
    """The one line of ``describe_choice`` for a default choice and its notes."""
    skipped = "; ".join(notes) if notes else "none"
    label = _device_label(device.platform, device, (is_pip or _is_pip_pocl)(device.platform))
    return (f"OpenCL device: {label}"
            f" (chosen: first in rank order that passed the probe; skipped: {skipped})")


def describe_choice(spec: str | None = None) -> str:
    """One line: which device ``select_device(spec)`` uses and why the others were not."""
    if spec is None:
        spec = os.environ.get(ENV_VAR) or None
    if spec is not None:
        d = select_device(spec)
        src = f"{ENV_VAR}={spec!r}" if spec == os.environ.get(ENV_VAR) else f"spec {spec!r}"
        return (f"OpenCL device: {_device_label(d.platform, d, _is_pip_pocl(d.platform))} "
                f"(chosen by {src}; not probed)")
    return _choice_line(*default_device_report())


def _default_device(platforms: list):
    """The first device, system platforms before pip's PoCL, that passes the probe."""
    return _default_device_report(platforms)[0]


SPEC_FORM = ("A spec is 'SUBSTRING[:INDEX]': SUBSTRING is matched, case-insensitively, "
             "against each platform's name, vendor and version (INDEX: that platform's "
             "device, default 0), else against device names (INDEX: among the devices "
             "whose name has it, default 0)")


def parse_spec(spec: str) -> tuple[str, int | None]:
    """``"pocl 3.1:0"`` -> ``("pocl 3.1", 0)``; the device index is optional."""
    m = re.fullmatch(r"(.*?)(?::(\d+))?", spec.strip())
    assert m is not None
    return m.group(1).strip(), (int(m.group(2)) if m.group(2) is not None else None)


def select_device(spec: str | None = None):
    """Returns a ``pyopencl.Device``.

    ``spec`` is ``"SUBSTRING[:INDEX]"`` (``SPEC_FORM``: a platform's name, vendor or
    version, else a device's name); ``None`` reads ``LIFTMAP_DEVICE``;
    if that is unset too, ``default_device_report()``'s device: the first that passes the
    probe, pip's PoCL last, CPU devices before others. Raises ``NoPlatformError`` or
    ``NoDeviceError`` with advice.
    """
    if spec is None:
        spec = os.environ.get(ENV_VAR) or None
    platforms = _platforms()
    if not platforms:
        raise NoPlatformError(f"no OpenCL platform found; {_INSTALL_ADVICE}")
    if spec is None:
        return default_device_report()[0]
    sub, index = parse_spec(spec)
    key = sub.lower()
    matches = [p for p in platforms
               if key in f"{p.name} {p.vendor} {p.version}".lower()]
    if not matches:  # a device name's substring: the index-th device whose name has it
        named = [d for p in platforms for d in _devices(p) if key in d.name.lower()]
        if named and (index or 0) < len(named):
            return named[index or 0]
        if named:
            raise NoDeviceError(
                f"{len(named)} device(s) have {sub!r} in their name: "
                f"{[d.name for d in named]}; index {index} is out of range")
        known = "; ".join(_describe_platform(p) + ": " + ", ".join(
            repr(d.name) for d in _devices(p)) for p in platforms)
        raise NoPlatformError(
            f"no OpenCL platform or device matches {sub!r} (spec {spec!r}, from {ENV_VAR} or "
            f"--device); platforms and devices here: {known}. {SPEC_FORM}; {_INSTALL_ADVICE}"
        )
    for p in matches:
        devs = _devices(p)
        if not devs:
            continue
        if index is None:
            return devs[0]
        if index < len(devs):
            return devs[index]
        raise NoDeviceError(
            f"platform {_describe_platform(p)} has {len(devs)} device(s): "
            f"{[d.name for d in devs]}; index {index} is out of range"
        )
    raise _no_device_error(", ".join(_describe_platform(p) for p in matches))


def device_spec(device) -> str:
    """A spec that selects ``device`` again (e.g. in a worker process)."""
    p = device.platform
    platforms = _platforms()
    same_name = [q for q in platforms if q.name == p.name]
    key = p.name
    if len(same_name) > 1:
        words = p.version.split()
        key = p.version.strip()
        for n in range(1, len(words) + 1):  # the shortest prefix of the version that is unique
            cand = " ".join(words[:n])
            if sum(cand.lower() in f"{q.name} {q.vendor} {q.version}".lower()
                   for q in platforms) == 1:
                key = cand
                break
    idx = [d.int_ptr for d in _devices(p)].index(device.int_ptr)
    return f"{key}:{idx}"


# ------------------------------------------------------------------ limits and features


def device_limits(device) -> dict[str, Any]:
    """Limits of ``device`` that become constraints and launch checks (sizes in bytes): its
    ``codegen.device_description.Device`` description as a dict, plus the version strings.

    The memory sizes (``max_mem_alloc_size``, ``global_mem_size``) are the device's own
    reports, for the runner's launch checks; ``Device.from_limits`` rounds them down to a
    power of two for the space and the lowering (``codegen.device_description.stable_memory_size``:
    PoCL reports them from the momentary free memory)."""
    return {
        **Device.from_opencl(device).to_dict(),
        "max_mem_alloc_size": int(device.max_mem_alloc_size),
        "global_mem_size": int(device.global_mem_size),
        "version": device.version.strip(),
        "platform_version": device.platform.version.strip(),
        "driver_version": device.driver_version.strip(),
    }


_DOUBLE = re.compile(r"\bdouble(2|3|4|8|16)?\b")
_HALF = re.compile(r"\bhalf(2|3|4|8|16)?\b|cl_khr_fp16")
_EXT = re.compile(r"#pragma\s+OPENCL\s+EXTENSION\s+(\w+)\s*:\s*enable")


def check_features(source: str, limits: dict[str, Any]) -> None:
    """Raises ``DeviceFeatureError`` if ``source`` uses double, half or an extension the
    device (described by ``device_limits``) lacks."""
    if _DOUBLE.search(source) and not limits["fp64"]:
        raise DeviceFeatureError(f"kernel uses double but {limits['name']} lacks cl_khr_fp64")
    if _HALF.search(source) and not limits["fp16"]:
        raise DeviceFeatureError(f"kernel uses half but {limits['name']} lacks cl_khr_fp16")
    for ext in _EXT.findall(source):
        if ext != "all" and ext not in limits["extensions"]:
            raise DeviceFeatureError(f"kernel enables {ext}, which {limits['name']} lacks")

