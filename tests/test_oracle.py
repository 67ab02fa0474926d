"""The oracle (mapper/oracle.py, run by experiments/oracle.py) samples near the valid set,
and the random program generator reaches the shapes issue 24 found; on a handful of those
programs the validity rules admit exactly the mappings that lower and run correctly."""

from __future__ import annotations

import itertools

import pytest

from ir.nodes import Slide, walk
from ir.randprog import random_program
from mapper.api import problem
from mapper.oracle import candidates, domains, meets, oracle_program, random_points, stats
from mapper.rules import _layout, flat_chain, unit

FAST_SEEDS = (1, 2, 6, 10)  # a map of one iteration, a flat nest, a stencil over local tiles


def _key(p, m: dict) -> tuple:
    return tuple(m[x] for x in p.labels)


def _distance(a: tuple, b: tuple) -> int:
    return sum(x != y for x, y in zip(a, b))


def test_candidates_lie_near_the_valid_set():
    prog = random_program(6, max_maps=4, wide=True)
    p = problem(prog, fusion="free", heuristics=False)
    chosen = candidates(p, full=0, admitted=20, near1=30, near2=20, samples=5, seed=3)
    doms = domains(p)
    keys = [_key(p, m) for m, _ in chosen]
    assert len(set(keys)) == len(keys)  # no mapping twice
    assert all(m[x] in doms[x] for m, _ in chosen for x in p.labels)
    valid = {_key(p, m) for m in (dict(zip(p.labels, v)) for v in
                                  itertools.product(*(doms[x] for x in p.labels)))
             if not p.model.violated(m)}
    by = {o: [_key(p, m) for m, oo in chosen if oo == o] for o in
          ("admitted", "near1", "near2", "uniform")}
    assert len(by["admitted"]) == 20 and set(by["admitted"]) <= valid
    assert len(by["near1"]) == 30 and len(by["near2"]) == 20 and len(by["uniform"]) == 5
    for k in by["near1"]:
        assert k not in valid and min(_distance(k, v) for v in valid) == 1
    for k in by["near2"]:
        assert k not in valid and min(_distance(k, v) for v in valid) == 2


def test_candidates_are_every_assignment_below_full():
    p = problem(random_program(3, max_maps=4, wide=True), fusion="free", heuristics=False)
    total = 1
    for d in domains(p).values():
        total *= len(d)
    chosen = candidates(p, full=total, admitted=1, near1=1, near2=1, samples=1, seed=0)
    assert len(chosen) == total and {o for _, o in chosen} == {"all"}


def test_wide_generator_reaches_issue_24s_shapes():
    seen = set()
    for seed in range(40):
        prog = random_program(seed, max_maps=4, wide=True)
        t = problem(prog).tree
        if any(isinstance(n, Slide) for n in walk(prog)):
            seen.add("stencil over a local tile")
        if any(unit(t, m) for m in t.maps):
            seen.add("map of one iteration")
        for m in t.maps:
            kids = t.maps[m].children
            depths = {len(t.nested(k)) for k in kids}
            if len(depths) > 1 and any(t.maps[k].writes == "local" for k in kids):
                seen.add("sibling chains of different depths exchanging local memory")
            if len(flat_chain(t, m)) > 1 and len(t.perfect_chain(m)) == 0:
                seen.add("a nest writing through join/split")
        random_points(prog)  # sizes exist
    assert seen == {"stencil over a local tile", "map of one iteration",
                    "sibling chains of different depths exchanging local memory",
                    "a nest writing through join/split"}


def test_tiles_generator_reaches_2d_local_tiles_read_transposed():
    """``tiles=True``: a tile map whose sibling chains (two maps each) write local memory
    row by row and read it column by column."""
    found = 0
    for seed in range(30):
        prog = random_program(seed, max_maps=6, tiles=True)
        t = problem(prog).tree
        for m in t.maps:
            kids = t.maps[m].children
            writers = [k for k in kids if t.maps[k].writes == "local" or any(
                t.maps[x].writes == "local" for x in t.nested(k))]
            if (len(kids) == 2 and all(len(t.nested(k)) == 1 for k in kids) and writers
                    and any(op == ("transpose",) for v in [_layout(t).read.get(
                        (writers[0], k)) for k in kids] if v for op in v)):
                found += 1
        random_points(prog)  # sizes exist
    assert found >= 5


@pytest.fixture(scope="module")
def pool():
    """One worker pool for the oracle's tests in this process: starting one (two workers
    that open the device) takes seconds, and the programs' verdicts do not depend on it."""
    from codegen.worker import WorkerPool

    with WorkerPool(workers=2) as p:
        yield p


def _oracle(pool, seeds, **kw) -> list[dict]:
    out = []
    for seed in seeds:
        prog = random_program(seed, max_maps=4, wide=True)
        rows = oracle_program(pool, prog, random_points(prog), seed=seed, **kw)
        out.append(stats(rows))
    return out


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
@pytest.mark.opencl
def test_oracle_agrees_with_the_rules_on_new_shapes(pool):
    """A few mappings the rules admit, and a few one or two codes away that they reject,
    per program: every admitted one runs correctly, every correct one is admitted."""
    for seed, s in zip(FAST_SEEDS, _oracle(pool, FAST_SEEDS, full=0, admitted=6, near1=8,
                                           near2=4, samples=0)):
        assert s["admitted"] > 0 and s["oracle_ok"] > 0, seed
        assert s["admitted_bad"] == 0 and s["ok_admitted"] == s["oracle_ok"], (seed, s)


@pytest.mark.opencl
@pytest.mark.slow
@pytest.mark.parametrize("seeds", [(15, 16, 18, 21), (22, 25, 27, 30)])  # in parallel
def test_oracle_agrees_with_the_rules_on_more_programs(pool, seeds):
    for seed, s in zip(seeds, _oracle(pool, seeds, full=0, admitted=15, near1=20, near2=10,
                                      samples=4)):
        assert meets(s, recall=1.0), (seed, s)


def test_resource_limits_at_a_size_point_are_not_judged():
    """A mapping the lowering refuses for a resource budget at one size point (a property
    of the sizes, not of the codes) counts neither for nor against the rules."""
    from mapper.oracle import Row, over_budget

    budget = "rejected:private-memory@2: kernel kernel_0: a work-group of 192 work-items"
    assert over_budget(budget) and not over_budget("rejected:data-race@1: ...")
    rows = [Row({"A": 10}, False, budget, True, True, "admitted"),
            Row({"A": 30}, True, "ok", True, True, "admitted"),
            Row({"A": 0}, False, "rejected:data-race@1: x", False, False, "near1")]
    s = stats(rows)
    assert (s["evaluated"], s["admitted"], s["admitted_bad"], s["over_budget"]) == (2, 1, 0, 1)
    assert meets(s)
