"""Kernel Tuner caches and T4 results in and out (mapper/explore/interop.py): a committed
store written in both formats reads back into the same records; Kernel Tuner 1.5 replays the
exported cache in simulation mode; the T4 file validates against the schema Kernel Tuner
ships; a cache written the way Kernel Tuner writes one (strings, booleans, errors, left open)
reads into records, ``mapper results`` shows it and a strategy replays it."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

from mapper import cli
from mapper.explore import interop
from mapper.explore.interop import InteropError, TuningFile
from mapper.explore.replay import compare, replay

REPO = Path(__file__).resolve().parent.parent
STORE = str(REPO / "results" / "search" / "search-19_21-512x28x28x512k3s1p1.sqlite")


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _kernel_tuner():
    return pytest.importorskip("kernel_tuner", reason="kernel_tuner is not installed (the "
                               "kernel-tuner extra: pip install 'kernel_tuner==1.5.*')")


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("export")
    out = {}
    for fmt in interop.FORMATS:
        path = str(d / f"{fmt}.json")
        assert interop.export_store(STORE, fmt, path) == 86
        out[fmt] = path
    return out


@pytest.mark.parametrize("fmt", interop.FORMATS)
def test_store_round_trips_through_both_formats(exported, fmt) -> None:
    orig = TuningFile.of_store(STORE)
    back = interop.read_tuning_file(exported[fmt])
    assert {r.key: r for r in back.records} == {r.key: r for r in orig.records}
    assert back.meta == orig.meta and back.sizes == orig.sizes
    assert [r["run_id"] for r in back.runs] == [r["run_id"] for r in orig.runs]


def test_kernel_tuner_cache_has_every_parameter_its_key_and_errors_in_its_form(
        exported) -> None:
    doc = json.loads(Path(exported["kernel-tuner"]).read_text())
    keys = doc["tune_params_keys"]
    assert keys[0] == interop.MAPPING_PARAM and set(keys[1:]) == {
        "kappa", "omega", "rho", "sigma", "theta", "v"}
    maps = doc["tune_params"]["mapping"]
    assert all("=" in m and "," not in m for m in maps) and maps[0].startswith("T=")
    errors = [e for e in doc["cache"].values() if "__error__" in e]
    assert len(errors) == 12 and {e["__error__"] for e in errors} == {"RuntimeFailedConfig"}
    assert all("time" not in e and e["liftmap_status"] == "timeout" for e in errors)
    for key, e in doc["cache"].items():
        assert key == ",".join(str(e[p]) for p in keys)
        assert all(p in e for p in keys)
        assert all(k in e for k in ("compile_time", "verification_time", "benchmark_time"))


def test_kernel_tuner_replays_the_exported_cache_in_simulation_mode(exported) -> None:
    kt = _kernel_tuner()
    path = exported["kernel-tuner"]
    doc = json.loads(Path(path).read_text())
    ok = {k: e["time"] for k, e in doc["cache"].items() if "__error__" not in e}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for strategy in ("random_sample", "genetic_algorithm"):
            results, env = kt.tune_kernel(**interop.kernel_tuner_args(path), strategy=strategy,
                                          strategy_options={"max_fevals": 20})
            assert 0 < len(results) and all(
                ",".join(str(r[p]) for p in doc["tune_params_keys"]) in doc["cache"]
                for r in results)
        # the whole space: exactly the stored candidates, its best the store's best
        results, _ = kt.tune_kernel(**interop.kernel_tuner_args(path),
                                    strategy="brute_force")
    assert len(results) == 86
    assert min(r["time"] for r in results if "__error__" not in r) == min(ok.values())
    assert len(interop.kernel_tuner_restrictions(doc, failures=False)) == 1


def test_t4_file_validates_against_kernel_tuners_schema(exported) -> None:
    _kernel_tuner()
    doc = json.loads(Path(exported["t4"]).read_text())
    interop.validate_t4(doc)
    assert doc["schema_version"] == "1.0.0" and len(doc["results"]) == 86
    assert {r["invalidity"] for r in doc["results"]} == {"correct", "timeout"}
    first = doc["results"][0]
    assert "mapping" in first["configuration"] and first["objectives"] == ["time"]
    bad = dict(doc, results=[dict(first, invalidity="fine")])
    with pytest.raises(InteropError, match="results/0/invalidity"):
        interop.validate_t4(bad)


# ----------------------------------------------------------------------------- made elsewhere

TUNE_PARAMS = {"block_size_x": [32, 64, 128, 256], "tile": [1, 2, 4],
               "precision": ["float", "double"], "use_shmem": [True, False]}


def kernel_tuner_cache(path: Path, *, left_open: bool = False) -> dict:
    """A cache as Kernel Tuner 1.5 writes one: times in ms, failures as "__error__"."""
    cache = {}
    for bx in TUNE_PARAMS["block_size_x"]:
        for t in TUNE_PARAMS["tile"]:
            for prec in TUNE_PARAMS["precision"]:
                for shm in TUNE_PARAMS["use_shmem"]:
                    e: dict = {"block_size_x": bx, "tile": t, "precision": prec,
                               "use_shmem": shm, "compile_time": 3.0,
                               "verification_time": 0.5, "benchmark_time": 7.0,
                               "strategy_time": 0.1, "framework_time": 0.2,
                               "timestamp": "2024-05-01 10:00:00.000000+00:00"}
                    if bx * t > 512:
                        e["__error__"] = "CompilationFailedConfig"
                    else:
                        time = 64.0 / bx * (2 if prec == "double" else 1) + t * (1 - shm / 2)
                        e.update(time=time, times=[time, time])
                    cache[",".join(str(e[k]) for k in TUNE_PARAMS)] = e
    doc = {"device_name": "NVIDIA A100-PCIE-40GB", "kernel_name": "vector_add",
           "problem_size": [1000000], "tune_params_keys": list(TUNE_PARAMS),
           "tune_params": TUNE_PARAMS, "objective": "time", "cache": cache}
    text = json.dumps(doc)
    if left_open:  # interrupted: Kernel Tuner appends entries and closes the file at the end
        text = text[:-2] + ","
    path.write_text(text)
    return doc


def test_a_cache_made_by_kernel_tuner_reads_into_records(tmp_path) -> None:
    path = tmp_path / "vector_add.json"
    doc = kernel_tuner_cache(path, left_open=True)
    tf = interop.read_tuning_file(path)
    assert len(tf.records) == len(doc["cache"]) == 48
    assert tf.kernel_name == "vector_add" and tf.device_name == "NVIDIA A100-PCIE-40GB"
    assert tf.sizes == {"x": 1000000}
    labels = {r.status for r in tf.records}
    assert labels == {"ok", "compile-error"}
    best = min((r for r in tf.records if r.ok), key=lambda r: r.time_s or 0)
    values = interop.decode_tuning(best.tuning, tf.tune_params)
    assert values == {"block_size_x": 256, "tile": 1, "precision": "float",
                      "use_shmem": True}
    assert best.time_s == pytest.approx((64 / 256 + 0.5) / 1000)
    assert not len(best.mapping)
    # written back, the categorical values are the file's again
    again = interop.to_kernel_tuner(tf)
    assert again["tune_params"] == doc["tune_params"]
    assert set(again["cache"]) == set(doc["cache"])


def test_results_and_replay_of_a_cache_made_elsewhere(tmp_path, capsys) -> None:
    path = tmp_path / "vector_add.json"
    kernel_tuner_cache(path)
    rc, out, err = _cli(capsys, "results", str(path), "--top", "3")
    assert rc == 0, err
    assert "vector_add" in out and "48 candidate(s)" in out and "compile-error" in out
    rc, out, err = _cli(capsys, "results", str(path), "--json")
    assert rc == 0, err
    assert len(json.loads(out)["rows"]) == 48
    res = replay(str(path), "model", budget=12, seed=3)
    assert len(res.records) == 12 and all(r.cached for r in res.records)
    c = compare(str(path), ["solver", "model"], seeds=2, fraction=0.95)
    assert c.candidates == 48 and all(len(v) == 2 for v in c.evaluations.values())
    out_path = tmp_path / "again.json"
    rc, out, err = _cli(capsys, "results", str(path), "--format", "t4", "--out",
                        str(out_path))
    assert rc == 0, err
    assert "wrote 48" in out and len(json.loads(out_path.read_text())["results"]) == 48


def test_errors_are_one_line(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    rc, out, err = _cli(capsys, "results", str(bad))
    assert rc == 2 and "neither a Kernel Tuner cache" in err
    bad.write_text("{not json")
    rc, out, err = _cli(capsys, "results", str(bad))
    assert rc == 2 and "not JSON" in err
    rc, out, err = _cli(capsys, "results", STORE, "--format", "t4")
    assert rc == 2 and "--format and --out go together" in err
    with pytest.raises(InteropError, match="not among its values"):
        interop.encode_config({"precision": "half"}, TUNE_PARAMS)
    assert not os.path.exists(tmp_path / "never.json")
