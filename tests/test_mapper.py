"""Mapping constraints: the papers' examples, bad input, and three independent witnesses."""

import itertools

import numpy as np
import pytest
from witness import brute_force_solutions, product_size, z3_counterexample

from experiments.vgg16 import PAPER_HAND_MAPPING
from ir.interp import evaluate
from ir.programs import (
    cc22_listing1,
    cc22_listing3,
    conv_final_stage,
    conv_partial_stage,
    gpgpu20_conv_highlevel,
)
from ir.randprog import random_program, sizes_for
from mapper import (
    ContradictoryFixedError,
    InvalidMappingError,
    MapCodes,
    MappingError,
    NoMapsError,
    check_mapping,
    count_mappings,
    enumerate_mappings,
    explain,
    lower_mapping,
    problem,
)
from mapper.apply import default_widths
from mapper.encoding import code_name, parse_code

# CC'22 Table 1 (V = vectorised sequential loop, a mapSeq here; see test_vectorisation)
TABLE1 = {
    "M1": "A=G0 B=S C=S D=S E=S",
    "M2": "A=G1 B=G0 C=S D=G0 E=S",
    "M3": "A=S B=W0 C=L0 D=W0 E=L0",
    "M4": "A=W0 B=L0 C=S D=L0 E=S",
    "M5": "A=W0 B=L0 C=S D=L0 E=S",
    "M6": "A=W0 B=L0 C=S D=S E=L0",
}


def rules_of(violations):
    return {c.rule for c in violations}


def test_table1_classification():
    p = cc22_listing1()
    # rule 8 would force fusing perfectly nested sequential pairs: Table 1 predates it
    for name in ("M1", "M4", "M5", "M6"):
        assert check_mapping(p, TABLE1[name], fusion="free") == [], name
    m2 = rules_of(check_mapping(p, TABLE1["M2"], fusion="free"))
    assert "cross-thread-dependency" in m2  # cannot synchronise across global threads
    m3 = rules_of(check_mapping(p, TABLE1["M3"], fusion="free"))
    assert "local-memory" in m3  # out-of-scope reads of local memory


def test_listing1_tree_and_memory():
    pr = problem(cc22_listing1())
    assert set(pr.tree.chains()) == {("A", "B", "C"), ("A", "D", "E")}
    assert pr.tree.maps["C"].writes == "local" and pr.tree.maps["E"].reads == {"local"}
    assert pr.tree.perfectly_nested_in("C", "B")
    assert pr.tree.maps["D"].depends_on == {"B"}
    assert "mapA" in pr.tree.render()


# CC'22 Listing 3, fusion 'always', heuristics on: the 13 of the paper's rules (work-group
# and local mappings, A=mapGlb with the rest sequential) and the 9 the exact rules add
# (B=C=mapGlb(d) with D fused: each work-item reads the element of tmpC it wrote)
LISTING3_VALID = {
    "A=0 B=0 C=0 D=1", "A=20 B=10 C=10 D=0", "A=20 B=10 C=10 D=1", "A=20 B=10 C=0 D=10",
    "A=21 B=11 C=11 D=1", "A=21 B=11 C=11 D=0", "A=21 B=11 C=0 D=11", "A=22 B=12 C=12 D=1",
    "A=22 B=12 C=12 D=0", "A=22 B=12 C=0 D=12", "A=30 B=0 C=0 D=1", "A=31 B=0 C=0 D=1",
    "A=32 B=0 C=0 D=1",
    "A=0 B=30 C=30 D=1", "A=0 B=31 C=31 D=1", "A=0 B=32 C=32 D=1", "A=30 B=31 C=31 D=1",
    "A=30 B=32 C=32 D=1", "A=31 B=30 C=30 D=1", "A=31 B=32 C=32 D=1", "A=32 B=31 C=31 D=1",
    "A=32 B=30 C=30 D=1",
}


def _scalar(m: MapCodes) -> MapCodes:
    """``m`` with every map in vector lanes (V) sequential instead."""
    return MapCodes({k: 0 if v == 2 else v for k, v in m.items()})


def test_listing3_full_set():
    ms = list(enumerate_mappings(cc22_listing3()))
    assert len(ms) == len(set(ms)) == count_mappings(cc22_listing3()) == 37
    scalar = {m for m in ms if 2 not in m.values()}
    assert {m.numeric() for m in scalar} == LISTING3_VALID  # CC'22's mapping stage
    # V is S run in lanes: each vectorised mapping is valid with its V maps S (by the
    # validity rules: the heuristic that prefers fusing a sequential map to running it
    # alone does not apply to lanes), and only B and D (innermost, contiguous) are ever V
    for m in set(ms) - scalar:
        assert check_mapping(cc22_listing3(), _scalar(m), heuristics=False) == [], m
        assert {k for k, v in m.items() if v == 2} <= {"B", "D"}
    legal = MapCodes.parse("A=W0 B=L0 C=L0 D=S")
    assert legal in ms
    local = cc22_listing3(local=True)
    assert legal in set(enumerate_mappings(local))
    bad = check_mapping(local, "A=G1 B=G0 C=G0 D=S")
    assert "local-memory" in rules_of(bad)


def test_listing3_hole_is_closed():
    """Rules (1)-(8) alone accept this; the cross-thread rule rejects it."""
    bad = check_mapping(cc22_listing3(), "A=G1 B=G0 C=G0 D=S")
    assert rules_of(bad) == {"cross-thread-dependency"}


def test_private_memory_rule():
    p = cc22_listing3(private=True)
    pr = problem(p)
    assert pr.tree.maps["D"].uses_private and pr.tree.maps["B"].uses_private
    # D and C produce/consume the private value inside the thread that owns it: D is fused,
    # C sequential or in B's thread (the same code as B); B and A distribute threads
    every = set(enumerate_mappings(p))
    got = {m.numeric() for m in every if 2 not in m.values()}
    assert all(check_mapping(p, _scalar(m), heuristics=False) == [] for m in every)
    glb = ("30", "31", "32")
    expect = {f"A={a} B={b} C={c} D=1"
              for a in ("0", *glb) for b in ("0", *glb) if a == "0" or b != a
              for c in ({"0", b} if b != "0" else {"0"})}
    expect |= {"A=20 B=10 C=10 D=1", "A=21 B=11 C=11 D=1", "A=22 B=12 C=12 D=1"}
    assert got == expect and len(got) == 25


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
def test_backends_agree_on_papers_examples():
    """cp, z3, the vectorised witness and (where its Python loop is cheap: not listing 1's
    11^5 points) the library's own brute-force backend give the same mappings."""
    for p, loop in ((cc22_listing1(), False), (cc22_listing3(), True),
                    (cc22_listing3(local=True), True)):
        for fusion in ("always", "never", "free"):
            a = set(enumerate_mappings(p, fusion=fusion))
            b = set(enumerate_mappings(p, backend="z3", fusion=fusion))
            witness = brute_force_solutions(problem(p, fusion=fusion).model)
            assert a == b and {frozenset(m.items()) for m in a} == witness
            if loop:
                assert set(enumerate_mappings(p, backend="brute", fusion=fusion)) == a


def test_fusion_strategies():
    p = cc22_listing3()
    never = set(enumerate_mappings(p, fusion="never"))
    free = set(enumerate_mappings(p, fusion="free"))
    always = set(enumerate_mappings(p, fusion="always"))
    assert all(1 not in m.values() for m in never)
    assert always <= free and never <= free
    assert not any(m["C"] == 0 and m["D"] == 0 for m in always)


def test_random_order_and_limit():
    p = cc22_listing3()
    a = list(enumerate_mappings(p, order="random", seed=1))
    b = list(enumerate_mappings(p, order="random", seed=1))
    c = list(enumerate_mappings(p, order="random", seed=2))
    assert a == b and set(a) == set(c) and a != c
    assert len(list(enumerate_mappings(p, limit=3))) == 3


def test_fixed_and_explain():
    p = cc22_listing3()
    fixed = list(enumerate_mappings(p, fixed="A=W0"))
    assert fixed and all(m["A"] == 20 for m in fixed)
    e = explain(p, "A=W0 C=G0")
    assert not e.possible and 1 <= len(e.core) <= 3
    assert "impossible" in str(e)
    # the core is unsatisfiable with the pins and minimal: dropping any instance frees it
    from constraints import z3_backend
    from constraints.model import Model

    pr = problem(p)
    params = [pr.model.param(m) for m in pr.labels]
    pins = {"A": 20, "C": 30}
    assert not z3_backend.is_satisfiable(Model(params, list(e.core)), fixed=pins)
    for i in range(len(e.core)):
        rest = [c for j, c in enumerate(e.core) if j != i]
        assert z3_backend.is_satisfiable(Model(params, rest), fixed=pins)
    ok = explain(p, "A=W0")
    assert ok.possible and ok.example["A"] == 20
    with pytest.raises(ContradictoryFixedError, match="no valid mapping has"):
        list(enumerate_mappings(p, fixed="A=W0 B=G0"))


def test_bad_input():
    from ir.builders import join, param, split
    from ir.nodes import Lambda
    from ir.types import Float, array

    X = param("X", array(Float, "N"))
    with pytest.raises(NoMapsError, match="no map that computes"):
        problem(Lambda((X,), join()(split(4)(X))))
    with pytest.raises(MappingError, match="unknown map"):
        check_mapping(cc22_listing3(), "A=20 Z=10 B=0 C=0 D=1")
    with pytest.raises(MappingError, match="not a map code"):
        MapCodes.parse("A=13")
    with pytest.raises(MappingError, match="cannot read"):
        parse_code("mapFoo(0)")
    with pytest.raises(MappingError, match="cannot be fused"):
        check_mapping(cc22_listing3(), "A=1 B=0 C=0 D=0")
    with pytest.raises(MappingError, match="no code for map"):
        check_mapping(cc22_listing3(), "A=20")
    with pytest.raises(InvalidMappingError, match="not valid"):
        lower_mapping(cc22_listing3(), "A=G1 B=G0 C=G0 D=S")
    assert code_name(21) == "mapWrg(1)"


def test_apply_mapping_and_fusion_semantics():
    p = cc22_listing3()
    rng = np.random.default_rng(0)
    X = rng.standard_normal(64).astype(np.float32)
    sizes = {"s0": 16, "s1": 4}
    for m in enumerate_mappings(p, fusion="free"):
        low = lower_mapping(p, m, fusion="free")
        got = evaluate(low, {"X": X, "y": 2.0, "z": 1.0}, sizes)
        np.testing.assert_allclose(got, X * 2 + 1, rtol=1e-6)
    low = lower_mapping(p, "A=W0 B=L0 C=L0 D=F")
    from ir.nodes import Map, walk

    kinds = {(n.label, n.kind, n.dim) for n in walk(low) if isinstance(n, Map) and n.label}
    assert ("C", "mapLcl", 0) in kinds and not any(k[0] == "D" for k in kinds)


def test_gpgpu20_conv_hand_mapping_is_valid():
    p = conv_partial_stage()
    pr = problem(p)
    hand = {lab: 0 for lab in pr.labels}
    hand.update({k: parse_code(v) for k, v in PAPER_HAND_MAPPING.items()})
    # perfectly nested sequential pairs are fused under fusion="always"
    assert check_mapping(p, hand, fusion="free") == []
    assert MapCodes(hand) in set(enumerate_mappings(p, fusion="free", fixed=PAPER_HAND_MAPPING))
    assert count_mappings(p) > 0
    assert {"private-memory", "duplicate-scheduling"} <= set(pr.per_rule())
    for m in ("R1", "R2", "I1", "I2", "P", "S1", "S2"):
        assert pr.tree.maps[m].uses_private, m


def test_conv_highlevel_and_final_have_mappings():
    assert count_mappings(gpgpu20_conv_highlevel()) > 0
    assert count_mappings(conv_final_stage()) > 0


# Z3 lists the sets of at most this many mappings (22-26 of each chunk's 40 programs, 1 to 7
# maps) and proves the equality on the others (listing costs 2-5 times the proof).
Z3_LISTED_UP_TO = 100


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(5))
def test_three_witnesses_on_random_programs(chunk):
    """cp, z3 and a brute force over all 11^n-12^n code assignments give the same sets
    (40 random programs of up to 7 maps per chunk, 200 in all).

    Z3 lists its set through `enumerate_mappings` where the set is small; on the others it
    proves that its set is the brute force's with one solver call (`z3_counterexample`).
    Listing every set took 90% of the time (15 s for a program's 14625 mappings, one Z3
    call per mapping and map) to check the same equality."""
    listed = proved = 0
    for seed in range(chunk * 40, chunk * 40 + 40):
        p = random_program(seed, max_maps=7)
        pr = problem(p)
        assert product_size(pr.model) <= 12**7
        cp = {frozenset(m.items()) for m in enumerate_mappings(p)}
        brute = brute_force_solutions(pr.model)
        assert cp == brute, (seed, str(pr.tree.render()))
        if len(brute) <= Z3_LISTED_UP_TO:
            z3s = {frozenset(m.items()) for m in enumerate_mappings(p, backend="z3")}
            assert z3s == brute, (seed, str(pr.tree.render()))
            listed += 1
        else:
            bad = z3_counterexample(pr.model, brute)
            assert bad is None, (seed, bad, str(pr.tree.render()))
            proved += 1
    assert listed >= 20 and proved >= 10  # each chunk takes both ways


def test_the_z3_proof_finds_a_missing_or_an_extra_mapping():
    """The Z3 witness above is not vacuous: one mapping left out of, or one invalid mapping
    added to, the true set is an assignment on which Z3 disagrees."""
    for seed in (1, 5, 14):
        pr = problem(random_program(seed, max_maps=7))
        valid = brute_force_solutions(pr.model)
        gone = next(iter(sorted(valid, key=sorted)))
        assert z3_counterexample(pr.model, valid - {gone}) == dict(gone)
        names = pr.model.names
        extra = next(frozenset(zip(names, codes)) for codes in itertools.product(
            *(pr.model.param(n).domain for n in names)) if frozenset(zip(names, codes))
            not in valid)
        assert z3_counterexample(pr.model, valid | {extra}) == dict(extra)
    assert z3_counterexample(pr.model, set()) in [dict(m) for m in valid]


@pytest.mark.slow
def test_random_programs_evaluate_under_every_mapping():
    """Applying any valid mapping keeps the meaning (interpreter witness)."""
    for seed in range(30):
        p = random_program(seed, max_maps=5)
        s = sizes_for(p)
        X = np.arange(s["N"], dtype=np.float32)
        ref = evaluate(p, {"X": X}, s)
        for m in enumerate_mappings(p, fusion="free", order="random", seed=seed, limit=6):
            low = lower_mapping(p, m, fusion="free")
            pr = problem(p, fusion="free")
            sw = {**default_widths(pr.program, m, pr.tree, s), **s}  # the mapping's widths
            np.testing.assert_allclose(evaluate(low, {"X": X}, sw), ref, rtol=1e-6)


def test_map_codes_and_tuning_values_are_read_only_mappings_equal_to_their_dicts():
    import pickle

    from mapper.explore.record import Tuning

    codes, tuning = MapCodes({"A": 20, "B": 0}), Tuning({"s1": 4, "s0": 64})
    for value, plain in ((codes, {"A": 20, "B": 0}), (tuning, {"s0": 64, "s1": 4})):
        assert value == plain and dict(value) == plain and len(value) == 2
        assert hash(value) == hash(type(value)(plain)) and value != {**plain, "C": 1}
        assert pickle.loads(pickle.dumps(value)) == value
        with pytest.raises(TypeError):
            value["A"] = 1  # type: ignore[index]
    assert list(tuning) == ["s0", "s1"] and str(tuning) == "s0=64 s1=4"
    assert str(codes) == "A=W0 B=S" and {codes: 1}[MapCodes.parse("A=W0 B=S")] == 1
