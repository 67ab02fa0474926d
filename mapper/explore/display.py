"""The live display of ``mapper explore`` (rich) and the tables of ``mapper results``."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from mapper.explore.record import Record, Retimed
from mapper.explore.run import Results


def _fmt_s(s: float | None) -> str:
    if s is None or s != s or s == float("inf"):
        return "?"
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def outcome_style(lab: str) -> str:
    return "green" if lab == "ok" else "yellow" if lab.startswith("rejected") else "red"


class Dashboard:
    """A renderable over a running ``Results``: progress over the budget with ETA, the best
    candidate so far with its mapping (short codes), the outcome counts. Rendered on every
    refresh."""

    def __init__(self) -> None:
        self.res: Results | None = None
        self.t0 = time.perf_counter()
        self.last: Record | None = None

    def start(self, res: Results) -> None:
        self.res, self.t0 = res, time.perf_counter()

    def update(self, rec: Record, res: Results) -> None:
        self.res, self.last = res, rec

    def __rich__(self):
        res = self.res
        if res is None:
            return Text("starting the worker and building the search space ...")
        elapsed = time.perf_counter() - self.t0
        b = res.budget
        if b.candidates is not None:
            done, total = float(res.considered), float(b.candidates)
            rate = elapsed / done if done else None
            eta = (total - done) * rate if rate else None
            what = f"{res.considered}/{b.candidates} candidates"
        else:
            done, total = min(elapsed, b.seconds or 0), float(b.seconds or 0)
            eta = max(0.0, total - elapsed)
            what = f"{res.considered} candidates, {_fmt_s(elapsed)} of {_fmt_s(total)}"
        head = Table.grid(padding=(0, 1))
        head.add_row(ProgressBar(total=total or 1, completed=done, width=40),
                     Text(f"{what}  elapsed {_fmt_s(elapsed)}  ETA {_fmt_s(eta)}"))
        lines: list[Any] = [
            Text.from_markup(f"[bold]{escape(res.strategy)}[/bold] seed {res.seed} -> "
                             f"{escape(res.store_path)} ({res.evaluated} evaluated, "
                             f"{res.cached} from the store"
                             + (f", {res.draws} random draws" if res.strategy == "random"
                                else "") + ")"),
            head]
        best = res.best
        lines.append(Text.from_markup("[bold]best so far:[/bold] " + (
            escape(best.describe()) if best else "none ok yet")))
        held = getattr(res, "incumbent", None)
        if held is not None and held.record is not None and held.time_s:
            r = held.record
            g = (r.gflops or 0.0) * (r.time_s or 0.0) / held.time_s
            lines.append(Text.from_markup(
                "[bold]answer, re-timed:[/bold] " + escape(
                    (f"{g:.3g} GFLOP/s " if g else "") + f"({held.time_s * 1e3:.4g} ms): "
                    + r.short_mapping + (f"; {r.tuning}" if str(r.tuning) else ""))))
        counts = res.counts
        if counts:
            lines.append(Text.from_markup("outcomes: " + "  ".join(
                f"[{outcome_style(k)}]{escape(k)}[/{outcome_style(k)}] {v}"
                for k, v in counts.most_common())))
        if self.last is not None:
            lines.append(Text(f"last: {self.last.label} {self.last.describe()}",
                              overflow="ellipsis", no_wrap=True))
        return Group(*lines)


def best_table(records: list[Record], title: str) -> Table:
    """The best records as a table (mappings in short codes)."""
    t = Table(title=title)
    for col in ("#", "GFLOP/s", "time (ms)", "mapping", "tuning", "memory (KiB)", "strategy"):
        t.add_column(col, overflow="fold")
    for i, r in enumerate(records, 1):
        t.add_row(str(i), f"{r.gflops:.3g}" if r.gflops else "",
                  f"{r.time_s * 1e3:.4g}" if r.time_s else "", r.short_mapping, str(r.tuning),
                  f"{r.memory_bytes / 1024:.0f}" if r.memory_bytes else "", r.strategy)
    return t


def retimed_table(retimed: list[Retimed], title: str) -> Table:
    """Re-timed candidates as a table: the median of the re-timed executions with the
    spread (fastest and slowest; a winner's from the rounds after it was chosen, marked
    ``*``), the median of the fastest round of those that chose (what ranks them), the
    executions and rounds, and the single measurement the exploration stored."""
    t = Table(title=title)
    for col in ("#", "GFLOP/s", "median (ms)", "spread (ms)", "fastest round (ms)",
                "runs", "rounds", "explored (ms)", "mapping", "tuning"):
        t.add_column(col, overflow="fold")
    for i, r in enumerate(retimed, 1):
        rec = r.record
        spread = f"{r.min_s * 1e3:.4g}-{r.max_s * 1e3:.4g}" if r.max_s is not None \
            else f"from {r.min_s * 1e3:.4g}"
        t.add_row(str(i), f"{r.gflops:.3g}" if r.gflops else "",
                  f"{r.median_s * 1e3:.4g}" + ("*" if r.confirmed else ""),
                  spread, "" if r.round_s is None else f"{r.round_s * 1e3:.4g}",
                  str(r.n), "" if r.rounds is None else str(r.rounds),
                  f"{rec.time_s * 1e3:.4g}" if rec.time_s else "", rec.short_mapping,
                  str(rec.tuning))
    return t


def counts_table(counts: Counter) -> Table:
    t = Table(title="Outcomes")
    t.add_column("outcome")
    t.add_column("candidates", justify="right")
    for k, v in counts.most_common():
        t.add_row(f"[{outcome_style(k)}]{escape(k)}[/{outcome_style(k)}]", str(v))
    t.add_row("[bold]total[/bold]", f"[bold]{sum(counts.values())}[/bold]")
    return t
