"""experiments.figures and experiments.paper (with fig_exploration.py and
fig_fusion.py): figures re-drawn from small committed stores
(tests/data/figures/, a real run of the scripts on VGG-16 layer 19 at 1/8 size, written
before the search time was split), a store with the split, and the pure functions the
figures are made of. No device is needed."""

from __future__ import annotations

import csv
import os
import random
import shutil
import statistics

import pytest

from experiments import figures, paper
from experiments.paper import dataset_values, expectancy_curve, first_n_reaching
from mapper.explore import Context, ResultStore
from mapper.explore.record import Record

pytest.importorskip("matplotlib")

DATA = os.path.join(os.path.dirname(__file__), "data", "figures")
TAG = "layer19-scale8"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def stores(tmp_path):
    """A copy of the committed stores (reading them must not touch the checkout)."""
    d = tmp_path / "stores"
    shutil.copytree(DATA, d)
    return d


def _csv(path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ------------------------------------------------------------------ the expectancy curve


def test_expectancy_curve_exact_values():
    assert expectancy_curve([7.0, 7.0, 7.0]) == [(1, 7.0), (2, 7.0), (3, 7.0)]
    vals = [0.0, 0.0, 0.0, 9.0]
    # all four: the maximum always; one of four: 0 three times in four, so the median is 0;
    # three of four contain the 9 three times in four, so the median is 9
    assert expectancy_curve(vals, [4, 1, 3]) == [(4, 9.0), (1, 0.0), (3, 9.0)]
    assert expectancy_curve([1, 2, 3, 4, 5], [5])[0] == (5, 5)


def test_expectancy_curve_is_the_median_of_seeded_draws_without_replacement():
    vals = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    rng = random.Random(5)
    want = statistics.median(max(rng.sample(vals, 3)) for _ in range(7))
    assert expectancy_curve(vals, [3], trials=7, seed=5) == [(3, want)]
    curve = expectancy_curve(vals)
    assert [n for n, _ in curve] == list(range(1, 9))
    assert all(a[1] <= b[1] for a, b in zip(curve, curve[1:]))  # more draws, no worse
    with pytest.raises(ValueError, match="1..8"):
        expectancy_curve(vals, [9])


def test_dataset_values_and_first_n_reaching():
    rows = [Record(key=f"k{i}", run_id="r", strategy="solver", mapping={"A": 20}, status=s,
                   gflops=g)
            for i, (s, g) in enumerate([("ok", 2.5), ("timeout", None), ("ok", None),
                                        ("wrong-result", 9.0)])]
    assert dataset_values(rows) == [2.5, 0.0, 0.0, 0.0]
    curve = [(1, 1.0), (2, 3.0), (3, 4.0)]
    assert first_n_reaching(curve, 3.0) == 2
    assert first_n_reaching(curve, 4.5) is None


# ------------------------------------------------- figures from the committed store


@pytest.mark.slow
def test_figures_from_the_committed_stores(stores, tmp_path, capsys):
    out = tmp_path / "figs"
    (stores / "lowering-rate.csv").write_text(
        "layer,device,total,lowered,rejected_reason,count\n"
        "19,cpu,100,60,local-memory,30\n19,cpu,100,60,private-memory,10\n")
    assert figures.main(["--stores", str(stores), "--out", str(out)]) == 0
    md = capsys.readouterr().out
    for name in (f"fig5-{TAG}.png", f"fig6-{TAG}.png", f"pareto-{TAG}.png",
                 "validity-breakdown.png"):
        assert (out / name).read_bytes()[:8] == PNG, name
    # Fig. 5: one CSV row per strategy, with what its store holds
    rows = {r["strategy"]: r for r in _csv(out / f"fig5-{TAG}.csv")}
    assert set(rows) == {"manual", "solver", "random", "model"}
    for strategy, r in rows.items():
        with ResultStore(stores / f"fig5-{TAG}-{strategy}.sqlite", readonly=True) as st:
            assert int(r["candidates"]) == len(st)
            assert int(r["runs"]) == len(st.runs())
            best = st.best_records()
            if best:
                assert float(r["best_gflops"]) == pytest.approx(best[0].gflops, rel=1e-5)
                assert f"{best[0].gflops:.3g}" in md
            else:
                assert r["best_gflops"] == ""
    assert "error: no valid assignment" in rows["random"]["stopped_by"]
    assert float(rows["random"]["search_s"]) > 1.0  # the draws' time, from the runs table
    assert "scaled to H,W = 3,3" in md
    # Fig. 6: the curve's last point is the data set's best
    curves = _csv(out / f"fig6-{TAG}.csv")
    labels = [c for c in curves[0] if c != "N"]
    assert "fusion-never-heuristics-off" in labels and len(labels) == 4
    for lab in labels:
        with ResultStore(stores / f"fig6-{TAG}-{lab}.sqlite", readonly=True) as st:
            vals = dataset_values(st.records())
        last = [r for r in curves if r[lab]][-1]
        assert int(last["N"]) == len(vals)
        assert float(last[lab]) == pytest.approx(max(vals), rel=1e-5)
    # CC'22 Table 4 and the validity breakdown
    t4 = {r["paper_row"]: r for r in _csv(out / "table4-constraints.csv")}
    assert t4["Private memory"]["paper_instances"] == "32"
    assert t4["total"]["paper_instances"] == "123"
    v = _csv(out / "validity-breakdown.csv")
    assert [(r["rejected_reason"], r["pct_of_total"]) for r in v] == [
        ("local-memory", "30.0"), ("private-memory", "10.0")]
    assert v[0]["lowered_pct"] == "60.0"


def test_missing_or_broken_stores_are_notes_not_tracebacks(tmp_path, capsys):
    out = tmp_path / "figs"
    assert figures.main(["--stores", str(tmp_path / "nope"), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "no stores folder" in err and (out / "table4-constraints.csv").exists()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "fig5-layer1-solver.sqlite").write_bytes(b"not a database at all" * 100)
    (bad / "lowering-rate.csv").write_text("layer,count\n1,2\n")
    assert figures.main(["--stores", str(bad), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "skipped" in err and "fig5-layer1-solver.sqlite" in err
    assert "lacks column(s) device, total, lowered, rejected_reason" in err
    assert "Fig. 6: no fig6" in err


# ------------------------------------------------------------------ pure pieces of the figures


def test_strategy_summary_of_an_older_store():
    """Rows without the split search in "other search"; runs without ``mapping_s``: a run
    stopped by a strategy error counts its time after the rows as finding mappings."""
    rows = [Record(key=f"k{i}", run_id="r1", strategy="solver", seed=0, idx=i, status="ok",
                   mapping={"A": 20}, gflops=g, time_s=1.0, search_s=0.5, lower_s=0.1,
                   build_s=0.2, run_s=1.0, wall_s=1.3, memory_bytes=None, created=float(i))
            for i, g in enumerate([1.0, 4.0, 2.0])]
    runs = [{"run_id": "r1", "started": 0.0, "finished": 6.0, "stopped_by": "budget"},
            {"run_id": "r2", "started": 10.0, "finished": 70.0, "stopped_by": "error: x"}]
    s = figures.strategy_summary(figures.StoreData("p", "solver", None, {}, rows, runs))
    assert (s["candidates"], s["ok"], s["best_gflops"], s["best_after_candidates"]) == \
        (3, 3, 4.0, 2)
    assert s["best_after_s"] == pytest.approx(3.6)
    assert s["search_s"] == pytest.approx(1.5 + 60.0)
    assert (s["other_search_s"], s["mapping_s"], s["tuning_s"]) == \
        (pytest.approx(1.5), pytest.approx(60.0), 0.0)
    assert s["exploration_s"] == pytest.approx(1.5 + 60.0 + 0.3 + 0.6 + 3.0)
    assert s["stopped_by"] == "budget; error: x"


def test_describe_layer_and_dataset_label():
    sizes = {"C": 512, "H": 7, "W": 7, "M": 512, "K": 3}
    assert figures.describe_layer("conv:vgg16-19,21/4", sizes) == \
        "VGG-16 layer 19,21 (C=512, M=512, K=3), scaled to H,W = 7,7 (1/4)"
    assert figures.describe_layer("conv:vgg16-7", {**sizes, "H": 112, "W": 112}).endswith(
        "H,W = 112,112")
    assert figures.describe_layer("conv:vgg16-C8H6W6M8", sizes).startswith("convolution C=512")
    assert figures.describe_layer("listing3", {}).startswith("convolution")
    assert figures.dataset_label("fusion-free-heuristics-off") == "fusion free, heuristics off"


def test_store_names_are_grouped_by_layer(tmp_path):
    for name in ("fig5-layer19-scale4-solver.sqlite", "fig5-layer19-scale4-model.sqlite",
                 "fig5-layer19-scale4-baseline.json", "fig5-C8H6W6M8-manual.sqlite",
                 "fig6-layer21-fusion-free-heuristics-on.sqlite", "other.sqlite"):
        (tmp_path / name).write_text("")
    g5 = figures.find_stores(str(tmp_path), figures.FIG5_RE)
    assert {k: sorted(lab for lab, _ in v) for k, v in g5.items()} == {
        "layer19-scale4": ["model", "solver"], "C8H6W6M8": ["manual"]}
    g6 = figures.find_stores(str(tmp_path), figures.FIG6_RE)
    assert list(g6) == ["layer21"] and g6["layer21"][0][0] == "fusion-free-heuristics-on"


def test_table4_counts_are_the_librarys():
    from ir.programs import conv_partial_stage
    from mapper.api import problem

    rows = figures.table4_rows()
    total = rows[-1]
    assert total["instances"] == len(problem(conv_partial_stage()).constraints)
    assert total["validity_only"] == len(problem(conv_partial_stage(),
                                                 heuristics=False).constraints)
    assert sum(r["instances"] for r in rows[:-1]) == total["instances"]
    assert [r["paper_instances"] for r in rows[:6]] == [32, 13, 34, 1, 34, 9]


def test_validity_breakdown_tabulates_reasons_largest_first():
    rows = [{"layer": "7", "device": "gpu", "total": 50, "lowered": 5,
             "rejected_reason": r, "count": n}
            for r, n in (("synchronizability", 15), ("memory", 30), ("", 0))]
    t = figures.validity_breakdown(rows)
    assert [(r["rejected_reason"], r["count"], r["pct_of_total"]) for r in t] == [
        ("memory", 30, "60.0"), ("synchronizability", 15, "30.0")]
    assert t[0]["lowered_pct"] == "10.0"


def test_pareto_points_keep_ok_rows_with_time_and_memory():
    rows = [Record(key=f"k{i}", run_id="r", strategy="solver", mapping={"A": 20}, status=s,
                   time_s=t, memory_bytes=m)
            for i, (s, t, m) in enumerate([("ok", 2e-3, 2 << 20), ("ok", 1e-3, None),
                                           ("crash", 1e-3, 1 << 20)])]
    assert figures.pareto_points(rows) == [(2.0, 2.0)]


# ------------------------------------------------------------------ the search time split


def _split_row(i, strategy, gflops, *, mapping_s, tuning_s, search_s):
    return dict(key=f"{strategy}{i}", run_id=f"run-{strategy}", strategy=strategy, seed=0,
                idx=i, mapping="T=21", tuning="{}", status="ok", gflops=gflops,
                time_s=1e-3, search_s=search_s, mapping_s=mapping_s, tuning_s=tuning_s,
                lower_s=0.5, build_s=1.0, run_s=2.0, wall_s=3.5, created=float(i))


def test_fig5_splits_finding_mappings_from_choosing_tuning(tmp_path, capsys):
    """A store with the split columns: finding mappings (rows and the run's own mapping
    search) and choosing tuning values are separate stages; the model's rest is apart."""
    stores = tmp_path / "stores"
    ctx = Context("conv:vgg16-19/8", "abc", {"C": 512, "H": 3, "W": 3, "M": 512, "K": 3},
                  {"name": "dev"})
    for strategy, run_mapping_s, split in (
            ("random", 40.0, dict(mapping_s=5.0, tuning_s=0.25, search_s=5.25)),
            ("model", 0.1, dict(mapping_s=0.01, tuning_s=0.5, search_s=1.51))):
        with ResultStore(paper.fig5_store_path(str(stores), "layer19-scale8", strategy)) as st:
            st.bind(ctx)
            st.start_run(f"run-{strategy}", strategy, 0, "60s", {})
            for i, g in enumerate([1.0, 2.0]):
                st.add(_split_row(i, strategy, g, **split))
            st.finish_run(f"run-{strategy}", "time", 2, 0, None, run_mapping_s)
    out = tmp_path / "figs"
    assert figures.main(["--stores", str(stores), "--out", str(out)]) == 0
    assert "finding mappings | choosing tuning" in capsys.readouterr().out
    rows = {r["strategy"]: r for r in _csv(out / f"fig5-{TAG}.csv")}
    assert float(rows["random"]["mapping_s"]) == pytest.approx(2 * 5.0 + 40.0)
    assert float(rows["random"]["tuning_s"]) == pytest.approx(0.5)
    assert float(rows["random"]["other_search_s"]) == pytest.approx(0.0, abs=1e-9)
    assert float(rows["model"]["other_search_s"]) == pytest.approx(2 * 1.0)
    assert float(rows["model"]["search_s"]) == pytest.approx(0.1 + 2 * 1.51)
    assert float(rows["random"]["exploration_s"]) == pytest.approx(50.5 + 2 * 3.5)
    assert (out / f"fig5-{TAG}.png").read_bytes()[:8] == PNG


# ------------------------------------------------------------------ the collection scripts


BAD_ARGUMENTS = {  # per collection: bad arguments (split at spaces), what the error says
    paper.parse_fig5_args: [
        ("--budget 0", "positive"),
        ("--strategies manual,nope", "unknown strategy"),
        ("--scale 0", "--scale"),
        ("--layers 99", "no VGG-16 layer"),
        ("--sizes C=8,H=6", "missing W, M"),
        ("--sizes C=8,H=x", "--sizes"),
        ("--seeds 0", "--seeds"),
        ("--timeout 0", "--timeout"),
    ],
    paper.parse_fig6_args: [
        ("--fusion always,sometimes", "sometimes"),
        ("--heuristics maybe", "--heuristics"),
        ("--candidates 0", "--candidates"),
        ("--workers 0", "--workers"),
    ],
}


@pytest.mark.parametrize("parse, argv, message", [
    (parse, argv, message) for parse, cases in BAD_ARGUMENTS.items() for argv, message in cases
])
def test_figure_arguments_refuse_bad_input(parse, argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        parse(argv.split())
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_layer_names_and_store_paths():
    args = paper.parse_fig5_args(["--layers", "19", "21", "--scale", "4"])
    assert [(t, (la.C, la.H, la.W)) for t, la in args.layer_list] == [
        ("layer19-scale4", (512, 7, 7)), ("layer21-scale4", (512, 7, 7))]
    args = paper.parse_fig6_args(["--sizes", "C=8,H=6,W=6,M=8", "--heuristics", "off,on"])
    assert args.layer_list[0][0] == "C8H6W6M8" and args.heuristics == [False, True]
    assert paper.fig5_store_path("r", "layer19", "solver") == \
        os.path.join("r", "fig5-layer19-solver.sqlite")
    assert paper.fig6_store_path("r", "layer19", "never", False) == \
        os.path.join("r", "fig6-layer19-fusion-never-heuristics-off.sqlite")
    for path, pattern in ((paper.fig5_store_path("r", "layer19-scale4", "model"),
                           figures.FIG5_RE),
                          (paper.fig6_store_path("r", "layer19-scale4", "free", True),
                           figures.FIG6_RE)):
        assert pattern.match(os.path.basename(path))["tag"] == "layer19-scale4"


def test_heuristics_off_settings():
    from ir.programs import cc22_listing3

    keep, same = paper.distinct_settings(
        cc22_listing3(), [("always", True), ("always", False), ("free", False)])
    assert keep == [("always", True), ("always", False)]
    assert same == {("free", False): ("always", False)}  # rule 8 is a heuristic


@pytest.fixture(scope="module")
def task_off():
    from ir.conv_layer import parse_layer

    return paper.conv_task(parse_layer("19/8"), heuristics=False,
                           name_suffix="[fusion-always-heuristics-off]")


def test_hand_mapping_is_valid_under_fusion_always(task_off):
    from mapper.api import check_mapping

    m = paper.hand_mapping(task_off)
    assert {k: m[k] for k in ("T", "G", "W", "C")} == {"T": 21, "G": 20, "W": 11, "C": 10}
    assert check_mapping(task_off.program, m, fusion="always") == []


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
def test_heuristics_off_task_enumerates_and_lowers_what_only_heuristics_reject(task_off):
    from mapper.api import check_mapping, count_valid_mappings

    assert task_off.name.endswith("/8 [fusion-always-heuristics-off]")
    assert (task_off.fusion, task_off.heuristics) == ("always", False)
    js = task_off.joint()
    on = paper.valid_mappings(task_off.program, "always", True)
    assert not js.heuristics
    assert len(js.mappings) == count_valid_mappings(task_off.program, fusion="always",
                                                    heuristics=False)
    m = next(m for m in js.mappings if frozenset(m.items()) not in on)
    assert check_mapping(task_off.program, m, fusion="always")  # a heuristic rejects it
    assert not check_mapping(task_off.program, m, fusion="always", heuristics=False)
    cfg = js.tuning(m).space.sample(1, seed=0)[0]
    assert task_off.lower_fn(m, cfg)().kernels  # lowered with the validity rules only
