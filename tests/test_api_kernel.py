"""The public build/run API: one problem with its configuration, a compiled kernel, a typed
run result; and the regressions of issue 22 (run --no-heuristics, explain's re-check, raw
source on stdout, a closed pipe)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ir.flops import count_flops
from mapper import (
    CompiledKernel,
    ConfigurationError,
    DeviceUseError,
    InputError,
    RunResult,
    SizeError,
    explain,
    problem,
)

ROOT = Path(__file__).resolve().parent.parent
LISTING3 = str(ROOT / "examples" / "cc22_listing3.lift")
LISTING1 = str(ROOT / "examples" / "cc22_listing1.lift")
SIZES3 = {"N": 4096, "s0": 64, "s1": 4}
MAPPER = [sys.executable, "-m", "mapper.cli"]

# a program that is not in examples/: 3-point sums within tiles
STENCIL = """
X : [float]N
join o mapA(mapB(\\w -> reduce(\\acc x -> add(acc, x))(0.0f, w)) o slide(3, 1)) o split(t) $ X
"""


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*MAPPER, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, **kw)


@pytest.fixture(scope="module")
def listing3():
    return problem(LISTING3)


@pytest.mark.slow
def test_build_and_run_gives_a_typed_result(listing3):
    k = listing3.build("A=W0 B=L0 C=L0 D=S", SIZES3)
    assert isinstance(k, CompiledKernel)
    assert "__kernel void" in k.source and k.launch[0][1:] == ((4096,), (64,))
    assert k.resources["global_total"] == k.program.memory_report()["global_total"]
    assert k.flops == count_flops(listing3.program, SIZES3) == 2 * 4096
    assert k.bytes == 2 * 4096 * 4  # X in, the result out (the scalars are arguments)
    r = k.run(repeats=3)
    assert isinstance(r, RunResult) and r.ok, r.reason
    assert len(r.times_s) == 3 and r.time_s is not None and r.spread is not None
    assert r.spread[0] <= r.time_s <= r.spread[1]
    assert r.gflops == pytest.approx(8192 / r.time_s / 1e9)
    assert r.gbs == pytest.approx(32768 / r.time_s / 1e9)
    assert r.max_abs_error is not None and r.max_abs_error < 1e-4
    text = str(r)
    assert text.startswith("ok: median") and "GFLOP/s" in text and "GB/s" in text
    doc = r.to_json()
    assert json.loads(json.dumps(doc))["gflops"] == pytest.approx(r.gflops)


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_a_program_not_in_examples_builds_and_runs():
    p = problem(STENCIL)
    m = next(iter(p.enumerate(fixed="A=W0")))
    k = p.build(m, {"N": 256, "t": 32})
    r = k.run()
    assert r.ok, r.reason
    assert r.flops == 8 * 30 * 3  # 8 tiles of 30 outputs, three additions each (from 0.0)


def test_given_inputs_are_checked_and_used(listing3):
    k = listing3.build("A=G0 B=S C=S D=F", SIZES3)
    x = np.arange(4096, dtype=np.float32)
    r = k.run({"X": x, "y": 2.0, "z": 1.0})
    assert r.ok, r.reason
    with pytest.raises(InputError, match="shape"):
        k.run({"X": x[:10], "y": 2.0, "z": 1.0})
    with pytest.raises(InputError, match="missing z"):
        k.run({"X": x, "y": 2.0})
    # a wrong reference is a wrong result, not a pass
    bad = k.run({"X": x, "y": 2.0, "z": 1.0}, reference=np.zeros(4096, np.float32))
    assert bad.status == "wrong-result" and not bad.ok and "wrong-result" in str(bad)


def test_sizes_are_checked(listing3):
    with pytest.raises(SizeError, match="missing s1"):
        listing3.build("A=W0 B=L0 C=L0 D=S", {"N": 4096, "s0": 64})
    with pytest.raises(SizeError, match="has no size Q"):
        listing3.build("A=W0 B=L0 C=L0 D=S", {**SIZES3, "Q": 1})


def test_keywords_that_contradict_the_problem_raise(listing3):
    with pytest.raises(ConfigurationError, match="heuristics=False"):
        problem(listing3, heuristics=False)
    with pytest.raises(ConfigurationError, match="fusion='never'"):
        explain(listing3, "A=W0", fusion="never")
    assert problem(listing3, heuristics=True, fusion="always") is listing3


def test_explain_recheck_without_heuristics_is_not_lost():
    # the regression: explain's re-check without heuristics kept them when given a problem
    p = problem(LISTING1)
    e = p.explain("A=L0 D=W0")
    assert e.kind == "validity", str(e)
    out = _cli("explain", LISTING1, "--partial", "A=L0 D=W0")
    assert "a validity rule rejects it" in out.stdout, out.stdout + out.stderr


def test_force_lists_the_overridden_rules(listing3):
    k = listing3.build("A=S B=S C=S D=S", SIZES3, force=True)
    assert {c.rule for c in k.overridden} == {"sequential-fusion"}
    assert k.run().ok


def test_a_description_builds_but_does_not_run():
    p = problem(LISTING3, device="h100")
    k = p.build("A=W0 B=L0 C=L0 D=S", SIZES3)
    assert not k.live and k.device.name.lower().find("h100") >= 0
    with pytest.raises(DeviceUseError, match="cannot run"):
        k.run()


@pytest.mark.slow
def test_run_no_heuristics_runs_what_only_heuristics_reject():
    heur = {str(m) for m in problem(LISTING3).enumerate()}
    only = next(m for m in problem(LISTING3, heuristics=False).enumerate()
                if str(m) not in heur)
    args = ("run", LISTING3, "--mapping", str(only), "--sizes", "N=4096,s0=64,s1=4",
            "--repeats", "1")
    refused = _cli(*args)
    assert refused.returncode == 2 and "is not valid" in refused.stderr
    ran = _cli(*args, "--no-heuristics", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    doc = json.loads(ran.stdout)
    assert doc["ok"] and doc["heuristics"] is False and doc["gflops"] > 0


@pytest.mark.slow
def test_show_source_is_raw_and_compiles(tmp_path):
    out = _cli("run", LISTING3, "--mapping", "A=W0 B=L0 C=L0 D=S", "--sizes",
               "N=4096,s0=64,s1=4", "--show-source", "--source-out",
               str(tmp_path / "k2.cl"), "--repeats", "1")
    assert out.returncode == 0, out.stderr
    src = out.stdout
    assert src == (tmp_path / "k2.cl").read_text()
    assert max(len(line) for line in src.splitlines()) > 80  # not wrapped
    assert "ok" in out.stderr  # the verdict goes to stderr
    import pyopencl as cl

    from codegen.device import select_device

    ctx = cl.Context([select_device(None)])
    cl.Program(ctx, src).build()  # the file as written compiles on the device


def test_closed_pipe_ends_quietly():
    out = subprocess.run(f"{sys.executable} -m mapper.cli device h100 --json | head -c 1",
                         shell=True, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr


def test_a_script_without_main_guard_can_run_kernels(tmp_path):
    script = tmp_path / "use.py"
    script.write_text(
        "from mapper import problem\n"
        f"p = problem({LISTING3!r})\n"
        "k = p.build('A=W0 B=L0 C=L0 D=S', {'N': 1024, 's0': 64, 's1': 4})\n"
        "print(k.run(repeats=1).ok)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "True", out.stderr[-2000:]
