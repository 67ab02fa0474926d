"""Rebuilds a knowledge file (``mapper/explore/knowledge/*.jsonl``) from results stores.

    python -m experiments.build_knowledge results/search/*.sqlite [--out FILE.jsonl]

Every ``ok`` and early-cut candidate of each store becomes one row (see
``mapper.explore.knowledge``); the ``model`` strategy transfers them to explorations of the
same program at other sizes. Prints the rows and stores read.
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
    args = ap.parse_args(argv)
    rows = []
    for path in args.stores:
        got = from_store(path)
        print(f"{path}: {len(got)} row(s)")
        rows += got
    with open(args.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"{args.out}: {len(rows)} row(s) from {len(args.stores)} store(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
