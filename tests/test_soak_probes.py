"""The soak's store probe: a store being created is empty, not corrupt."""

import sqlite3

from experiments.soak_probes import store_probe
from mapper.explore.store import ResultStore


def test_a_store_whose_tables_are_not_committed_has_no_rows_and_is_intact(tmp_path):
    path = tmp_path / "new.sqlite"
    assert store_probe(str(path)) == (0, "ok")  # not there yet
    db = sqlite3.connect(path)  # its creator has connected: the file exists, no table yet
    db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)")
    db.commit()
    db.close()
    assert store_probe(str(path)) == (0, "ok")


def test_a_store_is_counted_and_a_broken_file_is_an_error(tmp_path):
    path = tmp_path / "s.sqlite"
    ResultStore(str(path)).close()
    assert store_probe(str(path)) == (0, "ok")
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database at all" * 100)
    rows, verdict = store_probe(str(bad))
    assert rows == 0 and verdict.startswith("error: ")
