"""OpenCL device selection, device limits and features.

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

The probe itself is :mod:`codegen.device_probe`; PoCL's environment, the platform listing
and the device errors are :mod:`codegen.opencl_env` (the errors are importable from here too).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import logging
import os
import re
from collections.abc import Callable
from typing import Any

from codegen.device_description import Device
from codegen.device_probe import probe_device
from codegen.errors import Check

# DeviceError, NoPlatformError and NoDeviceError are importable from here, as docs/api.md says
from codegen.opencl_env import (
    INSTALL_ADVICE,
    DeviceError,
    NoDeviceError,
    NoPlatformError,
    describe_platform,
    list_devices,
    list_platforms,
    no_device_error,
)

ENV_VAR = "LIFTMAP_DEVICE"

log = logging.getLogger(__name__)


class DeviceFeatureError(DeviceError):
    """A kernel needs a feature (double, half, an extension) that the device lacks."""

    check = Check.DEVICE_FEATURE


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
        list_platforms()  # the ICD loader loads every ICD when it first lists platforms
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
        for di, d in enumerate(list_devices(p)):
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
        raise no_device_error(", ".join(describe_platform(p) for p in platforms))
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
        if not list_devices(p):
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
        platforms = list_platforms()
        if not platforms:
            raise NoPlatformError(f"no OpenCL platform found; {INSTALL_ADVICE}")
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
    platforms = list_platforms()
    if not platforms:
        raise NoPlatformError(f"no OpenCL platform found; {INSTALL_ADVICE}")
    if spec is None:
        return default_device_report()[0]
    sub, index = parse_spec(spec)
    key = sub.lower()
    matches = [p for p in platforms
               if key in f"{p.name} {p.vendor} {p.version}".lower()]
    if not matches:  # a device name's substring: the index-th device whose name has it
        named = [d for p in platforms for d in list_devices(p) if key in d.name.lower()]
        if named and (index or 0) < len(named):
            return named[index or 0]
        if named:
            raise NoDeviceError(
                f"{len(named)} device(s) have {sub!r} in their name: "
                f"{[d.name for d in named]}; index {index} is out of range")
        known = "; ".join(describe_platform(p) + ": " + ", ".join(
            repr(d.name) for d in list_devices(p)) for p in platforms)
        raise NoPlatformError(
            f"no OpenCL platform or device matches {sub!r} (spec {spec!r}, from {ENV_VAR} or "
            f"--device); platforms and devices here: {known}. {SPEC_FORM}; {INSTALL_ADVICE}"
        )
    for p in matches:
        devs = list_devices(p)
        if not devs:
            continue
        if index is None:
            return devs[0]
        if index < len(devs):
            return devs[index]
        raise NoDeviceError(
            f"platform {describe_platform(p)} has {len(devs)} device(s): "
            f"{[d.name for d in devs]}; index {index} is out of range"
        )
    raise no_device_error(", ".join(describe_platform(p) for p in matches))


def device_spec(device) -> str:
    """A spec that selects ``device`` again (e.g. in a worker process)."""
    p = device.platform
    platforms = list_platforms()
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
    idx = [d.int_ptr for d in list_devices(p)].index(device.int_ptr)
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

