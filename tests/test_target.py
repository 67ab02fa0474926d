"""One device value (codegen.target.Device): presets, JSON descriptions, the live device,
and every stage using the device it is given."""

from __future__ import annotations

import dataclasses
import json

import pytest
from opencl_required import opencl_device

from codegen.errors import WorkGroupSizeError
from codegen.lower import lower
from codegen.target import (
    DEFAULT_DEVICE,
    H100,
    POCL_CPU,
    PRESETS,
    Device,
    DeviceDescriptionError,
    resolve,
)
from ir.programs import cc22_listing3
from mapper.api import lower_mapping
from mapper.cli import main
from mapper.tuning import JointSpace, infer_tuning


def test_presets_and_json_round_trip(tmp_path):
    assert set(PRESETS) == {"pocl-cpu", "h100"} and DEFAULT_DEVICE is POCL_CPU
    for dev in PRESETS.values():
        path = tmp_path / "d.json"
        dev.save(path)
        back = Device.load(path)
        assert dataclasses.replace(back, source=dev.source) == dev
        assert back.source == f"file:{path}"
        assert resolve(str(path)) == back
    assert resolve("H100") is H100


@pytest.mark.parametrize("text, message", [
    ('{"name": "x", "max_work_group_size": 0}', "positive integer"),
    ('{"name": "x", "warp": 32}', r"unknown device field\(s\) warp"),
    ('{"max_work_group_size": 8}', "needs a 'name'"),
    ("[1, 2]", "JSON object"),
    ("{nope", "is not JSON"),
])
def test_bad_descriptions_are_clear_errors(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(DeviceDescriptionError, match=message):
        Device.load(path)
    with pytest.raises(DeviceDescriptionError, match="cannot read"):
        Device.load(tmp_path / "missing.json")


def test_lowering_uses_the_device_it_is_given():
    """A fixed work-group of 256 work-items fits the CPU preset, not a 128-item device."""
    low = lower_mapping(cc22_listing3(), "A=W0 B=L0 C=L0 D=S")
    sizes = {"N": 1024, "s0": 256, "s1": 4}
    assert lower(low, sizes, device=POCL_CPU, local_sizes={0: 256}).kernels
    small = dataclasses.replace(POCL_CPU, max_work_group_size=128,
                                max_work_item_sizes=(128, 128, 128))
    with pytest.raises(WorkGroupSizeError, match="128"):
        lower(low, sizes, device=small, local_sizes={0: 256})


@pytest.mark.slow
def test_spaces_differ_by_device_and_record_it():
    """The private-memory budget of the device decides the private tile sizes admitted."""
    prog = cc22_listing3(private=True)
    counts = {}
    for name, dev in PRESETS.items():
        js = JointSpace(prog, {"N": 1 << 16}, device=dev)
        assert js.device is dev
        counts[name] = js.count()
    tiny = dataclasses.replace(POCL_CPU, private_mem_size=64)
    assert JointSpace(prog, {"N": 1 << 16}, device=tiny).count() < counts["pocl-cpu"]


def test_cli_device_describes_and_saves(tmp_path, capsys):
    path = tmp_path / "h100.json"
    assert main(["device", "h100", "--save", str(path)]) == 0
    assert json.loads(path.read_text())["max_work_group_size"] == 1024
    assert "NVIDIA H100" in capsys.readouterr().out
    assert main(["device", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == H100.name


def test_cli_space_builds_for_a_saved_description(tmp_path, capsys):
    path = tmp_path / "gpu.json"
    H100.save(path)
    assert main(["space", "examples/cc22_listing3.lift", "--sizes", "N=4096",
                 "--mapping", "A=W0 B=L0 C=L0 D=S", "--device", str(path)]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100" in out and "valid configurations" in out
    assert main(["run", "examples/cc22_listing3.lift", "--sizes", "N=64,s0=8,s1=2",
                 "--mapping", "A=W0 B=L0 C=L0 D=S", "--device", "h100"]) == 2
    assert "live OpenCL device" in capsys.readouterr().err


def test_infer_tuning_default_device_is_the_one_default():
    low = lower_mapping(cc22_listing3(private=True), "A=G0 B=S C=S D=F")
    a = infer_tuning(low, {"N": 4096})
    b = infer_tuning(low, {"N": 4096}, device=DEFAULT_DEVICE)
    assert a.restrictions == b.restrictions


def test_live_device_description():
    from codegen.device import device_limits, select_device

    with opencl_device():  # none here: a skip, or with LIFTMAP_REQUIRE_OPENCL a failure
        cl_device = select_device(None)
    dev = Device.from_opencl(cl_device)
    assert dev.source == "opencl" and dev.max_work_group_size >= 1
    assert dev.type in ("cpu", "gpu", "other")
    assert Device.from_limits(device_limits(cl_device)) == dev
    assert resolve(None) == dev  # the live default device when there is one


def test_a_description_that_is_not_utf8_is_one_typed_error(tmp_path):
    from codegen.target import Device, DeviceDescriptionError

    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe{}")
    with pytest.raises(DeviceDescriptionError, match="not UTF-8 text"):
        Device.load(bad)


def test_presets_are_read_from_their_json_with_notes_left_out(tmp_path):
    from codegen.device_description import load_presets

    data = {name: {"_note": "why these values", **{k: v for k, v in dev.to_dict().items()
                                                   if k != "source"}}
            for name, dev in PRESETS.items()}
    path = tmp_path / "presets.json"
    path.write_text(json.dumps(data))
    again = load_presets(path)
    assert again == PRESETS and again["h100"].source == "preset:h100"
    data["h100"]["warp"] = 32  # a typo in the file is the same clear error as in a description
    path.write_text(json.dumps(data))
    with pytest.raises(DeviceDescriptionError, match="warp"):
        load_presets(path)
