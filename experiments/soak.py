"""The soak benchmark (issue 48): explorations with every worker busy for an hour, watched.

    python -m experiments.soak                                  # 60 minutes, a sample a minute
    python -m experiments.soak --minutes 3 --sample-s 10 --judge-min-s 40 --out /tmp/soak

One driver process runs explorations through the library (``mapper.explore.explore`` over a
``codegen.worker.WorkerPool`` of ``--workers`` processes, every worker kept busy). First a
rotation with faults (``1 - --quiet-share`` of the run): a small convolution (the GPGPU'20
pipeline as ``mapper explore conv`` builds it, sizes ``--conv``), the plain matmul
(``examples/matmul_plain.lift``) and the separable blur (``examples/blur_separable.lift``),
each exploration up to ``--slice-s`` on a new pool, with a task and its data built afresh
(the driver's own memory is soaked too); a task's store is resumed with the next seed, or a
new store begins once its space was exhausted. A candidate whose hash says so crashes its
worker (SIGSEGV or SIGABRT, 1 in ``--crash-every``) or hangs into the ``--timeout-s`` limit
(1 in ``--hang-every``), and every ``--kill-every-s`` the driver SIGKILLs a worker process.
Then the quiet phase: the ``--quiet`` task explored again and again on one pool, without
fault or kill, so that its workers live long enough for their own RSS slope to be judged.

Every ``--sample-s`` a thread samples the RSS (``VmRSS``) and open descriptors of the driver
and of each worker, the driver's descendant processes, the sizes of the soak's private
temporary directory (``TMPDIR``) and of PoCL's kernel cache (``POCL_CACHE_DIR``; a private
one unless set: the user's is shared by every run), each store's rows and its
``PRAGMA integrity_check``. Each record the driver is handed is written to
``observed.jsonl`` (not kept in the driver's memory, which is measured). At the end each
store is replayed as ``mapper results --compare`` does (``mapper.explore.replay``: its
replay space, a replay visiting every stored candidate, ``compare``) and checked against
what the driver was handed.

Checks, a verdict line each (PASS, FAIL, or SKIP where the run is too short to judge): RSS
slopes under 50 MB/h (least squares over the samples after the first 10 minutes, or the
first third of a shorter life; judged when they span ``--judge-min-s``) for the driver and
for each worker; no process left and the driver's descriptors back to their level at the
start once the pools are closed; the temporary directory empty at the end, PoCL's cache
growing by at most ``--cache-mb-per-build`` per candidate (PoCL never evicts: it is bounded
by the distinct kernels, not by the time); the integrity check ok at every sample; no row
lost; the replay exact; each injected kill costing at most one candidate, retried; the mix
held crashes and timeouts. The markdown table (samples, verdicts) and a JSON of every sample
go to ``--out`` (default ``results/soak/``). Exit status 0 when no check fails, else 1 with
one line per failed check on stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.soak_probes import (
    dir_mb,
    faulty_lower,
    fd_count,
    load_observed,
    replay_check,
    rss_mb,
    seen_row,
    slope_mb_h,
    store_probe,
    workers_and_others,
)
from mapper.explore import Task
from mapper.explore.record import Record

SLOPE_LIMIT_MB_H = 50.0
FD_SLACK = 3  # descriptors the driver may hold at the end beyond its level at the start
ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = {"matmul": "examples/matmul_plain.lift", "blur": "examples/blur_separable.lift"}


# ------------------------------------------------------------------ the task and its faults


@dataclass
class SoakTask(Task):
    """A ``Task`` whose candidates crash 1 in ``crash_every`` times and hang 1 in
    ``hang_every``, by a hash of the candidate (a resumed store meets the same faults)."""

    crash_every: int = 0
    hang_every: int = 0

    def fault(self, mapping: Mapping[str, int], tuning: Mapping[str, int]) -> str | None:
        text = f"{self.name}|{sorted(mapping.items())}|{sorted(tuning.items())}"
        h = int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)
        if self.crash_every and h % self.crash_every == 0:
            return "segv" if (h // self.crash_every) % 2 else "abort"
        if self.hang_every and (h // 7919) % self.hang_every == 0:
            return "hang"
        return None

    def lower_fn(self, mapping: Mapping[str, int], tuning: Mapping[str, int]
                 ) -> Callable[[], Any]:
        fn = super().lower_fn(mapping, tuning)
        fault = self.fault(mapping, tuning)
        return fn if fault is None else functools.partial(faulty_lower, fault, fn)


def sizes(text: str) -> dict[str, int]:
    """``"M=64,N=64"`` -> ``{"M": 64, "N": 64}``."""
    return {k.strip(): int(v) for k, v in (kv.split("=") for kv in text.split(","))}


def make_task(name: str, args: argparse.Namespace, quiet: bool = False) -> SoakTask:
    """The task ``name`` (conv, matmul, blur), built afresh, with its faults (none when
    ``quiet``)."""
    from ir.conv_layer import ConvLayer

    if name == "conv":  # K=3, S=1, P=1, as VGG-16's layers
        s = sizes(args.conv)
        task = Task.conv_layer(ConvLayer("soak", s["C"], s["H"], s["W"], s["M"]),
                               vectorise="window")
    else:
        task = Task.from_program(str(ROOT / PROGRAMS[name]), sizes(getattr(args, name)),
                                 name=os.path.basename(PROGRAMS[name]))
    fields = {f.name: getattr(task, f.name) for f in dataclasses.fields(Task)}
    return SoakTask(**fields, crash_every=0 if quiet else args.crash_every,
                    hang_every=0 if quiet else args.hang_every)


# ------------------------------------------------------------------ the run


@dataclass
class Soak:
    """What the driver saw: samples, kills, explorations, pools; the records it was handed
    go to a file (``observed.jsonl``), not into its own memory, which is measured."""

    args: argparse.Namespace
    tmp: str
    pocl: str
    log: Any  # observed.jsonl, open for appending
    stores: list[tuple[str, str]] = field(default_factory=list)  # (task, store path)
    samples: list[dict[str, Any]] = field(default_factory=list)
    kills: list[float] = field(default_factory=list)  # epoch seconds
    runs: list[dict[str, Any]] = field(default_factory=list)
    pools: list[dict[str, int]] = field(default_factory=list)
    observed: int = 0
    rate: float = 1.0  # candidates a second of the last quiet exploration
    t0: float = 0.0
    fds_start: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    quiet: threading.Event = field(default_factory=threading.Event)  # no kill now

    def sample(self) -> None:
        me = os.getpid()
        workers, others = workers_and_others(me)
        probes = [store_probe(path) for _, path in list(self.stores)]
        bad = [c for _, c in probes if c != "ok"]
        self.samples.append({
            "t_s": round(time.time() - self.t0, 1), "driver_rss_mb": rss_mb(me),
            "driver_fds": fd_count(me), "children": len(workers) + len(others),
            "workers": {str(p): {"rss_mb": rss_mb(p), "fds": fd_count(p)} for p in workers},
            "tmp_mb": dir_mb(self.tmp), "pocl_cache_mb": dir_mb(self.pocl),
            "rows": sum(n for n, _ in probes), "seen": self.observed, "quiet":
            self.quiet.is_set(), "integrity": "; ".join(bad) or "ok"})

    def sampler(self) -> None:
        while not self.stop.wait(self.args.sample_s):
            self.sample()

    def killer(self) -> None:
        rng = random.Random(self.args.seed)
        while not self.stop.wait(self.args.kill_every_s):
            workers, _ = workers_and_others(os.getpid())
            if workers and not self.quiet.is_set():
                try:
                    os.kill(rng.choice(workers), signal.SIGKILL)
                    self.kills.append(time.time())
                except ProcessLookupError:
                    pass

    def observe(self, store: str, rec: Record, _results: Any = None) -> None:
        """Writes down each record the driver is handed (``on_result``)."""
        self.log.write(json.dumps([store, rec.key, rec.cached, seen_row(rec)]) + "\n")
        self.observed += not rec.cached

    def explore(self, name: str, pool: Any, until: float, quiet: bool = False) -> bool:
        """One exploration of task ``name`` on ``pool`` (ending by ``until``): its store
        resumed with the next seed, or a new store once the last one's space was exhausted;
        whether it raised. A quiet one has a budget of candidates, not of time: the end of
        a time budget kills the workers of the candidates in flight."""
        from ir.errors import LiftmapError
        from mapper.explore import ExploreOptions, explore

        mine = [path for task, path in self.stores if task == name]
        last = [r for r in self.runs if r["task"] == name]
        if not mine or (last and str(last[-1].get("stopped_by")).startswith("exhausted")):
            mine.append(str(Path(self.args.out) / "stores" / f"{name}-{len(mine)}.sqlite"))
            for suffix in ("", "-wal", "-shm"):  # this soak's stores start empty
                Path(mine[-1] + suffix).unlink(missing_ok=True)
            self.stores.append((name, mine[-1]))
        left = min(self.args.slice_s, until - time.time())
        budget = f"{left:.1f}s" if not quiet else max(10, int(0.8 * self.rate * left))
        info: dict[str, Any] = {"task": name, "store": os.path.basename(mine[-1]),
                                "seed": self.args.seed + len(last), "quiet": quiet,
                                "budget": budget}
        try:
            res = explore(make_task(name, self.args, quiet), budget=budget,
                          store=mine[-1], pool=pool,
                          options=ExploreOptions.of(seed=info["seed"],
                                                    timeout_s=self.args.timeout_s),
                          on_result=functools.partial(self.observe, mine[-1]))
            info.update(stopped_by=res.stopped_by, evaluated=res.evaluated,
                        cached=res.cached, counts=dict(res.counts))
            if quiet:  # candidates a second, for the next one's budget
                self.rate = res.considered / max(res.elapsed_s, 1.0)
        except LiftmapError as e:
            info["error"] = f"{type(e).__name__}: {e}"
        self.runs.append(info)
        print(f"exploration {len(self.runs)}: {json.dumps(info)}", flush=True)
        return "error" in info

    def pool_done(self, pool: Any) -> None:
        self.pools.append({k: getattr(pool, k) for k in ("restarts", "crashes", "timeouts",
                                                         "retried")})


def run_soak(args: argparse.Namespace) -> Soak:
    """The soak in a private folder (its TMPDIR, and PoCL's cache unless given), removed
    at the end, however it ends."""
    root = tempfile.mkdtemp(prefix="liftmap-soak-")
    saved = dict(os.environ)
    try:
        return _soak(args, root)
    finally:
        os.environ.clear()
        os.environ.update(saved)  # TMPDIR and POCL_CACHE_DIR as they were
        tempfile.tempdir = None
        shutil.rmtree(root, ignore_errors=True)


def _soak(args: argparse.Namespace, root: str) -> Soak:
    """The explorations (a rotation with faults and kills, then the quiet phase) while the
    threads sample and kill; the last sample is taken after every pool closed."""
    from multiprocessing import resource_tracker

    from codegen.worker import WorkerPool

    tmp = os.path.join(root, "tmp")
    os.makedirs(tmp)
    os.environ["TMPDIR"] = tmp  # the workers inherit it; the driver's tempfile too
    tempfile.tempdir = None
    pocl = args.pocl_cache or os.environ.get("POCL_CACHE_DIR") or os.path.join(root, "pocl")
    os.makedirs(pocl, exist_ok=True)
    os.environ["POCL_CACHE_DIR"] = pocl
    resource_tracker.ensure_running()  # its pipe is open from the start: not a leak
    out = Path(args.out)
    (out / "stores").mkdir(parents=True, exist_ok=True)
    (out / ".gitignore").write_text("stores/\nobserved.jsonl\n")
    fds_start = fd_count(os.getpid()) or 0  # before the log: it is closed at the end
    sk = Soak(args, tmp, pocl, open(out / "observed.jsonl", "w", buffering=1))
    sk.t0, sk.fds_start = time.time(), fds_start
    sk.sample()
    threads = [threading.Thread(target=sk.sampler, daemon=True)]
    if args.kill_every_s > 0:
        threads.append(threading.Thread(target=sk.killer, daemon=True))
    for t in threads:
        t.start()
    quiet_at = sk.t0 + args.minutes * 60.0 * (1.0 - args.quiet_share)
    end = sk.t0 + args.minutes * 60.0
    failed = False  # an exploration that raised ends the run (its check says why)
    try:
        while quiet_at - time.time() > 3.0 and not failed:  # a new pool each time
            with WorkerPool(args.device, workers=args.workers) as pool:
                failed = sk.explore(args.tasks[len(sk.runs) % len(args.tasks)], pool,
                                    quiet_at)
            sk.pool_done(pool)
        sk.quiet.set()
        if end - time.time() > 3.0 and not failed:  # one pool, its workers live to the end
            with WorkerPool(args.device, workers=args.workers) as pool:
                while end - time.time() > 3.0 and not failed:
                    failed = sk.explore(args.quiet, pool, end, quiet=True)
            sk.pool_done(pool)
    finally:
        sk.stop.set()
        for t in threads:
            t.join()
        sk.log.close()
    deadline = time.time() + 10  # the closed pools' workers are reaped
    while time.time() < deadline and any(workers_and_others(os.getpid())):
        time.sleep(0.2)
    sk.sample()
    return sk


# ------------------------------------------------------------------ checks and report


def kill_verdict(sk: Soak, recs: list[tuple]) -> tuple[bool | None, str]:
    """Matches each record that says a worker was killed under it (``retried``, or a
    ``SIGKILL`` crash) to a distinct kill made while it was evaluated."""
    if not sk.kills:
        return None, "no kill injected (run longer than --kill-every-s)"
    free, unmatched = sorted(sk.kills), 0
    for r in sorted((r for r in recs if r[8]), key=lambda r: r[7]):  # by their end
        hit = [t for t in free if r[7] - (r[6] or 0) - 0.5 <= t <= r[7] + 0.5]
        if hit:  # the earliest free kill inside [start, end]: a maximum matching
            free.remove(hit[0])
        else:
            unmatched += 1
    lost = sum(1 for r in recs if r[8] == "SIGKILL")
    retried = sum(1 for r in recs if r[8] == "retried")
    pool_retries = sum(p["retried"] for p in sk.pools)
    return (unmatched == 0 and lost == 0 and retried <= pool_retries,
            f"{len(sk.kills)} kill(s): {retried} candidate(s) in flight retried (the pools "
            f"retried {pool_retries}, start-ups and re-timings included), {lost} stored as a "
            f"SIGKILL crash, {len(free)} hit an idle worker, {unmatched} record(s) killed "
            "beyond one per kill")


def worker_slopes(sk: Soak) -> tuple[list[float], list[int], int]:
    """Of each worker sampled for long enough after its own warm-up (its first 10 minutes,
    or first third): its RSS slope and how many descriptors it gained meanwhile; and how
    many workers were sampled."""
    per_pid: dict[str, list[tuple[float, float, int]]] = {}
    for x in sk.samples:
        for pid, v in x["workers"].items():
            if v["rss_mb"] is not None and v["fds"] is not None:
                per_pid.setdefault(pid, []).append((x["t_s"], v["rss_mb"], v["fds"]))
    slopes, fds = [], []
    for pts in per_pid.values():
        warm = min(600.0, (pts[-1][0] - pts[0][0]) / 3.0)
        late = [p for p in pts if p[0] - pts[0][0] >= warm]
        k = slope_mb_h([(t, y) for t, y, _ in late])
        if k is not None and late[-1][0] - late[0][0] >= sk.args.judge_min_s:
            slopes.append(k)
            fds.append(late[-1][2] - late[0][2])
    return slopes, fds, len(per_pid)


def checks(sk: Soak) -> list[tuple[str, str, str]]:
    """(check, PASS|FAIL|SKIP, what was measured) for every check."""
    a, s, end = sk.args, sk.samples, sk.samples[-1]
    seen, mismatched = load_observed(Path(a.out) / "observed.jsonl")
    recs = [r for rows in seen.values() for r in rows.values()]
    out: list[tuple[str, str, str]] = []

    def add(name: str, ok: bool | None, text: str) -> None:
        out.append((name, "SKIP" if ok is None else "PASS" if ok else "FAIL", text))

    warm = min(600.0, end["t_s"] / 3.0)
    late = [x for x in s[:-1] if x["t_s"] >= warm]  # the last sample is after the pools
    span = late[-1]["t_s"] - late[0]["t_s"] if late else 0.0
    d = slope_mb_h([(x["t_s"], x["driver_rss_mb"]) for x in late])
    add("driver RSS slope", None if span < a.judge_min_s or d is None else
        d < SLOPE_LIMIT_MB_H, f"{_f(d)} MB/h after {warm:.0f} s (limit "
        f"{SLOPE_LIMIT_MB_H:g}), {s[0]['driver_rss_mb']:.0f} -> {end['driver_rss_mb']:.0f} MB"
        + ("" if span >= a.judge_min_s else f"; not judged: {span:.0f} s of samples after "
           f"warm-up < --judge-min-s {a.judge_min_s:g}"))
    ws, wfds, sampled = worker_slopes(sk)
    add("worker RSS slope", max(ws) < SLOPE_LIMIT_MB_H if ws else None,
        f"{len(ws)} of {sampled} worker(s) sampled for --judge-min-s {a.judge_min_s:g} s "
        f"after their warm-up, steepest {_f(max(ws, default=None))} MB/h; at most "
        f"{max(_rss(x) for x in s):.0f} MB" + ("" if ws else "; not judged: no worker "
                                               "lived that long (the quiet phase's do)"))
    workers, others = workers_and_others(os.getpid())
    add("no leaked process", not workers and not others and end["children"] == 0,
        f"{len(workers) + len(others)} descendant(s) after the pools closed (multiprocessing's "
        f"resource tracker not counted); at most {max(x['children'] for x in s)} in the run")
    add("no leaked descriptor", abs(end["driver_fds"] - sk.fds_start) <= FD_SLACK
        and max(wfds, default=0) <= FD_SLACK,
        f"driver fds {sk.fds_start} at the start, {end['driver_fds']} at the end (slack "
        f"{FD_SLACK}), at most {max(x['driver_fds'] for x in s)} in the run; workers at most "
        f"{max((v['fds'] or 0 for x in s for v in x['workers'].values()), default=0)}, the "
        f"{len(wfds)} judged above gained at most {max(wfds, default=0)} after their warm-up")
    built = sum(1 for r in recs if r[2] != "rejected")
    growth = end["pocl_cache_mb"] - s[0]["pocl_cache_mb"]
    per = growth / built if built else growth
    add("cache dirs bounded", end["tmp_mb"] < 1.0 and per <= a.cache_mb_per_build,
        f"temporary dir {end['tmp_mb']:.2f} MB at the end, at most "
        f"{max(x['tmp_mb'] for x in s):.1f} MB; PoCL cache +{growth:.1f} MB for {built} "
        f"candidate(s) not rejected, {per * 1024:.0f} kB each (limit "
        f"{a.cache_mb_per_build * 1024:.0f} kB)")
    bad = [f"at {x['t_s']} s: {x['integrity']}" for x in s if x["integrity"] != "ok"]
    add("store integrity", not bad, f"{len(s)} checks, " + (bad[0] if bad else "all ok"))
    add("no row lost", end["rows"] == len(recs) and not mismatched,
        f"{end['rows']} row(s) in {len(sk.stores)} store(s), {len(recs)} record(s) evaluated"
        + (f"; {len(mismatched)} found otherwise, first {mismatched[0]}" if mismatched else ""))
    diffs = [f"{os.path.basename(path)}: {d}" for _, path in sk.stores
             for d in replay_check(path, seen.get(path, {}))]
    add("replay exact", not diffs, f"{len(recs)} record(s) replayed, ids, statuses and times "
        "as seen; compare(solver, model) as the CLI"
        + (f"; {len(diffs)} difference(s), first {diffs[0]}" if diffs else ""))
    add("kills cost <= 1 candidate, retried", *kill_verdict(sk, recs))
    errors = [r["error"] for r in sk.runs if "error" in r]
    counts: dict[str, int] = {}
    for r in sk.runs:
        for k, v in r.get("counts", {}).items():
            counts[k] = counts.get(k, 0) + v
    add("explorations ran the mix", not errors and counts.get("crash", 0) > 0
        and counts.get("timeout", 0) > 0, f"{len(sk.runs)} exploration(s) on "
        f"{len(sk.stores)} store(s), outcomes {json.dumps(counts, sort_keys=True)}"
        + (f"; {errors[0]}" if errors else ""))
    return out


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def _rss(x: dict[str, Any]) -> float:
    return max((v["rss_mb"] or 0.0 for v in x["workers"].values()), default=0.0)


def report(sk: Soak, verdicts: list[tuple[str, str, str]]) -> str:
    a = sk.args
    lines = [f"Soak: {a.minutes:g} min, {a.workers} worker(s), tasks {', '.join(a.tasks)} "
             f"then {a.quiet} quiet for {a.quiet_share:.0%}; {len(sk.runs)} exploration(s), "
             f"{len(sk.kills)} kill(s), {sk.observed} candidate(s) evaluated", "",
             "| t (s) | driver RSS (MB) | driver fds | workers' RSS (MB) | workers' fds | "
             "children | tmp (MB) | PoCL cache (MB) | rows | integrity |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for x in sk.samples:
        ws = x["workers"].values()
        lines.append(f"| {x['t_s']:.0f}{' q' if x['quiet'] else ''} | "
                     f"{x['driver_rss_mb']:.1f} | {x['driver_fds']} | "
                     + " | ".join("/".join(f"{v[k] or 0:.0f}" for v in ws) or "-"
                                  for k in ("rss_mb", "fds"))
                     + f" | {x['children']} | {x['tmp_mb']:.2f} | {x['pocl_cache_mb']:.1f} | "
                     f"{x['rows']} | {x['integrity']} |")
    lines += ["", "(q: the quiet phase)", "", "| check | verdict | measured |",
              "|---|---|---|"]
    lines += [f"| {n} | {v} | {t} |" for n, v, t in verdicts]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from experiments.options import ranged

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=ranged(float, 0.05, 24 * 60, "minutes"), default=60.0)
    ap.add_argument("--sample-s", type=ranged(float, 0.5, 3600, "seconds"), default=60.0)
    ap.add_argument("--out", default="results/soak", help="folder of the table, the samples "
                    "and the stores (default results/soak)")
    ap.add_argument("--workers", type=ranged(int, 1, 256, "a number of workers"),
                    default=max(2, os.cpu_count() or 2))
    ap.add_argument("--tasks", default="conv,matmul,blur", help="the rotation of tasks")
    ap.add_argument("--conv", default="C=8,H=16,W=16,M=16", help="convolution sizes")
    ap.add_argument("--matmul", default="M=64,N=64,K=64", help="matmul_plain sizes")
    ap.add_argument("--blur", default="H=64,W=64", help="blur_separable sizes")
    ap.add_argument("--slice-s", type=ranged(float, 5, 86400, "seconds"), default=None,
                    help="one exploration's time budget (default: a sixth of the run, at "
                    "least 20 s)")
    ap.add_argument("--timeout-s", type=ranged(float, 1, 600, "seconds"), default=15.0,
                    help="a candidate's time limit (the hanging ones meet it)")
    ap.add_argument("--quiet", default="matmul", choices=["conv", *PROGRAMS],
                    help="the task of the quiet phase (default matmul)")
    ap.add_argument("--quiet-share", type=ranged(float, 0, 1, "a fraction"), default=0.4,
                    help="the share of the run that is quiet: one pool, no fault, no kill, "
                    "so that its workers live long enough to be judged (default 0.4)")
    ap.add_argument("--crash-every", type=ranged(int, 0, 10**6, "a count"), default=30)
    ap.add_argument("--hang-every", type=ranged(int, 0, 10**6, "a count"), default=60)
    ap.add_argument("--kill-every-s", type=ranged(float, 0, 86400, "seconds"), default=None,
                    help="SIGKILL a worker this often (default: 30 kills a run, at most one "
                    "every 5 s, at least one every 120 s; 0: none)")
    ap.add_argument("--judge-min-s", type=ranged(float, 0, 86400, "seconds"), default=300.0,
                    help="the shortest span of samples a slope is judged over")
    ap.add_argument("--cache-mb-per-build", type=ranged(float, 0, 1024, "MB"), default=1.0)
    ap.add_argument("--pocl-cache", default=None, help="PoCL's cache folder (default: "
                    "POCL_CACHE_DIR, else a private one)")
    ap.add_argument("--device", default=None, help="OpenCL device spec (LIFTMAP_DEVICE)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    args.tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not args.tasks or set(args.tasks) - {"conv", *PROGRAMS}:
        ap.error("--tasks: give some of conv, matmul, blur")
    for opt, need in (("conv", "CHWM"), ("matmul", "MNK"), ("blur", "HW")):
        try:
            ok = set(sizes(getattr(args, opt))) == set(need)
        except ValueError:
            ok = False
        if not ok:
            ap.error(f"--{opt}: give {','.join(f'{k}=N' for k in need)}")
    secs = args.minutes * 60.0
    args.slice_s = args.slice_s or max(20.0, secs / 6)
    if args.kill_every_s is None:
        args.kill_every_s = min(120.0, max(5.0, secs / 30))
    sk = run_soak(args)
    verdicts = checks(sk)
    text = report(sk, verdicts)
    print(text)
    out = Path(args.out)
    (out / "soak.md").write_text(text)
    (out / "samples.json").write_text(json.dumps(
        {"args": vars(args), "samples": sk.samples, "kills": sk.kills, "runs": sk.runs,
         "pools": sk.pools, "fds_start": sk.fds_start, "verdicts": verdicts}, indent=1))
    print(f"written to {out / 'soak.md'} and {out / 'samples.json'}")
    failed = [f"FAIL {n}: {t}" for n, v, t in verdicts if v == "FAIL"]
    for line in failed:
        print(line, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
