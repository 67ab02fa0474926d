"""The command line under stress (issue 15): counting without listing, bounded space
construction, ``--json`` everywhere, typed errors only, code names in the REPL, and the
mutation fuzzer (``tests/fuzz_cli.py``)."""

from __future__ import annotations

import io
import json
import os
import re
import sys
import time

import pytest
from fuzz_cli import memory_cap
from rich.console import Console

from mapper import cli
from mapper.cli import main

sys.path.insert(0, os.path.dirname(__file__))

EX = os.path.join(os.path.dirname(__file__), "..", "examples")
L3 = f"{EX}/cc22_listing3.lift"
EXAMPLES = sorted(f for f in os.listdir(EX) if f.endswith(".lift"))


def nested(depth: int) -> str:
    """``depth`` perfectly nested maps over a ``depth``-dimensional array."""
    ty = "[" * depth + "float" + "".join(f"]N{i}" for i in range(depth))
    return f"X : {ty}\n" + "map(" * depth + "toGlobal(id)" + ")" * depth + " $ X\n"


def l3_text() -> str:
    with open(L3) as f:
        return f.read()


@pytest.fixture
def nest(tmp_path):
    def write(depth: int) -> str:
        path = tmp_path / f"nest{depth}.lift"
        path.write_text(nested(depth))
        return str(path)

    return write


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def run_json(capsys, *argv):
    rc, out, err = run(capsys, *argv, "--json")
    lines = out.splitlines()
    assert len(lines) == 1, out  # one JSON object on one line
    doc = json.loads(lines[0])
    assert doc["command"] == argv[0] and doc["schema"] == cli.JSON_SCHEMA_VERSION
    return rc, doc, err




# ------------------------------------------------------------ 1. counting without listing


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
@pytest.mark.parametrize("name", EXAMPLES)
def test_count_equals_the_enumeration_on_every_example(name):
    from ir.syntax import parse_file
    from mapper.api import count_mappings, count_valid_mappings, enumerate_mappings, problem

    prog = parse_file(f"{EX}/{name}")
    seen = set()  # the models counted: without the heuristics, fusion free and always give
    # the same one (rule 8 is a heuristic), and every count is a function of the model
    for fusion in ("always", "never", "free"):
        for heuristics in (True, False):
            kw = dict(fusion=fusion, heuristics=heuristics)
            p = problem(prog, **kw)
            model = (tuple(p.labels), p.model.parameters, p.model.constraints)
            if model in seen:
                continue
            seen.add(model)
            n = count_valid_mappings(prog, **kw)
            if n <= 100_000:
                assert n == count_mappings(prog, **kw), (fusion, heuristics)
                continue
            # listing half a million mappings takes a minute: the counts agree under pins
            # of the two innermost maps (the solver varies them fastest) to their codes in
            # valid mappings far apart
            first = list(enumerate_mappings(prog, limit=3000, **kw))
            for pins in {tuple(m.items())[-2:] for m in first[1999::1000]}:
                assert count_valid_mappings(prog, fixed=pins, **kw) == \
                    count_mappings(prog, fixed=pins, **kw) < n, (fusion, heuristics, pins)


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
def test_count_equals_the_enumeration_on_nested_maps_of_depth_3_to_8():
    from mapper.api import count_mappings, count_valid_mappings

    for fusion in ("always", "never", "free"):
        for d in range(3, 9):
            assert count_valid_mappings(nested(d), fusion=fusion) == \
                count_mappings(nested(d), fusion=fusion), (fusion, d)
    # (71, 234, 746, 2357, 7660, 25728 before the innermost map could be V)
    assert [count_valid_mappings(nested(d)) for d in range(3, 9)] == \
        [90, 305, 980, 3103, 10017, 33388]


def test_count_with_pins_equals_the_enumeration():
    from mapper.api import count_mappings, count_valid_mappings

    for fixed in ("A=W0", "A=W0 B=L0", "A=G0", "B=S", "A=S D=F"):
        assert count_valid_mappings(l3_text(), fixed=fixed) == \
            count_mappings(l3_text(), fixed=fixed), fixed


def test_enumerate_count_of_a_deep_nest_counts_by_states(capsys, nest):
    rc, out, _ = run(capsys, "enumerate", nest(14), "--count", "--timeout", "50")
    assert rc == 0 and out.startswith("27803371 valid mappings (states")


@pytest.mark.perf
def test_enumerate_count_of_a_deep_nest_is_fast(capsys, nest):
    t0 = time.perf_counter()
    rc, out, _ = run(capsys, "enumerate", nest(14), "--count", "--timeout", "50")
    assert rc == 0 and time.perf_counter() - t0 < 20  # listing them took minutes


def test_enumerate_count_stops_at_the_time_limit_and_says_how_far(capsys, nest):
    rc, out, err = run(capsys, "enumerate", nest(40), "--count", "--timeout", "0.2")
    assert rc == 2 and out == ""
    assert "time limit (0.2 s)" in err and re.search(r"after \d+ of 40 maps", err)
    assert "--fixed" in err and "--timeout" in err and "Traceback" not in err


def test_enumerate_listing_stops_at_the_time_limit(capsys, nest):
    rc, _, err = run(capsys, "enumerate", nest(10), "--timeout", "0.3")
    assert rc == 2 and "listing stopped at the time limit" in err and "--count" in err


def test_enumerate_count_shows_progress_on_a_terminal(capsys, nest, monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(cli.common, "err_console", Console(file=buf, force_terminal=True,
                                                           width=100))
    rc, out, _ = run(capsys, "enumerate", nest(10), "--count")
    assert rc == 0 and "369866 valid mappings" in out
    assert "counting mappings" in buf.getvalue()
    # piped (no terminal): nothing on stderr
    rc, _, err = run(capsys, "enumerate", nest(10), "--count")
    assert rc == 0 and err == ""


def test_enumerate_count_by_listing_with_a_backend(capsys):
    rc, out, _ = run(capsys, "enumerate", L3, "--count", "--backend", "z3")
    assert rc == 0 and out.startswith("37 valid mappings (z3")
    rc, _, err = run(capsys, "enumerate", L3, "--count", "--limit", "3")
    assert rc == 2 and "--limit" in err


def test_enumerate_timeout_must_be_a_number(capsys):
    with pytest.raises(SystemExit) as e:
        main(["enumerate", L3, "--count", "--timeout", "soon"])
    assert e.value.code == 2 and "seconds" in capsys.readouterr().err


# ------------------------------------------------------------ 2. huge spaces


def test_space_on_huge_sizes_is_one_clear_line(capsys):
    with memory_cap(2):  # before the fix this filled memory (a 4e9-value range)
        rc, _, err = run(capsys, "space", L3, "--sizes", "N=1000000000000")
        assert rc == 2 and "out of range" in err and "Traceback" not in err
        rc, _, err = run(capsys, "space", L3, "--sizes", "N=2000000000")
        assert rc == 2 and "--max" in err and "--domain" in err and "4,000,000,000" in err
        rc, _, err = run(capsys, "space", L3, "--sizes", "N=64", "--max", "100000000")
        assert rc == 2 and "--max 100000000 is out of range" in err
    rc, out, _ = run(capsys, "space", L3, "--sizes", "N=2000000000", "--max", "5000")
    assert rc == 0 and "valid configurations" in out


def test_space_too_large_group_says_what_to_do(capsys):
    rc, _, err = run(capsys, "space", f"{EX}/gpgpu20_conv_highlevel.lift", "--sizes",
                     "H=28,W=28,C=64,M=64", "--max", "3000")
    assert rc == 2 and "too large to build" in err and "--domain NAME=LO..HI" in err
    assert "Traceback" not in err


def test_space_construction_has_a_time_limit(capsys):
    rc, _, err = run(capsys, "space", L3, "--sizes", "", "--domain", "N=1..4000000",
                     "--domain", "s0=1..4000000", "--timeout", "1")
    assert rc == 2 and "--timeout 1 s" in err and "--domain" in err


@pytest.mark.parametrize("domain, message", [
    ("s0=a..b", "'a' is not an integer"),
    ("s0=5..1", "the range is empty"),
    ("s0=", "no value given"),
    ("s0", "NAME=LO..HI"),
    ("q=1..3", "no tuning parameter q; its tuning parameters are: s0, s1"),
    ("N=1..3", "N is fixed by --sizes"),
    ("s0=-1,2", "0 or more"),
    ("s0=1..99999999", "too many"),
])
def test_space_domains_are_checked(capsys, domain, message):
    rc, _, err = run(capsys, "space", L3, "--sizes", "N=64", "--domain", domain)
    assert rc == 2 and message in err and "invalid literal" not in err


# ------------------------------------------------------------ 3. --json


def test_json_show_constraints_check_explain(capsys):
    rc, doc, _ = run_json(capsys, "show", L3, "--sizes", "N=64,s0=16")
    assert rc == 0 and doc["result"] == "[float]N" and doc["sizes"] == {"N": 64, "s0": 16}
    assert {"name": "X", "type": "[float]N"} in doc["inputs"]
    rows = {r["constraint"]: r for r in doc["constraints"]}
    assert rows["N % s0 == 0"]["holds"] is True and rows["s0 % s1 == 0"]["needs"] == ["s1"]
    rc, doc, _ = run_json(capsys, "constraints", L3)
    assert rc == 0 and [m["label"] for m in doc["maps"]] == ["A", "B", "C", "D"]
    assert doc["total"] == len(doc["instances"]) == sum(r["instances"] for r in doc["rules"])
    assert ["A", "C", "D"] in doc["chains"]
    assert any("mapWrg(0)" in i["predicate_named"] for i in doc["instances"])
    rc, doc, _ = run_json(capsys, "check", L3, "--mapping", "A=G1 B=G0 C=G0 D=S")
    assert rc == 1 and doc["valid"] is False and doc["rejected_by"] == "validity"
    assert doc["mapping"] == {"A": "G1", "B": "G0", "C": "G0", "D": "S"}
    assert {v["rule"] for v in doc["violations"]} == {"cross-thread-dependency"}
    rc, doc, _ = run_json(capsys, "check", L3, "--mapping", "A=W0 B=L0 C=L0 D=S")
    assert rc == 0 and doc["valid"] is True and doc["violations"] == []
    rc, doc, _ = run_json(capsys, "explain", L3, "--partial", "A=W0 C=G0")
    assert rc == 0 and doc["possible"] is False and doc["core"] and doc["example"] is None
    rc, doc, _ = run_json(capsys, "explain", L3, "--partial", "A=W0")
    assert doc["possible"] is True and doc["example"]["A"] == "W0"


def test_json_enumerate(capsys):
    rc, doc, _ = run_json(capsys, "enumerate", L3, "--count")
    assert rc == 0 and doc["count"] == 37 and doc["method"] == "states"
    rc, doc, _ = run_json(capsys, "enumerate", L3)
    assert rc == 0 and doc["maps"] == ["A", "B", "C", "D"] and len(doc["mappings"]) == 37
    mapping = " ".join(f"{k}={v}" for k, v in doc["mappings"][5].items())
    assert run(capsys, "check", L3, "--mapping", mapping)[0] == 0  # codes read back
    rc, doc, _ = run_json(capsys, "enumerate", L3, "--fixed", "A=W0", "--limit", "2")
    assert doc["fixed"] == {"A": "W0"} and len(doc["mappings"]) == 2


def test_json_space(capsys):
    rc, doc, _ = run_json(capsys, "space", L3, "--sizes", "N=64")
    assert rc == 0 and [p["name"] for p in doc["parameters"]] == ["s0", "s1"]
    assert doc["parameters"][0]["domain"] == [1, 2, 4, 8, 16, 32, 64]
    assert doc["count"] <= doc["cartesian"] and doc["groups"] and doc["restrictions"]


@pytest.mark.opencl
def test_json_run(capsys):
    rc, doc, _ = run_json(capsys, "run", f"{EX}/listing3_local.lift", "--mapping",
                          "A=W0 B=L0 C=L0 D=S", "--sizes", "N=1024,s0=64,s1=4",
                          "--repeats", "2")
    assert rc == 0 and doc["ok"] is True and doc["status"] == "ok"
    assert doc["kernels"][0]["global_size"] == [1024] and doc["time_s"] > 0
    assert doc["max_abs_error"] == 0 and doc["overridden"] == []


def test_json_errors_stay_on_stderr(capsys):
    rc, out, err = run(capsys, "show", "no/such/file.lift", "--json")
    assert rc == 2 and out == "" and "No such file" in err


# ------------------------------------------------------------ 4. typed errors only


def test_main_lets_python_bugs_through(monkeypatch):
    def broken(args):
        raise ValueError("an internal mistake")

    monkeypatch.setitem(cli.COMMANDS, "show", broken)
    with pytest.raises(ValueError, match="an internal mistake"):
        main(["show", L3])


def test_cli_argument_errors_are_typed():
    from mapper.errors import SizeError

    with pytest.raises(SizeError):
        cli.parse_sizes("N=abc")
    with pytest.raises(cli.CliError):
        cli.parse_domains(["s0=a..b"])
    assert issubclass(cli.CliError, ValueError)  # callers catching ValueError still do


@pytest.mark.parametrize("argv, message", [
    (["space", L3, "--sizes", "N=64", "--domain", "s0=a..b"], "not an integer"),
    (["space", L3, "--sizes", "N=64", "--device", "no-such-device.json"], ""),
    (["explore", "conv", "--layer", "99/2", "--budget", "1"], "--layer"),
    (["explore", "conv", "--layer", "19/x", "--budget", "1"], "--layer"),
])
def test_known_leaks_are_clean_messages(capsys, tmp_path, argv, message):
    if argv[0] == "explore":
        argv = argv + ["--store", str(tmp_path / "s.sqlite")]
    rc, _, err = run(capsys, *argv)
    assert rc == 2 and message in err and "invalid literal" not in err
    assert err.startswith("error:")


def shell(*lines: str) -> str:
    from mapper.repl import MapperShell

    buf = io.StringIO()
    sh = MapperShell(Console(file=buf, width=200, highlight=False))
    for line in lines:
        assert not sh.onecmd(line)  # the session goes on
    return buf.getvalue()


def test_repl_usage_mistakes_are_clean_messages():
    out = shell(f"load {L3}", "enumerate abc", "load a b", 'load "x', "enumerate 1 2",
                "enumerate 1")
    assert "usage: enumerate [N]" in out and "usage: load FILE" in out
    assert "No closing quotation" in out
    assert "invalid literal" not in out and "too many values" not in out
    assert "1  A=" in out  # the session goes on


# ------------------------------------------------------------ 5. code names in the REPL


def test_predicates_show_code_names():
    from constraints.expr import Param, eq, ne
    from mapper.repl import show_predicate
    from mapper.rules import level

    assert show_predicate(ne(Param("A"), 20)) == "A != mapWrg(0)"
    assert show_predicate(level("A") < 1) == "level(A) < mapLcl"
    assert show_predicate(eq(Param("B"), 0) | eq(Param("B"), 1)) == \
        "B == mapSeq or B == fused"
    out = shell(f"load {L3}", "list C", "why A=W0 C=G0", "codes")
    assert "C != mapLcl(0) or A == mapWrg(0)" in out
    assert re.search(r"exhaustive-indexing\] .*mapGlb\(0\)", out)
    for code in ("S ", "F ", "L0-L2", "W0-W2", "G0-G2", "mapWrg(d)", "level(A)"):
        assert code in out
    assert not re.search(r"[A-D] [!=]= [0-9]", out)  # no raw code numbers


def test_repl_count_does_not_list(monkeypatch):
    import mapper.api

    def no_listing(*a, **k):
        raise AssertionError("count listed the mappings")

    monkeypatch.setattr(mapper.api, "count_mappings", no_listing)
    assert "4 valid mapping(s)" in shell(f"load {L3}", "pin A=W0", "count")


# ------------------------------------------------------------ 6. the fuzzer


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
def test_fuzz_500_cases_no_traceback_no_hang():
    import fuzz_cli

    rep = fuzz_cli.fuzz(500, seed=11, limit_s=30, heavy=False)
    assert rep.cases == 500
    assert rep.total("traceback") == 0 and rep.total("hang") == 0, \
        "\n".join(f.reproducer() for f in rep.findings)
    assert rep.total("ok") > 20 and rep.total("error") > 100  # both paths exercised


@pytest.mark.slow
def test_fuzz_1000_cases_no_traceback_no_hang():
    """With the 500 cases above and tests/test_faults.py's 1,500 with non-UTF-8 bytes, the
    suite fuzzes 3,000 inputs."""
    import fuzz_cli

    rep = fuzz_cli.fuzz(1000, seed=0, limit_s=30, heavy=False)
    assert rep.cases == 1000
    assert rep.total("traceback") == 0 and rep.total("hang") == 0, \
        "\n".join(f.reproducer() for f in rep.findings)
    for command in fuzz_cli.COMMANDS:
        assert sum(rep.counts[command].values()) > 200


def test_enumerate_table_reads_at_80_columns(capsys):
    rc, out, _ = run(capsys, "enumerate", f"{EX}/gpgpu20_conv_partial.lift", "--limit", "3")
    assert rc == 0 and "…" not in out and "│ G0 " in out and "codes: S mapSeq" in out
    assert max(len(line) for line in out.splitlines()) <= 80
