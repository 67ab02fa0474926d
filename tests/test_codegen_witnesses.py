"""Solver, lowering checks and kernel behaviour agree: every valid mapping the solver gives
lowers, runs on the device and matches the interpreter (and runs clean under Oclgrind)."""

import pytest

from codegen.oclgrind import check_with_oclgrind, oclgrind_available
from codegen.runner import Runner
from ir.programs import cc22_listing1, cc22_listing3
from ir.randprog import random_program, sizes_for
from mapper.api import enumerate_mappings
from mapper.candidates import build_candidate
from mapper.witness import check_program, random_inputs

L3_SIZES = {"N": 64, "s0": 16, "s1": 4}


class _SharedBuildRunner(Runner):
    """A Runner that builds once the kernels whose code differs only in its comments (the
    mapping and sizes in the header, the map codes beside the loops): several mappings of
    a program often lower to the same code (63 valid mappings of Listing 3 with private
    memory, 46 codes), and PoCL's build is most of each mapping's time. Each mapping still
    runs its kernels on the device and is compared with the interpreter; the build is that
    of the first source seen with the same code (the Runner's cache by source hash)."""

    def __init__(self) -> None:
        super().__init__()
        self._first_source: dict[tuple[str, tuple[str, ...]], str] = {}

    def build(self, source: str, options: tuple[str, ...] = ("-cl-mad-enable",)):
        code = "\n".join(line.split("//")[0].rstrip() for line in source.splitlines())
        first = self._first_source.setdefault((code, tuple(options)), source)
        return super().build(first, options)


@pytest.fixture(scope="module")
def runner():
    return _SharedBuildRunner()


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
@pytest.mark.parametrize("variant", ["global", "local", "private"])
def test_listing3_every_valid_mapping_runs_correctly(runner, variant):
    p = cc22_listing3(local=variant == "local", private=variant == "private")
    rep = check_program(p, L3_SIZES, runner, fusion="free")
    assert len(rep.outcomes) >= 8
    assert rep.disagreements == [], rep.disagreements


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
