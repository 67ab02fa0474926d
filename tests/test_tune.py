"""Tuning a user's own OpenCL kernel (mapper/explore/tune.py, mapper/cli/tune.py): launch sizes as
Kernel Tuner computes them, the arguments' checks, and (``opencl``) kernels tuned end to
end, checked against ``answer``, with every failure of a configuration a typed outcome."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mapper import cli
from mapper.cli.tune import parse_arg, parse_values
from mapper.explore.interop import decode_tuning
from mapper.explore.tune import (
    KernelSpec,
    TuneError,
    define_value,
    eval_size,
    kernel_program,
    launch_sizes,
    tune_kernel,
)

REPO = Path(__file__).resolve().parent.parent
VECTOR_ADD = REPO / "examples" / "kernels" / "vector_add.cl"
MATMUL = REPO / "examples" / "kernels" / "matmul.cl"


# ----------------------------------------------------------------------------- no device


@pytest.mark.parametrize(
    ("problem_size", "params", "grid_div"),
    [
        (1000, {"block_size_x": 128}, (None, None, None)),
        ((1000, 77), {"block_size_x": 32, "block_size_y": 4}, (None, None, None)),
        ((512, 512), {"block_size_x": 16, "block_size_y": 8, "tile_size_x": 4,
                      "tile_size_y": 2},
         (["block_size_x", "tile_size_x"], ["block_size_y", "tile_size_y"], None)),
        (("n * 2", 10), {"n": 100, "block_size_x": 64}, ("block_size_x // 2", 3, None)),
        (4096, {"tile": 8}, (lambda p: p["tile"] * 16, None, None)),
    ],
)
def test_launch_sizes_as_kernel_tuner_computes_them(problem_size, params, grid_div) -> None:
    grid, block = launch_sizes(problem_size, params, grid_div, ("block_size_x",
                                                                "block_size_y",
                                                                "block_size_z"))
    assert block == (params.get("block_size_x", 256), params.get("block_size_y", 1), 1)
    util = pytest.importorskip("kernel_tuner.util", reason="kernel_tuner is not installed")
    names = ["block_size_x", "block_size_y", "block_size_z"]
    dims = util.get_problem_size(problem_size, params)
    assert grid == util.get_grid_dimensions(dims, params, grid_div, names)
    assert block == util.get_thread_block_dimensions(params, names)


def test_sizes_defines_and_the_program() -> None:
    assert eval_size("min(n, 64) * 2 + n // 3", {"n": 100}) == 161
    with pytest.raises(ValueError, match="unknown name 'm'"):
        eval_size("m + 1", {"n": 1})
    with pytest.raises(ValueError, match="only numbers"):
        eval_size("__import__('os')", {})
    assert (define_value(True), define_value(False), define_value("float")) == ("1", "0",
                                                                                "float")
    spec = KernelSpec("k", "__kernel void k(__global float *a) {}", ("arg0",), (), "arg0",
                      (4,), ("-cl-fast-relaxed-math",))
    prog = kernel_program(spec, (("block_size_x", "64"), ("precision", "float")), (128, 1, 1),
                          (64, 1, 1))
    assert prog.build_options == ("-cl-fast-relaxed-math", "-Dblock_size_x=64",
                                  "-Dprecision=float")
    assert prog.kernels[0].global_size == (128, 1, 1) and prog.kernels[0].local_size == (64,
                                                                                         1, 1)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"arguments": [np.zeros(4, np.float64)]}, "float32 and int32"),
        ({"arguments": [np.zeros(4, np.float32), "x"]}, "neither a numpy array"),
        ({"answer": [np.zeros(4), np.zeros(4)]}, "liftmap compares one output"),
        ({"answer": [np.zeros(4)]}, "as long as arguments"),
        ({"kernel_name": "other"}, "defines no function 'other'"),
        ({"tune_params": {}}, "tune_params is empty"),
        ({"tune_params": {"precision": ["float x"]}}, "holds a space"),
        ({"tune_params": {"p-q": [1]}}, "not a C identifier"),
    ],
)
def test_arguments_that_describe_no_launch_are_refused(change, words) -> None:
    kw = {"kernel_name": "vector_add", "kernel_source": VECTOR_ADD, "problem_size": 4,
          "arguments": [np.zeros(4, np.float32), np.zeros(4, np.float32)],
          "tune_params": {"block_size_x": [4]}, "answer": None, **change}
    with pytest.raises(TuneError, match=words):
        tune_kernel(kw.pop("kernel_name"), kw.pop("kernel_source"), kw.pop("problem_size"),
                    kw.pop("arguments"), kw.pop("tune_params"), **kw)


def test_command_line_arguments_and_values() -> None:
    assert parse_values("16,32, 64") == [16, 32, 64]
    assert parse_values("float,double,0.5,true") == ["float", "double", 0.5, True]
    name, a = parse_arg("a:float[x*2]", {"x": 8}, 0)
    assert name == "a" and a.dtype == np.float32 and a.shape == (16,) and 0 <= a.min()
    name, c = parse_arg("c:int[x]=3", {"x": 5}, 0)
    assert c.dtype == np.int32 and c.tolist() == [3] * 5
    name, n = parse_arg("n:int=x", {"x": 5}, 0)
    assert isinstance(n, np.int32) and n == 5
    with pytest.raises(TuneError, match="NAME:float"):
        parse_arg("a:double[4]", {}, 0)


# ----------------------------------------------------------------------------- on the device


def _vector_add(n: int = 20_000) -> tuple[list, list]:
    rng = np.random.default_rng(0)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    c = np.zeros(n, np.float32)
    return [c, a, b, np.int32(n)], [a + b, None, None, None]


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
@pytest.mark.opencl
def test_vector_add_is_tuned_and_checked_against_the_answer(tmp_path) -> None:
    args, answer = _vector_add()
    store = tmp_path / "va.sqlite"
    params = {"block_size_x": [32, 64, 128, 256], "precision": ["float", "half"]}
    res = tune_kernel("vector_add", VECTOR_ADD, 20_000, args, params, answer=answer,
                      restrictions=["precision == 'float'", "block_size_x in [64, 128, 256]"],
                      strategy="solver", store=store, repeats=3)
    assert res.space_size == 3 and len(res.records) == 3
    assert all(r.ok and r.max_abs_error == 0 for r in res.records)
    assert res.best_config is not None and res.best_config["precision"] == "float"
    assert {c["block_size_x"] for c in res.configs()} == {64, 128, 256}
    assert all(c["time"] > 0 and c["status"] == "ok" for c in res.configs())
    # the store keeps them: a second call finds every configuration there
    again = tune_kernel("vector_add", VECTOR_ADD, 20_000, args, params, answer=answer,
                        restrictions=["precision == 'float'"], strategy="solver",
                        store=store, budget=3)
    assert again.results.cached == 3 and again.results.evaluated == 0
    wrong = [answer[0] + 1, None, None, None]
    bad = tune_kernel("vector_add", VECTOR_ADD, 20_000, args, {"block_size_x": [64]},
                      answer=wrong, repeats=1)
    assert [r.status for r in bad.records] == ["wrong-result"] and bad.best is None


FAILING = r"""
__kernel void k(__global float *c, __global const float *a, int n) {
    int i = get_global_id(0);
#if mode == 1
    this does not compile;
#elif mode == 2
    while (n > 0) { c[i] += 1.0f; if (c[i] < -1.0f) break; }  /* never ends */
#elif mode == 3
    __global float *p = (__global float *)0x10; p[i * 1000000] = 1.0f;  /* crashes */
#endif
    if (i < n) c[i] = a[i] * 2.0f;
}
"""


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
@pytest.mark.opencl
def test_failing_configurations_are_outcomes_not_crashes_of_the_tuner() -> None:
    n = 4096
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    res = tune_kernel("k", FAILING, n, [np.zeros(n, np.float32), a, np.int32(n)],
                      {"block_size_x": [64], "mode": [0, 1, 2, 3]}, answer=[a * 2, None, None],
                      strategy="solver", timeout_s=15, repeats=1)  # a loaded host builds slowly
    status = {decode_tuning(r.tuning, res.tune_params)["mode"]: r.status for r in res.records}
    assert status == {0: "ok", 1: "compile-error", 2: "timeout", 3: "crash"}
    assert res.best_config == {"block_size_x": 64, "mode": 0}


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
@pytest.mark.opencl
def test_command_line_tunes_the_example_and_exports_a_cache(tmp_path, capsys) -> None:
    store = tmp_path / "mm.sqlite"
    argv = ["tune", str(MATMUL), "--name", "matmul", "--problem-size", "64,64",
            "--arg", "C:float[x*y]=0", "--arg", "A:float[x*y]", "--arg", "B:float[x*y]",
            "--arg", "n:int=x", "--answer", "C = (A.reshape(x, x) @ B.reshape(x, x)).ravel()",
            "--atol", "1e-4", "--param", "block_size_x=8,16", "--param", "block_size_y=2,4",
            "--param", "tile_size_x=1,2", "--param", "tile_size_y=2",
            "--restriction", "block_size_x * block_size_y >= 32",
            "--grid-div-x", "block_size_x,tile_size_x", "--grid-div-y",
            "block_size_y,tile_size_y", "--flops", "2*x*x*x", "--budget", "4",
            "--store", str(store), "--json"]
    rc = cli.main(argv)
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["space"] == 6 and doc["tried"] == 4
    assert all(c["status"] == "ok" and c["GFLOP/s"] > 0 for c in doc["configs"])
    assert set(doc["best"]["config"]) == {"block_size_x", "block_size_y", "tile_size_x",
                                          "tile_size_y"}
    out = tmp_path / "mm.json"
    assert cli.main(["results", str(store), "--format", "kernel-tuner", "--out", str(out)]) == 0
    cache = json.loads(out.read_text())
    assert cache["kernel_name"] == "matmul" and cache["problem_size"] == [64, 64]
    assert cache["tune_params"]["block_size_x"] == [8, 16] and len(cache["cache"]) == 4
    assert "mapping" not in cache["tune_params_keys"]
    capsys.readouterr()


@pytest.mark.parametrize("option", [["--seed", "-1"], ["--seed", "x"], ["--timeout", "0"],
                                    ["--timeout", "nan"]])
def test_tune_refuses_a_bad_seed_or_timeout_in_one_line(option, capsys) -> None:
    argv = ["tune", str(MATMUL), "--name", "matmul", "--problem-size", "64", *option]
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and option[0] in err and "Traceback" not in err
