"""The device runner: every outcome kind from a real case, build cache, device errors,
worker isolation (timeouts, crashes) and the Oclgrind deep check."""

from __future__ import annotations

import functools
import os
import pickle
import time

import numpy as np
import pytest

from codegen.device import (
    DeviceFeatureError,
    NoDeviceError,
    NoPlatformError,
    check_features,
    device_limits,
    device_spec,
    parse_spec,
    select_device,
)
from codegen.oclgrind import check_with_oclgrind, oclgrind_available, parse_oclgrind_log
from codegen.opencl_env import ensure_pocl_cache_dir
from codegen.program import Buffer, CompiledProgram, Kernel, Outcome
from codegen.runner import Runner, check_launch, compare, source_hash
from codegen.worker import WorkerPool, data_token
from experiments.handwritten import (
    conv_inputs,
    conv_reference,
    local_tiled_conv_program,
    naive_conv_program,
    register_tiled_conv_program,
    vector_add_program,
)
from ir.conv_layer import ConvLayer

pytestmark = pytest.mark.opencl

N = 1000
SMALL = ConvLayer("small", 5, 9, 14, 8)


def _ab():
    rng = np.random.default_rng(1)
    return {"a": rng.random(N, dtype=np.float32), "b": rng.random(N, dtype=np.float32)}


HANG_SRC = """kernel void spin(volatile global const int* flag, global float* out) {
  int i = get_global_id(0);
  float x = 0.0f;
  while (flag[0] != 0) { x += 1.0f; }
  out[i] = x;
}
"""


def hang_program(n: int = 4) -> CompiledProgram:
    """Loops for ever while ``flag[0] != 0``."""
    return CompiledProgram(
        (Kernel("spin", HANG_SRC, ("flag", "out"), (n,)),),
        {"flag": Buffer("flag", "global", "int", 1, "input"),
         "out": Buffer("out", "global", "float", n, "output")},
        ("flag",), "out", (n,))


def syntax_error_program(n: int = 16, local_size: int | None = None) -> CompiledProgram:
    src = "kernel void vadd(global const float* a, global const float* b, global float* out) {\n" \
          "  out[get_global_id(0)] = a[get_global_id(0)] +* ;\n}\n"
    p = vector_add_program(n, local_size=local_size)
    return CompiledProgram((Kernel("vadd", src, ("a", "b", "out"), p.kernels[0].global_size,
                                   p.kernels[0].local_size),),
                           p.buffers, p.inputs, p.output, p.output_shape)


@pytest.fixture(scope="module")
def runner():
    return Runner()


# ------------------------------------------------------------------ device selection


def test_spec_matching_no_platform_gives_typed_error_with_advice(runner):
    with pytest.raises(NoPlatformError) as e:
        select_device("no-such-platform-xyz")
    msg = str(e.value)
    assert "no-such-platform-xyz" in msg and "pip install pyopencl[pocl]" in msg
    assert runner.device.platform.name in msg  # lists what is there


def test_device_index_out_of_range_and_env_var(runner, monkeypatch):
    spec = device_spec(runner.device)
    assert select_device(spec).int_ptr == runner.device.int_ptr
    with pytest.raises(NoDeviceError, match="out of range"):
        select_device(spec.rsplit(":", 1)[0] + ":99")
    monkeypatch.setenv("LIFTMAP_DEVICE", "no-such-platform-xyz")
    with pytest.raises(NoPlatformError):
        select_device()
    assert parse_spec("PoCL 3.1+debian:0") == ("PoCL 3.1+debian", 0)
    assert parse_spec("Portable") == ("Portable", None)


def test_no_device_error_mentions_the_pocl_cache_pitfall():
    from codegen.opencl_env import no_device_error

    msg = str(no_device_error("'Portable Computing Language'"))
    assert "POCL_CACHE_DIR" in msg and "writable" in msg


def test_unwritable_pocl_cache_dir_is_replaced(monkeypatch, tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    monkeypatch.setenv("POCL_CACHE_DIR", str(not_a_dir / "sub"))
    used = ensure_pocl_cache_dir()
    assert used != str(not_a_dir / "sub") and os.path.isdir(used)
    assert os.environ["POCL_CACHE_DIR"] == used


def test_pocl_threads_are_pinned_unless_the_user_or_the_cpu_set_says_otherwise(monkeypatch):
    from codegen import opencl_env

    n = os.cpu_count() or 1
    monkeypatch.delenv("POCL_AFFINITY", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(n)), raising=False)
    assert opencl_env.pin_pocl_threads() and os.environ["POCL_AFFINITY"] == "1"
    monkeypatch.setenv("POCL_AFFINITY", "0")  # the user's choice stands
    assert not opencl_env.pin_pocl_threads() and os.environ["POCL_AFFINITY"] == "0"
    monkeypatch.delenv("POCL_AFFINITY")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(1, n + 1)))
    assert not opencl_env.pin_pocl_threads()  # thread i on core i would leave the allowed set
    assert "POCL_AFFINITY" not in os.environ


def test_device_limits_and_feature_errors(runner):
    lim = device_limits(runner.device)
    for key in ("max_work_group_size", "max_work_item_sizes", "local_mem_size",
                "max_mem_alloc_size", "global_mem_size", "max_compute_units", "name",
                "version"):
        assert key in lim
    assert lim["max_compute_units"] >= 1
    no_fp = dict(lim, fp64=False, fp16=False)
    with pytest.raises(DeviceFeatureError, match="cl_khr_fp64"):
        check_features("kernel void f(global double* x) {}", no_fp)
    with pytest.raises(DeviceFeatureError, match="cl_khr_fp16"):
        check_features("#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n", no_fp)
    check_features("kernel void f(global float* doubled) {}", no_fp)  # a name, not a type


# ------------------------------------------------------------------ outcomes, in process


def test_ok_vector_add_with_timing_and_gflops(runner):
    d = _ab()
    out = runner.evaluate(vector_add_program(N), d, d["a"] + d["b"], repeats=4, warmup=1)
    assert out.status == "ok" and out.label == "ok", out.reason
    assert len(out.times_s) == 4 and out.time_s == float(np.median(out.times_s))
    assert out.gflops == pytest.approx(N / out.time_s / 1e9)
    assert out.memory["global_total"] == 3 * N * 4
    out2 = runner.evaluate(vector_add_program(N), d, d["a"] + d["b"], repeats=3, flops=10**9)
    assert out2.gflops == pytest.approx(1.0 / out2.time_s)


def test_run_budget_limits_the_timed_repeats(runner):
    d = _ab()
    ref = d["a"] + d["b"]
    # a budget below one execution: the first execution is the only, timed, one
    slow = runner.evaluate(vector_add_program(N), d, ref, repeats=5, run_budget_s=1e-12)
    assert slow.status == "ok" and len(slow.times_s) == 1
    # a generous budget: every repeat is timed
    fast = runner.evaluate(vector_add_program(N), d, ref, repeats=5, run_budget_s=60.0)
    assert fast.status == "ok" and len(fast.times_s) == 5
    # in between: as many as fit, at least one. The count is judged by the first
    # execution, whose time varies with load: the margin (20 budgeted against 2,000
    # asked) holds unless the first execution is 100x faster than the median of five
    t = fast.time_s
    mid = runner.evaluate(vector_add_program(N), d, ref, repeats=2000, run_budget_s=20 * t)
    assert 1 <= len(mid.times_s) < 2000


def test_wrong_result_states_error_and_tolerance(runner):
    d = _ab()
    out = runner.evaluate(vector_add_program(N, off_by_one=True), d, d["a"] + d["b"],
                          rtol=1e-5, atol=1e-6)
    assert out.status == "wrong-result"
    assert out.max_abs_error is not None and out.max_abs_error > 1e-3
    assert "max abs error" in out.reason and "atol=1e-06" in out.reason
    assert "rtol=1e-05" in out.reason


def test_unwritten_output_is_wrong_not_zero(runner):
    p = vector_add_program(N)
    src = p.kernels[0].source.replace("if (i < N)", "if (i < N - 1)")
    p2 = CompiledProgram((Kernel("vadd", src, ("a", "b", "out"), (N,)),), p.buffers,
                         p.inputs, p.output, p.output_shape)
    d = _ab()
    out = runner.evaluate(p2, d, d["a"] + d["b"])
    assert out.status == "wrong-result" and "not finite" in out.reason


def test_compile_error_carries_the_build_log(runner):
    out = runner.evaluate(syntax_error_program(), {"a": np.ones(16), "b": np.ones(16)},
                          np.full(16, 2.0))
    assert out.status == "compile-error"
    assert "vadd" in out.reason and "error" in out.reason.lower()
    assert len(out.reason.splitlines()) <= 13


def test_rejected_before_building(runner):
    lim = runner.limits
    too_big = 2 * lim["max_work_group_size"]
    # a syntax error too: rejected proves the size check comes before the build
    out = runner.evaluate(syntax_error_program(too_big, local_size=too_big),
                          {"a": np.ones(too_big), "b": np.ones(too_big)}, None)
    assert out.label == "rejected:work-group-size", out.reason
    p = vector_add_program(56, local_size=16)
    bad = CompiledProgram((Kernel("vadd", p.kernels[0].source, ("a", "b", "out"), (56,),
                                  (16,)),), p.buffers, p.inputs, p.output, p.output_shape)
    assert check_launch(bad, lim)[0] == "global-size"
    wide = ConvLayer("wide", lim["local_mem_size"] // 64, 3, 3, 1)  # patch 3x6xC floats
    out = runner.evaluate(local_tiled_conv_program(wide, 1, 4), conv_inputs(wide), None)
    assert out.label == "rejected:local-memory", out.reason
    huge = lim["max_mem_alloc_size"] // 4 + 1
    p = vector_add_program(16)
    bufs = dict(p.buffers, out=Buffer("out", "global", "float", huge, "output"))
    prog = CompiledProgram(p.kernels, bufs, p.inputs, p.output, (huge,))
    assert runner.evaluate(prog, {"a": np.ones(16), "b": np.ones(16)}).label == \
        "rejected:max-allocation"


def test_rejected_device_feature(runner):
    if runner.limits["fp16"]:
        pytest.skip("device has cl_khr_fp16")
    p = vector_add_program(16)
    src = "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n" + p.kernels[0].source
    prog = CompiledProgram((Kernel("vadd", src, ("a", "b", "out"), (16,)),), p.buffers,
                           p.inputs, p.output, p.output_shape)
    out = runner.evaluate(prog, {"a": np.ones(16), "b": np.ones(16)})
    assert out.label == "rejected:device-feature"


def test_build_cache_hit_on_second_build(runner):
    src = vector_add_program(N + 7).kernels[0].source  # a source no other test builds
    hits = runner.cache_hits
    _, t1, hit1 = runner.build(src)
    _, t2, hit2 = runner.build(src)
    assert (hit1, hit2) == (False, True) and t2 == 0.0 < t1
    assert runner.cache_hits == hits + 1
    _, _, hit3 = runner.build(src, ("-cl-mad-enable", "-cl-fast-relaxed-math"))
    assert not hit3  # options are part of the key
    assert source_hash(src) != source_hash(src, ("-cl-mad-enable",))


@pytest.mark.parametrize("make", [
    naive_conv_program,
    functools.partial(local_tiled_conv_program, tm=4, tx=4),
    functools.partial(register_tiled_conv_program, px=7, vw=8, nv=1, wg=(1, 1)),
], ids=["naive", "local-tiled", "register-tiled"])
def test_handwritten_convolutions_match_reference(runner, make):
    inp = conv_inputs(SMALL)
    out = runner.evaluate(make(SMALL), inp, conv_reference(SMALL, inp), repeats=2)
    assert out.status == "ok", out.reason
    assert out.gflops == pytest.approx(SMALL.flops / out.time_s / 1e9)


def test_compare_shapes_and_nan():
    ok, err, _ = compare(np.ones(6), np.ones((2, 3)))
    assert ok and err == 0
    ok, _, why = compare(np.ones(5), np.ones((2, 3)))
    assert not ok and "elements" in why


def test_outcome_pickles():
    out = Outcome("rejected", "x", check="work-group-size", memory={"a": 1})
    assert pickle.loads(pickle.dumps(out)) == out


# ------------------------------------------------------------------ isolation in workers


class SynchronizabilityError(Exception):
    """Stands in for the lowering's typed error."""

    check = "synchronizability"


def lower_vadd(n: int = N) -> CompiledProgram:
    return vector_add_program(n)


def lower_rejecting() -> CompiledProgram:
    raise SynchronizabilityError("map C writes local memory read by other work-items")


def lower_buggy() -> CompiledProgram:
    return {}["missing"]


@pytest.fixture(scope="module")
def pool():
    with WorkerPool() as p:
        yield p


def test_worker_ok_and_data_sent_once(pool):
    d = _ab()
    ref = d["a"] + d["b"]
    out = pool.evaluate(vector_add_program(N), d, ref, timeout_s=30)
    assert out.status == "ok", out.reason
    tok = data_token(d, ref)
    assert pool._workers[0].token == tok
    out = pool.evaluate_candidate(functools.partial(lower_vadd, N), d, ref, timeout_s=30)
    assert out.status == "ok" and out.lower_s is not None and out.build_s == 0.0


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
def test_timeout_kills_hanging_kernel_and_next_candidate_runs(pool):
    pool.evaluate(vector_add_program(N), _ab(), None, timeout_s=30)  # warm worker
    starts = pool.restarts
    out = pool.evaluate(hang_program(), {"flag": np.array([1], np.int32)}, np.zeros(4),
                        timeout_s=3)
    assert out.status == "timeout" and "killed" in out.reason
    d = _ab()
    nxt = pool.evaluate(vector_add_program(N), d, d["a"] + d["b"], timeout_s=30)
    assert nxt.status == "ok", nxt.reason
    assert pool.restarts == starts + 1
    fine = pool.evaluate(hang_program(), {"flag": np.array([0], np.int32)}, np.zeros(4),
                         timeout_s=30)
    assert fine.status == "ok", fine.reason


def test_crash_in_worker_gives_crash_with_signal(pool):
    d = _ab()
    out = pool.evaluate_candidate(os.abort, d, None, timeout_s=30)
    assert out.status == "crash" and "SIGABRT" in out.reason
    nxt = pool.evaluate_candidate(functools.partial(lower_vadd, N), d, d["a"] + d["b"],
                                  timeout_s=30)
    assert nxt.status == "ok", nxt.reason


def test_lowering_errors_become_rejected_or_crash(pool):
    d = _ab()
    out = pool.evaluate_candidate(lower_rejecting, d, None, timeout_s=30)
    assert out.label == "rejected:synchronizability" and "map C" in out.reason
    out = pool.evaluate_candidate(lower_buggy, d, None, timeout_s=30)
    assert out.status == "crash" and "KeyError" in out.reason


def test_compile_error_in_worker(pool):
    out = pool.evaluate(syntax_error_program(), {"a": np.ones(16), "b": np.ones(16)}, None,
                        timeout_s=30)
    assert out.status == "compile-error"


# ------------------------------------------------------------------ Oclgrind

needs_oclgrind = pytest.mark.skipif(not oclgrind_available(),
                                    reason="oclgrind not installed (apt-get install oclgrind)")

RACE_SRC = """kernel void race(global const float* a, global float* out) {
  local float tmp[4];
  int l = get_local_id(0);
  tmp[l / 2] = a[get_global_id(0)];  /* two work-items write the same element */
  out[get_global_id(0)] = tmp[(l + 1) % 4];  /* read without a barrier */
}
"""


def _race_program() -> CompiledProgram:
    return CompiledProgram(
        (Kernel("race", RACE_SRC, ("a", "out"), (8,), (4,),
                local_buffers=(Buffer("tmp", "local", "float", 4),)),),
        {"a": Buffer("a", "global", "float", 8, "input"),
         "out": Buffer("out", "global", "float", 8, "output")},
        ("a",), "out", (8,))


@pytest.mark.oclgrind
@needs_oclgrind
def test_oclgrind_reports_local_memory_race():
    rep = check_with_oclgrind(_race_program(), {"a": np.arange(8, dtype=np.float32)},
                              timeout_s=60)
    assert not rep.clean and "data-race" in rep.kinds()
    assert any("local memory" in i.message and i.kernel == "race" for i in rep.issues)


@pytest.mark.oclgrind
@needs_oclgrind
def test_oclgrind_missing_barrier_in_tiled_conv_and_clean_correct_kernels():
    layer = ConvLayer("tiny", 3, 4, 8, 4)
    inp = conv_inputs(layer)
    good = check_with_oclgrind(local_tiled_conv_program(layer, 2, 4), inp, timeout_s=60)
    assert good.clean, good.summary()
    np.testing.assert_allclose(good.output, conv_reference(layer, inp), atol=1e-4)
    bad = check_with_oclgrind(local_tiled_conv_program(layer, 2, 4, barrier=False), inp,
                              timeout_s=60)
    assert "data-race" in bad.kinds()


def test_parse_oclgrind_log_groups_repeats():
    text = ("Work-group divergence detected (barrier)\n\tKernel:     div\n\tWork-group: (0,0,0)\n"
            "\tAt line 6 (column 14) of input.cl:\n\t  if (l < 2) barrier(x);\n\t\n\n"
            "Work-group divergence detected (barrier)\n\tKernel:     div\n\tWork-group: (1,0,0)\n"
            "\tAt line 6 (column 14) of input.cl:\n\t  if (l < 2) barrier(x);\n\n"
            "Invalid write of size 4 at global memory address 0x2000000000040\n"
            "\tKernel: oob\n\tAt line 8 (column 62) of input.cl:\n\t  out[i+1] = 1.0f;\n")
    issues = parse_oclgrind_log(text)
    assert [(i.kind, i.kernel, i.count) for i in issues] == [
        ("barrier-divergence", "div", 2), ("out-of-bounds", "oob", 1)]
    assert issues[1].message == "Invalid write of size 4 at global memory"


def test_pool_on_missing_device_raises_setup_error():
    from codegen.worker import WorkerDeviceError

    with WorkerPool("no-such-platform-xyz") as p:
        with pytest.raises(WorkerDeviceError, match="NoPlatformError"):
            p.evaluate(vector_add_program(16), {"a": np.ones(16), "b": np.ones(16)})


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
def test_generated_conv_pipeline_end_to_end(pool):
    """The lowering's GPGPU'20 pipeline (hand mapping), lowered inside a worker."""
    from experiments.vgg16 import conv_stage_mappings, paper_like_tuning
    from ir.programs import gpgpu20_conv_pipeline
    from mapper.candidates import build_pipeline

    layer = ConvLayer("tiny", 4, 8, 8, 8)
    pipe = gpgpu20_conv_pipeline()
    lower_fn = functools.partial(build_pipeline, pipe, conv_stage_mappings(pipe),
                                 {**layer.sizes(), **paper_like_tuning(layer)},
                                 flops=layer.flops)
    inp = conv_inputs(layer)
    out = pool.evaluate_candidate(lower_fn, inp, conv_reference(layer, inp), timeout_s=60,
                                  repeats=1)
    assert out.status == "ok", out.reason
    assert out.lower_s is not None and out.gflops is not None


def lower_slow_vadd(n: int, delay_s: float) -> CompiledProgram:
    time.sleep(delay_s)  # stands for a slow lowering and build
    return vector_add_program(n)


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
def test_parallel_workers_run_in_turn():
    """Two workers lower side by side, and their timed runs never overlap (one device);
    that the lowerings overlap in time is the perf test below."""
    d = _ab()
    ref = d["a"] + d["b"]
    outs, _ = _four_slow_lowerings(d, ref)
    assert all(o.status == "ok" for o in outs), [o.reason for o in outs]
    windows = sorted(o.run_window for o in outs)
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:])), windows


def _four_slow_lowerings(d, ref):
    with WorkerPool(workers=2) as p:
        assert p.size == 2
        p.map_candidates([functools.partial(lower_vadd, N)] * 2, d, ref, timeout_s=60)
        t0 = time.perf_counter()
        outs = p.map_candidates([functools.partial(lower_slow_vadd, N, 1.0)] * 4, d, ref,
                                timeout_s=60, repeats=30)
        return outs, time.perf_counter() - t0


@pytest.mark.perf
def test_parallel_workers_lower_at_once():
    d = _ab()
    outs, wall = _four_slow_lowerings(d, d["a"] + d["b"])
    assert wall < 3.6, wall  # 4 x 1 s of lowering on 2 workers, not 4 s in a row


def twice_plus_one(a):
    """The numpy meaning of a statement-body user function (module level: it pickles)."""
    return 2 * a + 1


def test_statement_body_user_function_runs_in_a_worker(pool):
    """A user function whose C body is statements goes to a worker with its numpy meaning;
    one whose meaning cannot be pickled (a lambda) is a clear crash, not a broken worker."""
    from ir.builders import map_, param
    from ir.nodes import Lambda, UserFun
    from ir.types import Float, array
    from mapper.candidates import build_candidate

    body = "float t = a * 2.0f; return t + 1.0f;"
    x = np.arange(64, dtype=np.float32)
    for py, ok in ((twice_plus_one, True), (lambda a: 2 * a + 1, False)):
        uf = UserFun("tpo", ("a",), (Float,), Float, body, py)
        X = param("X", array(Float, "N"))
        prog = Lambda((X,), map_(uf, "A")(X))
        o = pool.evaluate_candidate(functools.partial(build_candidate, prog, "A=G0",
                                                      {"N": 64}), {"X": x}, 2 * x + 1,
                                    timeout_s=60)
        if ok:
            assert o.status == "ok", o.reason
        else:
            assert o.status == "crash" and "module-level function" in o.reason
    assert pool.evaluate(vector_add_program(N), _ab(), None, timeout_s=30).status == "ok"


def test_a_worker_that_cannot_start_leaves_a_pool_that_closes(monkeypatch):
    import multiprocessing.process as mpp

    pool = WorkerPool(None)

    def refuse(self):
        raise RuntimeError("cannot start a process here")

    monkeypatch.setattr(mpp.BaseProcess, "start", refuse)
    with pytest.raises(RuntimeError, match="cannot start"):
        pool.evaluate_candidate(lower_vadd, _ab(), None, timeout_s=10)
    monkeypatch.undo()
    pool.close()  # nothing to join: the process never started
