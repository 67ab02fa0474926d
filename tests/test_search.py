"""The default search: the analytic prior, the model strategy's initial design and local
search, the run-part early cut, the time budget's end, the convolution's domains."""

from __future__ import annotations

import math
import os

import pytest
from observed import observed

from ir.conv_layer import ConvLayer, parse_layer
from mapper.explore import Task, explore
from mapper.explore.options import ExploreOptions
from mapper.explore.prior import prior_score
from mapper.explore.strategies import Candidate, make_strategy
from mapper.tuning import infer_tuning

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
L3 = os.path.join(ROOT, "examples", "cc22_listing3.lift")


class _Dev:
    type, max_compute_units, preferred_vector_width_float = "cpu", 4, 16


def test_prior_prefers_balanced_groups_and_full_vectors():
    dev = _Dev()
    full = prior_score({"work_items": 64, "group_size": 8}, 16, dev)  # 8 groups, 4 units
    assert full == pytest.approx(0.0)
    assert prior_score({"work_items": 40, "group_size": 8}, 16, dev) < full  # 5 groups
    assert prior_score({"work_items": 16, "group_size": 8}, 16, dev) < full  # 2 idle units
    assert prior_score({"work_items": 64, "group_size": 8}, 4, dev) == \
        pytest.approx(math.log(4 / 16))
    # a register block beyond 32 native vectors spills; one within costs nothing
    assert prior_score({"work_items": 64, "group_size": 8, "private_bytes": 2048}, 16,
                       dev) == pytest.approx(0.0)
    assert prior_score({"work_items": 64, "group_size": 8, "private_bytes": 8192}, 16,
                       dev) == pytest.approx(-math.log(4))
    # where the innermost reduction's register block is known (and fits), private memory
    # beyond the file counts half: it also holds copies the loop does not keep live
    fits = {"work_items": 64, "group_size": 8, "private_bytes": 8192, "loop_ops": 4.0,
            "loop_loads": 2.0, "loop_registers": 8.0, "loop_operands": 2.0}
    assert prior_score(fits, 16, dev) == pytest.approx(-0.5 * math.log(4))
    gpu = type("G", (), {"type": "gpu", "max_compute_units": 2})()
    assert prior_score({"work_items": 4096, "group_size": 64}, 1, gpu) == pytest.approx(0.0)
    assert prior_score({"work_items": 64, "group_size": 64}, 1, gpu) < 0


def test_the_prior_counts_each_stages_lanes_and_the_tails_they_leave():
    from ir.syntax import parse_file
    from ir.tiling import tiling_variants
    from mapper.api import problem
    from mapper.explore.prior import simd_width, vector_width

    tiled = tiling_variants(parse_file(os.path.join(ROOT, "examples", "harris.lift")),
                            "auto")["tiled-private"]
    p = problem(tiled)
    codes = "TY=G0 TX=S E=S F=V G=S C=S D=V A=S B=V"
    tp = infer_tuning(p.lower(codes), {"H": 2052, "W": 2052})
    # the gradient stages' maps run over t + 2 columns, the window sums' over t
    assert {k: str(v) for k, v in tp.lane_lengths.items()} == {"vB": "t + 2", "vD": "t + 2",
                                                                "vF": "t"}
    narrow = {"t": 16, "vB": 2, "vD": 2, "vF": 8}
    assert vector_width(tp, narrow) == 8  # the widest alone
    assert simd_width(tp, narrow) == pytest.approx((2 * 2 * 8) ** (1 / 3))
    # 16 lanes over 18 columns: two vectors, 9 columns each; over 66: five, 13.2 each
    assert simd_width(tp, {"t": 16, "vB": 16, "vD": 16, "vF": 16}) == \
        pytest.approx((9 * 9 * 16) ** (1 / 3))
    wide = {"t": 64, "vB": 16, "vD": 16, "vF": 16}
    assert simd_width(tp, wide) == pytest.approx((13.2 * 13.2 * 16) ** (1 / 3))
    dev = _Dev()
    feats = {"work_items": 64, "group_size": 8}
    assert prior_score(feats, 8, dev, simd=simd_width(tp, narrow)) < \
        prior_score(feats, 16, dev, simd=simd_width(tp, wide))


def test_chunk_of_a_vectorised_split_divides_the_known_length():
    """``split(omega/v)`` of ``C*K*K/v`` vectors: omega's domain is the divisors of C*K*K
    (not a range capped at twice the largest size, which left out every long chunk)."""
    task = Task.conv_layer(parse_layer("19/4"))
    tp = task.joint().tuning(task.joint().mappings[0])
    ws = 512 * 3 * 3
    assert tp.params["omega"].domain == tuple(d for d in range(1, ws + 1) if ws % d == 0)
    assert 4608 in tp.params["omega"].domain and tp.params["v"].domain[-1] == 16


@pytest.fixture(scope="module")
def joint():
    return Task.from_program(L3, {"N": 1024}).joint()


def _key(c):
    return c.mapping, tuple(sorted(c.tuning.items()))


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_initial_design_is_the_prior_best_one_per_mapping(joint):
    s = make_strategy("model", joint, seed=0, n_init=6, batch=3)
    it = s.candidates()
    first = [next(it) for _ in range(6)]
    assert len({c.mapping for c in first}) == 6
    priors = [s.prior(c.mapping, c.tuning) for c in first[:3]]
    assert priors == sorted(priors, reverse=True)
    pool_best = max(f[3 * len(s.labels) + s.PRIOR] for f in s._feats.values())
    assert priors[0] == pytest.approx(pool_best)


def test_neighbours_are_valid_and_one_step_away(joint):
    s = make_strategy("model", joint, seed=0)
    m = joint.mappings[0]
    cfg = joint.tuning(m).space[len(joint.tuning(m).space) // 2]
    nbrs = s.neighbours(m, cfg)
    assert nbrs
    for nm, nc in nbrs:
        assert nm in joint.mappings and nc in joint.tuning(nm).space
        changed = [k for k in s.labels if nm[k] != m[k]]
        changed_params = sum(nc[k] != cfg[k] for k in cfg)
        # a map's code, two maps' codes exchanged, or a parameter's value (others repaired
        # where it alone is invalid)
        swapped = len(changed) == 2 and (nm[changed[0]], nm[changed[1]]) == \
            (m[changed[1]], m[changed[0]])
        assert (len(changed) == 1 or swapped) and changed_params == 0 or \
            (not changed and changed_params >= 1)


def test_prior_reduction_term_prefers_a_register_block_that_fits():
    """Operations per load below 2 cost their ratio; a block beyond the register file
    costs its squared excess (16 registers with 8-lane floats, as AVX2 has)."""
    from mapper.explore.prior import reduction_term

    base = {"loop_ops": 12.0, "loop_loads": 6.0, "loop_registers": 15.0}
    assert reduction_term(base, 8, 8, 16) == pytest.approx(0.0)
    thin = {"loop_ops": 8.0, "loop_loads": 9.0, "loop_registers": 9.0}  # 1 x 8
    assert reduction_term(thin, 8, 8, 16) == pytest.approx(math.log(8 / 9 / 2))
    spills = dict(base, loop_registers=31.0)
    assert reduction_term(spills, 8, 8, 16) == pytest.approx(-2 * math.log(2))
    # a 4 x 3 block holds 12 accumulators and 3 + 1 operands: it fits; 5 x 3 does not
    assert reduction_term(dict(base, loop_registers=12.0, loop_operands=4.0), 8, 8, 16) == 0
    assert reduction_term(dict(base, loop_registers=15.0, loop_operands=4.0), 8, 8, 16) < 0
    assert reduction_term(base, 16, 8, 16) < 0  # 16 lanes on 8-lane registers: twice the
    assert reduction_term({}, 8, 8, 16) == 0.0  # no reduction: no term


def test_prior_charges_redundant_work():
    from mapper.explore.prior import work

    f = {"work_items": 64, "group_size": 8, "loop_ops": 4.0, "loop_loads": 2.0,
         "loop_registers": 4.0, "loop_trips": 100.0}
    assert work(f, 8) == 64 * 100 * 4 * 8
    exact = prior_score(f, 16, _Dev(), least_work=work(f, 16))
    over = prior_score(dict(f, loop_trips=150.0), 16, _Dev(), least_work=work(f, 16))
    assert over == pytest.approx(exact + math.log(100 / 150))


def test_prior_charges_global_traffic_below_the_balance():
    from mapper.explore.prior import FLOPS_PER_BYTE, traffic_term

    f = {"work_items": 64, "group_size": 8, "global_bytes": 1000.0}
    flops = 1000.0 * FLOPS_PER_BYTE  # exactly at the balance: no charge
    assert traffic_term(f, flops / 2) == pytest.approx(0.0)
    assert traffic_term(dict(f, global_bytes=4000.0), flops / 2) == \
        pytest.approx(math.log(1 / 4))
    assert traffic_term(dict(f, global_bytes=10.0), flops / 2) == 0.0  # capped at 1
    assert traffic_term({"work_items": 64}, flops / 2) == 0.0  # bytes unknown
    assert traffic_term(f, None) == 0.0  # FLOPs unknown
    assert prior_score(dict(f, global_bytes=4000.0), 16, _Dev(), least_work=flops / 2) \
        == pytest.approx(prior_score(f, 16, _Dev(), least_work=flops / 2) + math.log(1 / 4))


def test_prior_prefers_one_sum_of_the_channels_to_partial_sums_in_global_memory():
    """A 1x1 convolution that sums its channels in ``C / omega`` partial sums writes them
    to global memory and reads them back in a second kernel: the lowering's global bytes
    grow with them, and the prior ranks the single sum first, all else equal."""
    from codegen.target import POCL_CPU
    from mapper.explore.prior import feature_values, simd_width, vector_width

    task = Task.conv_layer(ConvLayer("1x1", 64, 8, 8, 16, K=1, S=1, P=0), vectorise="kernels")
    js = task.joint(POCL_CPU)
    m = next(m for m in js.mappings if m["W"] >= 30 and m["C"] >= 30 and m["R1"] == 0)
    tp = js.tuning(m)
    space = tp.space
    base = next(c for c in space if c["omega"] == 64)
    split = next(c for c in space if c["omega"] == 8 and all(
        c[k] == base[k] for k in c if k != "omega"))

    def score(c):
        v = feature_values(tp, c)
        return prior_score(v, vector_width(tp, c), POCL_CPU, task.flops / 2,
                           simd_width(tp, c)), v["global_bytes"]

    (one, one_bytes), (parts, parts_bytes) = score(base), score(split)
    assert parts_bytes > one_bytes
    assert one > parts


@pytest.fixture(scope="module")
def conv17_task():
    """Layer 17 at a quarter of its size (7x7), built once for this module (its stages'
    mappings and data cost about a second): a test that needs a joint space no other test
    has used takes ``fresh_joint(conv17_task)``."""
    return Task.conv_layer(parse_layer("17/4"))


def fresh_joint(task):
    """A new joint space of ``task``'s program, with no tuning space built yet."""
    import dataclasses

    return dataclasses.replace(task, _joint=None).joint()


@pytest.fixture(scope="module")
def conv17(conv17_task):
    """Layer 17 at a quarter of its size (7x7): the joint space and a register-blocking
    mapping (one work-item per tile and kernel group, the rest sequential)."""
    js = conv17_task.joint()
    m = next(m for m in js.mappings if all(m[k] == 0 for k in ("W", "C", "R1", "R2", "P")))
    return js, m


def test_neighbours_repair_a_move_that_breaks_the_tiles(conv17):
    """On the convolution, one window per tile (theta = 3) admits only sigma = 1: moving
    sigma must move theta (and rho) too, to the nearest tiles that hold sigma windows."""
    js, m = conv17
    s = make_strategy("model", js, seed=0, transfer=False)
    cfg = {"kappa": 8, "omega": 576, "rho": 0, "sigma": 1, "theta": 3, "v": 8}
    assert cfg in js.tuning(m).space
    moved = [c for nm, c in s.neighbours(m, cfg) if nm == m and c["sigma"] > 1]
    assert moved and all(c["theta"] > 3 and c in js.tuning(m).space for c in moved)


def test_a_parallel_level_moves_from_one_map_to_another_in_one_step(conv17):
    """Moving the second global dimension from the tiles (T) to the channels' chunks (C)
    changes two codes: one alone would leave the level unused (all but one map
    sequential) or give it twice (invalid). The exchange is one neighbour, the tuning
    kept; no single-code neighbour reaches it."""
    js, _ = conv17
    s = make_strategy("model", js, seed=0, transfer=False)
    m = next(m for m in js.mappings if m["T"] == 31 and m["G"] == 30 and m["C"] == 0)
    want = {**{k: m[k] for k in s.labels}, "T": 0, "C": 31}
    target = next((x for x in js.mappings if all(x[k] == want[k] for k in s.labels)), None)
    assert target is not None  # the channels' chunks over work-items: a valid mapping
    cfg = next(c for c in js.tuning(m).space if c in js.tuning(target).space)
    got = [nm for nm, nc in s.neighbours(m, cfg) if nm == target]
    assert got and all(nc == cfg for nm, nc in s.neighbours(m, cfg) if nm == target)
    # not within one code: T alone to S leaves the level unused, C alone to G1 repeats it
    assert sum(target[k] != m[k] for k in s.labels) == 2


def test_climb_goes_uphill_under_the_analytic_prior(conv17):
    """From one window x 8 kernels (load-bound) the ascent reaches a larger block."""
    js, m = conv17
    s = make_strategy("model", js, seed=0, transfer=False)
    cfg = {"kappa": 8, "omega": 576, "rho": 0, "sigma": 1, "theta": 3, "v": 8}
    got = s._climb(m, cfg, set())
    assert got is not None and s.analytic(*got) > s.analytic(m, cfg)
    f = s._cached(*got)
    i = 3 * len(s.labels)  # the kernel features: log2(1 + x)
    ops, loads = (2 ** f[i + s.KERNEL_FEATURES.index(k)] - 1 for k in ("loop_ops", "loop_loads"))
    assert ops / loads > 8 / 9


def test_uphill_proposes_the_ascent_from_the_fastest_candidate(conv17):
    """After measurements, a batch holds the prior's ascent from the fastest candidate, a
    point it has not proposed; once every point of the path was proposed, none."""
    js, m = conv17
    s = make_strategy("model", js, seed=0, transfer=False)
    slow = {"kappa": 8, "omega": 576, "rho": 0, "sigma": 1, "theta": 3, "v": 8}
    s.observe(Candidate(m, slow), observed("ok", 10.0))
    done = {(m, tuple(sorted(slow.items())))}
    got = s._uphill(done)
    assert len(got) == 1 and got[0][1] != slow and got[0][1] in js.tuning(got[0][0]).space
    assert (got[0][0], tuple(sorted(got[0][1].items()))) in done  # joins the proposed


def test_best_rows_take_the_nearest_sizes_first():
    from mapper.explore.knowledge import best_rows, size_distance

    def row(n, k, score):
        return {"sizes": {"N": n, "K": k}, "mapping": {"A": 0}, "tuning": {"s0": n},
                "score": score}

    rows = [row(4096, 3, 0.0), row(64, 3, 0.0), row(512, 3, 0.0), row(512, 1, 0.0)]
    near = best_rows(rows, near={"N": 600, "K": 3})
    assert [(r["sizes"]["N"], r["sizes"]["K"]) for r in near] == \
        [(512, 3), (512, 1), (4096, 3), (64, 3)]
    assert size_distance({"N": 7}, {"N": 7}) == 0.0
    assert size_distance({"N": 7}, {"N": 15}) == pytest.approx(1.0)


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_local_search_proposes_neighbours_of_the_best(joint):
    """After the initial design, every batch holds ``local`` neighbours of the best
    candidates (performance peaks at one configuration: the search climbs to it)."""
    s = make_strategy("model", joint, seed=1, n_init=4, batch=4, local=2, pool_size=100,
                      trees=10)  # the cost model's size is not the point: 10 trees, not 100
    it = s.candidates()
    seen, done, near_best = [], [], []
    for b in range(10):
        batch = [next(it) for _ in range(4)]
        if b:  # how many are one step from a candidate measured before the batch
            near = {(nm, tuple(sorted(nc.items()))) for c in done
                    for nm, nc in s.neighbours(c.mapping, c.tuning)}
            near_best.append(sum(_key(c) in near for c in batch))
        for c in batch:
            seen.append(_key(c))
            done.append(c)
            s.observe(c, observed("ok", 1.0 + c.tuning["s0"] / 64.0))
    assert len(set(seen)) == len(seen)  # never proposes a candidate twice
    # about `local` of each batch (17 of 36 with seed 1; 5 with local=0, by chance)
    assert sum(near_best) >= 1.5 * len(near_best), near_best
    best_s0 = max(s0 for m in joint.mappings for cfg in joint.tuning(m).space
                  for s0 in [cfg["s0"]])
    assert max(dict(k[1])["s0"] for k in seen) == best_s0


def test_same_seed_same_sequence(joint):
    def run(seed):
        s = make_strategy("model", joint, seed=seed, n_init=4, batch=4, pool_size=100,
                          trees=10)  # a seeded forest all the same, a tenth of the fits
        it, out = s.candidates(), []
        for _ in range(16):
            c = next(it)
            out.append(_key(c))
            s.observe(c, observed("ok", float(c.tuning["s0"] % 7 + 1)))
        return out

    assert run(3) == run(3)


def test_local_must_fit_in_the_batch(joint):
    from mapper.explore.strategies import StrategyError

    with pytest.raises(StrategyError, match="local"):
        make_strategy("model", joint, local=9, batch=5)


@pytest.mark.opencl
def test_a_candidate_stopped_by_the_budget_end_is_not_recorded(conv17_task):
    """The end of a time budget bounds the candidate in flight; its outcome is unknown,
    so it is not a row (a later run evaluates it)."""
    from mapper.explore.evaluator import Evaluator
    from mapper.explore.store import ResultStore

    task = conv17_task  # a convolution: its candidate takes far longer than the 50 ms left
    st = ResultStore(":memory:")
    ev = Evaluator(task, st, run_id="r", strategy="solver", seed=0)
    try:
        m = task.joint().mappings[0]
        cfg = task.joint().tuning(m).space[0]
        assert ev.run(Candidate(m, dict(cfg)), 0, None, left_s=0.0) is None
    finally:
        ev.close()
        st.close()


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
@pytest.mark.opencl
def test_explore_defaults_are_the_model_with_the_early_cut(tmp_path):
    res = explore(L3, {"N": 1024}, budget=6, store=tmp_path / "s.sqlite",
                  options=ExploreOptions.of(count=False))
    assert res.strategy == "model" and res.evaluated == 6
    import json
    import sqlite3

    row = sqlite3.connect(tmp_path / "s.sqlite").execute("SELECT options FROM runs").fetchone()
    opts = json.loads(row[0])
    assert opts["cut"] == 3.0 and opts["run_budget_s"] == 1.0 and opts["timeout_s"] == 30.0


def test_tuning_inference_on_a_plain_split_still_divides():
    from ir.syntax import parse_file

    tp = infer_tuning(parse_file(L3), {"N": 1024})
    assert all(1024 % d == 0 for d in tp.params["s0"].domain)


# ------------------------------------------------------------------ transfer (knowledge)


def _knowledge_rows(joint, sizes, score_of, n=60, seed=0):
    """Made-up knowledge rows of ``joint``'s program at ``sizes``: random valid candidates
    scored by ``score_of(mapping, tuning)``."""
    import random

    from ir.syntax import print_program
    from mapper.explore.knowledge import program_key

    rng = random.Random(seed)
    key = program_key(print_program(joint.problem.program))
    rows = []
    maps = sorted(joint.mappings, key=str)  # the same rows whatever the solver's order
    for _ in range(n):
        m = rng.choice(maps)
        space = joint.tuning(m).space
        cfg = dict(space[rng.randrange(len(space))])
        rows.append({"program": key, "sizes": sizes, "mapping": dict(m), "tuning": cfg,
                     "score": score_of(m, cfg)})
    return rows


def test_knowledge_transfers_from_other_sizes_only(joint, tmp_path):
    import json

    from mapper.explore.knowledge import Knowledge

    def score(m, cfg):  # at the other size, a larger s0 was faster
        return math.log(cfg["s0"] / 1024)

    rows = _knowledge_rows(joint, {"N": 4096}, score)
    (tmp_path / "k.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    k = Knowledge.for_space(joint, dirs=[tmp_path])
    assert k is not None and k.rows == len(rows)
    m = joint.mappings[0]
    cfgs = sorted(joint.tuning(m).space, key=lambda c: c["s0"])
    lo, hi = k.predict([(m, cfgs[0]), (m, cfgs[-1])])
    assert hi > lo
    # rows of the explored sizes themselves are the store's business, not transferred
    own = _knowledge_rows(joint, {"N": 1024}, score)
    (tmp_path / "k.jsonl").write_text("\n".join(json.dumps(r) for r in own))
    assert Knowledge.for_space(joint, dirs=[tmp_path]) is None


def _assert_rows_decide(joint, tmp_path, small_fast, large_fast, n_large=60):
    """Rows measured on device ``small_fast`` (a small s0 was fast there) and
    ``n_large`` rows on ``large_fast`` (a large s0): the knowledge of ``joint`` is fitted on
    the first ones alone, and on both with fewer than ``MIN_ROWS`` of the first."""
    import json

    from mapper.explore.knowledge import MIN_ROWS, Knowledge

    small = _knowledge_rows(joint, {"N": 4096}, lambda m, c: -math.log(c["s0"]), seed=1)
    large = _knowledge_rows(joint, {"N": 4096}, lambda m, c: math.log(c["s0"] / 1024),
                            n=n_large)
    for r in small:
        r["device"] = small_fast
    for r in large:
        r["device"] = large_fast
    m = joint.mappings[0]
    cfgs = sorted(joint.tuning(m).space, key=lambda c: c["s0"])
    (tmp_path / "k.jsonl").write_text("\n".join(json.dumps(r) for r in small + large))
    k = Knowledge.for_space(joint, dirs=[tmp_path])
    assert k is not None and k.rows == len(small)
    lo, hi = k.predict([(m, cfgs[0]), (m, cfgs[-1])])
    assert lo > hi
    few = small[:MIN_ROWS - 1]
    (tmp_path / "k.jsonl").write_text("\n".join(json.dumps(r) for r in few + large))
    k = Knowledge.for_space(joint, dirs=[tmp_path])
    assert k is not None and k.rows == len(few) + len(large)


def test_knowledge_prefers_the_rows_of_the_explored_device(joint, tmp_path):
    """Rows measured on the explored device decide where there are enough of them; with
    too few, every device's rows are transferred."""
    _assert_rows_decide(joint, tmp_path, joint.device.name, "some-other-device")


def test_knowledge_of_a_new_cpu_comes_from_cpus_of_its_instruction_set(joint, tmp_path,
                                                                          monkeypatch):
    """A device with no rows of its own learns from the devices PoCL compiles for the same
    LLVM CPU (the same vector registers), even where another kind has more rows; with too
    few of its kind, from every device."""
    import dataclasses

    from mapper.explore.knowledge import code_target

    assert code_target("pthread-skylake-avx512-Intel(R) Xeon(R) Processor") == "skylake-avx512"
    assert code_target("cpu-x86-64-v3-13th Gen Intel(R) Core(TM)") == "x86-64-v3"
    assert code_target("NVIDIA H100 80GB HBM3") is None
    monkeypatch.setattr(joint, "device", dataclasses.replace(
        joint.device, name="pthread-skylake-avx512-Intel(R) Xeon(R) Gold"))
    _assert_rows_decide(joint, tmp_path, "pthread-skylake-avx512-AMD EPYC",
                        "pthread-haswell-AMD EPYC", n_large=200)


def test_knowledge_of_another_program_does_not_apply(joint, tmp_path):
    import json

    from mapper.explore.knowledge import Knowledge

    rows = _knowledge_rows(joint, {"N": 4096}, lambda m, c: 0.0)
    for r in rows:
        r["program"] = "0" * 64
    (tmp_path / "k.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    assert Knowledge.for_space(joint, dirs=[tmp_path]) is None


def test_initial_design_follows_the_transferred_knowledge(joint, tmp_path, monkeypatch):
    """With knowledge that a small s0 is fast, the first proposals have small s0."""
    import json

    rows = _knowledge_rows(joint, {"N": 4096}, lambda m, c: -math.log2(c["s0"]), n=200)
    (tmp_path / "k.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    monkeypatch.setenv("LIFTMAP_KNOWLEDGE", str(tmp_path))
    s = make_strategy("model", joint, seed=0, n_init=4, batch=4)
    assert s.knowledge is not None
    it = s.candidates()
    first = [next(it).tuning["s0"] for _ in range(4)]
    plain = make_strategy("model", joint, seed=0, n_init=4, batch=4, transfer=False)
    it = plain.candidates()
    without = [next(it).tuning["s0"] for _ in range(4)]
    assert sum(first) < sum(without)


def test_knowledge_rows_of_a_store(tmp_path):
    from mapper.explore.knowledge import store_rows
    from mapper.explore.record import Record

    rows = [Record.from_row({"key": f"k{i}", "run_id": "r", "strategy": "solver", **r})
            for i, r in enumerate([
                {"status": "ok", "gflops": 10.0, "mapping": "A=21 B=11",
                 "tuning": '{"s0": 4}', "outcome_check": None},
                {"status": "ok", "gflops": 5.0, "mapping": "A=0 B=21", "tuning": '{"s0": 8}',
                 "outcome_check": None},
                {"status": "timeout", "gflops": None, "mapping": "A=0 B=0",
                 "tuning": '{"s0": 2}', "outcome_check": "early-cut"},
                {"status": "crash", "gflops": None, "mapping": "A=0 B=0",
                 "tuning": '{"s0": 1}', "outcome_check": None}])]
    out = store_rows(rows, "prog", {"N": 8})
    assert [r["score"] for r in out] == [0.0, round(math.log(0.5), 4),
                                        round(math.log(0.5) - 1, 4)]
    assert out[0]["mapping"] == {"A": 21, "B": 11} and out[0]["tuning"] == {"s0": 4}
    assert "device" not in out[0]
    assert {r["device"] for r in store_rows(rows, "prog", {"N": 8}, device="cpu-x")} == \
        {"cpu-x"}


def test_shipped_knowledge_is_readable():
    from mapper.explore.knowledge import HERE, read_rows

    rows = read_rows([HERE])
    assert rows, "the library ships knowledge for the convolution"
    assert all(isinstance(r["score"], float | int) and r["score"] <= 0 for r in rows)


# ------------------------------------------------------------------ re-timing


@pytest.mark.slow
@pytest.mark.opencl
def test_the_winners_are_retimed_and_every_execution_stored(tmp_path):
    path = tmp_path / "r.sqlite"
    res = explore(L3, {"N": 4096}, strategy="solver", budget=5, store=path,
                  options=ExploreOptions.of(seed=1, count=False, retime=2, retime_rounds=2,
                                            repeats=2))
    ok = [r for r in res.records if r.ok]
    assert len(res.retimed) == min(2, len(ok)) >= 1
    from mapper.explore.run import RETIME_MAX_REPEATS, retime_repeats
    from mapper.explore.store import ResultStore

    with ResultStore(path) as st:
        for key, r in res.retimed.items():
            # 2 rounds of 2 runs, more for a kernel this short (microseconds): 50 each;
            # the winner's 2 confirmation rounds after them are its figure
            win = key == res.final.key
            assert r.confirmed == win
            assert len(st.retimes(key)) == (2 if win else 1) * r.n
            assert r.n == 2 * retime_repeats(r.record.time_s, 2) == 2 * RETIME_MAX_REPEATS
            assert r.rounds == 2 and r.min_s <= r.median_s and r.record.key == key
        assert st.retimed(1)[0].record.key == res.final.key and st.retimed(1)[0].confirmed
    assert res.final.key in res.retimed and res.final_retimed.record == res.final
    assert "re-timed" in res.summary()


def test_a_short_kernel_is_retimed_for_a_whole_round():
    from mapper.explore.run import RETIME_ROUND_S, retime_repeats

    assert retime_repeats(0.01, 3) == 3  # 30 ms a round already
    assert retime_repeats(0.002, 3) == 10 == round(RETIME_ROUND_S / 0.002)
    assert retime_repeats(0.0003, 3) == 50  # at most 50 runs
    assert retime_repeats(None, 5) == retime_repeats(0.0, 5) == retime_repeats(
        float("nan"), 5) == 5


def test_the_end_of_run_retiming_takes_at_most_a_tenth_of_a_time_budget():
    from mapper.encoding import MapCodes
    from mapper.explore.record import Record
    from mapper.explore.run import RETIME_SHARE, Budget, Results, _retime_count

    res = Results(run_id="r", strategy="model", seed=0, store_path=":memory:", context=None,
                  budget=Budget(seconds=60.0))
    assert _retime_count(res, 8, 3, 60.0) == 8  # nothing ran yet: no estimate
    res.records.append(Record(key="k", run_id="r", strategy="model", seed=0, idx=0,
                              mapping=MapCodes({"A": 0}), status="ok", time_s=0.1,
                              gflops=1.0, run_s=0.8, lower_s=0.0))
    # each re-timed candidate: 3 rounds x (0.8 s of runs + 0.2 s) = 3 s; the winner's
    # confirmation is spread over a twentieth of the budget (at most 30 s) and a round:
    # 4 s of 60 s, 8.5 s of 150 s, 31 s of 600 s
    assert _retime_count(res, 8, 3, 60.0) == 1
    assert _retime_count(res, 8, 3, 150.0) == int((RETIME_SHARE * 150.0 - 8.5) / 3.0) == 2
    assert _retime_count(res, 20, 3, 600.0) == int((RETIME_SHARE * 600.0 - 31.0) / 3.0) == 9
    assert _retime_count(res, 9, 3, 300.0) == int((RETIME_SHARE * 300.0 - 16.0) / 3.0) == 4
    assert _retime_count(res, 8, 3, 6000.0) == 8
    assert _retime_count(res, 8, 3, 1.0) == 1  # at least the best
    assert _retime_count(res, 8, 3, None) == 8  # a count budget: all of them


def test_the_final_winner_is_the_fastest_round_not_the_median_of_every_run():
    """Two winners re-timed: a's median over every run is the slower (a slow phase took
    one of its rounds), its fastest round the faster: a is the answer."""
    from mapper.encoding import MapCodes
    from mapper.explore.record import Record, Retimed
    from mapper.explore.run import Budget, Results

    def rec(key):
        return Record(key=key, run_id="r", strategy="model", seed=0, idx=0,
                      mapping=MapCodes({"A": 0}), status="ok", time_s=1.0, gflops=1.0)

    res = Results(run_id="r", strategy="model", seed=0, store_path=":memory:", context=None,
                  budget=Budget(candidates=2))
    res.retimed = {"a": Retimed(rec("a"), median_s=2.0, min_s=0.9, n=9, gflops=0.5,
                                round_s=1.0),
                   "b": Retimed(rec("b"), median_s=1.5, min_s=1.4, n=9, gflops=0.67,
                                round_s=1.5)}
    assert res.final.key == "a"
    assert "fastest round's median 1000 ms" in res.summary()


class _Timings:
    """An evaluator whose re-timings replay given times, per candidate key."""

    def __init__(self, times):
        from types import SimpleNamespace

        self.times = {k: list(v) for k, v in times.items()}
        self.task = SimpleNamespace(flops=1e9)
        self.calls = []

    def retime(self, cand, repeats):
        from types import SimpleNamespace

        self.calls.append(cand)
        ts = self.times[cand].pop(0)
        return SimpleNamespace(status="ok" if ts else "error", times_s=ts)


def test_the_winner_is_reported_by_rounds_after_its_choice(tmp_path):
    """Of two kernels within the noise the luckier wins the choice; its figure is the
    rounds timed after the choice, not the rounds that chose it (an optimistic figure)."""
    from mapper.encoding import MapCodes
    from mapper.explore.record import Record
    from mapper.explore.run import Budget, Results, _retime
    from mapper.explore.store import ResultStore

    res = Results(run_id="r", strategy="model", seed=0, store_path=":memory:", context=None,
                  budget=Budget(candidates=2))
    for k in "ab":
        res.records.append(Record(key=k, run_id="r", strategy="model", seed=0, idx=0,
                                  mapping=MapCodes({"A": 0}), status="ok", time_s=1.0,
                                  gflops=1.0))
        res.candidates[k] = k
    ev = _Timings({"a": [[0.9, 0.9], [1.0, 1.0], [1.1, 1.2], [1.1, 1.1]],
                   "b": [[1.0, 1.0], [1.0, 1.0]]})
    with ResultStore(tmp_path / "s.sqlite") as st:
        for r in res.records:
            st.add(r)
        _retime(res, ev, st, 2, 2, 2)
        assert ev.calls == ["a", "b", "a", "b", "a", "a"]  # chosen interleaved, then alone
        a = res.retimed["a"]
        assert res.final.key == "a" and a.round_s == 0.9  # chosen by its fastest round
        assert a.confirmed and a.median_s == 1.1 and a.n == 4 and a.rounds == 2
        assert a.gflops == pytest.approx(1 / 1.1)
        # its confirmation rounds' medians are 1.15 and 1.1: the fastest phase it met
        assert a.figure_round_s == pytest.approx(1.1)
        assert a.figure_round_gflops == pytest.approx(1 / 1.1)
        assert a.steady_s == pytest.approx(1.1)  # the faster of its two rounds
        assert "in 2 rounds after it was chosen; steady 1100 ms (0.909 GFLOP/s)" in \
            res.summary()
        assert not res.retimed["b"].confirmed and res.retimed["b"].median_s == 1.0
        assert res.retimed["b"].figure_round_s == pytest.approx(1.0)
        assert len(st.retimes("a")) == 8
        stored = st.retimed()  # the store ranks and reports as the run did
        assert [r.record.key for r in stored] == ["a", "b"]
        assert stored[0].confirmed and stored[0].median_s == 1.1 and stored[0].round_s == 0.9
        assert stored[0].figure_round_s == pytest.approx(1.1)
        assert stored[0].to_json()["figure_round_s"] == pytest.approx(1.1)


def test_the_steady_figure_leaves_the_slow_phases_out():
    from mapper.explore.record import Retimed, steady_time

    assert steady_time([]) is None
    assert steady_time([2.0]) == 2.0
    # the faster half of five rounds (three): two slow phases do not move it
    assert steady_time([1.0, 1.6, 1.1, 1.2, 1.5]) == 1.1
    assert steady_time([1.0, 1.2, 3.0, 3.0]) == pytest.approx(1.1)
    rounds = [[1.0, 1.0], [1.2, 1.2], [3.0, 3.0], [3.0, 3.1]]
    r = Retimed.of(_rec("k", 1.0), rounds, flops=1e9, confirm=rounds)
    assert r.steady_s == pytest.approx(1.1) and r.median_s == pytest.approx(2.1)
    assert r.steady_gflops == pytest.approx(1 / 1.1)
    assert r.to_json()["steady_s"] == pytest.approx(1.1)


def test_the_confirmation_is_spread_over_seconds(monkeypatch, tmp_path):
    """A winner's confirmation rounds are spread over the run's confirm span (one a second,
    the run's rounds at least): the host's phases last seconds. A short run (a test's, a
    few seconds) confirms back to back as before."""
    from mapper.explore import run as run_mod
    from mapper.explore.run import (
        CONFIRM_SPAN_S,
        Budget,
        Results,
        _retime,
        confirm_span,
        spread_rounds,
    )
    from mapper.explore.store import ResultStore

    assert confirm_span(600.0) == CONFIRM_SPAN_S == 30.0
    assert confirm_span(60.0) == pytest.approx(3.0) and confirm_span(None) == 0.0
    clock = [0.0]
    slept: list[float] = []

    def sleep(s):
        slept.append(s)
        clock[0] += s

    monkeypatch.setattr(run_mod.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(run_mod.time, "sleep", sleep)
    assert list(spread_rounds(3, 0.0)) == [0, 1, 2] and slept == []
    starts = []
    for _ in spread_rounds(3, 8.0):
        starts.append(clock[0])
        clock[0] += 0.25  # each round takes a quarter of a second
    assert starts == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]

    res = Results(run_id="r", strategy="model", seed=0, store_path=":memory:", context=None,
                  budget=Budget(seconds=600.0))
    for k in "ab":
        res.records.append(_rec(k, 1.0))
        res.candidates[k] = k
    ev = _Timings({"a": [[1.0]] * 32, "b": [[2.0]] * 2})
    with ResultStore(tmp_path / "s.sqlite") as st:
        for r in res.records:
            st.add(r)
        _retime(res, ev, st, 2, 2, 2)
    assert ev.calls == ["a", "b", "a", "b"] + ["a"] * 30
    assert res.retimed["a"].rounds == 30 and res.retimed["a"].confirmed


def _rec(key, time_s):
    from mapper.encoding import MapCodes
    from mapper.explore.record import Record

    return Record(key=key, run_id="r", strategy="model", seed=0, idx=0,
                  mapping=MapCodes({"A": 0}), status="ok", time_s=time_s, gflops=1 / time_s)


def test_a_lucky_stored_figure_does_not_take_the_answer_during_the_run(tmp_path):
    """A newcomer whose one stored measurement beats the answer is timed again beside it;
    it takes the answer only when it is faster then. The history of the answer is read
    back from the store, and the end-of-run figures leave the challenges' rounds out."""
    from mapper.explore.incumbent import Incumbent, answer_history
    from mapper.explore.store import ResultStore

    times = {"a": [[1.0, 1.0], [1.0, 1.1], [1.0, 1.0], [1.05, 1.0], [1.0, 1.0], [1.0, 1.0]],
             "lucky": [[1.4, 1.5], [1.3, 1.4]],  # stored at 0.7, runs at 1.3-1.5
             "b": [[0.8, 0.8], [0.85, 0.8]]}
    calls = []

    def retime(r):
        calls.append(r.key)
        return times[r.key].pop(0)

    inc = Incumbent(rounds=2)
    with ResultStore(tmp_path / "s.sqlite") as st:
        for k, t in (("a", 1.0), ("lucky", 0.7), ("b", 0.75)):
            st.add(_rec(k, t))
        assert inc.challenged_by(_rec("a", 1.0))  # no answer yet
        assert inc.challenge(_rec("a", 1.0), retime, st, "r", 1.0)
        assert inc.key == "a" and inc.time_s == pytest.approx(1.0)
        assert not inc.challenged_by(_rec("slow", 1.2))  # its stored time does not beat 1.0
        assert inc.challenged_by(_rec("lucky", 0.7))
        assert not inc.challenge(_rec("lucky", 0.7), retime, st, "r", 2.0)
        assert calls == ["a", "a", "lucky", "a", "lucky", "a"]  # interleaved
        assert inc.key == "a"
        assert inc.challenge(_rec("b", 0.75), retime, st, "r", 3.0)
        assert calls[-4:] == ["b", "a", "b", "a"]
        assert inc.key == "b" and inc.time_s == pytest.approx(0.8)
        assert [k for _, k in inc.history] == ["a", "b"]
        assert [(k, t) for _, k, t in answer_history(st, "r")] == [("a", 1.0), ("b", 0.8)]
        assert answer_history(st, "another-run") == []
        # the challenges are not end-of-run re-timings
        assert st.retimed() == [] and st.retimes("a") == []
    assert all(not v for v in times.values())


def test_the_answer_during_the_run_competes_at_the_end(tmp_path):
    """The end-of-run re-timing takes the best stored figures and the run's answer: a
    candidate that held the answer by re-timing is compared even where its stored figure
    is not among the best."""
    from mapper.explore.incumbent import Incumbent
    from mapper.explore.run import Budget, Results, _retime
    from mapper.explore.store import ResultStore

    res = Results(run_id="r", strategy="model", seed=0, store_path=":memory:", context=None,
                  budget=Budget(candidates=3), incumbent=Incumbent(rounds=2))
    for k, t in (("lucky", 0.5), ("other", 0.6), ("held", 0.9)):
        res.records.append(_rec(k, t))
        res.candidates[k] = k
    res.incumbent.key, res.incumbent.record = "held", res.records[-1]
    ev = _Timings({"lucky": [[1.5], [1.5]], "held": [[0.8], [0.8], [0.8]]})
    with ResultStore(tmp_path / "s.sqlite") as st:
        for r in res.records:
            st.add(r)
        _retime(res, ev, st, 2, 1, 1)
    assert ev.calls == ["lucky", "held", "held"]  # "other" made room for the answer
    assert res.final.key == "held"


@pytest.mark.slow
@pytest.mark.opencl
def test_a_run_keeps_its_answer_by_retiming(tmp_path):
    """A real run: every change of its answer is a challenge stored in the store, the
    last holder is among the end-of-run re-timing, and turning challenges off leaves
    none."""
    from mapper.explore.incumbent import answer_history
    from mapper.explore.store import ResultStore

    path = tmp_path / "r.sqlite"
    res = explore(L3, {"N": 4096}, strategy="solver", budget=6, store=path,
                  options=ExploreOptions.of(seed=1, count=False, retime=2, retime_rounds=1,
                                            repeats=2))
    assert res.incumbent.challenges >= 1 and res.incumbent.history
    assert res.incumbent.key in res.retimed
    with ResultStore(path, readonly=True) as st:
        assert [k for _, k, _ in answer_history(st, res.run_id)] == \
            [k for _, k in res.incumbent.history]
    off = explore(L3, {"N": 4096}, strategy="solver", budget=6, store=tmp_path / "o.sqlite",
                  options=ExploreOptions.of(seed=1, count=False, retime=2, retime_rounds=1,
                                            repeats=2, retime_challenge=0))
    assert off.incumbent.challenges == 0 and not off.incumbent.history


def test_the_fastest_round_of_the_figure_is_told_from_its_median():
    """A host that runs a whole round slow moves the median; the fastest round's median
    is the kernel at the host's full speed, the figure another process reproduces."""
    from mapper.encoding import MapCodes
    from mapper.explore.record import Record, Retimed

    rec = Record(key="k", run_id="r", strategy="model", seed=0, idx=0,
                 mapping=MapCodes({"A": 0}), status="ok", time_s=1.0, gflops=1.0)
    rt = Retimed.of(rec, [[1.0, 1.0]], 2e9, confirm=[[2.0, 2.1, 2.2], [1.0, 1.1, 1.2],
                                                     [2.0, 2.0, 2.0]])
    assert rt.median_s == 2.0 and rt.gflops == pytest.approx(1.0)
    assert rt.figure_round_s == pytest.approx(1.1)
    assert rt.figure_round_gflops == pytest.approx(2 / 1.1)


def test_a_winner_that_fails_its_confirmation_keeps_its_choosing_figure(tmp_path):
    from mapper.encoding import MapCodes
    from mapper.explore.record import Record
    from mapper.explore.run import Budget, Results, _retime
    from mapper.explore.store import ResultStore

    res = Results(run_id="r", strategy="model", seed=0, store_path=":memory:", context=None,
                  budget=Budget(candidates=1))
    res.records.append(Record(key="a", run_id="r", strategy="model", seed=0, idx=0,
                              mapping=MapCodes({"A": 0}), status="ok", time_s=1.0,
                              gflops=1.0))
    res.candidates["a"] = "a"
    with ResultStore(tmp_path / "s.sqlite") as st:
        _retime(res, _Timings({"a": [[2.0], []]}), st, 1, 1, 1)
    assert not res.retimed["a"].confirmed and res.retimed["a"].median_s == 2.0


# ------------------------------------------------------------------ the command line


@pytest.mark.parametrize("argv, words", [
    (["--sizes", "C=8,H=4,W=4,M=8,K=9"], "K=9 is larger than the padded input"),
    (["--sizes", "C=0,H=8,W=8,M=8"], "C=0"),
    (["--sizes", "C=8,H=8,W=8,M=8,X=3"], "conv has no size X"),
    (["--sizes", "C=8,H=8,W=8,M=8", "--layer", "19"], "not both"),
    (["--sizes", "C=8,H=8,W=8,M=8,P=-1"], "P=-1"),
    (["--layer", "24/16"], "H=0"),
])
def test_conv_shapes_a_user_gets_wrong_are_one_line_and_no_store(tmp_path, capsys, argv,
                                                                  words):
    from mapper.cli import main

    store = tmp_path / "s.sqlite"
    rc = main(["explore", "conv", *argv, "--budget", "1", "--store", str(store)])
    err = capsys.readouterr().err
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert not store.exists()


def test_explore_help_lists_every_strategy(capsys):
    from mapper.cli import main
    from mapper.explore.strategies import STRATEGIES

    with pytest.raises(SystemExit):
        main(["explore", "--help"])
    raw = capsys.readouterr().out
    lines = raw.splitlines()
    for name, cls in STRATEGIES.items():  # one line each, with its summary
        assert cls.summary, name
        assert sum(ln.split()[:1] == [name] and cls.summary in ln for ln in lines) == 1, name
    assert "model (the default" in " ".join(raw.split())


@pytest.mark.opencl
def test_a_budget_too_small_for_one_evaluation_says_so(tmp_path, capsys):
    from mapper.cli import main

    rc = main(["explore", L3, "--sizes", "N=1024", "--budget", "0.01s", "--store",
               str(tmp_path / "s.sqlite")])
    err = capsys.readouterr().err
    assert rc == 2 and "ended before one candidate was evaluated" in err, err


def test_best_rows_take_the_best_of_every_source_size_first():
    from mapper.explore.knowledge import best_rows

    def row(n, score, s0):
        return {"sizes": {"N": n}, "mapping": {"A": 0}, "tuning": {"s0": s0}, "score": score}

    rows = [row(64, 0.0, 4), row(64, -0.1, 8), row(64, -0.1, 8), row(64, -0.2, 16),
            row(128, -0.5, 2), row(128, 0.0, 32)]
    best = best_rows(rows, per_size=2)
    assert [(r["sizes"]["N"], r["tuning"]["s0"]) for r in best] == \
        [(64, 4), (128, 32), (64, 8), (128, 2)]  # each size's best, then its second


def test_projection_takes_the_nearest_valid_configuration(joint):
    from mapper.explore.knowledge import project

    m = joint.mappings[0]
    space = joint.tuning(m).space
    cfg = dict(space[len(space) // 2])
    assert project(cfg, space) == cfg  # valid here: itself
    near = {k: v + 0.1 * v for k, v in cfg.items()}  # values of no domain, close to cfg's
    assert project({k: round(v) if v >= 10 else v for k, v in near.items()}, space) == cfg
    far = {k: v * 1000 + 1 for k, v in cfg.items()}  # from a much larger size
    got = project(far, space)
    assert got is not None and got in space
    assert project({}, space) is None  # a configuration of another program


def test_first_proposals_start_from_the_knowledges_best(joint, tmp_path, monkeypatch):
    """The best candidates of the other sizes, projected, then moved uphill by the prior
    and the transferred score, are proposed first (half of the initial design), in the
    order of best_rows; without knowledge, no change."""
    import json

    from mapper.explore.knowledge import best_rows, project

    rows = _knowledge_rows(joint, {"N": 4096}, lambda m, c: -math.log2(c["s0"]), n=200)
    (tmp_path / "k.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    monkeypatch.setenv("LIFTMAP_KNOWLEDGE", str(tmp_path))
    s = make_strategy("model", joint, seed=0, n_init=4, batch=4)
    first = [next(s.candidates()) for _ in range(1)]
    want = []
    for r in best_rows(rows):
        m = next(m for m in joint.mappings if dict(m) == r["mapping"])
        cfg = project(r["tuning"], joint.tuning(m).space)
        if cfg is not None and (m, cfg) not in want:
            want.append((m, cfg))
    # each start moved uphill by the prior plus the transferred score (a value near by
    # number is not near by effect)
    fresh = make_strategy("model", joint, seed=0, n_init=4, batch=4)
    taken: set = set()
    climbed = [fresh._climb(m, c, taken, score=fresh.prior) for m, c in want[:2]]
    assert (first[0].mapping, first[0].tuning) == climbed[0]
    assert all(fresh.prior(*c) >= fresh.prior(*w) for c, w in zip(climbed, want))
    assert climbed != want[:2], "the projected starts already top the prior: no test"
    it = make_strategy("model", joint, seed=0, n_init=4, batch=4).candidates()
    again = [(c.mapping, c.tuning) for c in (next(it) for _ in range(4))]
    assert again[:2] == climbed  # n_init // 2 starts, the same on every run


def test_conv_task_adds_zero_channels_so_that_the_reduction_vectorises():
    """3 RGB channels of a 3x3 kernel make a reduction of 27, which only v=1 divides: the
    task runs with a fourth, zero channel (the layer's FLOP count and result unchanged)."""
    from ir.conv_layer import ConvLayer
    from mapper.explore.task import conv_channels

    rgb = ConvLayer("rgb", 3, 8, 8, 4)
    assert conv_channels(rgb) == 4
    assert conv_channels(ConvLayer("c2", 2, 8, 8, 4)) == 4  # 18 -> 36
    assert conv_channels(ConvLayer("c5", 5, 8, 8, 4, K=1, P=0)) == 8
    assert conv_channels(parse_layer("19/4")) == 512
    task = Task.conv_layer(rgb)
    assert task.sizes["C"] == 4 and task.flops == rgb.flops
    x, w = task.inputs["inputData"], task.inputs["kernelsWeights"]
    assert x.shape == (8, 8, 4) and w.shape == (4, 3, 3, 4)
    assert not x[..., 3:].any() and not w[..., 3:].any()
    tp = task.joint().tuning(task.joint().mappings[0])
    assert 4 in tp.params["v"].domain


@pytest.mark.opencl
@pytest.mark.slow  # over 3 s: the model strategy's start on a convolution
def test_conv_task_with_added_channels_computes_the_layer(tmp_path):
    from ir.conv_layer import ConvLayer

    res = explore(Task.conv_layer(ConvLayer("rgb", 3, 8, 8, 4)), budget=4,
                  store=tmp_path / "s.sqlite", options=ExploreOptions.of(count=False))
    assert res.counts.get("ok", 0) >= 1 and "wrong-result" not in res.counts, res.counts


def test_nearest_values_are_the_head_of_the_full_ranking():
    """``knowledge._nearest`` walks out from the wanted value instead of sorting the whole
    domain: the same ranking (distance on the log scale, ties to the smaller value)."""
    import random

    from mapper.explore.knowledge import _nearest

    rng = random.Random(3)
    for _ in range(200):
        dom = tuple(rng.sample(range(0, 400), rng.randint(1, 40)))
        want = math.log2(1 + rng.choice([0, 1, 7, 8, 64, 399, 1000, rng.randint(0, 500)]))
        full = sorted((abs(math.log2(1 + v) - want), v) for v in dom)
        for limit in (1, 3, 66):
            assert _nearest(dom, want, limit) == full[:limit]


def _small_quota(monkeypatch):
    """The pool's quotas and fills at an eighth of their defaults (each mapping new to a
    space costs its tuning space, ~50 ms on the convolution): still far more samples than
    new mappings, so that the quota binds as it does at the defaults."""
    from mapper.explore.model import ModelStrategy as M

    assert M.NEW_FIRST < M.FIRST_POOL and M.NEW_PER_BATCH < M.GROW  # the defaults bind too
    for name in ("NEW_FIRST", "NEW_PER_BATCH", "FIRST_POOL", "GROW"):
        monkeypatch.setattr(M, name, getattr(M, name) // 8)


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_pool_builds_few_tuning_spaces_per_fill(conv17_task, monkeypatch):
    """A sample of a mapping whose tuning space is not built costs building it (a lowering
    and its resource probes): the pool builds at most ``NEW_FIRST`` before the first
    proposal and ``NEW_PER_BATCH`` per later fill, and draws its other samples from the
    mappings it has drawn (uniform draws over a convolution's mappings took 40% of a run)."""
    _small_quota(monkeypatch)  # NEW_FIRST 8, NEW_PER_BATCH 2
    js = fresh_joint(conv17_task)  # its own: no space built yet
    s = make_strategy("model", js, seed=0, transfer=False)
    pool: list = []
    seen: set = set()
    s._fill(pool, seen, 16)
    assert len(pool) == 16 and 0 < len(js._tuning) <= s.NEW_FIRST < 16
    built = len(js._tuning)
    s._fill(pool, seen, 8)
    assert len(pool) == 24 and len(js._tuning) - built <= s.NEW_PER_BATCH
    assert {m for m, _ in pool} == s._drawn_set


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_a_second_strategy_on_a_used_space_proposes_the_same(conv17_task, monkeypatch):
    """The pool's quota counts mappings new to the pool, not to the space: a strategy on
    a space another strategy has used (a probe's, then the explored run's) proposes what
    it would on a fresh one."""
    from mapper.explore.model import ModelStrategy

    _small_quota(monkeypatch)  # binds all the same: a quota counted per space fails here
    # one ascent of the prior per initial pick, not four (each ~1 s on a new space); it
    # still builds the tuning spaces of the mappings next to its path
    monkeypatch.setattr(ModelStrategy, "CLIMB_FROM", 1)

    def first(js, n=3):  # the first design (1), then a batch after the pool's next fill
        s = make_strategy("model", js, seed=0, transfer=False, n_init=1, batch=2, local=1,
                          trees=10)
        it = s.candidates()
        out = []
        for _ in range(n):
            c = next(it)
            out.append(_key(c))
            s.observe(c, observed("ok", 1.0 + c.tuning.get("sigma", 1)))
        return out

    js = fresh_joint(conv17_task)
    once = first(js)
    assert first(js) == once == first(fresh_joint(conv17_task))


def test_local_search_goes_on_below_the_best_five(joint):
    """Once the neighbours of the five best are all proposed, the local search takes
    those of the next best (a lucky measurement on top must not stall it)."""
    from mapper.explore.model import _key as mkey

    s = make_strategy("model", joint, seed=1, n_init=4, batch=4, local=2, pool_size=100)
    cands = list({mkey(m, c): (m, c) for m, c in joint.sample(40, seed=0)}.values())[:8]
    for i, (m, c) in enumerate(cands):
        s.observe(Candidate(m, c), observed("ok", 10.0 - i))
    done = {mkey(m, c) for m, c in cands}
    for m, c in cands[:5]:
        done |= {mkey(nm, nc) for nm, nc in s.neighbours(m, c)}
    below = set()
    for m, c in cands[5:]:
        below |= {mkey(nm, nc) for nm, nc in s.neighbours(m, c)}
    picks = s._local_picks(2, set(done))
    assert picks and all(mkey(m, c) in below - done for m, c in picks)


def test_a_repaired_move_is_remembered_and_copied(conv17, monkeypatch):
    """``_valid_or_repaired`` answers a repeated question from memory (the repair runs
    once), with a copy."""
    import mapper.explore.knowledge as knowledge

    js, m = conv17
    s = make_strategy("model", js, seed=0, transfer=False)
    space = js.tuning(m).space
    cfg = dict(space[0])
    calls = []
    real = knowledge.project
    monkeypatch.setattr(knowledge, "project", lambda *a, **k: calls.append(a) or real(*a, **k))
    p = next(p for p in sorted(cfg) if dict(cfg, **{p: cfg[p] + 1}) not in space)
    moved = dict(cfg, **{p: cfg[p] + 1})
    a = s._valid_or_repaired(space, dict(moved), (p,))
    b = s._valid_or_repaired(space, dict(moved), (p,))
    assert len(calls) == 1
    assert a == b and (a is None or (a is not b and a in space))
