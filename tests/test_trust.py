"""Verdicts that are never false and bad inputs that end in one clear line (issue 48):
non-finite values compared as the reference has them, a user function's result converted
to its declared type in the reference as in C, out-of-range float literals, API inputs
checked at the boundary, and the command line's misleading or silent cases."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

from codegen.runner import compare
from ir.interp import evaluate
from ir.parser import parse
from mapper.data import reduction_tolerance

ROOT = os.path.join(os.path.dirname(__file__), "..")
MAPPER = os.path.join(os.path.dirname(sys.executable), "mapper")


def mapper(*argv: str, cwd: str = ROOT) -> subprocess.CompletedProcess:
    """``mapper ARGV`` in a child process (stderr as a user sees it)."""
    return subprocess.run([MAPPER, *argv], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


# ------------------------------------------------------------------ non-finite values


@pytest.mark.parametrize("out, ref", [
    ([np.nan, 1.0], [np.nan, 1.0]),
    ([np.inf, -np.inf], [np.inf, -np.inf]),
    ([np.nan, np.inf, 2.0], [np.nan, np.inf, 2.00001]),
])
def test_the_same_non_finite_values_match(out, ref):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning either
        ok, err, why = compare(np.array(out, np.float32), np.array(ref))
    assert ok and why == "" and np.isfinite(err)


@pytest.mark.parametrize("out, ref", [
    ([np.nan], [1.0]),        # an unwritten element
    ([1.0], [np.nan]),
    ([np.inf], [-np.inf]),
    ([np.nan], [np.inf]),
    ([np.inf], [1e30]),
])
def test_a_non_finite_value_on_one_side_or_a_different_one_is_a_mismatch(out, ref):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok, err, why = compare(np.array(out), np.array(ref))
    assert not ok and err == np.inf and "not finite" in why


def test_the_tolerance_scale_ignores_infinities():
    assert reduction_tolerance(np.array([np.inf, 2e5, np.nan])) == {"rtol": 1e-4, "atol": 2.0}
    assert reduction_tolerance(np.array([np.nan])) == {"rtol": 1e-4, "atol": 1e-4}


def test_the_reference_computes_nan_and_inf_without_warnings():
    p = parse("userfun f(x: float) : float = sqrt(x - 2.0f) + x / 0.0f\n"
              "X : [float]N\nmapA(f) $ X")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = evaluate(p, {"X": np.array([1.0, 3.0, -3.0], np.float32)})
    assert np.isnan(out[0]) and out[1] == np.inf and np.isnan(out[2])


# the warnings Python does not show a command-line user (its default filters)
HIDDEN_BY_DEFAULT = (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                     ResourceWarning)


@pytest.mark.opencl
@pytest.mark.parametrize("body", ["sqrt(x - 2.0f)", "x / 0.0f", "x * 1e40f", "x + 1e999f"])
def test_nan_and_inf_results_are_right_on_the_device(tmp_path, capfd, body):
    """``mapper run``'s ``main`` in this process (the device's worker pool, started once,
    serves all four; the next test runs ``mapper run`` as a child process): what it prints
    is captured, and every warning it raises is recorded, where a child process would
    print those Python shows by default on its stderr."""
    from mapper.cli import main

    prog = tmp_path / "p.lift"
    prog.write_text(f"userfun f(x: float) : float = {body}\nX : [float]N\nmapA(f) $ X\n")
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = main(["run", str(prog), "--mapping", "A=G0", "--sizes", "N=64"])
    out, err = capfd.readouterr()
    shown = [str(w.message) for w in caught if not issubclass(w.category, HIDDEN_BY_DEFAULT)]
    assert rc == 0 and out.startswith("ok"), out + err
    assert not shown and "Warning" not in err and "Error" not in err, (shown, err)


# ------------------------------------------------------------------ the declared type


@pytest.mark.parametrize("text, x, want", [
    ("userfun f(x: float) : int = x\nX : [float]N\nmapA(f) $ X",
     np.array([0.9, -1.7, 2.5], np.float32), np.array([0, -1, 2], np.int32)),
    ("userfun f(x: int) : float = x / 2\nX : [int]N\nmapA(f) $ X",
     np.array([3, -3, 4], np.int32), np.array([1.0, -1.0, 2.0], np.float32)),
    ("userfun f(x: float) : int = x > 0.5f\nX : [float]N\nmapA(f) $ X",
     np.array([0.9, 0.1], np.float32), np.array([1, 0], np.int32)),
])
def test_a_user_function_returns_its_declared_type_as_in_c(text, x, want):
    out = evaluate(parse(text), {"X": x})
    assert out.dtype == want.dtype and np.array_equal(out, want)


@pytest.mark.opencl
def test_a_float_returned_as_int_truncates_on_the_device_and_in_the_reference(tmp_path):
    prog = tmp_path / "p.lift"
    prog.write_text("userfun f(x: float) : int = x * 3.0f\nX : [float]N\nmapA(f) $ X\n")
    r = mapper("run", str(prog), "--mapping", "A=G0", "--sizes", "N=64")
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr


# ------------------------------------------------------------------ literals


def test_an_overflowing_float_literal_is_infinity_and_prints_back():
    from ir.printer import print_program

    text = "userfun f(x: float) : float = x + 1e999f\nX : [float]N\nmapA(f) $ X"
    out = evaluate(parse(text), {"X": np.array([1.0], np.float32)})
    assert out[0] == np.inf
    p = parse("X : [float]N\nmapA(\\x -> add(x, -1e999f)) $ X")
    again = parse(print_program(p))
    assert evaluate(again, {"X": np.array([1.0], np.float32)})[0] == -np.inf


# ------------------------------------------------------------------ the API's boundary

L3 = os.path.join(ROOT, "examples", "cc22_listing3.lift")
L3_MAPPING = "A=W0 B=L0 C=L0 D=S"
L3_SIZES = {"N": 4096, "s0": 64, "s1": 4}


@pytest.mark.parametrize("expr", [None, 42, b"X : [float]N", 1.5])
def test_problem_of_something_else_than_a_program_says_what_it_takes(expr):
    from mapper import problem
    from mapper.errors import ArgumentError

    with pytest.raises(ArgumentError, match="problem\\(\\) takes a program.*; got"):
        problem(expr)


@pytest.mark.parametrize("call, error, message", [
    (lambda p: p.build(L3_MAPPING, None), "ArgumentError", "sizes must be a dict"),
    (lambda p: p.build(L3_MAPPING, [("H", 4)]), "ArgumentError", "sizes must be a dict"),
    (lambda p: p.build(None, L3_SIZES), "ArgumentError", "a mapping is its text"),
    (lambda p: p.build(["A=G0", "B=S"], L3_SIZES), "ArgumentError", "got list"),
    (lambda p: p.run(L3_MAPPING, None), "ArgumentError", "sizes must be a dict"),
    (lambda p: p.run(None, L3_SIZES), "ArgumentError", "a mapping is its text"),
    (lambda p: p.run(L3_MAPPING, L3_SIZES, 42), "InputError", "inputs must be a dict"),
    (lambda p: p.check(None), "ArgumentError", "a mapping is its text"),
    (lambda p: p.explain(42), "ArgumentError", "a mapping is its text"),
    (lambda p: p.count(fixed=42), "ArgumentError", "a mapping is its text"),
    (lambda p: list(p.enumerate(fixed=["A=G0"])), "ArgumentError", "a mapping is its text"),
    (lambda p: list(p.enumerate(limit="3")), "ConfigurationError", "limit must be"),
    (lambda p: list(p.enumerate(limit=-1)), "ConfigurationError", "limit must be"),
    (lambda p: list(p.enumerate(order="random", seed="x")), "ConfigurationError",
     "seed must be"),
])
def test_api_arguments_are_checked_at_the_boundary(call, error, message):
    from ir.errors import LiftmapError
    from mapper import errors, problem

    p = problem(L3)
    with pytest.raises(LiftmapError, match=message) as e:
        call(p)
    assert type(e.value) is getattr(errors, error)


def test_api_arguments_of_the_right_kind_still_work():
    import numpy as np

    from mapper import problem

    p = problem(L3)
    assert len(list(p.enumerate(limit=np.int64(2), order="random", seed=np.int32(1)))) == 2
    assert p.build({"A": "W0", "B": "L0", "C": "L0", "D": "S"}, L3_SIZES).source
    # (label, code) pairs, as dict() takes them: a count pinned to part of a mapping
    assert p.count(fixed=(("A", 20), ("B", 10))) == p.count(fixed="A=W0 B=L0") > 0


# ------------------------------------------------------------------ the command line


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    from mapper.cli import main

    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def one_line_error(rc: int, err: str, message: str) -> None:
    assert rc == 2 and err.startswith("error:") and message in err, err
    assert "Traceback" not in err and "usage:" not in err


@pytest.mark.parametrize("arg, message", [
    ("nope", "No such file: nope"),
    ("examples", "examples is a folder, not a program file"),
    ("no/such/file.lift", "No such file: no/such/file.lift"),
])
def test_a_path_that_names_no_program_file_says_so(capsys, monkeypatch, arg, message):
    monkeypatch.chdir(ROOT)
    rc, _, err = cli(capsys, "show", arg)
    one_line_error(rc, err, message)
    assert "undeclared parameter" not in err


def test_a_negative_budget_is_the_budgets_own_one_line_error(capsys, tmp_path):
    store = str(tmp_path / "s.sqlite")
    rc, _, err = cli(capsys, "explore", L3, "--sizes", "N=64", "--budget", "-10m",
                     "--store", store)
    one_line_error(rc, err, "budget must be a positive time, got '-10m'")
    rc, _, err = cli(capsys, "explore", L3, "--sizes", "N=64", "--budget", "-5",
                     "--store", store)
    one_line_error(rc, err, "budget must be a positive number of candidates")


def test_an_empty_store_name_is_refused(capsys, tmp_path, monkeypatch):
    from mapper.explore.store import ResultStore, StoreError

    monkeypatch.chdir(tmp_path)
    rc, _, err = cli(capsys, "explore", L3, "--sizes", "N=64", "--budget", "1", "--store", "")
    one_line_error(rc, err, "--store needs a file name")
    assert not (tmp_path / "results").exists()
    with pytest.raises(StoreError, match="needs a file name"):
        ResultStore("")


@pytest.mark.parametrize("argv", [["device"], ["space", L3, "--sizes", "N=64", "--max", "10"]])
def test_a_liftmap_device_that_names_no_device_is_refused(capsys, monkeypatch, argv):
    monkeypatch.setenv("LIFTMAP_DEVICE", "no-such-platform-xyz")
    rc, out, err = cli(capsys, *argv)
    one_line_error(rc, err, "no-such-platform-xyz")


@pytest.mark.parametrize("text, message", [
    ("X : [float]4\nmapA(id) o split(3) $ X", "split(3) at node 8 needs 4 % 3 == 0, which can"),
    ("X : [float]5\nmapA(id) o slideStrict(2, 2) $ X", "needs (5 - 2) % 2 == 0, which can"),
])
def test_a_constraint_that_can_never_hold_is_shown_as_written(text, message):
    from ir.errors import ConstraintViolation
    from mapper import problem

    with pytest.raises(ConstraintViolation) as e:
        problem(text)
    assert message in str(e.value)


def test_show_piped_keeps_long_lines_so_the_program_parses_back(capsys):
    rc, out, _ = cli(capsys, "show", os.path.join(ROOT, "examples", "harris.lift"))
    assert rc == 0
    program = out.split("\n\n\n")[0].split("\n", 1)[1]  # after the file name line
    assert max(len(line) for line in program.splitlines()) > 80
    parse(program)


def test_an_interrupt_while_wrapping_up_counts_what_was_stored(capsys, tmp_path, monkeypatch):
    from mapper.explore import variants

    def interrupted(tasks, *, stores, **kw):  # 3 candidates stored, then a second Ctrl-C
        st = next(iter(stores.values()))
        for i in range(3):
            st.add(dict(key=f"k{i}", run_id="r", strategy="solver", seed=0, idx=i,
                        mapping="A=G0", tuning="{}", status="ok", created=float(i)))
        raise KeyboardInterrupt

    monkeypatch.setattr(variants, "explore_variants", interrupted)
    store = str(tmp_path / "s.sqlite")
    rc, _, err = cli(capsys, "explore", L3, "--sizes", "N=64", "--budget", "5", "--store",
                     store, "-q")
    assert rc == 130 and "nothing was evaluated" not in err
    assert f"interrupted: 3 candidate(s) of this run are stored in {store} (3)" in err


# ------------------------------------------------------------------ the summary's answer


def _summary_of(best_key: str, winner_key: str) -> str:
    """The summary of a run whose fastest single measurement is ``best_key`` (v=16 G1)
    and whose re-timing winner is ``winner_key``."""
    from mapper.encoding import MapCodes
    from mapper.explore.record import Record, Retimed, Tuning
    from mapper.explore.run import Budget, Results

    def rec(key, code, time_s):
        return Record(key=key, run_id="r", strategy="model", seed=0, idx=0,
                      mapping=MapCodes({"A": code}), tuning=Tuning({"v": 16}), status="ok",
                      time_s=time_s, gflops=1e-3 / time_s)

    g0, g1 = rec("g0", 30, 0.0012), rec("g1", 31, 0.001)  # codes of G0 and G1
    res = Results(run_id="r", strategy="model", seed=0, store_path=":memory:", context=None,
                  budget=Budget(candidates=2))
    res.records = [g0, g1]
    assert res.best is not None and res.best.key == best_key
    win = {"g0": g0, "g1": g1}[winner_key]
    res.retimed = {winner_key: Retimed(win, median_s=0.0011, min_s=0.001, n=9, gflops=1.0,
                                       round_s=0.0011)}
    return res.summary()


def test_a_summary_names_one_answer_and_says_why():
    text = _summary_of("g1", "g0")
    assert "best: 1 GFLOP/s (1 ms): A=G1; v=16 (the fastest single measurement)" in text
    assert ("answer: A=G0; v=16, the re-timed winner (the lowest median of a fastest round), "
            "not the best above") in text
    same = _summary_of("g1", "g1")
    assert "answer: A=G1; v=16 (the best, confirmed by the re-timing)" in same


# ------------------------------------------------------------------ Ctrl-C while loading


def test_an_interrupt_while_the_library_loads_is_one_line(monkeypatch, capsys):
    import types

    import liftmap

    class Loading(types.ModuleType):
        def __getattr__(self, name):  # the Ctrl-C arrives inside the import
            raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "mapper.cli", Loading("mapper.cli"))
    assert liftmap.main() == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_the_mapper_script_interrupted_in_its_first_half_second_exits_130_quietly():
    import signal
    import time

    p = subprocess.Popen([MAPPER, "show", os.path.join(ROOT, "examples", "cc22_listing3.lift")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # the signal must land inside the library's imports, not in the interpreter's own
    # start (before Python handles SIGINT at all: a loaded host took over 0.25 s there):
    # numpy, about half-way through them, mapped into the process says they have begun
    maps, deadline = f"/proc/{p.pid}/maps", time.monotonic() + 60
    if os.path.exists(maps):
        while time.monotonic() < deadline and p.poll() is None:
            with open(maps) as fh:
                if "_multiarray_umath" in fh.read():
                    break
            time.sleep(0.002)
    else:  # no /proc: the imports take about half a second
        time.sleep(0.25)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert (p.returncode, err) == (130, "interrupted\n")


def test_the_mapper_script_started_with_ctrl_c_ignored_keeps_it_ignored():
    """A command started in the background (SIGINT ignored) is not ended by one."""
    import signal
    import time

    p = subprocess.Popen([MAPPER, "show", os.path.join(ROOT, "examples", "cc22_listing3.lift")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    for _ in range(3):  # while it loads, and (on a fast machine) during or after the command
        time.sleep(0.2)
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert (p.returncode, err) == (0, "") and "N % s0 == 0" in out, (out, err)


# ------------------------------------------------------------------ explain


def test_explain_of_what_only_heuristics_rule_out_does_not_say_impossible(capsys):
    from mapper.cli import main

    l1 = os.path.join(ROOT, "examples", "cc22_listing1.lift")
    assert main(["explain", l1, "--partial", "B=G0"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "impossible" not in out
    assert out.startswith("B=G0 is ruled out by heuristic rules only (local-in-groups), not by "
                          "validity: --no-heuristics (heuristics=False) allows it")
    assert main(["explain", l1, "--partial", "B=G0", "--no-heuristics"]) == 0
    assert "B=G0 is possible" in capsys.readouterr().out


# ------------------------------------------------------------------ space's default --max


def test_space_takes_the_sizes_explore_takes_without_max(capsys, tmp_path):
    """N=16,777,216 without --max: a split's chunk ranges over N's divisors (25 values), as
    explore has it; only a parameter with no domain of its own (listing 3's s1) asks for
    --max or --domain, and is named."""
    prog = tmp_path / "st.lift"
    prog.write_text("X : [float]N\njoin o mapA(mapB(\\w -> reduce(\\acc x -> add(acc, x))"
                    "(0.0f, w)) o slide(5, 1)) o slideStrict(t + 4, t) o pad(2, 2) $ X\n")
    rc, out, err = cli(capsys, "space", str(prog), "--sizes", "N=16777216", "--json")
    assert rc == 0, err
    import json

    doc = json.loads(out)
    assert doc["count"] == 25 and [p["name"] for p in doc["parameters"]] == ["t"]
    rc, _, err = cli(capsys, "space", L3, "--sizes", "N=16777216")
    assert rc == 2 and "too many values to list for s1:" in " ".join(err.split())


# ------------------------------------------------------------------ device specs


@pytest.mark.opencl
def test_a_device_spec_may_name_the_device():
    """LIFTMAP_DEVICE / --device: a substring of a device's name (``pthread``, ``EPYC``)
    with an optional index among the devices so named, as the README says."""
    from codegen.device import NoDeviceError, NoPlatformError, select_device
    from codegen.opencl_env import list_platforms

    d = select_device(None)
    platforms = " ".join(f"{p.name} {p.vendor} {p.version}" for p in list_platforms()).lower()
    words = [w for w in d.name.replace("-", " ").split() if w.lower() not in platforms]
    assert words, d.name
    for spec in (words[0], f"{words[0]}:0", words[-1].lower()):
        assert select_device(spec).int_ptr == d.int_ptr, spec
    with pytest.raises(NoDeviceError, match="index 99 is out of range"):
        select_device(f"{words[0]}:99")
    here = f"platforms and devices here: .*{re.escape(d.name)}"
    with pytest.raises(NoPlatformError, match=here):
        select_device("no-such-device-anywhere")


def test_the_docs_say_which_platform_is_tried_first_as_the_code_does():
    """rank_devices tries the system's platforms before pip's PoCL: README and runner.md
    both say so."""
    for doc in ("README.md", os.path.join("docs", "runner.md")):
        with open(os.path.join(ROOT, doc)) as f:
            text = " ".join(f.read().split())
        assert "before pip's PoCL" in text and "pip's PoCL first" not in text, doc
        assert "pthread" in text and "EPYC" in text, doc
