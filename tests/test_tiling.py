"""Fusion through tiling (``ir.tiling``, issue 26): the tiled program computes what the
pipeline does, for every memory of its intermediates; sampled mappings of it lower, run
and match the interpreter; what cannot be tiled is one typed error; the command line
offers it (``--tiling``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from pipeline_cases import cases

from ir.flops import count_flops
from ir.interp import evaluate
from ir.nodes import ToMem, walk
from ir.syntax import parse_file, print_program
from ir.tiling import MEMORIES, TilingError, fuse_through_tiling, tiling_variants

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("memory", MEMORIES)
@pytest.mark.parametrize("case", cases(h=16, w=16), ids=lambda c: c[0])
def test_the_tiled_pipeline_computes_what_the_pipeline_does(case, memory: str) -> None:
    name, inputs, sizes, ref = case
    prog = parse_file(EXAMPLES / f"{name}.lift")
    tiled = fuse_through_tiling(prog, memory=memory)
    # outputs 12 x 12 (14 x 14 for the separable blur): tiles of 5 and 3 or 4 do not
    # divide them (the image padded, the result cropped), 16 exceeds them
    for t in (1, 2, 4, 5, 16) if name != "blur_separable" else (1, 2, 3, 7, 16):
        got = np.asarray(evaluate(tiled, inputs, {**sizes, "t": t}))
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3 * max(1.0, abs(ref).max()))
    # the intermediates are written to that memory, the result is not
    spaces = Counter(n.space for n in walk(tiled) if isinstance(n, ToMem))
    stages = {"blur_separable": 1, "blur_laplacian": 1, "harris": 2, "conv2_layers": 1}
    assert spaces == (Counter() if memory == "global" else Counter({memory: stages[name]}))
    # it prints and parses back to the same program
    assert print_program(parse_file_text(print_program(tiled))) == print_program(tiled)


def parse_file_text(text: str):
    from ir.syntax import parse

    return parse(text)


def test_what_cannot_be_tiled_is_one_typed_error() -> None:
    listing3 = parse_file(EXAMPLES / "cc22_listing3.lift")
    with pytest.raises(TilingError, match="no two-dimensional input image"):
        fuse_through_tiling(listing3)
    blur = parse_file(EXAMPLES / "blur_laplacian.lift")
    with pytest.raises(TilingError, match="memory 'texture'"):
        fuse_through_tiling(blur, memory="texture")
    with pytest.raises(TilingError, match="no input image 'nope'"):
        fuse_through_tiling(blur, image="nope")
    with pytest.raises(TilingError, match="already a size"):
        fuse_through_tiling(blur, tile="H")
    # a result that does not follow the image's shape (row sums: [float]H)
    rows = parse_file(EXAMPLES / "rowcol_sums.lift")
    with pytest.raises(TilingError):
        fuse_through_tiling(rows)
    assert isinstance(TilingError("x"), ValueError)


def test_tiling_variants() -> None:
    blur = parse_file(EXAMPLES / "blur_laplacian.lift")
    assert list(tiling_variants(blur, "none")) == ["unfused"]
    assert list(tiling_variants(blur, "private")) == ["tiled-private"]
    assert list(tiling_variants(blur)) == ["unfused", "tiled-local", "tiled-private"]
    listing3 = parse_file(EXAMPLES / "cc22_listing3.lift")
    assert list(tiling_variants(listing3)) == ["unfused"]  # auto: nothing to tile
    with pytest.raises(TilingError):
        tiling_variants(listing3, "local")


@pytest.fixture(scope="module")
def runner():
    from codegen.runner import Runner

    return Runner()


@pytest.mark.opencl
@pytest.mark.parametrize("memory", ["local", "private"])
@pytest.mark.parametrize("name,sizes", [
    ("blur_laplacian", {"H": 14, "W": 16}), ("harris", {"H": 14, "W": 12}),
    ("conv2_layers", {"H": 8, "W": 10, "C": 2, "M": 3, "N": 2}),
])
@pytest.mark.slow
def test_sampled_mappings_of_the_tiled_pipeline_run_correctly(name, sizes, memory,
                                                                runner) -> None:
    """Tiles of 2, which divide the outputs (10 x 12, 10 x 8, 6 x 8), and of 4, which do
    not divide the 10 and 6 sides: the image is padded, the writes of the last tiles
    cropped; the rules and the lowering judge the rest."""
    from mapper.witness import check_program

    tiled = fuse_through_tiling(parse_file(EXAMPLES / f"{name}.lift"), memory=memory)
    for t in (2, 4):
        report = check_program(tiled, {**sizes, "t": t}, runner, limit=6, seed=3,
                               fusion="always")
        counts = Counter(o.status for _, o in report.outcomes)
        assert counts["ok"] >= 4 and set(counts) <= {"ok", "rejected"}, report.outcomes


def test_tiles_that_do_not_divide_write_through_a_guard() -> None:
    """One work-item per tile, the output 9 x 11 in tiles of 4: the last tiles' writes
    outside the output are guarded (no copy kernel), the input reads past its end give
    the padding, and the race check (an independent witness) sees distinct elements in
    the guarded writes; where the tiles divide, no guard at all."""
    from mapper.api import problem
    from mapper.candidates import build_candidate

    tiled = fuse_through_tiling(parse_file(EXAMPLES / "blur_laplacian.lift"),
                                memory="private")
    mapping = problem(tiled, fusion="always").mapping("TY=G1 TX=G0 A=S B=S C=S D=S")
    cp = build_candidate(tiled, mapping, {"H": 13, "W": 15, "t": 4}, fusion="always")
    (kernel,) = cp.kernels
    writes = [line.strip() for line in kernel.source.splitlines() if "out[" in line]
    assert any(w.startswith("if (") for w in writes), writes  # the last tiles' writes
    cp = build_candidate(tiled, mapping, {"H": 12, "W": 16, "t": 4}, fusion="always")
    (kernel,) = cp.kernels
    assert "if (" not in kernel.source and "?" not in kernel.source


def test_a_tile_side_ranges_over_divisors_and_powers_of_two(capsys) -> None:
    """``t`` of a tiling: the divisors of the output's sides and the powers of two up to
    them (a tile need not divide the output), not every number up to twice the size."""
    from mapper.cli import main

    assert main(["space", str(EXAMPLES / "blur_laplacian.lift"), "--tiling", "private",
                 "--sizes", "H=28,W=31", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (t,) = [p for p in doc["parameters"] if p["name"] == "t"]
    # outputs 24 and 27
    assert t["domain"] == [1, 2, 3, 4, 6, 8, 9, 12, 16, 24, 27], t
    # the recomputed work, per tile side: more for small tiles, ragged ones compute padding
    work = {int(k): v for k, v in doc["recomputed_work"].items()}
    assert sorted(work) == t["domain"] and all(v >= 1.0 for v in work.values())
    assert work[1] > work[2] > work[4] > work[8]  # the halo recomputed less per pixel
    assert work[24] > work[27]  # 24 leaves the 27 columns ragged: padding computed
    unfused = count_flops(parse_file(EXAMPLES / "blur_laplacian.lift"), {"H": 28, "W": 31})
    tiled = fuse_through_tiling(parse_file(EXAMPLES / "blur_laplacian.lift"),
                                memory="private")
    assert work[16] == pytest.approx(
        count_flops(tiled, {"H": 28, "W": 31, "t": 16}) / unfused, rel=1e-3)


@pytest.mark.slow
@pytest.mark.oclgrind
def test_a_tiled_pipeline_with_local_intermediates_is_race_free() -> None:
    """The tile's blurred image written to local memory by the work-items of a work-group
    and read by them after a barrier: Oclgrind sees no race, no read or write out of
    bounds (tiles that do not divide the output) and the result is right."""
    from codegen.oclgrind import check_with_oclgrind, oclgrind_available
    from mapper.api import problem
    from mapper.candidates import build_candidate
    from mapper.witness import random_inputs

    if not oclgrind_available():
        pytest.fail("oclgrind is not installed: setup.sh installs it")
    tiled = fuse_through_tiling(parse_file(EXAMPLES / "blur_laplacian.lift"), memory="local")
    p = problem(tiled, fusion="always")
    labels = p.labels
    # tiles over work-groups, the stages' pixels over the work-items of each
    codes = {"TY": "W1", "TX": "W0", "A": "L1", "B": "L0", "C": "L1", "D": "L0"}
    assert set(codes) <= set(labels), labels
    mapping = p.mapping(" ".join(f"{k}={v}" for k, v in codes.items()))
    sizes = {"H": 13, "W": 15, "t": 4}  # a 9 x 11 output: the last tiles are cropped
    cp = build_candidate(tiled, mapping, sizes, fusion="always")
    assert any("barrier" in k.source for k in cp.kernels)
    inputs = random_inputs(tiled, sizes, 0)
    ref = evaluate(tiled, inputs, sizes)
    report = check_with_oclgrind(cp, inputs, timeout_s=300)
    assert report.clean, (report.error, report.issues[:3])
    assert report.output is not None
    np.testing.assert_allclose(report.output.reshape(np.shape(ref)), ref, rtol=1e-4,
                               atol=1e-4)


def test_the_command_line_tiles(capsys) -> None:
    from mapper.cli import main

    path = str(EXAMPLES / "blur_laplacian.lift")
    assert main(["enumerate", path, "--tiling", "local", "--count", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["count"] > 0
    assert main(["show", path, "--tiling", "private"]) == 0
    assert "toPrivate" in capsys.readouterr().out
    listing3 = str(EXAMPLES / "cc22_listing3.lift")
    assert main(["enumerate", listing3, "--tiling", "local"]) == 2
    assert "no two-dimensional input image" in capsys.readouterr().err


@pytest.mark.opencl
def test_explore_a_tiling_from_the_command_line(tmp_path, capsys) -> None:
    """``explore --tiling local``: the tiled program explored, ``t`` among its tuning
    values, its store named after the variant, GFLOP/s of the unfused work."""
    from mapper.cli import main

    store = tmp_path / "b.sqlite"
    assert main(["explore", str(EXAMPLES / "blur_laplacian.lift"), "--sizes", "H=20,W=20",
                 "--tiling", "local", "--budget", "3", "--strategy", "solver",
                 "--store", str(store), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["store"] == str(tmp_path / "b.tiled-local.sqlite") and not store.exists()
    assert doc["context"]["program"].endswith(":tiled-local")
    best = doc["best"]
    assert best is not None and "t" in best["tuning"], best
    assert main(["explore", "conv", "--tiling", "local", "--budget", "3"]) == 2
    assert "--tiling goes with a .lift" in capsys.readouterr().err


def test_tiling_auto_shows_every_variant(capsys) -> None:
    """``--tiling auto`` on enumerate/space/show/constraints: the unfused program and its
    local and private tilings, one after the other (one JSON document with ``--json``);
    a program that does not tile has its one variant; a mapping goes with one variant."""
    from mapper.cli import main

    path = str(EXAMPLES / "blur_laplacian.lift")
    assert main(["enumerate", path, "--tiling", "auto", "--count", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["variants"]) == ["unfused", "tiled-local", "tiled-private"]
    counts = {k: d["count"] for k, d in doc["variants"].items()}
    assert all(c > 0 for c in counts.values()) and counts["unfused"] != counts["tiled-local"]
    assert main(["space", path, "--tiling", "auto", "--sizes", "H=20,W=20"]) == 0
    out = capsys.readouterr().out
    assert "unfused (--tiling none)" in out and "tiled-private (--tiling private)" in out
    assert "a tile side over 16" in out  # t, in the tilings' spaces only
    # the unfused program has nothing to tune at these sizes: said in its place
    assert "refused for this variant: every size" in out
    assert main(["space", path, "--tiling", "auto", "--sizes", "H=20,W=20", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "nothing to tune" in doc["variants"]["unfused"]["error"]
    assert doc["variants"]["tiled-local"]["count"] > 0
    listing3 = str(EXAMPLES / "cc22_listing3.lift")
    assert main(["enumerate", listing3, "--tiling", "auto", "--count", "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)["variants"]) == ["unfused"]
    assert main(["space", path, "--tiling", "auto", "--sizes", "H=20,W=20",
                 "--mapping", "TY=G1 TX=G0"]) == 2
    assert "not auto" in capsys.readouterr().err


@pytest.mark.opencl
@pytest.mark.slow
def test_explore_tiles_a_stencil_pipeline_by_default(tmp_path, capsys) -> None:
    """``mapper explore`` of a stencil pipeline with no --tiling: the unfused program and
    its tilings are probed, each in its own store; a program that does not tile is
    explored as it is, in one store."""
    from mapper.cli import main
    from mapper.explore.variants import PROBE

    store = tmp_path / "b.sqlite"
    # the smallest budget that probes all three variants (a smaller one explores the
    # first only): the probes, then the fastest explored, as with any larger budget
    budget = 2 * PROBE * 3
    assert main(["explore", str(EXAMPLES / "blur_laplacian.lift"), "--sizes", "H=20,W=20",
                 "--budget", str(budget), "--strategy", "solver", "--store", str(store),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    probed = {v["name"] for v in doc["variants"] if v["probe_candidates"]}
    assert probed == {"unfused", "tiled-local", "tiled-private"}, doc["variants"]
    assert store.exists() and (tmp_path / "b.tiled-private.sqlite").exists()
    other = tmp_path / "m.sqlite"
    assert main(["explore", str(EXAMPLES / "cc22_listing3.lift"), "--sizes", "N=64",
                 "--budget", "3", "--strategy", "solver", "--store", str(other),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not doc.get("variants") and doc["best"] is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "b.sqlite", "b.tiled-local.sqlite", "b.tiled-private.sqlite", "m.sqlite"]


@pytest.mark.parametrize("memory", ["local", "private"])
@pytest.mark.parametrize("case", cases(h=15, w=13), ids=lambda c: c[0])
def test_stages_left_unfused_compute_what_the_pipeline_does(case, memory: str) -> None:
    """The fusion choice per edge: each set of stages left unfused (computed whole before
    the tiles, their images tiled beside the input with their own halos) computes the
    pipeline's result, at tiles that divide the output and that do not; those stages
    carry no memory annotation, the fused ones do."""
    import itertools

    from ir.nodes import Map, maps_in

    name, inputs, sizes, ref = case
    prog = parse_file(EXAMPLES / f"{name}.lift")
    labels = {"blur_separable": "A", "blur_laplacian": "A", "harris": "AC",
              "conv2_layers": "A"}[name]
    for k in range(1, len(labels) + 1):
        for cut in itertools.combinations(labels, k):
            tiled = fuse_through_tiling(prog, memory=memory, unfused=cut)
            for t in (2, 3):
                got = np.asarray(evaluate(tiled, inputs, {**sizes, "t": t}))
                assert got.shape == ref.shape
                np.testing.assert_allclose(got, ref, rtol=1e-4,
                                           atol=1e-3 * max(1.0, abs(ref).max()))
            annotated = {n.f.label for n in walk(tiled)
                         if isinstance(n, ToMem) and isinstance(n.f, Map)}
            assert not annotated & set(cut)
            assert {m.label for m in maps_in(tiled)} >= set(cut)
            assert print_program(parse_file_text(print_program(tiled))) == \
                print_program(tiled)


def test_stages_left_unfused_errors_and_names(capsys) -> None:
    from mapper.cli import main

    harris = parse_file(EXAMPLES / "harris.lift")
    with pytest.raises(TilingError, match="no stage Z .* the program's are A, C"):
        fuse_through_tiling(harris, unfused=("Z",))
    with pytest.raises(TilingError, match="no stage E"):  # the last stage is no producer
        fuse_through_tiling(harris, unfused=("E",))
    assert list(tiling_variants(harris, "private", unfused=("C", "A"))) == [
        "tiled-private-A-C-unfused"]
    with pytest.raises(TilingError, match="go with one tiling"):
        tiling_variants(harris, "auto", unfused=("A",))
    path = str(EXAMPLES / "harris.lift")
    assert main(["enumerate", path, "--unfused", "A", "--count"]) == 2
    assert "give it with --tiling" in capsys.readouterr().err
    assert main(["enumerate", path, "--tiling", "private", "--unfused", "A;", "--count"]) == 2
    assert "map labels separated by commas" in capsys.readouterr().err
    assert main(["enumerate", path, "--tiling", "private", "--unfused", "A", "--count",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] > 0


@pytest.mark.opencl
@pytest.mark.slow
def test_sampled_mappings_with_a_stage_left_unfused_run_correctly(runner) -> None:
    """Harris with its x gradient computed before the tiles (a kernel of its own) and its
    y gradient fused into them, in tiles that do not divide the output (10 x 8, t = 4)."""
    from mapper.witness import check_program

    tiled = fuse_through_tiling(parse_file(EXAMPLES / "harris.lift"), memory="private",
                                unfused=("A",))
    report = check_program(tiled, {"H": 14, "W": 12, "t": 4}, runner, limit=6, seed=5,
                           fusion="always")
    counts = Counter(o.status for _, o in report.outcomes)
    assert counts["ok"] >= 4 and set(counts) <= {"ok", "rejected"}, report.outcomes
