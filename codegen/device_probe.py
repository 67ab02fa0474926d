"""The device probe: a kernel with what generated kernels use (``PROBE_SOURCE``: 16/8/4-lane
vectors, fma, local memory, a barrier) built and run on one device in a child process, so that
a compiler that aborts or hangs (pip's PoCL 3.0 on AMD Zen 4/5) costs the child only; its
verdicts cached in this process and on disk next to PoCL's kernel cache
(:func:`probe_device`).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time

from codegen.opencl_env import NoDeviceError, list_devices, list_platforms, pocl_default_cache_dir

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
    for pi, p in enumerate(list_platforms()):
        if p.int_ptr == device.platform.int_ptr:
            ptrs = [d.int_ptr for d in list_devices(p)]
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

