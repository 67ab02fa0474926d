"""The early cut compares like with like (issue 48): the kernel time of a candidate's
first execution against the best candidate's kernel time, never the upload, PoCL's
compilation at a kernel's first launch or the comparison with the reference; a candidate
faster than the best is never stored as a failure, a slow one still is cut."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mapper import problem
from mapper.explore import explore
from mapper.explore.options import ExploreOptions
from mapper.explore.strategies import STRATEGIES, Candidate, Strategy
from mapper.explore.task import Task

# the sequential mapping (A=S B=F) runs N * N multiply-adds in one work-item: 30-50 ms
# at N=8192; A=G0 B=V runs them in N/s work-items of s lanes: 2 ms (s=16), 4 ms (s=8)
SLOW_SEQ = r"""
X : [float]N
join o mapA(mapB(\x -> reduce(\acc y -> add(acc, mult(x, y)))(0.0f, X))) o split(s) $ X
"""
CHEAP = r"""
X : [float]N
mapA(\x -> add(x, 1.0f)) $ X
"""

pytestmark = pytest.mark.opencl


@pytest.fixture(scope="module")
def pool():
    from codegen.worker import WorkerPool

    with WorkerPool() as p:
        yield p


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_the_cut_counts_kernel_time_not_the_data_phases(pool):
    """A cheap kernel over 32 MiB: uploading, filling, reading back and comparing take far
    longer than the limit, its kernel far less; it is not cut (before: 'runs stopped')."""
    task = Task.from_program(CHEAP, {"N": 1 << 23})
    fn = task.lower_fn(problem(CHEAP).mapping("A=G0"), {})
    o = pool.evaluate_candidate(fn, task.inputs, task.reference, timeout_s=60.0,
                                repeats=1, run_limit_s=0.05, **task.tolerance)
    assert o.status == "ok", o.reason
    assert o.time_s is not None and o.time_s < 0.05


class _Ordered(Strategy):
    """The candidates of ``ORDER``, in that order (a test's fixed sequence)."""

    name = "ordered-for-test"
    ORDER: list[tuple[str, dict[str, int]]] = []

    def candidates(self) -> Iterator[Candidate]:
        p = self.joint.problem
        for mapping, tuning in self.ORDER:
            yield Candidate(p.mapping(mapping), dict(tuning))


def test_a_faster_candidate_is_never_cut_and_a_slower_one_is(monkeypatch, pool):
    """The sequential mapping first (the best so far, slow), then a parallel one 15x
    faster: ok; then the sequential one again (another tile): cut, its reason in kernel
    time; then a parallel one within the cut of the new best: ok."""
    monkeypatch.setitem(STRATEGIES, _Ordered.name, _Ordered)
    monkeypatch.setattr(_Ordered, "ORDER", [("A=S B=F", {"s": 128}), ("A=G0 B=V", {"s": 16}),
                                            ("A=S B=F", {"s": 64}), ("A=G0 B=V", {"s": 8})])
    res = explore(SLOW_SEQ, {"N": 8192}, strategy=_Ordered.name, budget=4, pool=pool,
                  options=ExploreOptions.of(cut=3.0, cut_min_s=0.015, retime=0))
    got = [(r.status, r.check) for r in res.records]
    assert got == [("ok", None), ("ok", None), ("timeout", "early-cut"), ("ok", None)], \
        [r.reason for r in res.records]
    slow, fast = res.records[0], res.records[1]
    assert fast.time_s is not None and slow.time_s is not None
    assert fast.time_s < slow.time_s
    assert "kernel time" in res.records[2].reason
    assert f"{fast.time_s:.3g} s" in res.records[2].reason
