"""Re-time the best candidates of a convolution results store on a quiet machine.

A long exploration on a shared machine measures its candidates under varying load: the
same kernel can read 2x slower while something else runs. Before a store serves as a
replay data set, its top candidates (by stored throughput) are timed again, one after the
other, ``--evals`` evaluations of ``--repeats`` runs each, and the median replaces the
stored GFLOP/s and kernel time in a *copy* of the store (``--out``); each updated row's
``reason`` keeps the first measurement. The input store is not changed.

    python -m experiments.remeasure --store results/l19-half-1k.sqlite --layer 19/2 \\
        --top 150 --out docs/figures/data/l19-half-1k.sqlite
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    from codegen.worker import WorkerPool
    from experiments.machine import cpu_model
    from ir.conv_layer import parse_layer
    from mapper.encoding import MapCodes
    from mapper.explore import Task

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True, help="the store written by mapper explore conv")
    ap.add_argument("--layer", required=True, help="its layer, e.g. 19/2 (as given to explore)")
    ap.add_argument("--out", required=True, help="the copy to write (must not exist)")
    ap.add_argument("--top", type=int, default=150, help="candidates to re-time (default 150)")
    ap.add_argument("--evals", type=int, default=3, help="evaluations per candidate")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per evaluation")
    args = ap.parse_args(argv)
    if not os.path.isfile(args.store):
        print(f"error: no store {args.store}", file=sys.stderr)
        return 2
    if os.path.exists(args.out):
        print(f"error: {args.out} exists; give a new file", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    print(f"machine: {cpu_model()}, load average {load:.2f}"
          + ("  (warning: busy machine; timings are unreliable)" if load > 0.7 else ""))
    src = sqlite3.connect(args.store)
    out = sqlite3.connect(args.out)
    src.backup(out)
    src.close()
    task = Task.conv_layer(parse_layer(args.layer))
    rows = out.execute("SELECT key, gflops, time_s, mapping, tuning, reason FROM results "
                       "WHERE status = 'ok' AND gflops IS NOT NULL "
                       "ORDER BY gflops DESC LIMIT ?", (args.top,)).fetchall()
    t0 = time.time()
    with WorkerPool(None) as pool:
        for i, (key, g, _ts, mapping, tuning, reason) in enumerate(rows, 1):
            m, tu = dict(MapCodes.parse(mapping)), json.loads(tuning)
            outs = [pool.evaluate_candidate(task.lower_fn(m, tu), task.inputs, task.reference,
                                            timeout_s=60, repeats=args.repeats,
                                            flops=task.flops, **task.tolerance)
                    for _ in range(args.evals)]
            good = [o for o in outs if o.status == "ok" and o.gflops]
            if not good:
                print(f"{i:4d} {mapping}: {outs[0].label} now; kept", flush=True)
                continue
            g2 = statistics.median(o.gflops or 0.0 for o in good)
            t2 = statistics.median(o.time_s or 0.0 for o in good)
            note = (f"{reason}; re-measured {time.strftime('%Y-%m-%d')}: median of "
                    f"{len(good)} evaluations x {args.repeats} runs (first: {g:.3g} GFLOP/s)")
            out.execute("UPDATE results SET gflops = ?, time_s = ?, reason = ? WHERE key = ?",
                        (g2, t2, note, key))
            out.commit()
            print(f"{i:4d} stored {g:7.1f}  now {g2:7.1f} GFLOP/s  {mapping}  {tuning}",
                  flush=True)
    out.execute("INSERT OR REPLACE INTO meta VALUES ('remeasured', ?)",
                (json.dumps({"top": args.top, "evals": args.evals, "repeats": args.repeats,
                             "load": load, "date": time.strftime("%Y-%m-%d")}),))
    out.commit()
    out.close()
    print(f"{len(rows)} candidates re-timed in {time.time() - t0:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
