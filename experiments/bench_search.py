"""What the default search finds: `mapper explore conv` with its defaults, then the found
kernel against the hand-written kernel, PyTorch and the FMA-chain peak, in the same run.

    python -m experiments.bench_search                          # VGG-16's nine layers, 10m each
    python -m experiments.bench_search --layers 19,7 --budget 5m
    python -m experiments.bench_search --shapes "C=64,H=56,W=56,M=128,S=2;C=256,H=14,W=14,M=256,K=1"

For each shape: one exploration with the library's defaults, as ``mapper explore conv`` runs
it (``mapper.explore.variants.explore_variants`` over ``conv_variants``: the direct
convolution's two vectorisations and, where they apply, Winograd's F(2x2, 3x3) and F(4x4,
3x3), probed, the fastest explored; strategy, early cut, run budget, timeouts; only the
budget and the stores are given), every candidate stored in ``--store-dir``; then ``--rounds``
interleaved rounds time the found best (re-lowered from its stored mapping and tuning), the
register-tiled hand-written OpenCL kernel (``experiments.handwritten``) and PyTorch's conv2d
(when installed: ``pip install torch``), each after an idle pause and an untimed warm-up.
Before those, the found kernel is timed alone as the run timed its winner (the run's
rounds of ``retime_repeats`` runs, one a second over 60 s, a figure spanning a run's
minutes beside its 30 s of confirmation: ``found_alone``; its median with every 8-second
window alike, as a run's, its fastest round and steady figure): the run's reported figure
timed again by its own protocol; with ``--retime``, in a fresh process, so a figure that
one lucky run made would not come back. A short kernel loses up to a fifth beside the
peers and their pauses, which the interleaved figures show.
Kernel times are OpenCL profiling times of all kernels of a program; PyTorch's are wall
times of one call. Medians and minima are printed. The FMA-chain peak of the device
(``float8`` FMA chains, and ``float16`` ones where the device prefers 16-wide floats:
``experiments.probe_devices``) is measured once per run.

Also printed per shape: evaluations, time and evaluations to 90% and 95% of the run's final
best (stored figures) in the chosen variant's exploration, and the same over every
candidate of the shape's run in any variant (probes and contests included: what the run
would have answered, stopped then); then the run's successive answers (what each variant
held by re-timing, ``mapper.explore.incumbent``, the one re-timed fastest across variants;
in a store without challenges, each candidate that was the fastest stored so far) timed
again side by side, and the time at which
the answer, so timed, first reached 90% and 95% of the final answer's speed: one stored
measurement ranks kernels that are within 10% of each other nearly at random on a shared
host, so the stored figures' 90% mostly says when a lucky measurement came. Also the load
average before and after (it includes this script's
own previous shape). Other processes using more than a tenth of a core before a shape or
after its timing, and a host that took more than 2% of the CPU time (steal, on a virtual
machine) while timing, are named in a warning: figures taken beside other work are not
comparable. ``--json`` keeps every timed run's seconds.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from experiments.machine import cpu_model
from experiments.options import add_bench_seed, add_interleaving, add_json

VGG = ("0", "2", "5", "7", "10", "12,14", "17", "19,21", "24,26,28")


def parse_shapes(text: str) -> list:
    """``"C=64,H=56,W=56,M=128,S=2;..."`` -> ``ConvLayer`` values (K=3, S=1, P=1 unless
    given)."""
    from ir.conv_layer import ConvLayer

    out = []
    for i, part in enumerate(p for p in text.split(";") if p.strip()):
        kv = {}
        for item in part.split(","):
            k, _, v = item.partition("=")
            kv[k.strip()] = int(v)
        out.append(ConvLayer.from_sizes(kv, name=f"shape{i}"))
    return out


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


def busy_others() -> list[str]:
    """Other processes that used CPU in the last half second (name and %), from /proc."""
    def ticks() -> dict[int, tuple[str, int]]:
        out = {}
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == os.getpid():
                continue
            try:
                f = (d / "stat").read_text().rsplit(")", 1)
                name = (d / "comm").read_text().strip()
                rest = f[1].split()
                out[int(d.name)] = (name, int(rest[11]) + int(rest[12]))
            except (OSError, IndexError, ValueError):
                continue
        return out

    a = ticks()
    time.sleep(0.5)
    b = ticks()
    hz = os.sysconf("SC_CLK_TCK")
    res = []
    for pid, (name, t) in b.items():
        if pid in a and t - a[pid][1] > 0.1 * hz * 0.5:  # > 10% of a core
            res.append(f"{name}[{pid}] {100 * (t - a[pid][1]) / hz / 0.5:.0f}%")
    return res


def cpu_ticks() -> tuple[int, int]:
    """(steal, total) ticks of all CPUs since boot, from /proc/stat ((0, 0) elsewhere): the
    time a virtual machine's host gave its cores to others shows as steal."""
    try:
        with open("/proc/stat") as fh:
            vals = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return (vals[7] if len(vals) > 7 else 0), sum(vals)


def peak_widths(preferred: int) -> tuple[int, ...]:
    """The vector widths the FMA-chain peak is probed at: ``float8`` and the device's
    preferred float width where it is 16 or more (``float16``, where a core
    has 512-bit vectors: ``float8`` chains there leave half of each vector unused)."""
    return (8, 16) if preferred >= 16 else (8,)


def fma_peak(spec: str | None) -> tuple[float, int] | None:
    """``(GFLOP/s, width)`` of the fastest FMA chains (:func:`peak_widths`) on the device
    that ``spec`` selects (None: every chain failed)."""
    from codegen.device import select_device
    from codegen.opencl_env import list_devices, list_platforms
    from experiments.probe_devices import time_chain

    dev = select_device(spec)
    preferred = int(getattr(dev, "preferred_vector_width_float", 8) or 8)
    for pi, p in enumerate(list_platforms()):
        for di, d in enumerate(list_devices(p)):
            if d.int_ptr == dev.int_ptr:
                n = 8192 * max(1, int(dev.max_compute_units))
                best: tuple[float, int] | None = None
                for w in peak_widths(preferred):
                    g = time_chain(pi, di, w, 4096, n, 120.0).get("gflops")
                    if g and (best is None or g > best[0]):
                        best = (float(g), w)
                return best
    return None


def progress(records: list, start: float, final: float, frac: float) -> tuple[int, float]:
    """(evaluations, seconds from the run's start) to ``frac`` of ``final`` GFLOP/s, from
    a run's ``Record`` list."""
    for i, r in enumerate(records, 1):
        if r.ok and (r.gflops or 0) >= frac * final:
            return i, (r.created or start) - start
    return -1, float("nan")


MAX_ANSWERS = 24
ANSWER_FLOOR = 0.4


def answers(stores: dict, since: float, final: tuple) -> list[tuple]:
    """The run's answer as it changed, as ``(variant, record)`` in time order: from the
    challenges the runs stored (``mapper.explore.incumbent``: each variant's answer, held
    by re-timing; across variants the one whose re-timed figure was the lowest then), or,
    in stores without them, every record that was the fastest stored so far; at most
    ``MAX_ANSWERS`` (the latest; those under ``ANSWER_FLOOR`` of the final stored best
    left out), then ``final`` (``(variant, record)``: the run's answer) if it is not the
    last one."""
    steps = _held_answers(stores, since)
    if not steps:
        every = [(n, r) for n, r in _variant_records(stores, since) if r.ok and r.gflops]
        every.sort(key=lambda vr: vr[1].created or 0.0)
        top = 0.0
        for name, r in every:
            if (r.gflops or 0.0) > top:
                steps.append((name, r))
                top = r.gflops or 0.0
    top = max((r.gflops or 0.0 for _, r in steps), default=0.0)
    steps = [s for s in steps if (s[1].gflops or 0.0) >= ANSWER_FLOOR * top][-MAX_ANSWERS:]
    if final[1] is not None and (not steps or steps[-1][1].key != final[1].key
                                 or steps[-1][0] != final[0]):
        steps.append(final)
    return steps


def _held_answers(stores: dict, since: float) -> list[tuple]:
    """``(variant, record)`` each time the answer held by re-timing changed, over the
    variant stores ``stores`` from ``since`` on (see :func:`answers`)."""
    from mapper.explore.incumbent import answer_history
    from mapper.explore.store import ResultStore

    events = []
    for name, p in stores.items():
        if p is not None and os.path.exists(p):
            with ResultStore(p, readonly=True) as st:
                events += [(t, name, st.record(k), s)
                           for t, k, s in answer_history(st, since=since)]
    events.sort(key=lambda e: e[0])
    held: dict = {}  # variant -> (record, re-timed seconds)
    steps: list[tuple] = []
    for _, name, rec, s in events:
        if rec is None:
            continue
        held[name] = (rec, s)
        lead = min(held, key=lambda n: held[n][1])
        if not steps or steps[-1][0] != lead or steps[-1][1].key != held[lead][0].key:
            steps.append((lead, held[lead][0]))
    return steps


def answers_retimed(tasks: dict, steps: list[tuple], since: float, args) -> dict:
    """The answers of :func:`answers` timed again, interleaved (``ANSWER_ROUNDS`` rounds
    of ``args.repeats`` runs each, more for a short kernel: ``retime_repeats``), each by
    the median of its fastest round; then the time (from ``since``) at which the run's
    answer, re-timed, first reached 90% and 95% of the final answer's re-timed speed
    (None: never).

    The stored figures are one measurement each: on a shared host a kernel's 3-run median
    ranges over 1.1x-2.6x its fastest, wider than the 10% judged, and the final stored best
    is the luckiest of hundreds of measurements. Timed side by side, the answers are
    compared as kernels."""
    from codegen.worker import WorkerPool
    from mapper.explore.run import retime_repeats

    if not steps:
        return {}
    rounds: list[list[float]] = [[] for _ in steps]
    with WorkerPool() as pool:
        for _ in range(ANSWER_ROUNDS):
            for i, (name, r) in enumerate(steps):
                task = tasks[name]
                o = pool.evaluate_candidate(task.lower_fn(r.mapping, r.tuning),
                                            task.inputs, task.reference, timeout_s=300,
                                            repeats=retime_repeats(r.time_s, args.repeats),
                                            flops=task.flops,
                                            **task.tolerance)
                if o.ok and o.times_s:
                    rounds[i].append(statistics.median(o.times_s))
    fastest = [min(ts) if ts else None for ts in rounds]
    final = fastest[-1]
    out: dict = {"answers": [
        {"variant": n, "key": r.key, "at_s": (r.created or since) - since,
         "stored_gflops": r.gflops, "retimed_s": t} for (n, r), t in zip(steps, fastest)]}
    if final is None:
        return out
    for frac in (0.9, 0.95):
        hit = next(((s, t) for s, t in zip(steps, fastest)
                    if t is not None and t <= final / frac), None)
        out[f"to{int(frac * 100)}_retimed"] = None if hit is None else \
            (hit[0][1].created or since) - since
    return out


ANSWER_ROUNDS = 3


def _variant_records(stores: dict, since: float) -> list[tuple]:
    """``(variant, record)`` for every record stored in ``stores`` (variant -> path, a
    shape's variant stores; None: none) from ``since`` on."""
    from mapper.explore.store import ResultStore

    out = []
    for name, p in stores.items():
        if p is not None and os.path.exists(p):
            with ResultStore(p, readonly=True) as st:
                out += [(name, r) for r in st.records() if (r.created or 0.0) >= since]
    return out


def _run_records(paths, since: float) -> list:
    """The records stored at ``paths`` (a shape's variant stores) from ``since`` on."""
    return [r for _, r in _variant_records(dict(enumerate(paths)), since)]


def bench_shape(layer, args) -> dict:
    """Explores ``layer`` with the defaults, then times what it found (``time_found``)."""
    from mapper.explore import ExploreOptions
    from mapper.explore.task import conv_variants
    from mapper.explore.variants import explore_variants, variant_store

    warn = []  # the load average counts this script's previous shape: only others warn
    others = busy_others()
    if others:
        warn.append("busy: " + ", ".join(others))
    tasks = conv_variants(layer)  # what `mapper explore conv` explores by default
    store = Path(args.store_dir) / f"search-{layer.name.replace(',', '_')}-{layer.C}x{layer.H}x" \
        f"{layer.W}x{layer.M}k{layer.K}s{layer.S}p{layer.P}.sqlite"
    store.parent.mkdir(parents=True, exist_ok=True)
    stores = {n: variant_store(str(store), n, i == 0) for i, n in enumerate(tasks)}
    t0 = time.time()
    vr = explore_variants(tasks, budget=args.budget, stores=stores,
                          options=ExploreOptions.of(seed=args.seed))
    wall = time.time() - t0
    res, task = vr.results, tasks[vr.chosen]
    best = res.final  # the winner of the end-of-run re-timing
    out: dict = {"layer": layer.name, "shape": layer.sizes(), "variant": vr.chosen,
                 "budget": args.budget,
                 "probes": {n: (b.gflops if b is not None else None)
                            for n, b in vr.probe_best().items()},
                 # the close probes' bests timed again, interleaved: GFLOP/s of the fastest round
                 "probe_retimed": {n: layer.flops / m / 1e9
                                   for n, m in vr.probe_medians.items()},
                 # where those were close too, each variant explored a while: its best
                 "contest_retimed": {n: layer.flops / m / 1e9
                                     for n, m in vr.contest_medians.items()},
                 "evaluated": res.evaluated + sum(r.evaluated for n, r in vr.probes.items()
                                                  if n != vr.chosen),
                 "considered": res.considered, "explore_s": wall, "load_before": load(),
                 "warnings": warn, "counts": dict(res.counts)}
    if best is None:
        out["error"] = "no candidate ran ok"
        return out
    out["stored_gflops"] = best.gflops
    rt = res.retimed.get(best.key)
    out["retimed_gflops"] = rt.gflops if rt else None
    # the median of its fastest round: what another process reproduces best on a host
    # whose speed moves in phases of seconds (compared with ``found_alone``'s)
    out["retimed_round_gflops"] = rt.figure_round_gflops if rt else None
    # the median of its faster half of rounds: the figure with the host's slow phases out
    out["retimed_steady_gflops"] = rt.steady_gflops if rt else None
    # the host's slow phases during the run: (slow watch rounds, all, the worst ratio)
    from mapper.explore.watch import host_phases

    out["host_phases"] = host_phases(res.watched)
    final = max(r.gflops or 0.0 for r in res.records if r.ok)
    for frac in (0.9, 0.95):
        n, s = progress(res.records, t0, final, frac)
        out[f"to{int(frac * 100)}"] = (n, s)
    # what the run had found by then in any variant (probes and contests included), against
    # the fastest stored time of any variant: the answer had it been stopped there
    every = sorted(_run_records(stores.values(), t0), key=lambda r: r.created or 0.0)
    final_any = max((r.gflops or 0.0 for r in every if r.ok), default=0.0)
    for frac in (0.9, 0.95):
        n, s = progress(every, t0, final_any, frac)
        out[f"to{int(frac * 100)}_any"] = (n, s)
    steps = answers(stores, t0, (vr.chosen, best))
    out.update(answers_retimed(tasks, steps, t0, args))
    tuning = dict(best.tuning)
    out["best"] = f"{best.short_mapping}; {json.dumps(tuning, sort_keys=True)}"
    return time_found(layer, task, out, args)


def retime_row(row: dict, args) -> dict:
    """``row`` (a shape of an earlier run's JSON) with its found kernel timed again against
    the peers (the exploration's figures kept): more rounds where a run was noisy."""
    from ir.conv_layer import ConvLayer
    from mapper.explore.task import conv_task

    s = row["shape"]
    layer = ConvLayer(row["layer"], s["C"], s["H"], s["W"], s["M"], K=s["K"], S=s["S"],
                      P=s["P"])
    out = {k: v for k, v in row.items()
           if k not in ("found", "found_alone", "hand-written", "PyTorch", "steal_pct",
                        "error")}
    out.update(load_before=load(), warnings=[], retimed_from_run=True)
    return time_found(layer, conv_task(layer, row.get("variant", "window")), out, args)


def time_found(layer, task, out: dict, args) -> dict:
    """Times ``out["best"]`` (``"<mapping>; <tuning JSON>"``) against the hand-written
    kernel and PyTorch, interleaved, ``args.rounds`` rounds; the figures go into ``out``."""
    from codegen.program import CompiledProgram
    from codegen.worker import WorkerPool
    from experiments.baselines import (
        RunFailed,
        conv_inputs,
        conv_reference,
        fastest_round_s,
        interleave,
        kernel_times,
        skipped_peer,
        torch_available,
        torch_conv_fn,
        wall_times,
    )
    from experiments.handwritten import hand_program
    from mapper.data import reduction_tolerance
    from mapper.explore.run import retime_repeats

    warn = out["warnings"]
    short, tuning_text = out["best"].split("; ", 1)
    tuning = json.loads(tuning_text.replace("'", '"'))
    mapping = task.joint().problem.mapping(short)
    found_fn = task.lower_fn(mapping, tuning)
    try:
        hand, hand_label = hand_program(layer)
    except ValueError as e:  # stride 2: the register-tiled kernel does not apply
        hand, hand_label = None, f"no hand-written kernel ({e})"
    hin = conv_inputs(layer)
    href = conv_reference(layer, hin)
    torch_fn = None
    if torch_available():
        # the layer's own data and layout (a task may add zero channels or take its
        # weights in another layout: the kernel-vectorised variant's are KKCM)
        torch_fn, _ = torch_conv_fn(hin["inputData"], hin["kernelsWeights"], layer.S,
                                    layer.P, threads=os.cpu_count())
        torch_fn()
    else:
        print(skipped_peer("PyTorch", "torch"), flush=True)
    # a short kernel: more runs per round, the same for every contender of the shape
    g = out.get("retimed_gflops") or out.get("stored_gflops")
    reps = retime_repeats(layer.flops / (g * 1e9) if g else None, args.repeats)
    out["repeats"] = reps
    steal0, total0 = cpu_ticks()
    with WorkerPool() as pool:
        def handwritten(program: CompiledProgram) -> Sequence[float]:
            o = pool.evaluate(program, hin, href, timeout_s=300, repeats=reps,
                              flops=layer.flops, **reduction_tolerance(href))
            return o.times_s if o.ok else []

        runs: dict[str, Callable[[], Sequence[float]]] = {"found": kernel_times(
            pool, task, found_fn, repeats=reps, flops=layer.flops,
            what="found kernel")}
        if hand is not None:
            runs["hand-written"] = functools.partial(handwritten, hand)
        if torch_fn is not None:
            runs["PyTorch"] = functools.partial(wall_times, torch_fn, reps)
        per_round: dict[str, list[list[float]]] = {}
        try:
            # first the found kernel as the run re-timed it at its end: alone, its rounds
            # back to back, each of the run's runs (the reported figure's protocol, here in
            # this process: a figure a lucky run made would not come back)
            from mapper.explore.run import parse_budget

            out["found_alone"] = _alone(pool, task, found_fn, layer.flops, g,
                                        parse_budget(out.get("budget")
                                                     or args.budget).seconds,
                                        getattr(args, "alone_span", ALONE_SPAN_S))
            times = interleave(runs, args.rounds, args.settle, per_round)
        except RunFailed as e:
            out["error"] = str(e)
            return out
    steal1, total1 = cpu_ticks()
    steal = 100 * (steal1 - steal0) / max(1, total1 - total0)
    out["steal_pct"] = steal
    if steal > 2:
        warn.append(f"the host took {steal:.0f}% of the CPU time (steal) while timing")
    others = busy_others()
    if others:
        warn.append("busy after timing: " + ", ".join(others))
    for k, ts in times.items():
        if ts:
            fr = fastest_round_s(per_round.get(k, []))
            out[k] = {"median_gflops": layer.flops / statistics.median(ts) / 1e9,
                      "max_gflops": layer.flops / min(ts) / 1e9, "times_s": ts,
                      "round_gflops": layer.flops / fr / 1e9 if fr else None}
    out["hand_label"] = hand_label
    out["load_after"] = load()
    return out


# the found kernel timed alone is spread over this long at least: a run's figure spans
# the run (its watch rounds, ``mapper.explore.watch``), and the host's phases last tens
# of seconds, so a figure of 16-30 s meets one of them
ALONE_SPAN_S = 60.0


def _alone(pool, task, found_fn, flops: int, gflops: float | None,
           budget_s: float | None, span_s: float = ALONE_SPAN_S) -> dict:
    """The found kernel timed as a run confirms its winner at its end (the options'
    defaults: at least ``Retiming.rounds`` rounds of ``retime_repeats`` runs, one a
    second), spread over ``span_s`` (:data:`ALONE_SPAN_S`) or the ``confirm_span`` of a
    run given ``budget_s`` where that is longer: the median over every run with each window of the
    host's time weighing alike (``windowed_median``, as a run's figure), the fastest
    round's median and the steady figure (``steady_time``), in GFLOP/s."""
    from experiments.baselines import fastest_round_s, kernel_times
    from mapper.explore import ExploreOptions
    from mapper.explore.record import steady_time, windowed_median
    from mapper.explore.run import confirm_span, retime_repeats, spread_rounds

    o = ExploreOptions()
    reps = retime_repeats(flops / (gflops * 1e9) if gflops else None, o.evaluation.repeats)
    once = kernel_times(pool, task, found_fn, repeats=reps, flops=flops, what="found kernel")
    rounds, at = [], []
    for _ in spread_rounds(o.retiming.rounds, max(span_s, confirm_span(budget_s))):
        rounds.append(list(once()))
        at.append(time.time())
    ts = [t for r in rounds for t in r]
    fr = fastest_round_s(rounds)
    steady = steady_time([statistics.median(r) for r in rounds])
    return {"median_gflops": flops / windowed_median(rounds, at) / 1e9,
            "plain_median_gflops": flops / statistics.median(ts) / 1e9,
            "round_gflops": flops / fr / 1e9 if fr else None,
            "steady_gflops": flops / steady / 1e9 if steady else None, "repeats": reps,
            "rounds": len(rounds), "span_s": at[-1] - at[0], "times_s": ts}


def write_json(path: str, peak: float | None, rows: list[dict]) -> None:
    """Every figure measured so far, with the machine, to ``path``."""
    with open(path, "w") as fh:
        json.dump({"machine": cpu_model(), "peak": peak, "rows": rows}, fh, indent=1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", default=",".join(VGG).replace("12,14", "12")
                    .replace("19,21", "19").replace("24,26,28", "24"),
                    help="VGG-16 layers (default: the nine unique ones)")
    ap.add_argument("--shapes", help="other shapes: C=..,H=..,W=..,M=..[,K,S,P];... (replace "
                    "--layers)")
    ap.add_argument("--budget", default="10m", help="exploration budget per shape")
    add_interleaving(ap, rounds=5, repeats=5, settle=0.3)
    add_bench_seed(ap)
    ap.add_argument("--store-dir", default="results/search")
    ap.add_argument("--alone-span", type=float, default=ALONE_SPAN_S, metavar="SECONDS",
                    help="the found kernel timed alone (as the run timed its winner): its "
                    "rounds, one a second, spread over this long (default %(default)s)")
    add_json(ap)
    ap.add_argument("--retime", metavar="JSON",
                    help="no exploration: time again the kernels an earlier run's --json "
                    "found (its shapes; --rounds rounds), e.g. where that run was noisy")
    args = ap.parse_args(argv)
    from ir.conv_layer import vgg16_layer

    layers = parse_shapes(args.shapes) if args.shapes else \
        [vgg16_layer(n) for n in args.layers.split(",") if n]
    print(f"machine: {cpu_model()}; load {load()}", flush=True)
    probed = fma_peak(None)
    peak = probed[0] if probed else None
    print(f"FMA-chain peak (float{probed[1]}): {probed[0]:.0f} GFLOP/s" if probed
          else "FMA peak: failed", flush=True)
    rows = []
    if args.retime:
        try:
            with open(args.retime) as fh:
                earlier = [r for r in json.load(fh)["rows"] if "best" in r]
        except (OSError, ValueError, KeyError) as e:
            print(f"error: cannot read {args.retime}: {e}", file=sys.stderr)
            return 2
        jobs = [functools.partial(retime_row, r, args) for r in earlier]
    else:
        jobs = [functools.partial(bench_shape, layer, args) for layer in layers]
    for job in jobs:
        r = job()
        r["peak"] = peak
        rows.append(r)
        f = r.get("found", {}).get("median_gflops")
        h = r.get("hand-written", {}).get("median_gflops")
        t = r.get("PyTorch", {}).get("median_gflops")
        parts = [f"layer {r['layer']}: {r['evaluated']} evaluated in {r['explore_s']:.0f} s"
                 + (" (an earlier run)" if r.get("retimed_from_run") else "")]
        if r.get("probes"):
            again = r.get("probe_retimed") or {}
            parts.append(f"variant {r['variant']} (probes: " + ", ".join(
                (f"{n} {g:.1f}" if g else f"{n} -")
                + (f" [again {again[n]:.1f}]" if n in again else "")
                for n, g in r["probes"].items()) + ")")
        if "error" in r:
            parts.append(r["error"])
        if f:
            rt = r.get("retimed_gflops")
            parts.append(f"found {f:.1f} GFLOP/s (stored {r['stored_gflops']:.1f}, re-timed "
                         f"by the run {rt or 0:.1f}, max {r['found']['max_gflops']:.1f})")
        alone = r.get("found_alone", {}).get("median_gflops")
        if alone:
            rt = r.get("retimed_gflops")
            rr, ar = r.get("retimed_round_gflops"), r["found_alone"].get("round_gflops")
            rs, as_ = r.get("retimed_steady_gflops"), r["found_alone"].get("steady_gflops")
            parts.append(f"timed as the run re-times it {alone:.1f}"
                         + (f" (reported/this {rt / alone:.2f}x" if rt else "")
                         + (f"; by fastest rounds {rr:.1f}/{ar:.1f} = {rr / ar:.2f}x"
                            if rt and rr and ar else "")
                         + (f"; steady {rs:.1f}/{as_:.1f} = {rs / as_:.2f}x"
                            if rt and rs and as_ else "") + (")" if rt else ""))
        if h:
            parts.append(f"hand-written {h:.1f} ({f / h:.2f}x)" if f else f"hand {h:.1f}")
        if t:
            parts.append(f"PyTorch {t:.1f} ({f / t:.2f}x)" if f else f"PyTorch {t:.1f}")
        if peak and f:
            parts.append(f"peak {peak:.0f} ({f / peak:.2f}x)")
        fr = _rounds_ratios(r)
        if fr:
            parts.append("by fastest rounds: " + ", ".join(fr))
        if "to90" in r:
            parts.append(f"90% at #{r['to90'][0]} {r['to90'][1]:.0f} s, 95% at "
                         f"#{r['to95'][0]} {r['to95'][1]:.0f} s")
        if "to90_any" in r:
            parts.append(f"in any variant 90% at #{r['to90_any'][0]} "
                         f"{r['to90_any'][1]:.0f} s, 95% at #{r['to95_any'][0]} "
                         f"{r['to95_any'][1]:.0f} s")
        if r.get("answers"):
            def at(x):
                return "never" if x is None else f"{x:.0f} s"
            parts.append(f"the answer re-timed ({len(r['answers'])} answers, interleaved): "
                         f"90% at {at(r.get('to90_retimed'))}, 95% at "
                         f"{at(r.get('to95_retimed'))}")
        parts.append(f"load {r['load_before']} -> {r.get('load_after', '?')}")
        if r["warnings"]:
            parts.append("WARNING: " + "; ".join(r["warnings"]))
        print("; ".join(parts), flush=True)
        if args.json:  # after every shape: a long run stopped half-way keeps what it measured
            write_json(args.json, peak, rows)
    for line in summary_lines(rows):
        print(line)
    return 0


def summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The geometric means of the found kernel against each contender, by medians and by
    fastest rounds, each over the shapes that have that contender (a shape with no
    hand-written kernel is left out of that mean and the count says so)."""
    lines = []
    for figure, label in (("median_gflops", "medians"), ("round_gflops", "fastest rounds")):
        ratios = [(r["found"].get(figure), r.get("hand-written", {}).get(figure),
                   r.get("PyTorch", {}).get(figure)) for r in rows if "found" in r]
        ratios = [(f, h, t) for f, h, t in ratios if f]
        means = []
        for name, i in (("hand-written", 1), ("PyTorch", 2)):
            xs = [r[0] / r[i] for r in ratios if r[i]]  # the shapes that have this contender
            if xs:
                means.append(f"found/{name} {_gmean(xs):.2f}x"
                             + ("" if len(xs) == len(ratios) else f" ({len(xs)} shape(s))"))
        if means:
            lines.append(f"geometric mean over {len(ratios)} shape(s), by {label}: "
                         + ", ".join(means))
    return lines


def _gmean(xs: list[float]) -> float:
    return statistics.geometric_mean(xs) if xs else float("nan")


def _rounds_ratios(row: dict) -> list[str]:
    """The found kernel against each baseline by every contender's fastest round (see
    ``experiments.baselines.fastest_round_s``), in words; empty where the row has none."""
    f = row.get("found", {}).get("round_gflops")
    if not f:
        return []
    out = [f"found {f:.1f}"]
    for k in ("hand-written", "PyTorch"):
        g = row.get(k, {}).get("round_gflops")
        if g:
            out.append(f"{k} {g:.1f} ({f / g:.2f}x)")
    return out


if __name__ == "__main__":
    sys.exit(main())
