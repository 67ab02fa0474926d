"""Scaling of ``mapper explore --ray``: the same exploration on 1, 2 and 4 Ray device actors,
each a simulated device that replays a committed results store's measured times.

    python -m experiments.bench_ray_scaling                        # defaults below
    python -m experiments.bench_ray_scaling --store docs/figures/data/l19-half-1k.sqlite \\
        --candidates 120 --workers 1,2,4,8 --strategy solver --time-scale 0.25
    python -m experiments.bench_ray_scaling --strategy model --out results/ray-scaling.json

Each run is ``explore(ReplayTask.from_store(store), pool=RayPool(...))`` on a local Ray
cluster started here (one node, as many logical CPUs as the largest worker count; stopped at
the end): the strategy proposes among the store's candidates and each device actor holds a
``mapper.explore.simulate.SimulatedDevice`` (``RayPool(backend=...)``): a candidate sleeps
its stored lowering + build time, then its stored run time on the device, and returns its
stored outcome. Nothing is lowered or run, so this 2-core machine does not cap 4 devices:
what is measured is the explorer (strategy, driver loop, Ray, store). Same strategy and seed
for every worker count.

Per worker count it prints: candidates per minute of the exploration loop (from the first
proposal to the last result stored), the ideal (the simulated seconds of those candidates
divided by the workers: devices never idle, a driver that costs nothing), the devices'
utilisation (their ratio), the simulated schedule (each candidate in order on the first
free device, no overhead: the ideal less the idle end of the run), and per candidate the
driver's overhead (the loop's time not spent waiting for an evaluation:
``Results.wait_s``), the strategy's proposal time (the records' ``search_s``) and the
store's time (``ResultStore.add`` and look-ups, timed here). For the ``model`` strategy
the kernel features of the store's mappings (a lowering and a tuning inference each, the
same for every worker count) are computed before the loop, so that its proposal time is
the strategy's own: sampling, fitting, ranking.

``--stored`` prints the candidate and proposal times of committed stores (what a real run
measured: the stored distributions), the proposal times of ``solver`` and ``random`` on
CC'22 Listing 3's live joint space, and ``--devices 16`` what that many devices would
sustain at those candidate times with the measured driver overhead: where the driver, not
the devices, is the bottleneck. ``--out`` writes every figure as JSON.
"""

from __future__ import annotations

import argparse
import glob
import heapq
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from experiments.machine import save_json
from mapper.explore.record import Record
from mapper.explore.store import ResultStore

STORE = "docs/figures/data/fig6-layer19-scale8-fusion-always-heuristics-on.sqlite"
STORED = ("docs/figures/data/l19-half-1k.sqlite", "docs/figures/data/l19-half-live-model.sqlite",
          "docs/figures/data/fig6-layer19-scale8-fusion-always-heuristics-on.sqlite",
          "docs/figures/data/fig5-layer19-scale4-model.sqlite",
          "docs/figures/data/fig5-layer19-scale4-random.sqlite", "results/search/*.sqlite")


MODEL_BATCH = 5  # the model strategy's default batch (the stored runs' batch)


class TimedStore(ResultStore):
    """A ``ResultStore`` that times its writes (``add``) and look-ups (``record``)."""

    add_s = 0.0
    adds = 0
    lookup_s = 0.0

    def add(self, row: Record | Mapping[str, Any]) -> bool:
        t0 = time.perf_counter()
        try:
            return super().add(row)
        finally:
            self.add_s += time.perf_counter() - t0
            self.adds += 1

    def record(self, key: str) -> Record | None:
        t0 = time.perf_counter()
        try:
            return super().record(key)
        finally:
            self.lookup_s += time.perf_counter() - t0


@dataclass
class Row:
    """One exploration at one worker count."""

    workers: int
    candidates: int
    loop_s: float  # first proposal to last stored result
    simulated_s: float  # the candidates' stored times (scaled), summed
    driver_s: float  # the loop's time not waiting for evaluations
    proposal_s: float  # the strategy's search time, summed
    store_s: float  # ResultStore.add + look-ups, summed
    scheduled_s: float  # the simulated makespan: each candidate, in order, on the first free
    outcomes: dict[str, int]

    @property
    def per_min(self) -> float:
        return 60.0 * self.candidates / self.loop_s

    @property
    def ideal_s(self) -> float:
        return self.simulated_s / self.workers

    @property
    def ideal_per_min(self) -> float:
        return 60.0 * self.candidates / self.ideal_s if self.ideal_s else float("inf")

    @property
    def utilisation(self) -> float:
        return self.ideal_s / self.loop_s

    @property
    def scheduled_per_min(self) -> float:
        return 60.0 * self.candidates / self.scheduled_s if self.scheduled_s else float("inf")

    def per_candidate_ms(self, seconds: float) -> float:
        return 1e3 * seconds / max(1, self.candidates)


def run_one(store: str, workers: int, *, strategy: str, candidates: int, seed: int,
            time_scale: float, tmp: str, options: Mapping[str, Any]) -> Row:
    """The exploration of ``store``'s candidates on ``workers`` simulated device actors."""
    from mapper.explore import ExploreOptions, explore
    from mapper.explore.ray_pool import RayPool
    from mapper.explore.simulate import ReplayTask, SimulatedDevice, StoredOutcomes

    outs = StoredOutcomes.load(store)
    task = ReplayTask.from_store(store)
    if strategy == "model":  # the mappings' kernel features, before the loop (see above)
        space = task.joint()
        for m in space.mappings:
            space.tuning(m).features  # noqa: B018 - computed once, then cached
    st = TimedStore(os.path.join(tmp, f"{strategy}-{workers}.sqlite"))
    started: list[float] = []
    with RayPool([f"sim:{i}" for i in range(workers)], workers_per_device=1,
                 backend=SimulatedDevice.backend(outs, time_scale=time_scale),
                 timeout_s=1e6) as pool:
        t_call = time.perf_counter()
        res = explore(task, budget=candidates, store=st, pool=pool, strategy=strategy,
                      options=ExploreOptions.of(seed=seed, cut=None, retime=0,
                                                timeout_s=1e6),
                      on_start=lambda _: started.append(time.perf_counter()), **options)
    st.close()
    loop_s = res.elapsed_s - (started[0] - t_call)
    times = [outs[task.lower_fn(r.mapping, r.tuning).key].total_s * time_scale
             for r in sorted(res.records, key=lambda r: r.idx or 0)]
    return Row(workers, res.evaluated, loop_s, sum(times), loop_s - res.wait_s,
               sum(r.search_s or 0.0 for r in res.records), st.add_s + st.lookup_s,
               makespan(times, workers), dict(res.counts))


def makespan(times: Sequence[float], workers: int) -> float:
    """When the last of ``times`` ends, each started in order on the first free of
    ``workers`` devices, with no overhead (the simulated schedule: the end of a run leaves
    devices idle that the ideal ``sum / workers`` does not)."""
    free = [0.0] * workers
    for t in times:
        heapq.heappush(free, heapq.heappop(free) + t)
    return max(free)


def stored_times(patterns: Sequence[str]) -> list[dict[str, Any]]:
    """Per committed store and strategy: candidates, candidate and proposal times (what a
    real run measured), and the runs that stopped without a candidate."""
    out = []
    for path in sorted({p for pat in patterns for p in glob.glob(pat)}):
        with ResultStore(path, readonly=True) as st:
            recs = st.records()
            runs = st.runs()
        by: dict[str, list[Record]] = {}
        for r in recs:
            by.setdefault(r.strategy, []).append(r)
        for strat, rs in sorted(by.items()):
            wall = [float(r.wall_s or 0.0) for r in rs]
            search = [float(r.search_s or 0.0) for r in rs]
            out.append({"store": path, "strategy": strat, "candidates": len(rs),
                        "wall_median_s": statistics.median(wall),
                        "wall_mean_s": statistics.fmean(wall),
                        "search_median_s": statistics.median(search),
                        "search_mean_s": statistics.fmean(search)})
        for run in runs:
            if not run.get("evaluated"):
                out.append({"store": path, "strategy": run.get("strategy"), "candidates": 0,
                            "stopped_by": run.get("stopped_by"), "draws": run.get("draws")})
    return out


def proposal_times(strategies: Sequence[str], n: int = 200) -> list[dict[str, Any]]:
    """Each strategy's time to propose ``n`` candidates of CC'22 Listing 3 (N=65536) from
    its live joint space (no device, nothing evaluated: ``next()`` on its candidates)."""
    from ir.programs import cc22_listing3
    from mapper.explore.strategies import get_strategy
    from mapper.explore.task import Task

    joint = Task.from_program(cc22_listing3(), {"N": 65536}).joint()
    out = []
    for name in strategies:
        strat = get_strategy(name)(joint, seed=0)
        it, times = strat.candidates(), []
        for _ in range(n):
            t0 = time.perf_counter()
            if next(it, None) is None:
                break
            times.append(time.perf_counter() - t0)
        out.append({"program": "cc22_listing3 N=65536", "strategy": name,
                    "candidates": len(times), "median_s": statistics.median(times),
                    "mean_s": statistics.fmean(times), "draws": strat.draws_total})
    return out


def sustained(devices: int, candidate_s: float, driver_s: float) -> float:
    """Candidates per minute of ``devices`` devices at ``candidate_s`` a candidate, with a
    driver that spends ``driver_s`` on each (the smaller of the two rates)."""
    return min(60.0 * devices / candidate_s, 60.0 / driver_s if driver_s else float("inf"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", default=STORE, help="the store replayed (default %(default)s)")
    ap.add_argument("--workers", default="1,2,4", help="device actors per run (default "
                    "%(default)s)")
    ap.add_argument("--candidates", type=int, default=100, help="per run (default "
                    "%(default)s)")
    ap.add_argument("--strategy", default="solver")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=None, help="the model strategy's batch")
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="each simulated sleep is the stored time times this (default 1)")
    ap.add_argument("--stored", action="store_true",
                    help="also print the stored candidate and proposal times")
    ap.add_argument("--devices", type=int, default=16,
                    help="the cluster size of the projection (default %(default)s)")
    ap.add_argument("--driver-ms", type=float, default=None,
                    help="with --stored: the driver's overhead per candidate besides the "
                    "proposal, in ms (default: the largest the runs measured)")
    ap.add_argument("--out", help="write every figure as JSON")
    args = ap.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",") if w.strip() not in ("", "0")]
    if not counts and not (args.stored and args.driver_ms is not None):
        ap.error("give --workers, or --stored with --driver-ms")
    options = {"batch": args.batch} if args.batch else {}

    rows: list[Row] = []
    if counts:
        import ray

        os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
        ray.init(num_cpus=max(counts), include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR)
        try:
            with tempfile.TemporaryDirectory(prefix="ray-scaling-") as tmp:
                for n in counts:
                    rows.append(run_one(args.store, n, strategy=args.strategy,
                                        candidates=args.candidates, seed=args.seed,
                                        time_scale=args.time_scale, tmp=tmp,
                                        options=options))
                    r = rows[-1]
                    print(f"  {n} worker(s): {r.candidates} candidates in {r.loop_s:.1f} s",
                          file=sys.stderr)
        finally:
            ray.shutdown()

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU(s), " \
        f"load {load:.1f}"
    if rows:
        print(f"# {args.strategy}, seed {args.seed}, {args.store}, time scale "
              f"{args.time_scale:g}; {machine}")
    else:
        print(f"# {machine}")
    if rows:
        print("| workers | candidates | candidates/min | ideal/min | scheduled/min | "
              "utilisation | driver overhead ms/cand. | proposal ms/cand. | store ms/cand. |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r.workers} | {r.candidates} | {r.per_min:.1f} | {r.ideal_per_min:.1f} | "
              f"{r.scheduled_per_min:.1f} | "
              f"{r.utilisation:.0%} | {r.per_candidate_ms(r.driver_s):.1f} | "
              f"{r.per_candidate_ms(r.proposal_s):.1f} | {r.per_candidate_ms(r.store_s):.1f} |")
    report: dict[str, Any] = {"args": vars(args), "load": load,
                              "rows": [{**asdict(r), "per_min": r.per_min,
                                        "ideal_per_min": r.ideal_per_min,
                                        "scheduled_per_min": r.scheduled_per_min,
                                        "utilisation": r.utilisation} for r in rows]}
    if args.stored:
        # the driver's own cost per candidate besides proposing: receiving + storing
        base = 1e-3 * args.driver_ms if args.driver_ms is not None else \
            max((r.driver_s - r.proposal_s) / max(1, r.candidates) for r in rows)
        report["stored"] = stored = stored_times(STORED)
        # the model's proposal work is per batch (a refit, 128 more samples): with a batch
        # of one per device (explore's default on a larger pool) it is spread over more
        batched = MODEL_BATCH / max(MODEL_BATCH, args.devices)
        print(f"\n# stored times; {args.devices} devices: sustained candidates/min with a "
              f"driver of {1e3 * base:.1f} ms + the strategy's mean proposal time (model: as "
              f"stored, batch {MODEL_BATCH}; and x {batched:.2f} for a batch of "
              f"{max(MODEL_BATCH, args.devices)})")
        print("| store | strategy | candidates | candidate s (median / mean) | proposal ms "
              f"(median / mean) | {args.devices} devices, ideal/min | sustained/min | "
              "batched/min |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for s in stored:
            name = os.path.basename(s["store"]).removesuffix(".sqlite")
            if not s["candidates"]:
                print(f"| {name} | {s['strategy']} | 0 ({s['stopped_by']}) | | | | | |")
                continue
            ideal = 60.0 * args.devices / s["wall_mean_s"]
            s["sustained_per_min"] = sus = sustained(args.devices, s["wall_mean_s"],
                                                     base + s["search_mean_s"])
            bat = sustained(args.devices, s["wall_mean_s"], base + s["search_mean_s"]
                            * (batched if s["strategy"] == "model" else 1.0))
            s["batched_per_min"] = bat
            print(f"| {name} | {s['strategy']} | {s['candidates']} | "
                  f"{s['wall_median_s']:.2f} / {s['wall_mean_s']:.2f} | "
                  f"{1e3 * s['search_median_s']:.1f} / {1e3 * s['search_mean_s']:.1f} | "
                  f"{ideal:.0f} | {sus:.0f} | {bat:.0f} |")
        report["proposals"] = props = proposal_times(("solver", "random"))
        print("\n# proposal times on a live joint space (no device)")
        print("| program | strategy | candidates | proposal ms (median / mean) | draws |")
        print("|---|---|---:|---:|---:|")
        for p in props:
            print(f"| {p['program']} | {p['strategy']} | {p['candidates']} | "
                  f"{1e3 * p['median_s']:.2f} / {1e3 * p['mean_s']:.2f} | {p['draws']} |")
    save_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
