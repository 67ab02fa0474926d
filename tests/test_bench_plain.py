"""experiments/bench_plain.py on a tiny case: the default search's answer on plain programs
timed against the baseline a user would pick (a smoke test: no speed is asserted)."""

from __future__ import annotations

import json

import pytest


@pytest.mark.opencl
@pytest.mark.slow  # two short explorations and their interleaved timing
def test_bench_plain_times_the_answer_against_the_baseline(tmp_path, capsys):
    from experiments import bench_plain

    out = tmp_path / "plain.json"
    assert bench_plain.main(["--programs", "row_sums,box_blur3x3", "--scale", "32",
                             "--budget", "6s", "--rounds", "1", "--repeats", "2",
                             "--json", str(out)]) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["copy_gbs"] > 0 and "copy bandwidth" in text and "family" in doc["machine"]
    sums, blur = doc["rows"]
    assert sums["program"] == "row_sums" and sums["liftmap_ms"] > 0 and sums["ratio"] > 0
    assert sums["of_copy_bandwidth"] > 0 and "numpy sum" in text
    # OpenCV is the bench extra's: the blur is timed against it, or says it is missing
    assert blur["liftmap_ms"] > 0 and ("ratio" in blur or "not installed" in
                                        blur["baseline_skipped"])


def test_bench_plain_refuses_an_unknown_program():
    from experiments import bench_plain

    with pytest.raises(SystemExit) as e:
        bench_plain.main(["--programs", "nope"])
    assert e.value.code == 2
