"""What ``mapper explore`` and ``mapper results`` print besides tables: the JSON documents
of ``docs/cli-json.md``, a store's CSV, one line per candidate (``-v``), the answer
(``-q``) and the list of strategies of ``mapper explore --help``."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from collections.abc import Sequence
from typing import Any

from mapper.explore.record import Record
from mapper.explore.run import Results
from mapper.explore.store import Context, ResultStore
from mapper.explore.strategies import STRATEGIES

DEFAULT_STRATEGY = "model"
_JSON_META = ("sizes", "device")  # meta entries stored as JSON text


def strategies_help(default: str = DEFAULT_STRATEGY) -> str:
    """One line per registered strategy, the default first."""
    names = sorted(STRATEGIES, key=lambda n: (n != default, n))
    width = max(map(len, names))
    lines = ["strategies (--strategy):"]
    for n in names:
        cls = STRATEGIES[n]
        text = cls.summary or (cls.__doc__ or "").strip().split("\n")[0]
        lines.append(f"  {n:<{width}}  " + ("(the default) " if n == default else "") + text)
    return "\n".join(lines)


def candidate_line(rec: Record, res: Results) -> str:
    """``#3 ok 12.3 GFLOP/s 0.045 ms A=W0 B=L0 C=S; s0=64 s1=4 (best 12.3 GFLOP/s, 4 s)``:
    one candidate as ``-v`` prints it."""
    parts = [f"#{res.considered}", rec.label + (" (stored)" if rec.cached else "")]
    if rec.gflops:
        parts.append(f"{rec.gflops:.3g} GFLOP/s")
    if rec.time_s:
        parts.append(f"{rec.time_s * 1e3:.4g} ms")
    parts.append(rec.short_mapping + (f"; {rec.tuning}" if rec.tuning else ""))
    best = res.best
    top = f"best {best.gflops:.3g} GFLOP/s, " if best is not None and best.gflops else ""
    return " ".join(parts) + f" ({top}{res.elapsed_s:.0f} s)"


def answer_line(res: Results) -> str | None:
    """The run's answer in one line, ``A=W0 B=L0 C=S; s0=64 s1=4: 12.3 GFLOP/s, 0.045 ms``
    (the re-timed median where the winners were re-timed), or ``None`` when no candidate
    ran ok."""
    rec = res.final
    if rec is None:
        return None
    rt = res.final_retimed
    gflops, time_s = (rt.gflops, rt.median_s) if rt is not None else (rec.gflops, rec.time_s)
    perf = ", ".join(([f"{gflops:.3g} GFLOP/s"] if gflops else [])
                     + ([f"{time_s * 1e3:.4g} ms"] if time_s else []))
    text = rec.short_mapping + (f"; {rec.tuning}" if rec.tuning else "")
    return text + (f": {perf}" if perf else "")


def candidate_json(rec: Record, res: Results) -> dict[str, Any]:
    """One ``--jsonl`` candidate object: ``type``, its position ``n`` in the run, the
    record (``Record.to_json``)."""
    return {"type": "candidate", "n": res.considered, **rec.to_json()}


def summary_json(res: Results, *, file: str, store: str) -> dict[str, Any]:
    """The ``--json`` document (and ``--jsonl``'s last object) of one explore run."""
    rt = res.final_retimed
    final = res.final
    ctx = res.context
    return {
        "type": "summary", "file": file, "store": store, "run_id": res.run_id,
        "strategy": res.strategy, "seed": res.seed, "budget": res.budget.text,
        "context": dataclasses.asdict(ctx) if isinstance(ctx, Context) else None,
        "candidates": res.considered, "evaluated": res.evaluated, "cached": res.cached,
        "stopped_by": res.stopped_by, "elapsed_s": res.elapsed_s,
        "draws": res.draws if res.strategy == "random" else None,
        "counts": dict(res.counts.most_common()),
        "best": res.best.to_json() if res.best is not None else None,
        "final": None if final is None else {
            **final.to_json(), "retimed": rt.to_json() if rt is not None else None},
        "retimed": [{"key": k, **r.to_json()} for k, r in res.retimed.items()],
    }


def variants_json(vr: Any) -> list[dict[str, Any]]:
    """Each variant of a ``mapper.explore.variants.VariantsResults``: its store, and its
    probe's candidates, outcome and best, and the seconds of that best timed again beside
    the other close probes' (the median of its fastest round; null: not timed again;
    empty when no variant was probed), and the same of its contest's best where the
    re-timed probes were too close to choose (null: no contest)."""
    medians = getattr(vr, "probe_medians", {})
    contest = getattr(vr, "contest_medians", {})
    return [{"name": name, "store": vr.stores.get(name), "chosen": name == vr.chosen,
             "probe_candidates": r.considered, "probe_stopped_by": r.stopped_by,
             "probe_best": r.best.to_json() if r.best is not None else None,
             "probe_retimed_median_s": medians.get(name),
             "contest_retimed_median_s": contest.get(name),
             "explored": name in getattr(vr, "explored", ())}
            for name, r in vr.probes.items()]


def _meta_json(meta: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = dict(meta)
    for k in _JSON_META:
        if k in out:
            try:
                out[k] = json.loads(out[k])
            except ValueError:
                pass
    return out


def _run_json(run: dict[str, Any]) -> dict[str, Any]:
    out = dict(run)
    if isinstance(out.get("options"), str):
        try:
            out["options"] = json.loads(out["options"])
        except ValueError:
            pass
    return out


def results_json(st: ResultStore, top: int) -> dict[str, Any]:
    """The ``mapper results --json`` document of a store (without ``command``/``schema``):
    its context, meta (sizes and device as objects), outcome counts, runs (options as an
    object), the ``top`` best records by their exploration measurement, the ``top``
    re-timed ones (``retimed``: each record with its re-timing, the store's answer
    first) and every record."""
    ctx = st.context()
    return {"store": st.path,
            "context": dataclasses.asdict(ctx) if ctx is not None else None,
            "meta": _meta_json(st.meta()), "counts": dict(st.counts().most_common()),
            "runs": [_run_json(r) for r in st.runs()],
            "best": [r.to_json() for r in st.best_records(top)],
            "retimed": [{**r.record.to_json(), "retimed": r.to_json()}
                        for r in st.retimed(top)],
            "rows": [r.to_json() for r in st.records()]}


def csv_columns(records: Sequence[Record]) -> list[str]:
    """The CSV header: the record's JSON keys in order, the tuning as one ``tuning.<name>``
    column per parameter (sorted) in place of ``tuning``."""
    params = sorted({p for r in records for p in r.tuning})
    keys = list(Record.json_keys())
    i = keys.index("tuning")
    return keys[:i] + [f"tuning.{p}" for p in params] + keys[i + 1:]


def csv_row(rec: Record) -> dict[str, Any]:
    """One record as a CSV row: the mapping in short codes (``A=W0 B=L0``), one column per
    tuning value (empty where a record lacks the parameter)."""
    d = rec.to_json()
    d["mapping"] = rec.short_mapping
    for p, v in d.pop("tuning").items():
        d[f"tuning.{p}"] = v
    return d


def write_csv(path: str | os.PathLike, records: Sequence[Record]) -> int:
    """Writes every record to a CSV file; returns the number of rows."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=csv_columns(records), restval="")
        w.writeheader()
        for r in records:
            w.writerow(csv_row(r))
    return len(records)

