"""OpenCL device selection, device limits and the PoCL cache-directory pitfall.

The default device is the CPU device of PoCL installed from PyPI
(``pocl-binary-distribution``, bundled with pyopencl's ICD loader). Another
platform/device is chosen by a spec ``"platform-substring[:device-index]"``, given
to ``select_device`` or in the environment variable ``LIFTMAP_DEVICE``. The
substring is matched, case-insensitively, against the platform's name, vendor and
version, so two platforms with the same name (Debian's PoCL and pip's) are told
apart by version: ``"PoCL 3.1"`` or ``"3.0-rc2"``.
"""

from __future__ import annotations

import os
import re
import tempfile
import warnings
from typing import Any

ENV_VAR = "LIFTMAP_DEVICE"

_INSTALL_ADVICE = (
    "install with pip install pyopencl[pocl] (PoCL CPU device from PyPI), or install a vendor "
    "OpenCL ICD (e.g. Debian's pocl-opencl-icd) so that it is listed in /etc/OpenCL/vendors"
)


class DeviceError(RuntimeError):
    """Base class of the device errors; the message says what to do."""


class NoPlatformError(DeviceError):
    """No OpenCL platform is visible, or none matches the requested spec."""


class NoDeviceError(DeviceError):
    """A platform was found but it lists no (matching) device."""


class DeviceFeatureError(DeviceError):
    """A kernel needs a feature (double, half, an extension) that the device lacks."""

    check = "device-feature"


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


# ------------------------------------------------------------------ selection


def _cl():
    ensure_pocl_cache_dir()
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


def list_platforms() -> list[dict[str, Any]]:
    """Every visible platform with its devices: name, vendor, version, device names."""
    out = []
    for i, p in enumerate(_platforms()):
        out.append({"index": i, "name": p.name, "vendor": p.vendor, "version": p.version.strip(),
                    "devices": [d.name for d in _devices(p)]})
    return out


def _is_pip_pocl(p) -> bool:
    """True for the PoCL of ``pocl-binary-distribution`` (its version string says DISTRO)."""
    if "Portable Computing Language" not in p.name:
        return False
    try:
        import pocl_binary_distribution as pbd
    except ImportError:
        return "DISTRO" in p.version
    return f"PoCL {pbd.__version__}" in p.version or "DISTRO" in p.version


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


_PROBE = "kernel void probe(global float* x) { x[get_global_id(0)] += 1.0f; }"
_probe_cache: dict[int, str] = {}


def probe_device(device) -> str:
    """Builds a trivial kernel on ``device``; returns ``""`` if it works, else the error.

    pip's PoCL 3.0 (LLVM 14) fails on CPUs its LLVM does not know (AMD Zen 5: ``unknown
    target CPU 'generic'``), so a device is only chosen by default once it compiles.
    """
    key = device.int_ptr
    if key not in _probe_cache:
        cl = _cl()
        try:
            ctx = cl.Context([device])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cl.Program(ctx, _PROBE).build()
            _probe_cache[key] = ""
        except cl.Error as e:
            _probe_cache[key] = " ".join(build_log_of(str(e)).split())[:300]
    return _probe_cache[key]


def _default_device(platforms: list):
    """pip's PoCL if it compiles, else the first CPU device that does, else any that does."""
    cl = _cl()

    def rank(p):
        devs = _devices(p)
        cpu = bool(devs) and bool(devs[0].type & cl.device_type.CPU)
        return (not _is_pip_pocl(p), not cpu)

    failures = []
    for p in sorted(platforms, key=rank):
        for d in _devices(p):
            err = probe_device(d)
            if not err:
                return d
            failures.append(f"{d.name} on {_describe_platform(p)}: {err}")
    if not failures:
        raise _no_device_error(", ".join(_describe_platform(p) for p in platforms))
    raise NoDeviceError(
        "no OpenCL device here compiles a trivial kernel: " + "; ".join(failures)
        + ". pip's PoCL 3.0 (LLVM 14) cannot compile for CPUs newer than its LLVM (e.g. AMD "
        "Zen 5); install a newer PoCL (Debian: apt-get install pocl-opencl-icd)"
    )


def parse_spec(spec: str) -> tuple[str, int | None]:
    """``"pocl 3.1:0"`` -> ``("pocl 3.1", 0)``; the device index is optional."""
    m = re.fullmatch(r"(.*?)(?::(\d+))?", spec.strip())
    assert m is not None
    return m.group(1).strip(), (int(m.group(2)) if m.group(2) is not None else None)


def select_device(spec: str | None = None):
    """Returns a ``pyopencl.Device``.

    ``spec`` is ``"platform-substring[:device-index]"``; ``None`` reads ``LIFTMAP_DEVICE``;
    if that is unset too, the first device that compiles a trivial kernel, trying pip's
    PoCL first, then CPU devices, then the rest. Raises ``NoPlatformError`` or
    ``NoDeviceError`` with advice.
    """
    if spec is None:
        spec = os.environ.get(ENV_VAR) or None
    platforms = _platforms()
    if not platforms:
        raise NoPlatformError(f"no OpenCL platform found; {_INSTALL_ADVICE}")
    if spec is None:
        return _default_device(platforms)
    sub, index = parse_spec(spec)
    key = sub.lower()
    matches = [p for p in platforms
               if key in f"{p.name} {p.vendor} {p.version}".lower()]
    if not matches:
        known = "; ".join(_describe_platform(p) for p in platforms)
        raise NoPlatformError(
            f"no OpenCL platform matches {sub!r} (spec {spec!r}, from {ENV_VAR} or --device); "
            f"platforms here: {known}. A spec is 'platform-substring[:device-index]' matched "
            f"against name, vendor and version; {_INSTALL_ADVICE}"
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
    """Limits of ``device`` that become constraints and launch checks (sizes in bytes)."""
    cl = _cl()
    exts = set(device.extensions.split())
    is_cpu = bool(device.type & cl.device_type.CPU)
    return {
        "name": device.name.strip(),
        "platform": device.platform.name.strip(),
        "version": device.version.strip(),
        "platform_version": device.platform.version.strip(),
        "driver_version": device.driver_version.strip(),
        "type": "cpu" if is_cpu else ("gpu" if device.type & cl.device_type.GPU else "other"),
        "max_work_group_size": int(device.max_work_group_size),
        "max_work_item_dimensions": int(device.max_work_item_dimensions),
        "max_work_item_sizes": tuple(int(s) for s in device.max_work_item_sizes),
        "local_mem_size": int(device.local_mem_size),
        "max_mem_alloc_size": int(device.max_mem_alloc_size),
        "global_mem_size": int(device.global_mem_size),
        "max_compute_units": int(device.max_compute_units),
        "fp64": "cl_khr_fp64" in exts or bool(getattr(device, "double_fp_config", 0)),
        "fp16": "cl_khr_fp16" in exts,
        "extensions": tuple(sorted(exts)),
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


def describe_device(device) -> str:
    """One line: device name, compute units, platform version."""
    lim = device_limits(device)
    return (f"{lim['name']} ({lim['max_compute_units']} compute units) on "
            f"{lim['platform']} [{lim['platform_version']}]")
