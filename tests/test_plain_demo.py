"""``mapper demo`` (``mapper.plain_demo``): a program written plainly, as written and as
the default search maps it."""

from __future__ import annotations

import json
import os

import pytest

from ir.equality import alpha_equal
from ir.programs import plain_matmul
from ir.syntax import parse_file
from mapper import cli
from mapper.api import problem
from mapper.encoding import VEC
from mapper.plain_demo import as_written, code_meaning, run_plain_demo

ROOT = os.path.join(os.path.dirname(__file__), "..")
EX = os.path.join(ROOT, "examples")
SMALL = {"M": 64, "N": 64, "K": 64}


def _cli(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_built_in_matmul_is_the_plain_example():
    ex = problem(parse_file(os.path.join(EX, "matmul_plain.lift"))).program
    assert alpha_equal(problem(plain_matmul()).program, ex)


@pytest.mark.parametrize("name", ["matmul_plain", "blur_separable", "row_sums", "transpose",
                                  "harris", "matvec"])
def test_as_written_runs_the_outer_maps_in_parallel_and_nothing_in_lanes(name):
    p = problem(parse_file(os.path.join(EX, f"{name}.lift")))
    m = as_written(p)
    assert not p.check(m)  # a valid mapping
    roots = [k for k in p.labels if p.tree.maps[k].parent is None]
    assert all(m[k] // 10 == 3 for k in roots), m.short()  # global work-items
    assert all(m[k] < 10 and m[k] != VEC for k in p.labels if k not in roots), m.short()


def test_as_written_of_the_matmul_is_its_rows_in_parallel():
    assert as_written(problem(plain_matmul())).short() == "A=G0 B=S"


def test_every_code_has_a_meaning():
    from mapper.encoding import CODES

    meanings = {code_meaning(c) for c in CODES}
    assert len(meanings) == len(CODES)
    assert "vector lanes" in code_meaning(VEC)


@pytest.mark.opencl
@pytest.mark.slow
def test_the_demo_runs_the_matmul_as_written_and_as_the_search_maps_it():
    r = run_plain_demo(sizes=SMALL, budget="12s")
    assert r.ok, (r.written, r.answer, r.counts)
    assert r.written.mapping == "A=G0 B=S" and r.written.time_s and r.written.runs >= 1
    # every size the as-written mapping adds is 1: no lanes, no register block
    assert set(r.written.tuning.values()) <= {1}
    assert r.answer is not None and r.answer.time_s and r.evaluated >= 1
    assert r.speedup == pytest.approx(r.written.time_s / r.answer.time_s)
    names = [c.name for c in r.choices]
    assert names[:2] == ["A", "B"] and set(names[2:]) == set(r.answer.tuning)
    assert all(c.meaning for c in r.choices)
    assert "__kernel" in r.source
    doc = r.to_json()
    json.dumps(doc)
    assert doc["as_written"]["status"] == "ok" and doc["valid_mappings"] == r.valid_mappings


@pytest.mark.opencl
@pytest.mark.slow
def test_mapper_demo_prints_both_kernels_and_the_choices(capsys, monkeypatch):
    monkeypatch.setattr(cli.console, "width", 200)
    rc, out, err = _cli(capsys, "demo", os.path.join(EX, "row_sums.lift"), "--sizes",
                        "H=256,W=256", "--budget", "8s", "--source")
    assert rc == 0, err
    for text in ("As written against the default search", "as written", "the search's answer",
                 "What the search chose", "as fast as the program as written", "__kernel"):
        assert text in out, text
    rc, out, err = _cli(capsys, "demo", "--sizes", "M=32,N=32,K=32", "--budget", "6s",
                        "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["command"] == "demo" and doc["as_written"]["mapping"] == "A=G0 B=S"
    assert doc["answer"]["status"] == "ok" and doc["choices"]


@pytest.mark.parametrize("argv, says", [
    (["demo", "no/such/file.lift", "--sizes", "N=4"], "no/such/file.lift"),
    (["demo", os.path.join(EX, "row_sums.lift")], "--sizes"),
    (["demo", "--budget", "soon"], "soon"),
    (["demo", "--store", " "], "--store"),
    (["demo", "--sizes", "M=0,N=4,K=4"], "M"),
])
def test_mapper_demo_says_what_is_wrong_without_a_traceback(capsys, argv, says):
    rc, out, err = _cli(capsys, *argv)
    assert rc == 2 and "error" in err and says in err and "Traceback" not in err
