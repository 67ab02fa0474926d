"""Plots of a results store (matplotlib, optional extra ``liftmap[plot]``).

Three figures, each re-drawn from the store alone (no device, no re-run):

* ``progress.png``: best throughput so far (best kernel time where the program has no FLOP
  count) against exploration time, one curve per run
  (strategy and seed), each point annotated with the number of candidates evaluated, and
  a horizontal line at the best throughput in the store;
* ``breakdown.png``: where the time went, one stacked bar per strategy (finding a
  mapping, choosing tuning values, the strategy's other search work, lowering, building,
  running);
* ``pareto.png``: device memory against kernel time of every ``ok`` candidate, with the
  time-memory Pareto front.

Exploration time of a run is the sum, in candidate order, of each candidate's proposal
time and evaluation wall time (candidates found in the store cost nothing again).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Sequence

from ir.errors import LiftmapError
from mapper.explore.record import Record
from mapper.explore.store import ResultStore

SEARCH_STAGES = (("mapping_s", "finding a mapping"), ("tuning_s", "choosing tuning values"),
                 ("other_search_s", "other search (model fitting and ranking; older "
                  "stores: all search)"))
STAGES = SEARCH_STAGES + (("lower_s", "lowering"), ("build_s", "compiling"),
                          ("run_s", "running"))


class PlotError(LiftmapError, ValueError):
    """Nothing to plot, or matplotlib is missing (one clear line)."""


def pyplot(required: bool = True):
    """matplotlib.pyplot on the Agg backend. Without matplotlib: ``PlotError`` (one line
    saying what to install), or None when not ``required``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if not required:
            return None
        raise PlotError("mapper plot needs matplotlib: pip install 'liftmap[plot]' "
                        "(or pip install matplotlib)") from None
    return plt


def progress_curves(records: Iterable[Record], metric: str = "gflops"
                    ) -> dict[str, list[tuple[float, float, int]]]:
    """Per run (``strategy seed run-id``): ``(elapsed s, best so far, evaluated)`` at every
    candidate that improved the best, plus the run's last candidate. ``metric`` is
    ``"gflops"`` (higher is better) or ``"time_ms"`` (kernel time, lower is better: for
    programs without a FLOP count)."""
    by_run: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_run[f"{r.strategy} (seed {r.seed}, run {r.run_id[:6]})"].append(r)
    sign = 1.0 if metric == "gflops" else -1.0
    out: dict[str, list[tuple[float, float, int]]] = {}
    for label, rs in by_run.items():
        rs.sort(key=lambda r: (r.idx if r.idx is not None else 0, r.created or 0.0))
        t, best, pts = 0.0, None, []
        for i, r in enumerate(rs, 1):
            t += (r.search_s or 0.0) + (r.wall_s or 0.0)
            v = _value(r, metric)
            if v is not None and (best is None or sign * v > sign * best):
                best = v
                pts.append((t, best, i))
        if best is not None and pts[-1][2] != len(rs):
            pts.append((t, best, len(rs)))
        out[label] = pts
    return out


def _value(r: Record, metric: str) -> float | None:
    if not r.ok:
        return None
    if metric == "gflops":
        return r.gflops or None
    return r.time_s * 1e3 if r.time_s else None


def search_split(rec: Record) -> tuple[float, float, float]:
    """A record's search seconds: finding the mapping, choosing the tuning values, the rest
    of ``search_s`` (the model strategy's own work; all of it in records of older stores,
    which do not split it)."""
    m, t = rec.mapping_s or 0.0, rec.tuning_s or 0.0
    total = rec.search_s
    total = m + t if total is None else total
    return m, t, max(0.0, total - m - t)


def time_breakdown(records: Iterable[Record]) -> dict[str, dict[str, float]]:
    """Per strategy: seconds spent in each stage of ``STAGES``, and ``search_s`` (the three
    search stages together)."""
    out: dict[str, dict[str, float]] = defaultdict(
        lambda: {"search_s": 0.0, **{k: 0.0 for k, _ in STAGES}})
    for r in records:
        d = out[r.strategy]
        for (k, _), v in zip(SEARCH_STAGES, search_split(r)):
            d[k] += v
            d["search_s"] += v
        for k, _ in STAGES[len(SEARCH_STAGES):]:
            d[k] += getattr(r, k) or 0.0
    return dict(out)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points not dominated in (time, memory), both lower-is-better, by time."""
    front: list[tuple[float, float]] = []
    for t, m in sorted(points):
        if not front or m < front[-1][1]:
            front.append((t, m))
    return front


def plot_store(store: ResultStore, out_dir: str | os.PathLike, *,
               title: str | None = None) -> list[str]:
    """Writes the three PNGs of the module docstring into ``out_dir``; returns their paths.
    Raises ``PlotError`` when the store holds no candidate or ``out_dir`` cannot be a
    folder (an existing file)."""
    rows = store.records()
    if not rows:
        raise PlotError(f"store {store.path} holds no candidate yet; run mapper explore first")
    plt = pyplot()
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise PlotError(f"{os.fspath(out_dir)} is a file, not a folder: give --out a folder "
                        f"for the PNGs (a new name, or an existing folder)")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise PlotError(f"cannot make the folder {os.fspath(out_dir)} for the PNGs "
                        f"({e.strerror}): give --out a folder you can write") from None
    ctx = store.context()
    head = title or (ctx.describe() if ctx else store.path)
    paths = []

    metric = "gflops" if any(r.gflops for r in rows) else "time_ms"
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, pts in sorted(progress_curves(rows, metric).items()):
        if not pts:
            continue
        xs, ys, ns = zip(*pts)
        ax.step(xs, ys, where="post", marker="o", label=label)
        for x, y, n in pts:
            ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(2, 4), fontsize=7)
    vals = [v for v in (_value(r, metric) for r in rows) if v is not None]
    if vals:
        top = max(vals) if metric == "gflops" else min(vals)
        unit = "GFLOP/s" if metric == "gflops" else "ms"
        ax.axhline(top, color="grey", linestyle="--", linewidth=1,
                   label=f"best in store: {top:.4g} {unit}")
    ax.set_xlabel("exploration time (s)")
    ax.set_ylabel("best throughput so far (GFLOP/s)" if metric == "gflops"
                  else "best kernel time so far (ms; the program has no FLOP count)")
    ax.set_title(_wrap(head), fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    paths.append(save_figure(fig, plt, os.path.join(os.fspath(out_dir), "progress.png")))

    fig, ax = plt.subplots(figsize=(6, 4))
    br = time_breakdown(rows)
    names = sorted(br)
    bottom = [0.0] * len(names)
    for i, (key, label) in enumerate(STAGES):
        vals = [br[n][key] for n in names]
        if not any(vals):
            continue
        ax.bar(names, vals, bottom=bottom, label=label, color=f"C{i}")
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("seconds")
    ax.set_title("where the exploration time went", fontsize=9)
    ax.legend(fontsize=7)
    paths.append(save_figure(fig, plt, os.path.join(os.fspath(out_dir), "breakdown.png")))

    fig, ax = plt.subplots(figsize=(6, 4))
    points = [(r.time_s * 1e3, r.memory_bytes / 2**20) for r in rows
              if r.ok and r.time_s and r.memory_bytes]
    if points:
        ax.scatter(*zip(*points), s=10, alpha=0.5, label="ok candidates")
        front = pareto_front(points)
        ax.step(*zip(*front), where="post", color="red", marker="o", label="Pareto front")
        ax.legend(fontsize=7)
    ax.set_xlabel("kernel time (ms)")
    ax.set_ylabel("device memory (MiB)")
    ax.set_title("time and memory of the candidates", fontsize=9)
    ax.grid(alpha=0.3)
    paths.append(save_figure(fig, plt, os.path.join(os.fspath(out_dir), "pareto.png")))
    return paths


def _wrap(text: str, width: int = 90) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def save_figure(fig, plt, path: str) -> str:
    """Lays out, writes (110 dpi) and closes ``fig``; returns ``path``."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
