"""Solver, lowering checks and kernel behaviour agree: every valid mapping the solver gives
lowers, runs on the device and matches the interpreter (and runs clean under Oclgrind)."""

import pytest

from codegen.oclgrind import check_with_oclgrind, oclgrind_available
from codegen.runner import BuildError, Runner
from ir.programs import cc22_listing1, cc22_listing3
from ir.randprog import random_program, sizes_for
from mapper.api import enumerate_mappings
from mapper.candidates import build_candidate
from mapper.witness import check_program, random_inputs

L3_SIZES = {"N": 64, "s0": 16, "s1": 4}


@pytest.fixture(scope="module")
def runner():
    return Runner()


_CODE = """// mapping: {mapping}
__kernel void twice(__global float* a) {{ // {note}
  int i = get_global_id(0);
  a[i] = {expr};
}}
"""


@pytest.mark.opencl
def test_sources_that_differ_only_in_comments_share_one_build(runner):
    """Several mappings often lower to the same code, their sources differing only in the
    comments (the mapping in the header, the codes beside the loops): the Runner builds
    that code once (63 valid mappings of Listing 3 with private memory, 46 codes). A
    difference in the code is another build, and a build log's line numbers are those of
    the source given."""
    one = _CODE.format(mapping="A=G0", note="mapGlb(0) A", expr="2.0f * a[i]")
    other = _CODE.format(mapping="A=W0", note="mapWrg(0) A\n", expr="2.0f * a[i]")
    code = _CODE.format(mapping="A=G0", note="mapGlb(0) A", expr="a[i] + a[i]")
    prg, _, hit = runner.build(one)
    assert not hit
    assert runner.build(other)[0] is prg and runner.build(other)[2]
    assert runner.build(code)[0] is not prg
    assert runner.build(one, ("-cl-fast-relaxed-math",))[0] is not prg  # options count
    with pytest.raises(BuildError) as e:  # the error in line 4 of the source
        runner.build(_CODE.format(mapping="A=G0", note="x", expr="2.0f * nope"))
    assert ":4:" in e.value.log and "nope" in e.value.log


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
@pytest.mark.parametrize("variant", ["global", "local", "private"])
def test_listing3_every_valid_mapping_runs_correctly(runner, variant):
    """Each valid mapping runs on the device; those that lower to one code (63 valid
    mappings with private memory, 46 codes) share its build."""
    p = cc22_listing3(local=variant == "local", private=variant == "private")
    misses = runner.cache_misses
    rep = check_program(p, L3_SIZES, runner, fusion="free")
    assert len(rep.outcomes) >= 8
    assert rep.disagreements == [], rep.disagreements
    if variant == "private":
        assert runner.cache_misses - misses < len(rep.outcomes) == 63


@pytest.mark.slow
def test_listing1_every_valid_mapping_runs_correctly(runner):
    rep = check_program(cc22_listing1(), {"I": 4, "J": 8, "K": 8}, runner, fusion="free")
    assert len(rep.outcomes) > 30 and rep.disagreements == []


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(2))
def test_random_programs_valid_mappings_run_correctly(runner, chunk):
    n = 0
    for seed in range(chunk * 12, chunk * 12 + 12):
        p = random_program(seed, max_maps=6)
        rep = check_program(p, sizes_for(p), runner, limit=5, seed=seed)
        assert rep.disagreements == [], (seed, rep.disagreements)
        n += len(rep.outcomes)
    assert n >= 30


@pytest.mark.slow
@pytest.mark.oclgrind
@pytest.mark.skipif(not oclgrind_available(), reason="oclgrind is not installed")
def test_listing3_local_every_valid_mapping_is_race_free_under_oclgrind():
    p = cc22_listing3(local=True)
    inputs = random_inputs(p, L3_SIZES)
    n = 0
    for m in enumerate_mappings(p):
        report = check_with_oclgrind(build_candidate(p, m, L3_SIZES), inputs, timeout_s=120)
        assert report.clean, (str(m), report.issues, report.error)
        n += 1
    assert n == 28  # 13 without vector lanes (V)
