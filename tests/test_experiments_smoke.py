"""Every script in ``experiments/`` runs on a tiny case, so that no benchmark rots unnoticed
(issue 49).

The scripts are found, not listed: every ``experiments/*.py`` with an ``if __name__ ==
"__main__":`` block runs as ``python -m experiments.NAME`` with its arguments in ``TINY``
(a runnable script without an entry fails, saying to add one), and its output must hold the
figure it exists for. The other modules (helpers without a command line) are imported.

A script whose optional peer (the ``bench`` extra: PyTorch, TVM, Kernel Tuner, OpenCV,
Halide) is not installed must still run and print ``<peer>: skipped: <module> not
installed``; the test checks that line where the peer is missing here, and its absence where
it is present. Nothing is skipped silently.

    .venv/bin/python -m pytest -q -m smoke -n 2 tests/test_experiments_smoke.py
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"

# committed results stores some scripts read: copied into the test's folder first ({s24},
# {f6}), so that no run writes beside the committed files
STORES = {"s24": "results/search/search-24_26_28-512x14x14x512k3s1p1.sqlite",
          "f6": "docs/figures/data/fig6-layer19-scale8-fusion-always-heuristics-on.sqlite"}

# a convolution small enough to explore in seconds (a scaled VGG-16 layer's shape)
TINY_CONV = "C=8,H=8,W=8,M=8"
GFLOPS = r"\d+\.\d+ \|"  # a GFLOP/s (or ms) cell of a markdown table

# script -> (its tiny arguments ({tmp}: the test's folder; {s24}, {f6}: STORES), a regular
# expression its output must match: the figure the script exists for)
TINY: dict[str, tuple[list[str], str]] = {
    "bench_conv": (["--layer", "24", "--scale", "0.5", "--rounds", "1", "--repeats", "1",
                    "--settle", "0"], r"\| generated OpenCL[^|]*\| " + GFLOPS),
    "bench_halide": (["--pipelines", "blur_separable", "--size", "32", "--budget", "4",
                      "--rounds", "1", "--repeats", "1", "--settle", "0", "--json",
                      "{tmp}/h.json"], r"\| blur_separable \| liftmap \| [\d.]+ \| [\d.]+ \|"),
    "bench_joint_space": (["--layers", "19/14", "--vectorise", "window", "--plain",
                           "examples/matmul_plain.lift:M=16,N=16,K=16", "--rounds", "1",
                           "--samples", "3", "--lowerings", "2", "--json", "{tmp}/j.json"],
                          r"\| this \| 19/14 \| window \| \d+ \| [\d,]+ \| [\d.]+ \| \d+ \| "
                          r"[\d.]+ \|(?s:.*)matmul_plain.lift[^\n]*\| [\d.]+ \| \d+/2 \|"),
    "bench_lowering": (["--layers", "24", "--samples", "2", "--rounds", "1", "--v", "4"],
                       r"\| this \| 24 \| joint-space sample: mapping applied \+ lowered \| 2 "
                       r"\| [\d.]+ \|"),
    "bench_mapping": (["--samples", "100", "--z3-cap", "10", "--repeats", "1"],
                      r"\| valid \| \d+ \|"),
    "bench_matmul": (["--size", "64", "--tunings", "4x4x8", "--rounds", "1", "--repeats", "1",
                      "--settle", "0"], r"\| generated, bm=4 bn=4 v=8 \| " + GFLOPS),
    "bench_peers": (["--quick", "--only", "halide,kernel_tuner"],
                    r"\| kernel_tuner \| bench_peers_search \| (ran|skipped: kernel_tuner not "
                    r"installed) \|"),
    "bench_peers_search": (["--stores", "{f6}", "--seeds", "1", "--kt", "random_sample",
                            "--liftmap", "solver", "--kt-wall", "5", "--out", "{tmp}/p.json"],
                           r"liftmap:solver +\d+ \["),
    "heldout": (["--sets", "row_sums", "--scale", "256", "--budget", "3", "--out",
                 "{tmp}/h"], r"\| row_sums \| H=16,W=16 \| 3 \| budget \|"),
    "bench_plain": (["--scale", "16", "--budget", "4", "--rounds", "1", "--repeats", "1",
                     "--programs", "row_sums", "--json", "{tmp}/p.json"], r"row_sums.* ms"),
    "bench_ray_scaling": (["--store", "{f6}", "--workers", "1", "--candidates", "3",
                           "--time-scale", "0.01", "--out", "{tmp}/r.json"],
                          r"\| 1 \| 3 \| [\d.]+ \|"),
    "bench_search": (["--shapes", TINY_CONV, "--budget", "4", "--rounds", "1", "--alone-span", "1",
                      "--store-dir", "{tmp}", "--json", "{tmp}/s.json"],
                     r"found [\d.]+ GFLOP/s"),
    "bench_space": (["--quick", "--pc2-limit", "1", "--brute-max", "1e6"],
                    r"\| dedispersion \| [\d,]+ \| [\d,]+ \| [\d.]+ ms \|"),
    "bench_sym": (["100"], r"evaluate +median +[\d.]+ us/expr"),
    "bench_tiling": (["--pipelines", "blur_laplacian", "--size", "64", "--budget", "3",
                      "--variants", "unfused", "--rounds", "1", "--repeats", "1",
                      "--store-dir", "{tmp}", "--json", "{tmp}/t.json"],
                     r"blur_laplacian unfused: median [\d.]+ ms"),
    # --budget: TVM's, where it is installed; liftmap's search: 2 candidates (in 25 s of a
    # loaded machine its default search may not finish its first batch)
    "bench_tvm": (["--sizes", TINY_CONV, "--budget", "25s", "--liftmap-budget", "2",
                   "--rounds", "1", "--repeats", "1", "--settle", "0", "--store-dir", "{tmp}",
                   "--json", "{tmp}/t.json"],
                  r"GFLOP/s, median of 1 interleaved rounds x 1: liftmap [\d.]+"),
    "bench_listing3": (["--sizes", "C=8,H=6,W=6,M=16", "--budget", "2", "--rounds", "1",
                        "--repeats", "1", "--settle", "0", "--store-dir", "{tmp}"],
                       r"Listing 3 / conv: [\d.]+x"),
    "build_knowledge": (["{s24}", "--out", "{tmp}/k.jsonl"], r"k\.jsonl: \d+ row\(s\)"),
    "prior_recall": (["{s24}", "--private-weight", "1,0.5", "--top", "5"],
                     r"\| search-24_26_28-512x14x14x512k3s1p1\.sqlite \| window \| \d+ \| "
                     r"[\d.]+ \| 0\.5 \| -?[\d.]+ \| [\d.]+ \| [\d.]+ \|"),
    "check_tiling": (["--pipelines", "blur_separable", "--memories", "local", "--tiles", "2",
                      "--limit", "2"], r"TOTAL \{[^}]*'ok': \d+"),
    "disasm_conv": (["--layer", "24", "--v", "4"], r"hot loop: "),
    "explore_conv": (["--layer", "19", "--scale", "14", "--candidates", "1"],
                    r"best [\d.]+ GFLOP/s vs hand mapping [\d.]+"),
    "fig_exploration": (["--sizes", TINY_CONV, "--strategies", "manual", "--budget", "2",
                         "--out", "{tmp}", "--repeats", "1"], r"best: [\d.]+ GFLOP/s"),
    "fig_fusion": (["--sizes", TINY_CONV, "--candidates", "2", "--fusion", "never",
                    "--heuristics", "on", "--out", "{tmp}", "--repeats", "1"],
                   r"best: [\d.]+ GFLOP/s"),
    # --trials 10: Fig. 6's curves drawn 10 times a point, not 100 (the same code, a tenth
    # of the draws: most of the script's time)
    "figures": (["--stores", "docs/figures/data", "--out", "{tmp}/fig", "--trials", "10"],
                r"written to "),
    "lowering_rate": (["--layers", "24/7", "--devices", "pocl-cpu", "--samples", "3",
                       "--csv", "{tmp}/l.csv"], r"\| 24,26,28/7 \| pocl-cpu \| \d+ \| [\d,]+ \| "
                      r"[\d.]+ \| \d+ \| [\d.]+ \| \d/3"),
    "oracle": (["examples/cc22_listing3.lift", "--full", "20", "--admitted", "2", "--near1",
                "2", "--near2", "2", "--samples", "2", "--workers", "1", "--quiet", "--json",
                "{tmp}/o.json"], r"cc22_listing3.lift: "),
    "probe_devices": (["--iters", "16", "--n", "64", "--widths", "1", "--json", "{tmp}/p.json"],
                      r"float FMA chain: [\d.]+ GFLOP/s"),
    "remeasure": (["--store", "{s24}", "--layer", "24", "--out", "{tmp}/c.sqlite", "--top", "1",
                   "--evals", "1", "--repeats", "1"], r"stored +[\d.]+ +now +[\d.]+ GFLOP/s"),
    "soak": (["--minutes", "0.5", "--sample-s", "4", "--tasks", "matmul,blur", "--crash-every",
              "2", "--hang-every", "7", "--timeout-s", "4", "--kill-every-s", "5", "--out",
              "{tmp}/soak"],
             r"\| check \| verdict \| measured \|(?s:.*)\| replay exact \| PASS \|"),
    "source_hashes": (["--out", "{tmp}/h.txt", "--per-example", "1", "--samples", "1",
                       "--examples", "examples/cc22_listing3.lift"],
                      r"lowering: median [\d.]+ ms per candidate"),
    "time_candidates": (["--layer", TINY_CONV, "--variant", "kernels", "--mapping",
                         "T=G0 G=S W=S C=S S1=S S2=F R1=S R2=S P=S I1=S I2=F", "--tuning",
                         "kappa=8,omega=72,rho=0,sigma=2,theta=4,v=8", "--tuning",
                         "kappa=8,omega=72,rho=0,sigma=2,theta=6,v=8", "--rounds", "1",
                         "--repeats", "1"],
                        r"theta=6 v=8: median [\d.]+ GFLOP/s"),
    "table3_vgg16": (["--layers", "24", "--scale", "0.5", "--rounds", "1", "--repeats", "1",
                      "--settle", "0", "--csv", "{tmp}/t.csv"],
                     r"\| 24 \| [\d.]+ \| [\d.]+ \| [\d.]+ \|"),
    "torch_conv_baseline": (["--layer", "24", "--scale", "2", "--repeats", "1"],
                            r"GFLOP/s|PyTorch: skipped"),
    "validate_vgg": (["--layers", "24"], r"\| ok \| .* \| [\d.]+ \| [\d.]+ \|"),
    "witness_codegen": (["--programs", "1", "--limit", "1", "--oclgrind", "0"],
                        r"disagreements: 0"),
}

# script -> the optional peers it times, (name it prints, module): where the module is
# missing, the script must say so (CI installs kernel_tuner, not the rest of the bench extra)
PEERS: dict[str, list[tuple[str, str]]] = {
    "bench_conv": [("PyTorch", "torch")],
    "bench_search": [("PyTorch", "torch")],
    "bench_tvm": [("TVM", "tvm"), ("PyTorch", "torch")],
    "torch_conv_baseline": [("PyTorch", "torch")],
    "table3_vgg16": [("PyTorch", "torch")],
    "bench_peers_search": [("Kernel Tuner", "kernel_tuner")],
    "bench_halide": [("halide", "halide"), ("OpenCV", "cv2")],
    "bench_peers": [("halide", "halide"), ("kernel_tuner", "kernel_tuner")],
    "bench_tiling": [("OpenCV", "cv2")],
}

# script -> the test that runs it with its tiny arguments already (the main job: its own
# test checks its lines; running it here too would cost CI another minute)
ELSEWHERE: dict[str, str] = {
    "demo": "tests/test_demo.py::test_demo_quick_runs_the_hand_mapped_convolution_ok",
}

TIMEOUT_S = 240  # per script: tiny cases take seconds, a loaded CI machine more


def _runnable(path: Path) -> bool:
    """Whether the module has a command line: an ``if __name__ == "__main__":`` block."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body)


_FILES = sorted(p for p in EXPERIMENTS.glob("*.py") if p.name != "__init__.py")
SCRIPTS = [p.stem for p in _FILES if _runnable(p)]
MODULES = [p.stem for p in _FILES if not _runnable(p)]


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def test_the_directory_is_covered() -> None:
    """The glob finds the scripts (a broken glob would make every test below vacuous), and
    ``TINY``/``PEERS`` name no script that is gone."""
    assert len(SCRIPTS) > 20 and "bench_joint_space" in SCRIPTS
    assert "vgg16" in MODULES
    stale = sorted((set(TINY) | set(PEERS) | set(ELSEWHERE)) - set(SCRIPTS))
    assert not stale, f"TINY or PEERS name scripts that are not runnable any more: {stale}"


@pytest.mark.parametrize("name", sorted(ELSEWHERE))
def test_a_script_run_elsewhere_has_that_test(name: str) -> None:
    """A script left out here is run by the test named, with ``python -m experiments.NAME``."""
    path, _, func = ELSEWHERE[name].partition("::")
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    fn = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == func]
    assert fn, f"{ELSEWHERE[name]} does not exist: run {name} here (TINY) instead"
    assert f"experiments.{name}" in ast.unparse(fn[0]), \
        f"{ELSEWHERE[name]} does not run python -m experiments.{name}"


@pytest.mark.smoke
@pytest.mark.slow
@pytest.mark.parametrize("name", MODULES)
def test_helper_module_imports(name: str) -> None:
    """A helper module without a command line imports (its names resolve)."""
    importlib.import_module(f"experiments.{name}")


@pytest.mark.smoke
@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.parametrize("name", [s for s in SCRIPTS if s not in ELSEWHERE])
def test_script_runs_on_a_tiny_case(name: str, tmp_path: Path) -> None:
    """``python -m experiments.NAME <tiny args>`` exits 0 and prints its figure; a missing
    peer is named as skipped."""
    assert name in TINY, (f"experiments/{name}.py has a command line but no tiny case: add "
                          f"its smallest arguments and its figure to TINY in {__file__}")
    args, figure = TINY[name]
    subs = {"tmp": str(tmp_path)}
    for key, rel in STORES.items():
        if any("{" + key + "}" in a for a in args):
            subs[key] = str(tmp_path / Path(rel).name)
            shutil.copy(ROOT / rel, subs[key])
    argv = [a.format(**subs) for a in args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.run([sys.executable, "-m", f"experiments.{name}", *argv], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    out = p.stdout + p.stderr
    tail = out[-3000:]
    assert p.returncode == 0, f"exit status {p.returncode}:\n{tail}"
    assert re.search(figure, out), f"no figure matching {figure!r} in the output:\n{tail}"
    for peer, module in PEERS.get(name, []):
        line = f"{peer}: skipped: {module} not installed"
        if _installed(module):
            assert line not in out, f"{peer} is installed but was skipped:\n{tail}"
        else:
            assert line in out, f"{module} is not installed, and the output does not say " \
                                f"{line!r}:\n{tail}"
