"""This process's OpenCL environment: PoCL set up before the first OpenCL call (a writable
kernel cache, worker threads pinned one per core), pyopencl loaded after that, the platforms
and devices listed, and the errors when there are none.

If ``POCL_CACHE_DIR`` is unset and PoCL's default cache is not writable, PoCL lists *zero*
devices (:func:`ensure_pocl_cache_dir`); unpinned, PoCL's workers may share one core for a
whole kernel (:func:`pin_pocl_threads`).
"""

from __future__ import annotations

import os
import tempfile

from ir.errors import LiftmapError

INSTALL_ADVICE = (
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


# ------------------------------------------------------------------ the listing


def _cl():
    ensure_pocl_environment()
    import pyopencl as cl

    return cl


def list_platforms() -> list:
    """The OpenCL platforms of this process (PoCL's environment set up first)."""
    cl = _cl()
    try:
        return list(cl.get_platforms())
    except cl.Error as e:  # PLATFORM_NOT_FOUND_KHR when no ICD at all
        raise NoPlatformError(f"no OpenCL platform found ({e}); {INSTALL_ADVICE}") from e


def list_devices(platform) -> list:
    """The devices of ``platform`` (none when it cannot list them)."""
    cl = _cl()
    try:
        return list(platform.get_devices())
    except cl.Error:
        return []


def describe_platform(p) -> str:
    """``'Portable Computing Language' (OpenCL 3.0 PoCL 3.1+debian ...)``."""
    return f"{p.name!r} ({p.version.strip()})"


def no_device_error(platform_desc: str) -> NoDeviceError:
    """The error for a platform that lists no device, naming the PoCL cache pitfall."""
    cache = os.environ.get("POCL_CACHE_DIR") or pocl_default_cache_dir()
    return NoDeviceError(
        f"platform {platform_desc} lists no device. For PoCL this happens when its kernel cache "
        f"directory is not writable (now {cache!r}): set POCL_CACHE_DIR (and XDG_CACHE_HOME) to a "
        "writable directory before the first OpenCL call"
    )

