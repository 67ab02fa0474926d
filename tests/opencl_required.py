"""Getting an OpenCL device in a test fixture: where this machine has none, the tests that
need one are skipped; with ``LIFTMAP_REQUIRE_OPENCL`` set (``.ci/run`` sets it), they fail
instead, so that CI cannot pass with every device test skipped unseen (as
``LIFTMAP_REQUIRE_RAY`` does for Ray).

Only the errors that mean "no device here" count: ``codegen.device.DeviceError`` (no
platform, no device, none that passes the probe) and a missing ``pyopencl``. Any other
error is a bug, and escapes as one.

    with opencl_device():
        device = select_device(None)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import NoReturn

import pytest

from codegen.device import DeviceError

REQUIRE_OPENCL = "LIFTMAP_REQUIRE_OPENCL"


def opencl_required() -> bool:
    """True when ``LIFTMAP_REQUIRE_OPENCL`` is set to anything but empty or ``0``."""
    return os.environ.get(REQUIRE_OPENCL, "") not in ("", "0")


def no_opencl(reason: str) -> NoReturn:
    """Skip the test for ``reason`` (no OpenCL device), or fail it where one is required."""
    if opencl_required():
        pytest.fail(f"{reason} ({REQUIRE_OPENCL} is set: a missing OpenCL device is a "
                    "failure here, not a skip)", pytrace=False)
    pytest.skip(reason)


@contextmanager
def opencl_device(what: str = "no OpenCL device") -> Iterator[None]:
    """Runs the block; a ``DeviceError`` in it becomes :func:`no_opencl` (a skip, or a
    failure where a device is required). Other errors pass through unchanged."""
    try:
        yield
    except DeviceError as e:
        no_opencl(f"{what}: {e}")


def import_pyopencl() -> ModuleType:
    """``pyopencl``; where it cannot be imported, :func:`no_opencl`."""
    try:
        import pyopencl
    except ImportError as e:
        no_opencl(f"pyopencl cannot be imported: {e}")
    return pyopencl
