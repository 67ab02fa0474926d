"""Default device choice: the probe kernel in a child process (an abort costs the child, not
the caller), its cached verdicts, the ranking (pip's PoCL last) and the one-line report."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import pytest
from opencl_required import opencl_device

from codegen import device as D
from codegen import device_probe as P
from codegen.device import (
    CL_DEVICE_TYPE_CPU,
    CL_DEVICE_TYPE_GPU,
    NoDeviceError,
    describe_choice,
    device_spec,
    rank_devices,
)
from codegen.device_probe import probe_device
from codegen.opencl_env import list_platforms

ABORT = "import os, sys; sys.stderr.write('LLVM ERROR: Cannot select: fake\\n'); " \
        "sys.stderr.flush(); os.abort()"


@pytest.fixture(scope="module")
def device():
    """The default device, or a skip where this machine has none that passes the probe
    (a failure with LIFTMAP_REQUIRE_OPENCL)."""
    with opencl_device("no OpenCL device passes the probe here"):
        return D.default_device_report()[0]


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """No verdict from memory or from an earlier on-disk cache."""
    monkeypatch.setattr(P, "_probe_cache", {})
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path / "pocl"))
    return tmp_path / "pocl"


# ------------------------------------------------------------------ fakes


@dataclass
class FakeDevice:
    name: str
    type: int = CL_DEVICE_TYPE_CPU
    platform: object = None


@dataclass
class FakePlatform:
    name: str
    version: str
    devices: list = field(default_factory=list)
    vendor: str = "fake"
    int_ptr: int = 0

    def __post_init__(self):
        for d in self.devices:
            d.platform = self

    def get_devices(self):
        return list(self.devices)


def _fakes():
    pip = FakePlatform("Portable Computing Language", "OpenCL 3.0 PoCL 3.0-rc2 DISTRO",
                       [FakeDevice("pip-cpu")])
    gpu = FakePlatform("Some GPU", "OpenCL 3.0 vendor 1.0",
                       [FakeDevice("gpu0", CL_DEVICE_TYPE_GPU)])
    sys_pocl = FakePlatform("Portable Computing Language", "OpenCL 3.0 PoCL 3.1+debian DISTRO",
                            [FakeDevice("sys-cpu")])
    return [pip, gpu, sys_pocl], (lambda p: p is pip)


# ------------------------------------------------------------------ ranking and the report


def test_rank_puts_system_platforms_first_cpu_first_and_pip_pocl_last():
    platforms, is_pip = _fakes()
    ranked = rank_devices(platforms, is_pip)
    assert [d.name for _, d, _ in ranked] == ["sys-cpu", "gpu0", "pip-cpu"]
    assert [pip for _, _, pip in ranked] == [False, False, True]


def test_report_takes_the_first_that_passes_and_says_why_others_were_skipped():
    platforms, is_pip = _fakes()
    probed = []

    def probe(d):
        probed.append(d.name)
        return "process aborted (SIGABRT): LLVM ERROR: x" if d.name == "sys-cpu" else ""

    dev, notes = D._default_device_report(platforms, is_pip, probe)
    assert dev.name == "gpu0" and probed == ["sys-cpu", "gpu0"]
    assert notes[0].startswith("sys-cpu on PoCL 3.1+debian: process aborted (SIGABRT)")
    assert notes[1] == "pip-cpu on PoCL 3.0-rc2 (pip): not probed, ranked after the chosen device"
    line = D._choice_line(dev, notes, is_pip)
    assert line.startswith("OpenCL device: gpu0 on Some GPU") and "\n" not in line
    assert "LLVM ERROR" in line and "not probed" in line


def test_report_raises_with_every_reason_when_nothing_passes():
    platforms, is_pip = _fakes()
    with pytest.raises(NoDeviceError, match="pip-cpu on PoCL 3.0-rc2 \\(pip\\): boom"):
        D._default_device_report(platforms, is_pip, lambda d: "boom")


def test_pip_pocl_is_not_recognised_by_distro_and_version_fallback(monkeypatch):
    debian = FakePlatform("Portable Computing Language",
                          "OpenCL 3.0 PoCL 3.1+debian  Linux, LLVM 15.0.6, DISTRO")
    pip = FakePlatform("Portable Computing Language",
                       "OpenCL 3.0 PoCL 3.0-rc2  Linux, LLVM 14.0.6, DISTRO")
    other = FakePlatform("Other", "OpenCL 3.0 PoCL 3.0-rc2")
    assert not D._is_pip_pocl(debian) and not D._is_pip_pocl(other)
    monkeypatch.setattr(D, "_pip_pocl_platform_ptrs", lambda: None)  # force the fallback
    monkeypatch.setattr(D.importlib.metadata, "version", lambda name: "3.0")
    assert D._is_pip_pocl(pip) and not D._is_pip_pocl(debian)


@pytest.mark.opencl
def test_pip_pocl_handles_belong_to_pocl_platforms():
    with opencl_device():
        platforms = list_platforms()
    ptrs = D._pip_pocl_platform_ptrs()
    for p in platforms:
        if ptrs and p.int_ptr in ptrs:
            assert "Portable Computing Language" in p.name


# ------------------------------------------------------------------ the child process


def test_child_abort_becomes_a_reason_and_spares_this_process():
    reason, kind = P._probe_in_child(0, 0, "v", "d", P.PROBE_SOURCE, child_prelude=ABORT)
    assert kind == "verdict"
    assert reason.startswith("process aborted (SIGABRT): LLVM ERROR: Cannot select: fake")


def test_child_that_hangs_is_killed_and_reported_as_timeout():
    reason, kind = P._probe_in_child(0, 0, "v", "d", P.PROBE_SOURCE, timeout=2,
                                     child_prelude="import time; time.sleep(60)")
    assert kind == "timeout" and reason.startswith("no answer within 2 s")


@pytest.mark.opencl
def test_probe_of_the_default_device_passes_in_a_child(device, fresh, monkeypatch):
    calls = []
    real = P._probe_in_child
    monkeypatch.setattr(P, "_probe_in_child", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert probe_device(device) == ""
    assert calls == [1]
    assert probe_device(device) == "" and calls == [1]  # cached in this process


@pytest.mark.opencl
def test_probe_device_reports_an_aborting_child_and_caches_only_in_memory(device, fresh):
    reason = probe_device(device, child_prelude=ABORT)
    assert reason.startswith("process aborted (SIGABRT)")
    assert not (fresh / "liftmap-probe").exists()  # a test hook's verdict is not kept on disk


@pytest.mark.opencl
def test_probe_reports_build_errors_and_wrong_numbers(device, fresh):
    bad = "kernel void probe(global const float* x, global float* y) { y[0] = x[0] +* ; }"
    assert probe_device(device, bad).startswith("build failed")
    wrong = ("kernel void probe(global const float* x, global float* y) "
             "{ y[get_global_id(0)] = 0.0f; }")
    assert probe_device(device, wrong).startswith("wrong result")


@pytest.mark.opencl
def test_verdict_on_disk_is_reused_by_a_fresh_process(device, fresh, monkeypatch):
    assert probe_device(device) == ""
    files = list((fresh / "liftmap-probe").glob("*.json"))
    assert len(files) == 1
    entry = json.loads(files[0].read_text())
    assert entry["reason"] == "" and entry["key"]["device_name"] == device.name.strip()
    monkeypatch.setattr(P, "_probe_cache", {})  # as in a fresh process

    def no_child(*a, **k):
        raise AssertionError("the on-disk verdict should have been used")

    monkeypatch.setattr(P, "_probe_in_child", no_child)
    assert probe_device(device) == ""
    monkeypatch.setenv(P.PROBE_CACHE_ENV, "0")
    monkeypatch.setattr(P, "_probe_cache", {})
    with pytest.raises(AssertionError, match="on-disk"):
        probe_device(device)


def test_disk_verdicts_need_an_equal_key_and_timeouts_expire(fresh, monkeypatch):
    key = {"platform_version": "v", "device_name": "d", "cpu": "c", "probe": "p"}
    P._write_verdict(key, "LLVM ERROR: x")
    assert P._read_verdict(key) == "LLVM ERROR: x"
    assert P._read_verdict(dict(key, cpu="another CPU")) is None
    P._write_verdict(key, "no answer within 60 s", "timeout")
    assert P._read_verdict(key) == "no answer within 60 s"
    monkeypatch.setattr(P, "PROBE_TIMEOUT_TTL_S", 0.0)
    assert P._read_verdict(key) is None
    path = P._verdict_path(key)
    with open(path, "w") as f:
        f.write("{not json")
    assert P._read_verdict(key) is None
    assert [p.name for p in (fresh / "liftmap-probe").iterdir()] == [os.path.basename(path)]


def test_stderr_tail_prefers_the_llvm_error_line():
    out = "5 warnings generated.\nLLVM ERROR: Cannot select: t1: v16f32 = fma\nIn function: k\nx\n"
    assert P._stderr_tail(out) == "LLVM ERROR: Cannot select: t1: v16f32 = fma In function: k"
    assert P._stderr_tail("a\nb\n\nc\nd\n") == "b c d"
    assert P._stderr_tail("") == "(no output)"


# ------------------------------------------------------------------ the one line


@pytest.mark.opencl
def test_describe_choice_names_the_chosen_device(device, monkeypatch):
    monkeypatch.delenv(D.ENV_VAR, raising=False)
    line = describe_choice()
    assert line.startswith(f"OpenCL device: {device.name.strip()} on ") and "\n" not in line
    assert "chosen: first in rank order that passed the probe" in line
    dev, notes = D.default_device_report()
    assert dev.int_ptr == device.int_ptr and all(isinstance(n, str) for n in notes)
    spec = device_spec(device)
    monkeypatch.setenv(D.ENV_VAR, spec)
    assert f"chosen by {D.ENV_VAR}={spec!r}" in describe_choice()
