"""``LIFTMAP_REQUIRE_OPENCL``: a fixture that cannot get an OpenCL device skips its tests,
or fails them where the variable is set (CI: ``.ci/run``); errors that do not mean "no
device" are never turned into either."""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest
from opencl_required import REQUIRE_OPENCL, import_pyopencl, opencl_device, opencl_required

from codegen.device import NoDeviceError, NoPlatformError

ROOT = Path(__file__).resolve().parent.parent


def _no_device():
    raise NoDeviceError("platform 'X' lists no device")


@pytest.mark.parametrize("value", [None, "", "0"])
def test_without_the_switch_no_device_is_a_skip(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(REQUIRE_OPENCL, raising=False)
    else:
        monkeypatch.setenv(REQUIRE_OPENCL, value)
    assert not opencl_required()
    with pytest.raises(pytest.skip.Exception, match="no OpenCL device: platform 'X'"):
        with opencl_device():
            _no_device()


@pytest.mark.parametrize("error", [NoDeviceError, NoPlatformError])
def test_with_the_switch_no_device_is_a_failure(monkeypatch, error):
    monkeypatch.setenv(REQUIRE_OPENCL, "1")
    assert opencl_required()
    with pytest.raises(pytest.fail.Exception, match=REQUIRE_OPENCL) as e:
        with opencl_device():
            raise error("none here")
    assert "none here" in str(e.value)


@pytest.mark.parametrize("value", [None, "1"])
def test_other_errors_are_neither_a_skip_nor_turned_into_a_failure(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(REQUIRE_OPENCL, raising=False)
    else:
        monkeypatch.setenv(REQUIRE_OPENCL, value)
    with pytest.raises(KeyError):  # a bug in the fixture: reported as itself
        with opencl_device():
            {}["missing"]


def test_a_missing_pyopencl_skips_or_fails(monkeypatch):
    real_import = builtins.__import__

    def no_pyopencl(name, *args, **kwargs):
        if name == "pyopencl":
            raise ImportError("No module named 'pyopencl'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyopencl)
    monkeypatch.delenv(REQUIRE_OPENCL, raising=False)
    with pytest.raises(pytest.skip.Exception, match="pyopencl"):
        import_pyopencl()
    monkeypatch.setenv(REQUIRE_OPENCL, "1")
    with pytest.raises(pytest.fail.Exception, match=REQUIRE_OPENCL):
        import_pyopencl()


def test_ci_requires_opencl():
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"export {REQUIRE_OPENCL}=1" in ci
