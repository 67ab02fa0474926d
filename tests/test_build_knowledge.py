"""experiments/build_knowledge.py: knowledge rows from stores, appended without repeats."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.build_knowledge import main, row_key
from mapper.explore.knowledge import from_store
from mapper.explore.store import ResultStore

REPO = Path(__file__).resolve().parents[1]
STORE = str(REPO / "results" / "search-zen4" / "search-shape0-64x56x56x128k3s2p1.kernels.sqlite")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_append_keeps_the_rows_and_adds_only_new_candidates(tmp_path) -> None:
    out = tmp_path / "k.jsonl"
    own = from_store(STORE)
    assert own, "the committed store has ok candidates"
    old = dict(own[0], sizes=dict(own[0]["sizes"], H=7))  # a row of another size
    out.write_text(json.dumps(old) + "\n")
    assert main([STORE, "--out", str(out), "--append"]) == 0
    rows = _rows(out)
    assert rows[0] == old and len(rows) == 1 + len({row_key(r) for r in own})
    assert main([STORE, "--out", str(out), "--append"]) == 0  # again: nothing new
    assert _rows(out) == rows
    assert main([STORE, "--out", str(out)]) == 0  # without --append: the store's rows only
    assert {row_key(r) for r in _rows(out)} == {row_key(r) for r in own}


def test_rows_name_their_device_and_old_rows_can_be_tagged(tmp_path) -> None:
    own = from_store(STORE)
    with ResultStore(STORE, readonly=True) as st:
        name = json.loads(st.meta()["device"])["name"]
    assert name and {r["device"] for r in own} == {name}
    out = tmp_path / "k.jsonl"
    old = {k: v for k, v in own[0].items() if k != "device"}
    out.write_text(json.dumps(old) + "\n")
    assert main([STORE, "--out", str(out), "--append", "--tag-device", "old-cpu"]) == 0
    rows = _rows(out)
    assert rows[0] == dict(old, device="old-cpu")
    # the same candidate measured on another device is another row
    assert len(rows) == 1 + len({row_key(r) for r in own})
