"""Every peer comparison the installed extras allow, in one command (issue 47).

    python -m experiments.bench_peers --all                 # each at its sensible size
    python -m experiments.bench_peers --all --quick         # each on a tiny case (a check)
    python -m experiments.bench_peers --only halide,tvm --budget 10m --out-dir results/peers
    python -m experiments.bench_peers                       # the plan: what would run, skip

Each comparison is its own script, run as a subprocess (``python -m experiments.NAME``;
its output streamed as it comes), so that one that fails does not end the others:

- ``halide``: ``bench_halide``, Halide's autoschedulers and a hand schedule on the three
  stencil pipelines at 2048x2048, beside liftmap's default search and OpenCV;
- ``tvm``: ``bench_tvm``, TVM's MetaSchedule with the same wall budget as liftmap's search
  on VGG-16 layer 19, with PyTorch in the same run;
- ``tvm_matmul``: ``bench_tvm --matmul 1024``, the same on the plain matmul, with numpy's
  sgemm;
- ``pytorch``: ``bench_conv``, the generated OpenCL convolution against PyTorch and
  numpy im2col on VGG-16 layer 19;
- ``kernel_tuner``: ``bench_peers_search``, Kernel Tuner 1.5's strategies replayed on the
  committed results stores beside liftmap's (counts, no kernel runs);
- ``numpy_opencv``: ``bench_plain``, the plain programs' default-search answers against
  numpy and OpenCV.

A comparison whose peer does not import is skipped, saying ``<name>: skipped: <module>
not installed`` (or what the import raised); the others run (the ``bench`` extra installs
every peer: ``pip install -e '.[bench]'``). Whether a module imports is asked of a fresh
interpreter, as the script will. The peers a script leaves out itself (e.g. OpenCV for
``bench_plain``'s filters) are collected from its ``skipped`` lines. At the end, a summary
table: each comparison, its status, its wall time and what it skipped.

``--budget`` is the wall budget of liftmap's searches (and TVM's), ``--out-dir`` where each
script writes its JSON; ``--quick`` gives every script a tiny case instead (seconds each; a
check that they run, not a figure). Time on an idle machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Kernel Tuner's strategies for the default run: its 1.5 set less hybrid_vndx (its
# surrogate costs more each step: 20-40 minutes a store, docs/peers.md)
KT_DEFAULT = ("random_sample,greedy_ils,greedy_mls,dual_annealing,genetic_algorithm,diff_evo,"
              "pso,simulated_annealing,firefly_algorithm,bayes_opt,adaptive_tabu_greywolf")
# a small store for --quick (12 candidates), copied to a scratch folder first
QUICK_STORE = "tests/data/figures/fig6-layer19-scale8-fusion-always-heuristics-on.sqlite"


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One peer comparison: the script, the modules it needs (name printed, module), and
    its arguments: ``full(budget, json, scratch)`` and ``quick(json, scratch)``
    (``json``: the path for its figures or None; ``scratch``: a folder of its own)."""

    name: str
    script: str
    needs: tuple[str, ...]
    what: str
    full: Callable[[str, str | None, str], list[str]]
    quick: Callable[[str | None, str], list[str]]
    json_flag: str = "--json"


def _j(flag: str, path: str | None) -> list[str]:
    return [flag, path] if path else []


def _quick_store(scratch: str) -> str:
    dst = os.path.join(scratch, os.path.basename(QUICK_STORE))
    shutil.copy(os.path.join(ROOT, QUICK_STORE), dst)
    return dst


COMPARISONS: tuple[Comparison, ...] = (
    Comparison(
        "halide", "bench_halide", ("halide",),
        "Halide's autoschedulers and a hand schedule on the stencil pipelines, with "
        "liftmap's default search and OpenCV",
        lambda b, j, s: ["--size", "2048", "--rounds", "5", "--budget", b, *_j("--json", j)],
        lambda j, s: ["--pipelines", "blur_separable", "--size", "64", "--rounds", "1",
                      "--repeats", "1", "--settle", "0", "--budget", "4",
                      *_j("--json", j)]),
    Comparison(
        "tvm", "bench_tvm", ("tvm",),
        "TVM MetaSchedule with liftmap's wall budget on VGG-16 layer 19, with PyTorch",
        lambda b, j, s: ["--layer", "19", "--budget", b, "--rounds", "3",
                         "--store-dir", s, *_j("--json", j)],
        lambda j, s: ["--sizes", "C=8,H=8,W=8,M=8", "--budget", "25s", "--liftmap-budget",
                      "2", "--rounds", "1", "--repeats", "1", "--settle", "0",
                      "--store-dir", s, *_j("--json", j)]),
    Comparison(
        "tvm_matmul", "bench_tvm", ("tvm",),
        "TVM MetaSchedule with liftmap's wall budget on the plain matmul (1024^3), with "
        "numpy's sgemm",
        lambda b, j, s: ["--matmul", "1024", "--budget", b, "--rounds", "5",
                         *_j("--json", j)],
        lambda j, s: ["--matmul", "32,16,8", "--budget", "5s", "--rounds", "1",
                      "--repeats", "1", "--settle", "0", "--population", "16",
                      "--trials-per-iter", "8", *_j("--json", j)]),
    Comparison(
        "pytorch", "bench_conv", ("torch",),
        "the generated convolution against PyTorch and numpy im2col, VGG-16 layer 19",
        lambda b, j, s: ["--layer", "19", "--rounds", "5"],
        lambda j, s: ["--layer", "24", "--scale", "0.5", "--rounds", "1", "--repeats", "1",
                      "--settle", "0"], json_flag=""),
    Comparison(
        "kernel_tuner", "bench_peers_search", ("kernel_tuner",),
        "Kernel Tuner 1.5's strategies against liftmap's, replayed on the committed stores",
        lambda b, j, s: ["--seeds", "5", "--kt", KT_DEFAULT, "--kt-wall", "60",
                         *_j("--out", j)],
        lambda j, s: ["--stores", _quick_store(s), "--seeds", "1", "--kt", "random_sample",
                      "--liftmap", "solver", "--kt-wall", "5", *_j("--out", j)],
        json_flag="--out"),
    Comparison(
        "numpy_opencv", "bench_plain", (),
        "the plain programs' default-search answers against numpy and OpenCV",
        lambda b, j, s: ["--budget", b, "--rounds", "3", *_j("--json", j)],
        lambda j, s: ["--programs", "row_sums,blur_separable", "--scale", "16", "--budget",
                      "4", "--rounds", "1", "--repeats", "1", *_j("--json", j)]),
)
NAMES = tuple(c.name for c in COMPARISONS)


def import_problem(module: str, timeout_s: float = 300.0) -> str | None:
    """None where ``module`` imports in a fresh interpreter, else why not: ``<module> not
    installed``, or the last line the import printed (a module that is there but
    breaks, e.g. a TVM whose FFI does not match)."""
    p = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=timeout_s)
    if p.returncode == 0:
        return None
    err = (p.stderr or p.stdout).strip().splitlines()
    if any(f"No module named '{module}'" in line for line in err):
        return f"{module} not installed"
    last = err[-1] if err else f"exit status {p.returncode}"
    return f"{module} does not import: {last[:200]}"


_SKIPPED = re.compile(r"^(?:[\w ]+: )?([\w .]+): skipped: (.+)$")


def run_script(c: Comparison, argv: list[str], timeout_s: float | None
               ) -> tuple[int, float, list[str]]:
    """``python -m experiments.<script> argv``, its output streamed: (exit status, wall
    seconds, the peers it said it skipped)."""
    cmd = [sys.executable, "-m", f"experiments.{c.script}", *argv]
    print(f"\n## {c.name}: {' '.join(['python', '-m', f'experiments.{c.script}', *argv])}",
          flush=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    t0 = time.time()
    skipped: list[str] = []
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    timer = threading.Timer(timeout_s, proc.kill) if timeout_s else None
    if timer is not None:
        timer.start()
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            m = _SKIPPED.match(line.strip())
            if m and (s := f"{m.group(1)}: {m.group(2)}"[:120]) not in skipped:
                skipped.append(s)
        rc = proc.wait()
    except KeyboardInterrupt:
        proc.kill()
        proc.wait()
        raise
    finally:
        if timer is not None:
            timer.cancel()
    secs = time.time() - t0
    if timeout_s and secs >= timeout_s and rc != 0:
        rc = 124
    return rc, secs, skipped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--all", action="store_true", help="run every comparison whose peer "
                    "imports (without --all or --only: print the plan and exit)")
    ap.add_argument("--only", help=f"comma-separated, of {', '.join(NAMES)}")
    ap.add_argument("--quick", action="store_true",
                    help="a tiny case of each (seconds; checks that they run)")
    ap.add_argument("--budget", default="3m", help="liftmap's (and TVM's) search budget, "
                    "each search (default 3m; not with --quick)")
    ap.add_argument("--out-dir", help="where each script writes its JSON (NAME.json)")
    ap.add_argument("--timeout", type=float, help="seconds one comparison may run (default: "
                    "no limit)")
    a = ap.parse_args(argv)
    if a.all and a.only:
        ap.error("give --all or --only, not both")
    names = list(NAMES) if a.all else [n for n in (a.only or "").split(",") if n]
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        ap.error(f"unknown comparison(s) {', '.join(unknown)}; the comparisons: "
                 f"{', '.join(NAMES)}")
    plan_only = not names
    chosen = [c for c in COMPARISONS if plan_only or c.name in names]
    if a.out_dir:
        os.makedirs(a.out_dir, exist_ok=True)
    rows: list[tuple[str, str, str, str, str]] = []
    failed = 0
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        for c in chosen:
            why = next((p for p in map(import_problem, c.needs) if p), None)
            if why:
                print(f"{c.name}: skipped: {why}", flush=True)
                rows.append((c.name, c.script, f"skipped: {why}", "-", ""))
                continue
            scratch = os.path.join(tmp, c.name)
            os.makedirs(scratch, exist_ok=True)
            js = (os.path.join(a.out_dir, f"{c.name}.json")
                  if a.out_dir and c.json_flag else None)
            args = c.quick(js, scratch) if a.quick else c.full(a.budget, js, scratch)
            if plan_only:
                print(f"{c.name}: would run python -m experiments.{c.script} "
                      f"{' '.join(args)}", flush=True)
                rows.append((c.name, c.script, "would run", "-", ""))
                continue
            rc, secs, skipped = run_script(c, args, a.timeout)
            status = "ran" if rc == 0 else ("timed out" if rc == 124 else f"failed (exit {rc})")
            failed += rc != 0
            rows.append((c.name, c.script, status, f"{secs:.0f}", "; ".join(skipped)))
    print("\n| comparison | script | status | s | the script skipped |")
    print("|---|---|---|---:|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if plan_only:
        print("\n(the plan only: --all runs them, --only NAME,... some)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
