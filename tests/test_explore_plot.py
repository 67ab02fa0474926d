"""``mapper plot``: figures re-drawn from a results store alone (no device, no re-run)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mapper.cli import main
from mapper.explore.plot import pareto_front, progress_curves, time_breakdown
from mapper.explore.store import Context, ResultStore

pytest.importorskip("matplotlib")


def _row(i, strategy, gflops, status="ok", mem=1 << 20):
    return dict(key=f"k{strategy}{i}", run_id=f"run-{strategy}", strategy=strategy, seed=0,
                idx=i, mapping="A=20 B=10", tuning="{}", status=status, search_s=0.5,
                lower_s=0.1, build_s=0.2, run_s=1.0, wall_s=1.3, gflops=gflops,
                time_s=1.0 / gflops if gflops else None, memory_bytes=mem, created=float(i))


@pytest.fixture
def store(tmp_path):
    st = ResultStore(tmp_path / "s.sqlite")
    st.bind(Context("prog", "abc", {"N": 64}, {"name": "dev"}))
    for i, g in enumerate([1.0, 3.0, 2.0, None, 5.0]):
        st.add(_row(i, "solver", g, status="ok" if g else "rejected", mem=(5 - i) << 20))
    for i, g in enumerate([4.0, 1.0]):
        st.add(_row(i, "model", g))
    yield st
    st.close()


def test_progress_curves_track_the_best_so_far(store):
    curves = progress_curves(store.records())
    solver = next(v for k, v in curves.items() if k.startswith("solver"))
    assert [(round(t, 1), g, n) for t, g, n in solver] == [
        (1.8, 1.0, 1), (3.6, 3.0, 2), (9.0, 5.0, 5)]
    model = next(v for k, v in curves.items() if k.startswith("model"))
    assert [g for _, g, _ in model] == [4.0, 4.0] and model[-1][2] == 2


def test_time_breakdown_and_pareto_front(store):
    br = time_breakdown(store.records())
    assert br["solver"]["search_s"] == pytest.approx(2.5)
    assert br["model"]["run_s"] == pytest.approx(2.0)
    assert pareto_front([(1, 5), (2, 3), (3, 4), (4, 1)]) == [(1, 5), (2, 3), (4, 1)]


def test_mapper_plot_writes_three_pngs(store, tmp_path, capsys):
    out = tmp_path / "plots"
    assert main(["plot", store.path, "--out", str(out)]) == 0
    for name in ("progress.png", "breakdown.png", "pareto.png"):
        f = out / name
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f.stat().st_size > 5000
    assert "progress.png" in capsys.readouterr().out


def test_mapper_plot_on_an_empty_or_missing_store_is_one_line(tmp_path, capsys):
    empty = ResultStore(tmp_path / "e.sqlite")
    empty.close()
    assert main(["plot", str(tmp_path / "e.sqlite")]) == 2
    assert "holds no candidate" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "nope.sqlite")]) == 2
    assert "no results store" in capsys.readouterr().err


def test_without_flop_counts_the_curve_follows_the_kernel_time(store):
    rows = [replace(r, gflops=None) for r in store.records()]
    solver = next(v for k, v in progress_curves(rows, "time_ms").items()
                  if k.startswith("solver"))
    assert [round(v, 1) for _, v, _ in solver] == [1000.0, 333.3, 200.0]


def test_mapper_plot_to_an_existing_file_is_one_line(store, tmp_path, capsys):
    f = tmp_path / "README.md"
    f.write_text("keep me\n")
    assert main(["plot", store.path, "--out", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "is a file, not a folder" in err
    assert len(err.strip().splitlines()) == 1 and f.read_text() == "keep me\n"
    assert main(["plot", store.path, "--out", str(f / "sub")]) == 2
    assert "cannot make the folder" in capsys.readouterr().err
