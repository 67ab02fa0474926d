"""Errors about a program name the file, line and column of what the user wrote, from
Python as from the command line: ir.source_map, the API's problems, mapper.space_report."""

from __future__ import annotations

import pytest

from ir.errors import ConstraintViolation, IRTypeError, Location
from ir.source_map import parse_mapped
from ir.syntax import parse
from ir.typecheck import typecheck
from mapper import problem
from mapper.space_report import SpaceBuildError, build_space_document, space_document

BAD_TYPE = "X : [float]N\n# a comment line\nmapA(_ + X) $ X\n"
BAD_SIZE = "X : [float]N\nmapA(mapB(id)) o split(4) $ X\n"


def test_location_format_with_and_without_a_file():
    loc = Location("p.lift", 3, 6, "mapA(_ + X) $ X")
    assert loc.format("bad") == "p.lift, line 3, column 6: bad\n  mapA(_ + X) $ X\n       ^"
    assert Location(None, 1, 1).format("bad") == "line 1, column 1: bad"


def test_source_map_locates_a_node_of_the_program_and_of_a_copy(tmp_path):
    path = tmp_path / "p.lift"
    path.write_text(BAD_TYPE)
    program, source = parse_mapped(path)
    with pytest.raises(IRTypeError) as info:
        typecheck(program)
    e = info.value
    assert e.location is None and "line" not in str(e).splitlines()[0]
    assert source.attach(e) and e.location == Location(str(path), 3, 6, "mapA(_ + X) $ X")
    assert str(e).startswith(f"{path}, line 3, column 6: ")
    assert not source.attach(e)  # the first location stays
    other = parse(BAD_TYPE)  # same shape, other nodes: found through the error's root
    with pytest.raises(IRTypeError) as info2:
        typecheck(other)
    assert info2.value.root is not None and source.attach(info2.value)
    assert info2.value.location.line == 3


@pytest.mark.parametrize("given", ["path", "text"])
def test_problem_type_errors_are_located(tmp_path, given):
    path = tmp_path / "bad.lift"
    path.write_text(BAD_TYPE)
    with pytest.raises(IRTypeError) as info:
        problem(str(path) if given == "path" else BAD_TYPE).count()
    first = str(info.value).splitlines()[0]
    where = f"{path}, line 3, column 6: " if given == "path" else "line 3, column 6: "
    assert first.startswith(where) and "expects float" in first
    assert str(info.value).endswith("  mapA(_ + X) $ X\n       ^")


def test_problem_of_a_node_keeps_the_plain_message():
    with pytest.raises(IRTypeError) as info:
        problem(parse(BAD_TYPE))
    assert info.value.location is None and "column" not in str(info.value)


def test_build_size_violations_are_located(tmp_path):
    path = tmp_path / "split.lift"
    path.write_text(BAD_SIZE)
    p = problem(str(path))
    with pytest.raises(ConstraintViolation) as info:
        p.build("A=G0 B=S", {"N": 10})
    assert str(info.value).startswith(f"{path}, line 2, column 18: split(4)")
    assert "N % 4 == 0" in str(info.value)
    assert p.build("A=G0 B=S", {"N": 12}).source  # a size that divides builds


def test_space_document_errors_are_typed_and_located(tmp_path):
    bad = tmp_path / "bad.lift"
    bad.write_text(BAD_TYPE)
    with pytest.raises(IRTypeError) as info:
        space_document(str(bad), {}, {}, None, None, None)
    assert str(info.value).startswith(f"{bad}, line 3, column 6: ")
    good = tmp_path / "good.lift"
    good.write_text(BAD_SIZE)
    with pytest.raises(SpaceBuildError) as nothing:
        space_document(str(good), {"N": 8}, {}, None, None, None)
    assert nothing.value.kind == "nothing" and "nothing to tune" in str(nothing.value)


def test_space_built_in_its_worker_reports_the_programs_error(tmp_path):
    bad = tmp_path / "bad.lift"
    bad.write_text(BAD_TYPE)
    with pytest.raises(SpaceBuildError) as info:
        build_space_document(str(bad), {"N": 8}, {}, None, None, None, timeout_s=120)
    assert info.value.kind == "error"
    assert str(info.value).startswith(f"{bad}, line 3, column 6: ")
