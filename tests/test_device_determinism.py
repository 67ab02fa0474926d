"""Same seed, same sequence, whatever the free memory: a live device's memory sizes (PoCL
reports them from the momentary free memory) enter its ``Device``, and so the tuning space,
rounded down to a power of two; the runner keeps the real values for its launch checks."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from opencl_required import import_pyopencl

from codegen.target import Device, stable_memory_size
from ir.conv_layer import ConvLayer

GiB = 1 << 30

# what a worker reports (codegen.device.device_limits) for one PoCL CPU device at two
# moments with different free memory: only the memory sizes differ
LIMITS = dict(name="pthread-haswell-AMD EPYC", type="cpu", platform="Portable Computing Language",
              max_work_group_size=4096, max_work_item_sizes=[4096, 4096, 4096],
              max_work_item_dimensions=3, local_mem_size=1 << 20, max_compute_units=2,
              preferred_vector_width_float=16, fp64=True, fp16=False,
              extensions=["cl_khr_fp64"], private_mem_size=64 << 10,
              private_group_budget=256 << 10, source="opencl", version="OpenCL 3.0 PoCL",
              platform_version="OpenCL 3.0 PoCL 3.1", driver_version="3.1")
MORE_FREE = dict(LIMITS, max_mem_alloc_size=int(1.9 * GiB), global_mem_size=int(7.6 * GiB))
LESS_FREE = dict(LIMITS, max_mem_alloc_size=int(1.7 * GiB), global_mem_size=int(6.8 * GiB))


@pytest.mark.parametrize("n", [1, 2, 3, 1000, 4096, 4097, int(1.7 * GiB), int(1.9 * GiB),
                               2 * GiB - 1, 2 * GiB, 2 * GiB + 1, 6671257600, 84_920_496_128])
def test_stable_memory_size_is_the_power_of_two_at_or_below(n):
    q = stable_memory_size(n)
    assert q & (q - 1) == 0  # a power of two
    assert q <= n < 2 * q  # never more than the device has, and the largest such
    assert stable_memory_size(q) == q


def test_stable_memory_size_leaves_invalid_values_to_the_device_check():
    for bad in (0, -5, None, "1G", True):
        assert stable_memory_size(bad) == bad  # type: ignore[arg-type]


def test_limits_that_differ_in_free_memory_give_equal_devices():
    a, b = Device.from_limits(MORE_FREE), Device.from_limits(LESS_FREE)
    assert a == b
    assert a.max_mem_alloc_size == GiB and a.global_mem_size == 4 * GiB
    for lim in (MORE_FREE, LESS_FREE):
        dev = Device.from_limits(lim)
        assert dev.max_mem_alloc_size <= lim["max_mem_alloc_size"]
        assert dev.global_mem_size <= lim["global_mem_size"]
        assert dev.max_mem_alloc_size <= dev.global_mem_size
    # the other limits pass unchanged; the limits dicts are not modified
    assert a.local_mem_size == 1 << 20 and a.max_work_item_sizes == (4096, 4096, 4096)
    assert MORE_FREE["max_mem_alloc_size"] == int(1.9 * GiB)


def _fake_cl_device(alloc: int, glob: int):
    import pyopencl as cl

    plat = SimpleNamespace(name="Portable Computing Language", version="OpenCL 3.0 PoCL 3.1")
    return SimpleNamespace(
        name="pthread-haswell-AMD EPYC", type=int(cl.device_type.CPU), platform=plat,
        version="OpenCL 3.0 PoCL", driver_version="3.1", extensions="cl_khr_fp64 cl_khr_spir",
        double_fp_config=1, max_work_group_size=4096, max_work_item_sizes=[4096] * 3,
        max_work_item_dimensions=3, local_mem_size=1 << 20, max_mem_alloc_size=alloc,
        global_mem_size=glob, max_compute_units=2, preferred_vector_width_float=16)


def test_live_descriptions_agree_and_the_runner_keeps_the_real_limits():
    import_pyopencl()
    from codegen.device import device_limits

    more = _fake_cl_device(int(1.9 * GiB), int(7.6 * GiB))
    less = _fake_cl_device(int(1.7 * GiB), int(6.8 * GiB))
    assert Device.from_opencl(more) == Device.from_opencl(less)
    for d in (more, less):
        lim = device_limits(d)
        # the runner's launch checks read these: the device's own reports
        assert lim["max_mem_alloc_size"] == d.max_mem_alloc_size
        assert lim["global_mem_size"] == d.global_mem_size
        # the worker's report and the direct description give the same Device
        assert Device.from_limits(lim) == Device.from_opencl(d)


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
def test_joint_space_constraints_do_not_follow_the_free_memory():
    from mapper.explore.task import Task

    layer = ConvLayer("a", C=2, H=6, W=6, M=4, K=3, S=1, P=1)

    def restrictions(dev: Device):
        js = Task.conv_layer(layer).joint(dev)
        tp = js.tuning(js.mappings[0])
        # a seeded sample of the mapping's space (the joint space's own sample would build
        # every mapping's space: a minute)
        return [(str(p), origin) for p, origin in tp.restrictions], \
            [(js.mappings[0], c) for c in tp.space.sample(3, seed=0)]

    known = {"name", "type", "platform", "max_work_group_size", "max_work_item_sizes",
             "max_work_item_dimensions", "local_mem_size", "max_mem_alloc_size",
             "global_mem_size", "max_compute_units", "preferred_vector_width_float", "fp64",
             "fp16", "extensions", "private_mem_size", "private_group_budget"}
    raw = [restrictions(Device.from_dict({k: v for k, v in lim.items() if k in known}))[0]
           for lim in (MORE_FREE, LESS_FREE)]
    assert raw[0] != raw[1]  # the memory sizes do enter the space's constraints
    (r1, s1), (r2, s2) = (restrictions(Device.from_limits(lim)) for lim in (MORE_FREE, LESS_FREE))
    assert r1 == r2
    assert any("largest allocation of 1073741824" in o for _, o in r1)
    assert [(str(m), c) for m, c in s1] == [(str(m), c) for m, c in s2]
