"""Typed records (``mapper.explore.record``) and what ``mapper explore`` / ``mapper results``
print: short codes everywhere, tuning values as objects or columns, --json, --jsonl, -v,
-q."""

from __future__ import annotations

import csv
import dataclasses
import glob
import io
import json
import os
import pickle
import re
import sqlite3

import pytest

from mapper import cli
from mapper.encoding import MapCodes
from mapper.explore import Record, Results, Retimed, Task, Tuning, parse_budget
from mapper.explore.store import COLUMN_NAMES, Context, ResultStore

ROOT = os.path.join(os.path.dirname(__file__), "..")
L3 = os.path.join(ROOT, "examples", "cc22_listing3.lift")
STORES = sorted(glob.glob(os.path.join(ROOT, "results", "search", "*.sqlite")))
SMALL_STORE = min(STORES, key=os.path.getsize)
SHORT = re.compile(r"^(S|F|V|[LWG][0-2])$")
SHORT_TEXT = re.compile(r"^[A-Z][A-Z0-9]*=(S|F|[LWG][0-2])( [A-Z][A-Z0-9]*=(S|F|[LWG][0-2]))*$")
NUMERIC_MAP = re.compile(r"\b[A-Z][A-Z0-9]*=\d")  # a map label with a numeric code


def _raw_rows(path: str) -> list[dict]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        cur = db.execute(f"SELECT {', '.join(COLUMN_NAMES)} FROM results")
        return [dict(zip(COLUMN_NAMES, r)) for r in cur.fetchall()]
    finally:
        db.close()


def _record(**kw) -> Record:
    base = dict(key="k1", run_id="r1", strategy="solver", seed=0, idx=0,
                mapping=MapCodes({"A": 20, "B": 10, "C": 0, "D": 1}),
                tuning={"s1": 4, "s0": 64}, status="ok", gflops=12.5, time_s=4.5e-5)
    return Record(**{**base, **kw})


# ------------------------------------------------------------------ Record


def test_record_holds_every_store_column():
    assert Record.columns() == COLUMN_NAMES


@pytest.mark.parametrize("path", STORES, ids=os.path.basename)
def test_committed_stores_load_into_records_and_round_trip(path):
    """Row -> Record -> row is the identity on every row of the committed stores (the
    format on disk does not change), and ``records()`` reads them typed."""
    rows = _raw_rows(path)
    assert rows
    for row in rows:
        assert Record.from_row(row).to_row() == row
    with ResultStore(path, readonly=True) as st:
        recs = st.records()
        best = st.best_records(3)
    assert len(recs) == len(rows)
    for r in recs:
        assert isinstance(r.mapping, MapCodes) and isinstance(r.tuning, Tuning)
        assert all(isinstance(v, int) for v in r.tuning.values())
        assert SHORT_TEXT.match(r.short_mapping), r.short_mapping
    assert best and all(b.ok for b in best)
    assert [b.gflops for b in best] == sorted((b.gflops for b in best), reverse=True)


def test_record_json_label_and_text():
    r = _record()
    doc = r.to_json()
    assert doc["mapping"] == {"A": "W0", "B": "L0", "C": "S", "D": "F"}
    assert doc["tuning"] == {"s0": 64, "s1": 4}  # an object of ints, sorted
    assert (doc["label"], doc["ok"], doc["check"], doc["cached"]) == ("ok", True, None, False)
    assert list(doc) == list(Record.json_keys())
    assert json.loads(json.dumps(doc)) == doc
    assert r.short_mapping == "A=W0 B=L0 C=S D=F" and str(r.tuning) == "s0=64 s1=4"
    assert r.describe() == "12.5 GFLOP/s (0.045 ms): A=W0 B=L0 C=S D=F; s0=64 s1=4"
    assert r.to_row()["mapping"] == "A=20 B=10 C=0 D=1"  # the store's form only
    assert r.to_row()["tuning"] == '{"s0": 64, "s1": 4}'
    rej = _record(status="rejected", check="local-memory", gflops=None)
    assert (rej.label, rej.ok) == ("rejected:local-memory", False)
    assert _record(status="timeout", check="early-cut").label == "timeout"


def test_record_is_a_value():
    r = _record()
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.status = "crash"  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.tuning["s0"] = 1  # type: ignore[index]
    assert pickle.loads(pickle.dumps(r)) == r and hash(r) == hash(_record())
    assert dataclasses.replace(r, cached=True).cached and not r.cached
    assert Record.from_row({**r.to_row(), "cached": True}) == dataclasses.replace(r,
                                                                                 cached=True)
    assert Record.from_row({"key": "k", "run_id": "r", "strategy": "s", "mapping": "A=W0",
                            "tuning": {"s0": "8"}, "status": "ok"}).tuning == {"s0": 8}


def test_store_adds_and_reads_records(tmp_path):
    with ResultStore(tmp_path / "s.sqlite") as st:
        st.bind(Context("p", "abc", {"N": 64}, {"name": "dev"}))
        assert st.add(_record(created=1.0))
        assert not st.add(_record(created=2.0))  # a key is stored once
        assert st.add(_record(key="k2", gflops=None, status="crash", created=3.0))
        assert st.record("k1") == _record(created=1.0)
        assert [r.key for r in st.records()] == ["k1", "k2"]
        assert [r.key for r in st.best_records(5)] == ["k1"]


def test_store_answer_is_the_retimed_median_not_one_lucky_run(tmp_path, capsys, monkeypatch):
    """``mapper results`` answers with the re-timed median and its spread (issue 45): a
    candidate whose one exploration measurement was lucky (k1: 45 us stored, 80 us
    re-timed) ranks below one that re-times faster (k2), by the fastest round's median as a
    run ranks its winners; rounds of two runs are pooled; an unreadable re-timing is a
    one-line error, not a traceback."""
    path = tmp_path / "s.sqlite"
    with ResultStore(path) as st:
        st.bind(Context("p", "abc", {"N": 64}, {"name": "dev"}))
        st.add(_record(created=1.0))  # 12.5 GFLOP/s at 45 us: 562,500 FLOPs
        st.add(_record(key="k2", gflops=9.0, time_s=6.25e-5, tuning={"s1": 8, "s0": 32},
                       created=2.0))
        st.add(_record(key="k3", status="crash", gflops=None, time_s=None, created=3.0))
        st.add_retime("k1", "r1", 0, [8e-5, 9e-5, 8.5e-5])
        st.add_retime("k1", "r2", 0, [7.9e-5, 8.1e-5, 8e-5])
        st.add_retime("k2", "r1", 0, [6e-5, 6.4e-5, 6.2e-5])
        st.add_retime("k3", "r1", 0, [1e-5])  # not ok: never the answer
        got = st.retimed()
    assert [r.record.key for r in got] == ["k2", "k1"]
    k2, k1 = got
    assert (k2.median_s, k2.min_s, k2.max_s, k2.n, k2.rounds) == (6.2e-5, 6e-5, 6.4e-5, 3, 1)
    assert k2.gflops == pytest.approx(9.0 * 6.25e-5 / 6.2e-5)
    assert (k1.n, k1.rounds, k1.round_s) == (6, 2, 8e-5)
    assert k1.median_s == pytest.approx(8.05e-5)
    monkeypatch.setattr(cli.console, "width", 400)
    rc, out, err = _cli(capsys, "results", str(path))
    assert rc == 0, err
    answer = next(line for line in out.splitlines() if line.startswith("answer:"))
    assert "s1=8" in answer and "s0=32" in answer
    assert "median 0.062 ms of 3 re-timed run(s) (spread 0.06-0.064 ms)" in answer
    assert out.index("Re-timed") < out.index("Best")
    rc, out, err = _cli(capsys, "results", str(path), "--json")
    doc = json.loads(out)
    assert [r["key"] for r in doc["retimed"]] == ["k2", "k1"]
    assert doc["retimed"][0]["retimed"]["max_s"] == 6.4e-5
    db = sqlite3.connect(path)
    db.execute("UPDATE retimes SET times='not json' WHERE key='k2'")
    db.commit()
    db.close()
    rc, out, err = _cli(capsys, "results", str(path))
    assert rc == 2 and "damaged" in err and "Traceback" not in err


def test_store_answer_names_its_fastest_round_beside_the_median(tmp_path, capsys,
                                                                monkeypatch):
    """Over several rounds the answer also gives its fastest round's median: a shared
    host runs whole rounds slow, and that figure is the one another process reproduces."""
    path = tmp_path / "s.sqlite"
    with ResultStore(path) as st:
        st.bind(Context("p", "abc", {"N": 64}, {"name": "dev"}))
        st.add(_record(created=1.0))
        st.add_retime("k1", "r1", 0, [9e-5, 9.2e-5, 9.4e-5])  # a slow phase
        st.add_retime("k1", "r1", 1, [5e-5, 5.1e-5, 5.2e-5])
        st.add_retime("k1", "r1", 2, [6e-5, 6.1e-5, 6.2e-5])
    monkeypatch.setattr(cli.console, "width", 400)
    rc, out, err = _cli(capsys, "results", str(path))
    assert rc == 0, err
    answer = next(line for line in out.splitlines() if line.startswith("answer:"))
    assert "its fastest round's median 0.051 ms" in answer
    # the steady figure: the median of the faster half of the rounds (0.051 and 0.061)
    assert "steady 0.056 ms, the median of its faster half of 3 rounds" in answer
    doc = json.loads(_cli(capsys, "results", str(path), "--json")[1])
    assert doc["retimed"][0]["retimed"]["figure_round_s"] == pytest.approx(5.1e-5)
    assert doc["retimed"][0]["retimed"]["steady_s"] == pytest.approx(5.6e-5)


def test_store_without_retimes_says_its_best_is_one_measurement(tmp_path, capsys):
    path = tmp_path / "s.sqlite"
    with ResultStore(path) as st:
        st.bind(Context("p", "abc", {"N": 64}, {"name": "dev"}))
        st.add(_record(created=1.0))
        assert st.retimed() == []
    rc, out, err = _cli(capsys, "results", str(path))
    assert rc == 0 and "answer: not re-timed" in out
    assert json.loads(_cli(capsys, "results", str(path), "--json")[1])["retimed"] == []


# ------------------------------------------------------------------ explore's text and JSON


def _results(records: list[Record], retimed: dict[str, Retimed] | None = None) -> Results:
    res = Results("run1", "solver", 0, "s.sqlite", Context("p", "abc", {"N": 64},
                                                            {"name": "dev"}),
                  parse_budget(5))
    res.records, res.evaluated, res.stopped_by = list(records), len(records), "budget"
    res.retimed = retimed or {}
    return res


def test_results_best_final_summary_and_output_lines():
    from mapper.explore import output

    fast = _record(key="k2", gflops=20.0, mapping=MapCodes({"A": 30, "B": 0, "C": 0, "D": 1}))
    res = _results([_record(), fast])
    assert res.best == fast and res.final == fast and res.final_retimed is None
    rt = Retimed(_record(), median_s=4e-5, min_s=3.9e-5, n=9, gflops=25.0)
    res.retimed = {"k1": rt, "k2": Retimed(fast, 5e-5, 4e-5, 9, 20.0)}
    assert res.final == _record() and res.final_retimed == rt  # re-timing decides
    text = res.summary()
    assert "A=W0 B=L0 C=S D=F; s0=64 s1=4" in text and not NUMERIC_MAP.search(text)
    assert output.answer_line(res) == "A=W0 B=L0 C=S D=F; s0=64 s1=4: 25 GFLOP/s, 0.04 ms"
    line = output.candidate_line(fast, res)
    assert line.startswith("#2 ok 20 GFLOP/s") and "A=G0 B=S C=S D=F" in line
    doc = output.summary_json(res, file="x.lift", store="s.sqlite")
    assert doc["type"] == "summary" and doc["final"]["retimed"]["n"] == 9
    assert doc["final"]["mapping"] == {"A": "W0", "B": "L0", "C": "S", "D": "F"}
    assert doc["context"]["sizes"] == {"N": 64} and doc["counts"] == {"ok": 2}
    assert json.loads(json.dumps(doc)) == doc
    assert output.answer_line(_results([_record(status="crash")])) is None


def test_dashboard_prints_short_codes():
    from rich.console import Console

    from mapper.explore.display import Dashboard, best_table

    res = _results([_record()])
    dash = Dashboard()
    dash.start(res)
    dash.update(_record(), res)
    buf = io.StringIO()
    con = Console(file=buf, width=200)
    con.print(dash)
    con.print(best_table(res.records, "best"))
    text = buf.getvalue()
    assert text.count("A=W0 B=L0 C=S D=F") == 3 and not NUMERIC_MAP.search(text)
    assert "answer, re-timed" not in text
    # the answer held by re-timing, at its re-timed speed (half the stored: 6.25 GFLOP/s)
    res.incumbent.record, res.incumbent.time_s = res.records[0], 9e-5
    buf = io.StringIO()
    Console(file=buf, width=200).print(dash)
    assert "answer, re-timed: 6.25 GFLOP/s (0.09 ms): A=W0 B=L0 C=S D=F" in buf.getvalue()


# ------------------------------------------------------------------ the command line


def _cli(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_results_table_prints_short_codes(capsys, monkeypatch):
    monkeypatch.setattr(cli.console, "width", 400)
    rc, out, err = _cli(capsys, "results", SMALL_STORE, "--top", "3")
    assert rc == 0, err
    table = out[out.index("Best 3"):]
    with ResultStore(SMALL_STORE, readonly=True) as st:
        best = st.best_records(3)
    for r in best:
        assert r.short_mapping in table and str(r.tuning) in table
    assert not NUMERIC_MAP.search(table)


def test_results_json_and_csv_use_short_codes_and_real_objects(capsys, tmp_path):
    path = tmp_path / "all.csv"
    rc, out, err = _cli(capsys, "results", SMALL_STORE, "--json", "--csv", str(path))
    assert rc == 0, err
    assert len(out.strip().splitlines()) == 1  # one JSON object on one line
    doc = json.loads(out)
    assert (doc["command"], doc["schema"]) == ("results", 1)
    n = len(doc["rows"])
    assert n == sum(doc["counts"].values()) > 0 and len(doc["best"]) == min(10, n)
    for r in doc["rows"] + doc["best"]:
        assert r["mapping"] and all(SHORT.match(c) for c in r["mapping"].values())
        assert isinstance(r["tuning"], dict) and all(isinstance(v, int)
                                                     for v in r["tuning"].values())
    assert isinstance(doc["meta"]["sizes"], dict) and isinstance(doc["context"]["device"],
                                                                 dict)
    assert all(isinstance(run["options"], dict) for run in doc["runs"])
    assert '"tuning": "' not in out and '"mapping": "' not in out  # no JSON inside JSON
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == n
    header = list(rows[0])
    params = sorted(doc["rows"][0]["tuning"])
    assert "tuning" not in header and [f"tuning.{p}" for p in params] == \
        [h for h in header if h.startswith("tuning.")]
    for row, r in zip(rows, doc["rows"]):
        assert SHORT_TEXT.match(row["mapping"]), row["mapping"]
        assert {p: int(row[f"tuning.{p}"]) for p in r["tuning"]} == r["tuning"]


def _parser_actions(name: str):
    ap = cli.build_parser()
    sub = next(a for a in ap._actions if a.dest == "command")
    return sub.choices[name]._actions


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_every_option_has_a_help_string(command):
    for a in _parser_actions(command):
        assert a.help, (command, a.option_strings or a.dest)


@pytest.mark.parametrize("flags", [["--json", "--jsonl"], ["-q", "-v"]])
def test_explore_output_flags_that_exclude_each_other(capsys, tmp_path, flags):
    with pytest.raises(SystemExit) as e:
        cli.main(["explore", L3, "--sizes", "N=1024", "--store", str(tmp_path / "s.sqlite"),
                  *flags])
    assert e.value.code == 2 and "not allowed with" in capsys.readouterr().err
    assert not (tmp_path / "s.sqlite").exists()


def _explore(capsys, tmp_path, *flags):
    return _cli(capsys, "explore", L3, "--sizes", "N=1024", "--budget", "3", "--strategy",
                "solver", "--seed", "3", "--store", str(tmp_path / "e.sqlite"), *flags)


@pytest.mark.opencl
def test_explore_jsonl_streams_each_candidate_then_a_summary(capsys, tmp_path, monkeypatch):
    import sys

    flushes = []
    real = sys.stdout.flush
    monkeypatch.setattr(sys.stdout, "flush", lambda: (flushes.append(1), real())[1])
    rc, out, err = _explore(capsys, tmp_path, "--jsonl")
    assert rc == 0, err
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["type"] for d in docs] == ["candidate"] * 3 + ["summary"]
    assert len(flushes) >= 3  # each candidate's line is flushed when it finishes
    assert all(d["command"] == "explore" and d["schema"] == 1 for d in docs)
    assert [d["n"] for d in docs[:3]] == [1, 2, 3]
    for d in docs[:3]:
        assert all(SHORT.match(c) for c in d["mapping"].values()) and set(d["mapping"]) == \
            set("ABCD")
        widths = {f"v{m}" for m, c in d["mapping"].items() if c == "V"}
        assert set(d["tuning"]) <= {"s0", "s1"} | widths and d["status"] and "label" in d
    s = docs[-1]
    assert (s["candidates"], s["evaluated"], s["stopped_by"]) == (3, 3, "budget")
    assert s["store"] == str(tmp_path / "e.sqlite") and s["context"]["sizes"] == {"N": 1024}
    if s["final"] is not None:
        assert s["final"]["key"] in {d["key"] for d in docs[:3]}
    assert not NUMERIC_MAP.search(out)


@pytest.mark.opencl
def test_explore_quiet_prints_only_the_answer(capsys, tmp_path):
    rc, out, err = _explore(capsys, tmp_path, "-q")
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == 1, out
    assert re.fullmatch(r"A=\S+ B=\S+ C=\S+ D=\S+(; s0=\d+( s1=\d+)?( v[A-D]=\d+)*)?: .*ms",
                        lines[0])
    assert not re.search(r"\b[ABCD]=\d", out)


@pytest.mark.opencl
def test_explore_verbose_prints_a_line_per_candidate_on_stderr(capsys, tmp_path):
    rc, out, err = _explore(capsys, tmp_path, "-v")
    assert rc == 0, err
    lines = [ln for ln in err.splitlines() if ln.startswith("#")]
    assert [ln.split()[0] for ln in lines] == ["#1", "#2", "#3"]
    assert all(re.search(r" A=(S|F|[LWG][0-2]) B=", ln) for ln in lines)
    assert "3 candidate(s), 3 evaluated" in " ".join(out.split())  # the summary, as usual
    assert not re.search(r"\b[ABCD]=\d", out + err)  # (the sizes print as N=1024)


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
@pytest.mark.opencl
def test_explore_of_a_lift_program_reports_derived_or_given_flops(capsys, tmp_path):
    rc, out, err = _explore(capsys, tmp_path, "--jsonl")
    assert rc == 0, err
    docs = [json.loads(line) for line in out.splitlines()]
    ok = [d for d in docs if d["type"] == "candidate" and d["status"] == "ok"]
    assert ok and all(d["gflops"] == pytest.approx(2 * 1024 / d["time_s"] / 1e9) for d in ok)
    rc, out, err = _cli(capsys, "explore", L3, "--sizes", "N=1024", "--budget", "2",
                        "--strategy", "solver", "--store", str(tmp_path / "f.sqlite"),
                        "--flops", "1000000", "--jsonl")
    assert rc == 0, err
    ok = [d for d in map(json.loads, out.splitlines())
          if d["type"] == "candidate" and d["status"] == "ok"]
    assert ok and all(d["gflops"] == pytest.approx(1e6 / d["time_s"] / 1e9) for d in ok)


def test_explore_passes_its_rules_to_the_task(monkeypatch, tmp_path):
    """--no-heuristics and --fusion reach the explored task (they were dropped for .lift)."""
    seen = {}

    def fake_from_program(prog, sizes, **kw):
        seen.update(kw)
        raise cli.CliError("stop here")

    monkeypatch.setattr(Task, "from_program", fake_from_program)
    rc = cli.main(["explore", L3, "--sizes", "N=1024", "--no-heuristics", "--fusion", "free",
                   "--store", str(tmp_path / "g.sqlite")])
    assert rc == 2 and seen["heuristics"] is False and seen["fusion"] == "free"
