"""The papers' figures and tables, regenerated from result stores alone (no device, no re-run).

    python -m experiments.figures [--stores results/] [--out docs/figures/]

Reads whatever exists in ``--stores`` and writes PNGs and CSVs into ``--out``:

* ``fig5-<layer>-<strategy>.sqlite`` (``experiments/fig_exploration.py``), and the
  hand-written kernel's ``fig5-<layer>-baseline.json`` if recorded -> ``fig5-<layer>.png``
  (CC'22 Fig. 5: best GFLOP/s against exploration time, one curve per run annotated with
  the candidates evaluated, a line at the best throughput known, and where each strategy's
  time went: finding valid mappings, choosing tuning values, lowering, compiling,
  running) and ``fig5-<layer>.csv`` (one row per strategy);
* ``fig6-<layer>-fusion-<f>-heuristics-<h>.sqlite`` (``experiments/fig_fusion.py``) ->
  ``fig6-<layer>.png`` and ``.csv`` (CC'22 Fig. 6: throughput expectancy per number of
  evaluated candidates, one curve per fusion strategy and heuristics setting);
* every store of a layer that records device memory -> ``pareto-<layer>.png`` and ``.csv``
  (GPGPU'20 Fig. 6: the time-memory Pareto front);
* ``lowering-rate.csv`` (columns layer,device,total,lowered,rejected_reason,count) ->
  ``validity-breakdown.csv`` and ``.png``;
* always ``table4-constraints.csv``: CC'22 Table 4, the constraint instances per rule of
  the convolution's explored stage, counted by the library, next to the paper's numbers.

A Markdown summary of the numbers goes to stdout. Missing or unreadable stores are skipped
with a note; without matplotlib only the CSVs and the summary are written.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from experiments.options import ranged
from experiments.paper import (
    STRATEGY_ORDER,
    dataset_values,
    expectancy_curve,
    first_n_reaching,
)
from mapper.explore.plot import (
    STAGES,
    pareto_front,
    progress_curves,
    pyplot,
    save_figure,
    time_breakdown,
)
from mapper.explore.record import Record
from mapper.explore.store import Context, ResultStore, StoreError

FIG5_RE = re.compile(r"^fig5-(?P<tag>.+)-(?P<label>[a-z][a-z0-9_]*)\.sqlite$")
FIG6_RE = re.compile(r"^fig6-(?P<tag>.+)-(?P<label>fusion-[a-z]+-heuristics-(?:on|off))"
                     r"\.sqlite$")
STAGE_LABELS = dict(STAGES)

# CC'22 Table 4 (the paper's numbers, 123 instances in all) and the library's rules in its rows
PAPER_TABLE4 = (("Private memory", 32), ("Shared memory", 13), ("Duplicate scheduling", 34),
                ("Local thread indexing dimensionality", 1),
                ("Local thread indexing hierarchy", 34), ("Exhaustive thread indexing", 9))
PAPER_ROW_OF_RULE = {
    "private-memory": "Private memory", "local-memory": "Shared memory",
    "duplicate-scheduling": "Duplicate scheduling",
    "local-dimensionality": "Local thread indexing dimensionality",
    "local-hierarchy": "Local thread indexing hierarchy",
    "local-in-group": "Local thread indexing hierarchy",
    "exhaustive-indexing": "Exhaustive thread indexing"}
LOWERING_COLUMNS = ("layer", "device", "total", "lowered", "rejected_reason", "count")


# ---------------------------------------------------------------------- reading stores


@dataclass
class StoreData:
    """What one store holds, read once."""

    path: str
    label: str  # the strategy (Fig. 5) or the data set (Fig. 6)
    context: Context | None
    meta: dict[str, str]
    records: list[Record]
    runs: list[dict[str, Any]] = field(default_factory=list)


def read_store(path: str, label: str) -> StoreData:
    """Reads a store (read-only); ``StoreError`` if it is not one."""
    with ResultStore(path, readonly=True) as st:
        return StoreData(path, label, st.context(), st.meta(), st.records(), st.runs())


def find_stores(folder: str, pattern: re.Pattern) -> dict[str, list[tuple[str, str]]]:
    """Per layer tag: ``(label, path)`` of the stores in ``folder`` whose name matches."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name in sorted(os.listdir(folder)):
        m = pattern.match(name)
        if m:
            out[m["tag"]].append((m["label"], os.path.join(folder, name)))
    return dict(out)


def stores_by_layer(folder: str, pattern: re.Pattern, notes: list[str], figure: str,
                    names: str, script: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """:func:`find_stores`, sorted by layer tag; when there are none, a note naming the stores
    (``names``.sqlite) and the collection script (``experiments.<script>``) that writes them."""
    groups = find_stores(folder, pattern)
    if not groups:
        notes.append(f"{figure}: no {names}.sqlite in {folder} (python -m experiments.{script})")
    return sorted(groups.items())


def read_group(entries: Sequence[tuple[str, str]], notes: list[str]) -> list[StoreData]:
    """The readable stores of a group; a note for each one that is not."""
    out = []
    for label, path in entries:
        try:
            out.append(read_store(path, label))
        except (StoreError, OSError, ValueError) as e:
            notes.append(f"skipped {path}: {e}")
    return out


def layer_title(data: Sequence[StoreData]) -> str:
    """``VGG-16 layer 19,21 scaled to H,W = 7,7 (1/4)`` from the stores' program and sizes."""
    ctx = next((d.context for d in data if d.context), None)
    if ctx is None:
        return "(empty stores)"
    return describe_layer(ctx.program, ctx.sizes)


def describe_layer(program: str, sizes: dict[str, int]) -> str:
    """A layer in words from a store's program name (``conv:vgg16-19,21/4 ...``) and sizes."""
    hw = f"H,W = {sizes.get('H', '?')},{sizes.get('W', '?')}"
    shape = f"C={sizes.get('C', '?')}, M={sizes.get('M', '?')}, K={sizes.get('K', '?')}"
    m = re.search(r"vgg16-([\d,]+)(?:/(\d+))?", program)
    if not m:
        return f"convolution {shape}, {hw}"
    if m[2]:
        return f"VGG-16 layer {m[1]} ({shape}), scaled to {hw} (1/{m[2]})"
    return f"VGG-16 layer {m[1]} ({shape}), {hw}"


def device_name(data: Sequence[StoreData]) -> str:
    ctx = next((d.context for d in data if d.context), None)
    return str(ctx.device.get("name", "?")) if ctx else "?"


# ---------------------------------------------------------------------- Fig. 5


def strategy_summary(data: StoreData) -> dict[str, Any]:
    """One strategy's numbers: runs, candidates, ok, best GFLOP/s and when its run reached
    it (exploration seconds, candidates evaluated), and seconds per stage (``search_s``:
    the search stages together). The runs' mapping search in no row (the enumeration of
    the valid mappings, a search the end of a run cut short) counts as finding a
    mapping."""
    rows = data.records
    ok = [r for r in rows if r.ok and r.gflops]
    per = time_breakdown(rows).values()
    stages = {k: sum(s[k] for s in per) for k, _ in STAGES}
    stages["mapping_s"] += run_mapping_s(data)
    best, at_s, at_n = None, None, None
    for pts in progress_curves(rows).values():
        for t, g, n in pts:
            if best is None or g > best:
                best, at_s, at_n = g, t, n
    search = sum(stages[k] for k in ("mapping_s", "tuning_s", "other_search_s"))
    return {"strategy": data.label, "runs": len(data.runs), "candidates": len(rows),
            "ok": len(ok), "best_gflops": best, "best_after_s": at_s,
            "best_after_candidates": at_n, "exploration_s": sum(stages.values()),
            "search_s": search, **stages,
            "draws": sum(r["draws"] for r in data.runs if r.get("draws")) or None,
            "stopped_by": "; ".join(sorted({str(r["stopped_by"] or "running/killed")
                                            for r in data.runs}))}


def run_mapping_s(data: StoreData) -> float:
    """The runs' mapping search that no row holds (``runs.mapping_s``). Stores written
    before that column lack it: there, a run stopped by a strategy error (``random``
    finding no valid assignment) is estimated as its duration minus its rows' time."""
    extra = 0.0
    for run in data.runs:
        if run.get("mapping_s") is not None:
            extra += run["mapping_s"]
            continue
        if not str(run["stopped_by"] or "").startswith("error") or not run["finished"]:
            continue
        rows = [r for r in data.records if r.run_id == run["run_id"]]
        spent = sum((r.search_s or 0.0) + (r.wall_s or 0.0) for r in rows)
        extra += max(0.0, run["finished"] - run["started"] - spent)
    return extra


def read_baseline(path: str, notes: list[str]) -> dict[str, Any] | None:
    """The hand-written kernel's measurement, if recorded and ok."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            b = json.load(f)
    except (OSError, ValueError) as e:
        notes.append(f"skipped {path}: {e}")
        return None
    return b if b.get("status") == "ok" and b.get("gflops") else None


def _ordered(data: Sequence[StoreData]) -> list[StoreData]:
    rank = {s: i for i, s in enumerate(STRATEGY_ORDER)}
    return sorted(data, key=lambda d: (rank.get(d.label, len(rank)), d.label))


def plot_fig5(plt, data: Sequence[StoreData], baseline: dict | None,
              summary: Sequence[dict], path: str) -> str:
    """CC'22 Fig. 5 for one layer: progress curves and the time breakdown."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [3, 1]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (d, s) in enumerate(zip(data, summary)):
        color = colors[i % len(colors)]
        curves = [pts for pts in progress_curves(d.records).values() if pts]
        if not curves:
            ax.plot([], [], color=color, label=f"{d.label}: no candidate ran ok "
                    f"({s['candidates']} evaluated, {s['exploration_s']:.0f} s)")
        for j, pts in enumerate(curves):
            xs, ys, _ = zip(*pts)
            ax.step(xs, ys, where="post", marker="o", markersize=3, color=color,
                    label=f"{d.label} ({len(curves)} run(s))" if j == 0 else None)
            for x, y, n in pts:
                ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(2, 4),
                            fontsize=7, color=color)
    best = max((s["best_gflops"] for s in summary if s["best_gflops"]), default=None)
    if best:
        ax.axhline(best, color="grey", linestyle="--", linewidth=1,
                   label=f"best found: {best:.3g} GFLOP/s")
    if baseline:
        ax.axhline(baseline["gflops"], color="black", linestyle=":", linewidth=1,
                   label=f"hand-written kernel: {baseline['gflops']:.3g} GFLOP/s")
    ax.set_xlabel("exploration time (s): finding, lowering, compiling and running candidates")
    ax.set_ylabel("best throughput so far (GFLOP/s)")
    ax.set_title(f"{layer_title(data)}\ndevice {device_name(data)}; numbers: candidates "
                 "evaluated", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    names = [s["strategy"] for s in summary]
    bottom = [0.0] * len(names)
    for i, (key, _) in enumerate(STAGES):
        vals = [s[key] for s in summary]
        if not any(vals):
            continue
        bx.bar(names, vals, bottom=bottom, label=STAGE_LABELS.get(key, key), color=f"C{i}")
        bottom = [b + v for b, v in zip(bottom, vals)]
    bx.set_ylabel("seconds")
    bx.set_title("where the time went", fontsize=9)
    bx.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    return save_figure(fig, plt, path)


def fig5(plt, folder: str, out: str, notes: list[str]) -> list[str]:
    """Fig. 5 PNG + CSV per layer; the Markdown lines of the summary."""
    md: list[str] = []
    for tag, entries in stores_by_layer(folder, FIG5_RE, notes, "Fig. 5",
                                        "fig5-<layer>-<strategy>", "fig_exploration"):
        data = _ordered(read_group(entries, notes))
        if not data:
            continue
        summary = [strategy_summary(d) for d in data]
        baseline = read_baseline(os.path.join(folder, f"fig5-{tag}-baseline.json"), notes)
        write_csv(os.path.join(out, f"fig5-{tag}.csv"), summary)
        if plt is not None:
            plot_fig5(plt, data, baseline, summary, os.path.join(out, f"fig5-{tag}.png"))
        md += fig5_markdown(tag, data, summary, baseline)
    return md


def fig5_markdown(tag: str, data, summary: Sequence[dict], baseline: dict | None) -> list[str]:
    md = [f"### CC'22 Fig. 5, {tag}: {layer_title(data)}; device {device_name(data)}", "",
          "| strategy | runs | candidates | ok | best GFLOP/s | reached after (s) | at candidate "
          "| exploration (s) | finding mappings | choosing tuning | other search | lowering "
          "| compiling | running | random draws | stopped by |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in summary:
        md.append(f"| {s['strategy']} | {s['runs']} | {s['candidates']} | {s['ok']} | "
                  f"{_num(s['best_gflops'])} | {_num(s['best_after_s'], '.1f')} | "
                  f"{s['best_after_candidates'] or ''} | {s['exploration_s']:.1f} | "
                  + " | ".join(f"{s[k]:.1f}" for k, _ in STAGES)
                  + f" | {_num(s['draws'], ',')} | {s['stopped_by']} |")
    if baseline:
        md += ["", f"Hand-written kernel ({baseline['label']}): "
                   f"{baseline['gflops']:.3g} GFLOP/s."]
    return md + [""]


# ---------------------------------------------------------------------- Fig. 6


def dataset_label(label: str) -> str:
    """``fusion-always-heuristics-on`` -> ``fusion always, heuristics on``."""
    m = re.fullmatch(r"fusion-([a-z]+)-heuristics-(on|off)", label)
    return f"fusion {m[1]}, heuristics {m[2]}" if m else label


def dataset_order(label: str) -> tuple:
    """Sort key: heuristics on first, then fusion always, never, free."""
    m = re.fullmatch(r"fusion-([a-z]+)-heuristics-(on|off)", label)
    if not m:
        return (2, 9, label)
    rank = {"always": 0, "never": 1, "free": 2}
    return (0 if m[2] == "on" else 1, rank.get(m[1], 9), label)


def fig6(plt, folder: str, out: str, notes: list[str], trials: int = 100) -> list[str]:
    """Fig. 6 PNG + CSV per layer; the Markdown lines of the summary."""
    md: list[str] = []
    for tag, entries in stores_by_layer(folder, FIG6_RE, notes, "Fig. 6",
                                        "fig6-<layer>-fusion-<f>-heuristics-<h>", "fig_fusion"):
        data = sorted((d for d in read_group(entries, notes) if d.records),
                      key=lambda d: dataset_order(d.label))
        if not data:
            continue
        curves = {d.label: expectancy_curve(dataset_values(d.records), trials=trials)
                  for d in data}
        write_expectancy_csv(os.path.join(out, f"fig6-{tag}.csv"), curves)
        if plt is not None:
            plot_fig6(plt, data, curves, os.path.join(out, f"fig6-{tag}.png"))
        md += fig6_markdown(tag, data, curves)
    return md


def write_expectancy_csv(path: str, curves: dict[str, list[tuple[int, float]]]) -> None:
    """Columns ``N`` and one per data set (empty past a data set's size)."""
    labels = list(curves)
    n_max = max(len(c) for c in curves.values())
    rows = []
    for n in range(1, n_max + 1):
        row: dict[str, Any] = {"N": n}
        for lab in labels:
            c = curves[lab]
            row[lab] = f"{c[n - 1][1]:.6g}" if n <= len(c) else ""
        rows.append(row)
    write_csv(path, rows, ["N", *labels])


def plot_fig6(plt, data: Sequence[StoreData], curves: dict, path: str) -> str:
    fig, ax = plt.subplots(figsize=(8, 5))
    for d in data:
        ns, vs = zip(*curves[d.label])
        ax.plot(ns, vs, label=f"{dataset_label(d.label)} ({len(d.records)} candidates)")
    ax.set_xlabel("candidates evaluated (N)")
    ax.set_ylabel("throughput expectancy (GFLOP/s): median of 100 draws' best")
    ax.set_title(f"{layer_title(data)}\ndevice {device_name(data)}", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return save_figure(fig, plt, path)


def fig6_markdown(tag: str, data: Sequence[StoreData], curves: dict) -> list[str]:
    md = [f"### CC'22 Fig. 6, {tag}: {layer_title(data)}; device {device_name(data)}", "",
          "| data set | candidates | ok | best GFLOP/s | expectancy at N=10 | N to reach 90% "
          "of best | N to reach best |", "|---|---:|---:|---:|---:|---:|---:|"]
    for d in data:
        vals, c = dataset_values(d.records), curves[d.label]
        best = max(vals)
        e10 = c[min(10, len(c)) - 1][1]
        n90 = first_n_reaching(c, 0.9 * best) if best else None
        nbest = first_n_reaching(c, best) if best else None
        md.append(f"| {dataset_label(d.label)} | {len(vals)} | {sum(v > 0 for v in vals)} | "
                  f"{best:.3g} | {e10:.3g} | {n90 or ''} | {nbest or ''} |")
    return md + [""]


# ---------------------------------------------------------------------- Pareto (GPGPU'20 Fig. 6)


def pareto_points(records: Iterable[Record]) -> list[tuple[float, float]]:
    """``(kernel time ms, device memory MiB)`` of the ``ok`` records that hold both."""
    return [(r.time_s * 1e3, r.memory_bytes / 2**20) for r in records
            if r.ok and r.time_s and r.memory_bytes]


def pareto(plt, folder: str, out: str, notes: list[str]) -> list[str]:
    """The time-memory Pareto front per layer, from every store of the layer."""
    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for pattern in (FIG5_RE, FIG6_RE):
        for tag, entries in find_stores(folder, pattern).items():
            groups[tag] += entries
    md: list[str] = []
    for tag, entries in sorted(groups.items()):
        data = read_group(entries, notes)
        ctx = {(json.dumps(d.context.sizes, sort_keys=True), d.context.device.get("name"))
               for d in data if d.context}
        if len(ctx) > 1:
            notes.append(f"Pareto {tag}: stores of other sizes or devices; not merged")
            continue
        rows = [r for d in data for r in d.records]
        pts = pareto_points(rows)
        if not pts:
            notes.append(f"Pareto {tag}: no ok candidate records device memory")
            continue
        front = pareto_front(pts)
        write_csv(os.path.join(out, f"pareto-{tag}.csv"),
                  [{"time_ms": f"{t:.6g}", "memory_mib": f"{m:.6g}"} for t, m in front])
        if plt is not None:
            fig, ax = plt.subplots(figsize=(6, 4))
            ax.scatter(*zip(*pts), s=10, alpha=0.5, label=f"{len(pts)} ok candidates")
            ax.step(*zip(*front), where="post", color="red", marker="o", label="Pareto front")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("kernel time (ms)")
            ax.set_ylabel("device memory (MiB)")
            ax.set_title(f"{layer_title(data)}\ndevice {device_name(data)}", fontsize=8)
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
            save_figure(fig, plt, os.path.join(out, f"pareto-{tag}.png"))
        md += [f"### Time-memory Pareto front (GPGPU'20 Fig. 6), {tag}", "",
               f"{len(pts)} ok candidates, {len(front)} on the front: fastest "
               f"{front[0][0]:.4g} ms at {front[0][1]:.4g} MiB, smallest {front[-1][1]:.4g} MiB "
               f"at {front[-1][0]:.4g} ms.", ""]
    return md


# ---------------------------------------------------------------------- CC'22 Table 4


def table4_rows(program=None) -> list[dict[str, Any]]:
    """Constraint instances per rule of the convolution's explored stage (fusion
    ``always``), grouped by CC'22 Table 4's rows, then the library's other rules and the
    total; ``validity_only`` counts them with the heuristic rules off."""
    from ir.programs import conv_partial_stage
    from mapper.api import problem
    from mapper.rules import RULES

    prog = program if program is not None else conv_partial_stage()
    on = problem(prog, fusion="always").per_rule()
    off = problem(prog, fusion="always", heuristics=False).per_rule()
    rules = {r.name: r for r in RULES}
    out = []
    for row, paper in PAPER_TABLE4:
        names = [n for n, r in PAPER_ROW_OF_RULE.items() if r == row and n in rules]
        out.append(_table4_row(row, paper, names, rules, on, off))
    for name in rules:
        if name not in PAPER_ROW_OF_RULE and (on.get(name) or off.get(name)):
            out.append(_table4_row("(not in CC'22 Table 4)", None, [name], rules, on, off))
    out.append({"paper_row": "total", "paper_instances": sum(n for _, n in PAPER_TABLE4),
                "library_rules": "", "source": "", "kind": "",
                "instances": sum(on.values()), "validity_only": sum(off.values())})
    return out


def _table4_row(row: str, paper: int | None, names: Sequence[str], rules, on, off) -> dict:
    return {"paper_row": row, "paper_instances": "" if paper is None else paper,
            "library_rules": " + ".join(names),
            "source": "; ".join(dict.fromkeys(rules[n].source for n in names)),
            "kind": "/".join(dict.fromkeys(rules[n].kind for n in names)),
            "instances": sum(on.get(n, 0) for n in names),
            "validity_only": sum(off.get(n, 0) for n in names)}


def table4(out: str) -> list[str]:
    rows = table4_rows()
    write_csv(os.path.join(out, "table4-constraints.csv"), rows)
    md = ["### CC'22 Table 4: constraint instances of the convolution (partial stage, "
          "fusion always)", "",
          "| CC'22 row | paper | library rule(s) | source | kind | instances | validity "
          "rules only |", "|---|---:|---|---|---|---:|---:|"]
    md += [f"| {r['paper_row']} | {r['paper_instances']} | {r['library_rules']} | "
           f"{r['source']} | {r['kind']} | {r['instances']} | {r['validity_only']} |"
           for r in rows]
    return md + [""]


# ---------------------------------------------------------------------- lowering rate


def read_lowering_rate(path: str) -> list[dict[str, Any]]:
    """The rows of a ``lowering-rate.csv``; ValueError names a missing column or bad count."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in LOWERING_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path} lacks column(s) {', '.join(missing)}")
        rows = []
        for i, r in enumerate(reader, 2):
            try:
                rows.append({**r, **{k: int(r[k] or 0) for k in ("total", "lowered", "count")}})
            except ValueError:
                raise ValueError(f"{path} line {i}: total, lowered and count must be "
                                 "integers") from None
    return rows


def validity_breakdown(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per layer and device: the lowered share and each rejection reason's share of the
    total, largest first."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["layer"], r["device"])].append(r)
    out = []
    for (layer, device), rs in groups.items():
        total = max(r["total"] for r in rs)
        lowered = max(r["lowered"] for r in rs)
        base = {"layer": layer, "device": device, "total": total, "lowered": lowered,
                "lowered_pct": _pct(lowered, total)}
        reasons: dict[str, int] = defaultdict(int)
        for r in rs:
            if r["rejected_reason"]:
                reasons[r["rejected_reason"]] += r["count"]
        if not reasons:
            out.append({**base, "rejected_reason": "", "count": 0, "pct_of_total": ""})
        for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
            out.append({**base, "rejected_reason": reason, "count": n,
                        "pct_of_total": _pct(n, total)})
    return out


def lowering(plt, path: str, out: str, notes: list[str]) -> list[str]:
    if not os.path.isfile(path):
        notes.append(f"validity breakdown: no {path}")
        return []
    try:
        table = validity_breakdown(read_lowering_rate(path))
    except (OSError, ValueError) as e:
        notes.append(f"validity breakdown: skipped {path}: {e}")
        return []
    write_csv(os.path.join(out, "validity-breakdown.csv"), table)
    if plt is not None and table:
        plot_breakdown(plt, table, os.path.join(out, "validity-breakdown.png"))
    md = ["### Validity breakdown (lowering-rate.csv)", "",
          "| layer | device | total | lowered | lowered % | rejected because | count | % |",
          "|---|---|---:|---:|---:|---|---:|---:|"]
    md += [f"| {r['layer']} | {r['device']} | {r['total']} | {r['lowered']} | "
           f"{r['lowered_pct']} | {r['rejected_reason'] or 'none'} | {r['count']} | "
           f"{r['pct_of_total']} |" for r in table]
    return md + [""]


def plot_breakdown(plt, table: Sequence[dict], path: str) -> str:
    """One horizontal bar per layer and device: lowered, then each reason, as % of total."""
    keys = list(dict.fromkeys((r["layer"], r["device"]) for r in table))
    reasons = list(dict.fromkeys(r["rejected_reason"] for r in table if r["rejected_reason"]))
    fig, ax = plt.subplots(figsize=(8, 1.5 + 0.5 * len(keys)))
    names = [f"{lay} / {dev}" for lay, dev in keys]
    first = {k: next(r for r in table if (r["layer"], r["device"]) == k) for k in keys}
    left = [100.0 * first[k]["lowered"] / first[k]["total"] if first[k]["total"] else 0.0
            for k in keys]
    ax.barh(names, left, label="lowered")
    for reason in reasons:
        vals = []
        for k in keys:
            n = sum(r["count"] for r in table
                    if (r["layer"], r["device"]) == k and r["rejected_reason"] == reason)
            vals.append(100.0 * n / first[k]["total"] if first[k]["total"] else 0.0)
        ax.barh(names, vals, left=left, label=reason)
        left = [a + b for a, b in zip(left, vals)]
    ax.set_xlabel("% of candidates")
    ax.legend(fontsize=7, loc="lower right")
    return save_figure(fig, plt, path)


# ---------------------------------------------------------------------- output helpers


def write_csv(path: str, rows: Sequence[dict[str, Any]],
              columns: Sequence[str] | None = None) -> str:
    cols = list(columns or (rows[0].keys() if rows else []))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else _cell(r[k])) for k in cols})
    return path


def _cell(v: Any) -> Any:
    return f"{v:.6g}" if isinstance(v, float) else v


def _num(v: float | None, fmt: str = ".3g") -> str:
    return "" if v is None else format(v, fmt)


def _pct(n: int, total: int) -> str:
    return f"{100.0 * n / total:.1f}" if total else ""


# ---------------------------------------------------------------------- command line


def regenerate(stores: str, out: str, lowering_csv: str | None = None, *,
               trials: int = 100) -> tuple[list[str], list[str]]:
    """Writes every figure and table the stores allow; returns (Markdown lines, notes).
    ``trials``: draws per point of Fig. 6's expectancy curves."""
    os.makedirs(out, exist_ok=True)
    plt = pyplot(required=False)
    notes: list[str] = []
    if plt is None:
        notes.append("matplotlib is missing (pip install 'liftmap[plot]'): CSVs only")
    md = ["## Figures regenerated from the result stores", ""]
    if os.path.isdir(stores):
        md += fig5(plt, stores, out, notes)
        md += fig6(plt, stores, out, notes, trials=trials)
        md += pareto(plt, stores, out, notes)
    else:
        notes.append(f"no stores folder {stores}: only the tables that need no store")
    md += table4(out)
    md += lowering(plt, lowering_csv or os.path.join(stores, "lowering-rate.csv"), out, notes)
    return md, notes


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.figures",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--stores", default="results", help="folder of the stores (default "
                    "results)")
    ap.add_argument("--out", default=os.path.join("docs", "figures"),
                    help="folder for PNGs and CSVs (default docs/figures)")
    ap.add_argument("--lowering-rate", help="validity CSV (default STORES/lowering-rate.csv)")
    ap.add_argument("--trials", type=ranged(int, 1, 10**6, "a number of draws"), default=100,
                    help="Fig. 6: draws per point of each expectancy curve (default 100, as "
                    "the committed figures; fewer for a quick look)")
    args = ap.parse_args(argv)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        ap.error(f"--out {args.out} is not a folder")
    try:
        md, notes = regenerate(args.stores, args.out, args.lowering_rate,
                               trials=args.trials)
    except OSError as e:  # an unwritable --out
        print(f"error: cannot write the figures: {e}", file=sys.stderr)
        return 2
    print("\n".join(md))
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    print(f"written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
