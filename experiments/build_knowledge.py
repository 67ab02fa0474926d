"""Rebuilds a knowledge file (``mapper/explore/knowledge/*.jsonl``) from results stores.

    python -m experiments.build_knowledge results/search/*.sqlite [--out FILE.jsonl] [--append]
        [--tag-device NAME]

Every ``ok`` and early-cut candidate of each store becomes one row (see
``mapper.explore.knowledge``), tagged with the name of the device the store was measured
on; the ``model`` strategy transfers them to explorations of the same program at other
sizes, preferring the rows of its own device. ``--append`` keeps the rows the file has and
adds those it lacks (the same program, sizes, mapping, tuning and device count once);
``--tag-device NAME`` gives the kept rows that name no device this one (rows written before
rows were tagged). Prints the rows and stores read.
"""

from __future__ import annotations

import argparse
import json
import sys

from mapper.explore.knowledge import HERE, from_store


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stores", nargs="+", help="results stores (SQLite) to read")
    ap.add_argument("--out", default=str(HERE / "conv.jsonl"), help="the knowledge file")
    ap.add_argument("--append", action="store_true",
                    help="keep the file's rows, add the stores' rows it lacks")
    ap.add_argument("--tag-device", metavar="NAME",
                    help="the device of the kept rows that name none")
    args = ap.parse_args(argv)
    rows = read_rows_of(args.out) if args.append else []
    if args.tag_device:
        rows = [r if r.get("device") else {**r, "device": args.tag_device} for r in rows]
    seen = {row_key(r) for r in rows}
    kept = len(rows)
    for path in args.stores:
        got = [r for r in from_store(path) if row_key(r) not in seen]
        seen.update(row_key(r) for r in got)
        print(f"{path}: {len(got)} new row(s)")
        rows += got
    with open(args.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"{args.out}: {len(rows)} row(s), {kept} kept, from {len(args.stores)} store(s)")
    return 0


def row_key(row: dict) -> str:
    """What makes a knowledge row the same measurement: program, sizes, mapping, tuning,
    device."""
    return json.dumps([row["program"], row["sizes"], row["mapping"], row["tuning"],
                       row.get("device")], sort_keys=True)


def read_rows_of(path: str) -> list[dict]:
    """The rows of the knowledge file at ``path`` ([] where there is none)."""
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


if __name__ == "__main__":
    sys.exit(main())
