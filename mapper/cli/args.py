"""The command line's parser: every command's arguments, range-checked."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

from mapper.cli.common import MAX_RANGE
from mapper.cli.demo import add_parser as add_demo_parser
from mapper.cli.options import (
    MAX_REPLAY_SEEDS,
    MAX_TOP,
    MAX_WORKERS,
    _int_in,
    _non_negative,
    _seconds,
    add_device,
    add_repeats,
    add_search,
    add_seed,
    add_timeout,
)
from mapper.cli.tune import add_parser as add_tune_parser


def _version() -> str:
    from mapper.explore.store import library_version

    return library_version()


def _value_options(ap: argparse.ArgumentParser) -> set[str]:
    """The option strings of ``ap`` and its subcommands that take a value."""
    out: set[str] = set()
    for a in ap._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sp in a.choices.values():
                out |= _value_options(sp)
        elif a.option_strings and a.nargs != 0:
            out.update(a.option_strings)
    return out


def negative_values_joined(ap: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--opt -10m`` written ``--opt=-10m`` for the options that take a value,
    so that a negative value reaches the option's own check (one clear line) instead of
    argparse's "expected one argument"."""
    takes = _value_options(ap)
    out: list[str] = []
    i = 0
    while i < len(argv):
        t = argv[i]
        if t in takes and i + 1 < len(argv) and re.match(r"-\.?\d", argv[i + 1]):
            out.append(f"{t}={argv[i + 1]}")
            i += 2
        else:
            out.append(t)
            i += 1
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="mapper",
        description="Valid parallel mappings of functional array programs onto OpenCL, "
        "found by constraint satisfaction.",
    )
    ap.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = ap.add_subparsers(dest="command", required=True)

    def prog_cmd(name: str, help: str, variants: bool = False) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("file", help="program file in the text syntax (e.g. examples/*.lift)")
        p.add_argument("--tiling", choices=("none", "local", "private", "global")
                       + (("auto",) if variants else ()),
                       default="none", help="the program fused through tiling (a stencil "
                       "pipeline computed tile by tile, its intermediate images per tile in "
                       "that memory; the tile side is the size t)"
                       + ("; auto: the unfused program and its local and private tilings, "
                          "one after the other" if variants else "") + ": docs/tiling.md")
        unfused_arg(p)
        return p

    def unfused_arg(p):
        p.add_argument("--unfused", metavar="A,C", help="with --tiling local/private/global: "
                       "stages (by their outer map's label) computed whole before the tiles, "
                       "their edges to their consumers not fused")

    def fusion(p):
        p.add_argument("--fusion", choices=("always", "never", "free"), default="always",
                       help="sequential map fusion strategy (CC'22 Section 4.5)")
        p.add_argument("--no-heuristics", dest="heuristics", action="store_false",
                       help="validity rules only: drop the heuristic rules that prune "
                       "correct but unlikely mappings (see mapper constraints)")

    def as_json(p):
        p.add_argument("--json", action="store_true", help="print one JSON document instead "
                       "(schema: docs/cli-json.md)")

    p = prog_cmd("show", "parse a program, print it typed with its algorithmic constraints",
                 variants=True)
    p.add_argument("--sizes", help="check the constraints for sizes, e.g. N=64,s0=16,s1=4")
    as_json(p)
    p = prog_cmd("constraints", "the map-nesting tree and the mapping constraints per rule",
                 variants=True)
    fusion(p)
    p.add_argument("--list", action="store_true", help="list every constraint instance")
    as_json(p)
    p = prog_cmd("enumerate", "enumerate (or count) the valid mappings",
                 variants=True)
    fusion(p)
    p.add_argument("--count", action="store_true", help="only count them (without listing "
                   "them, unless --backend is given)")
    p.add_argument("--limit", type=_non_negative, help="show at most N mappings")
    p.add_argument("--random", action="store_true", help="uniformly random order")
    add_seed(p, "seed of the random order", default=None)
    p.add_argument("--backend", choices=("cp", "z3", "brute"), default=None,
                   help="solver that lists the mappings (default cp); with --count, count "
                   "by listing with it (a slow cross-check)")
    p.add_argument("--fixed", help="pin some maps, e.g. 'A=W0 B=L0'")
    add_timeout(p, 60.0, "stop with exit status 2 after this many seconds (default 60; 0: "
                "no limit)", zero_off=True)
    as_json(p)
    p = prog_cmd("check", "check one mapping and say which rules it violates")
    fusion(p)
    p.add_argument("--mapping", required=True, help="e.g. 'A=20 B=10 C=10 D=0' or 'A=W0 B=L0'")
    as_json(p)
    p = prog_cmd("explain", "why a partial mapping is impossible (minimal rule instances)")
    fusion(p)
    p.add_argument("--partial", required=True, help="e.g. 'A=W0 C=G0'")
    as_json(p)
    p = prog_cmd("space", "tuning parameters, their constraints and the exact count",
                 variants=True)
    add_timeout(p, 120.0, "stop building the space after this many seconds (default 120; 0: "
                "no limit)", zero_off=True)
    as_json(p)
    p.add_argument("--sizes", required=True, help="the fixed sizes, e.g. H=28,W=28,C=64,...")
    p.add_argument("--mapping", help="apply this mapping first (adds launch constraints)")
    p.add_argument("--domain", action="append", help="override a domain: theta=3..20 or v=1,4")
    p.add_argument("--max", type=int, help="upper end of inferred ranges (default 2x sizes; "
                   f"1..{MAX_RANGE}, checked by the command)")
    add_device(p, "the device whose limits become constraints: a preset (pocl-cpu, h100), a "
               "JSON description or an OpenCL device spec (default: the pocl-cpu preset)")
    p = sub.add_parser("device", help="describe a device (preset, JSON description or live "
                       "OpenCL device) and save its description")
    p.add_argument("spec", nargs="?", help="pocl-cpu, h100, FILE.json or an OpenCL device "
                   "spec (default: the live default device)")
    p.add_argument("--save", help="write the description to this JSON file")
    p.add_argument("--json", action="store_true", help="print the description as JSON")
    p = prog_cmd("run", "lower one mapping to OpenCL, run it on the device, check and time it")
    fusion(p)
    p.add_argument("--mapping", required=True, help="e.g. 'A=W0 B=L0 C=L0 D=S'")
    p.add_argument("--sizes", required=True, help="every size and tuning value, e.g. N=4096,"
                   "s0=64,s1=4")
    add_device(p)
    add_repeats(p, 5, "timed executions (default 5)")
    add_timeout(p, 120.0, "seconds for build and runs in the worker process (default 120)")
    add_seed(p, "seed of the random inputs")
    p.add_argument("--show-source", action="store_true", help="print the OpenCL source on "
                   "stdout, raw (the verdict then goes to stderr)")
    p.add_argument("--source-out", metavar="FILE", help="write the OpenCL source to FILE")
    p.add_argument("--flops", type=_non_negative, help="the FLOP count GFLOP/s is computed "
                   "from (default: derived from the program's functions)")
    p.add_argument("--force", action="store_true", help="skip the mapping constraints: let "
                   "the lowering's checks judge an invalid mapping")
    as_json(p)
    p = sub.add_parser("repl", help="interactive shell to debug a program's mapping constraints")
    p.add_argument("file", nargs="?", help="program to load first")
    class StrategyList(argparse.RawDescriptionHelpFormatter):
        """Help whose epilog ``STRATEGIES`` becomes the registered strategies, one a line
        (imported only when the help is printed)."""

        def add_text(self, text: str | None) -> None:
            if text == "STRATEGIES":
                from mapper.explore.output import strategies_help

                text = strategies_help()
            super().add_text(text)

    p = sub.add_parser("explore", help="search mappings x tuning on the device, every "
                       "candidate recorded in a resumable SQLite store",
                       description="Search mappings x tuning values on the device; every "
                       "candidate is recorded in a\nresumable SQLite store. On a terminal a live "
                       "dashboard shows the progress; -v prints\na line per candidate on stderr, "
                       "--json/--jsonl print JSON on stdout (docs/cli-json.md),\n-q only the "
                       "answer.", epilog="STRATEGIES", formatter_class=StrategyList)
    p.add_argument("file", help="program file (examples/*.lift) or 'conv' (the GPGPU'20 "
                   "convolution pipeline, with --layer)")
    fusion(p)
    p.add_argument("--sizes", help="the fixed sizes, e.g. N=4096; the other size variables "
                   "are tuned")
    p.add_argument("--flops", type=_non_negative, help="the FLOP count GFLOP/s is computed "
                   "from (default: derived from the program's functions)")
    p.add_argument("--layer", help="conv only: VGG-16 layer, /k scales H and W down "
                   "(default 19/2)")
    p.add_argument("--tiling", choices=("none", "local", "private", "global", "auto"),
                   default=None, help="a .lift stencil pipeline fused through tiling, its "
                   "intermediate images per tile in that memory (the tile side t is tuned); "
                   "auto (the default, but with --strategy manual): the unfused program and "
                   "the local and private tilings probed, the fastest explored; a program "
                   "that does not tile is explored as it is (docs/tiling.md)")
    unfused_arg(p)
    p.add_argument("--layout", choices=("auto", "declared"), help="a .lift program's input "
                   "layouts: auto (the default, but with --strategy manual): beside the "
                   "program as declared, a variant per input worth storing with another "
                   "dimension innermost (a first kernel copies it; docs/mapping.md, Layouts), "
                   "probed with the others; declared: the inputs as declared only")
    p.add_argument("--vectorise", choices=("auto", "window", "kernels"), help="conv only: "
                   "vectors along the window (dot products) or across kernels (an outer "
                   "product; its store is STORE with .kernels before the extension, whichever "
                   "runs); auto (default): probe both, explore the faster (a budget under "
                   "2 minutes or 32 candidates: the window's only)")
    p.add_argument("--algorithm", choices=("auto", "direct", "winograd", "winograd4"),
                   help="conv only: the direct convolution, or Winograd's F(2x2, 3x3) "
                   "(winograd) or F(4x4, 3x3) (winograd4; 3x3 kernels, stride 1, padding 1; "
                   "tiles past the output are cropped; the store is STORE with "
                   ".winograd or .winograd4 before the extension); auto (default): where each "
                   "applies and --vectorise is auto, Winograd's variants are probed beside "
                   "the direct ones")
    add_search(p, strategy="the search strategy (default model; every strategy is listed "
               "below)", budget="candidates (500) or time (90s, 10m)", budget_default="100",
               store="SQLite results store (default results/<program>.sqlite)",
               seed="seed of the strategy (the same seed and store resume a run; default 0)",
               timeout=(30.0, "seconds for one candidate's lowering, build and runs (default "
                        "30)"))
    p.add_argument("--mapping", help="the fixed mapping of --strategy manual")
    add_repeats(p, 3, "timed runs per candidate")
    p.add_argument("--cut", type=_seconds, default=3.0, help="early cut: stop a candidate whose "
                   "first execution's kernels run CUT times the best candidate's kernel "
                   "time, at least 2 s (default 3; 0: off)")
    p.add_argument("--run-budget", type=_seconds, default=1.0, help="seconds the timed runs "
                   "of one candidate may take: slow ones are timed fewer times (at least "
                   "once; default 1; 0: always --repeats)")
    p.add_argument("--max", type=_int_in(1, MAX_RANGE), help="upper end of inferred tuning "
                   "ranges")
    p.add_argument("--workers", type=_int_in(1, MAX_WORKERS), default=None, help="candidates "
                   "lowered and "
                   "built in parallel worker processes; their timed runs still take turns on "
                   "the device (default 1; with --ray: per device, default the node's CPUs)")
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS", help="evaluate on "
                   "a Ray cluster: join the one at ADDRESS (host:port, or 'auto': the one "
                   "`ray start` runs here), or without ADDRESS start one on this machine; "
                   "--device applies on every node (several specs: SPEC,SPEC: one actor "
                   "each); the store is written here (pip install 'liftmap[cluster]')")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print one JSON summary object at "
                     "the end on stdout instead of the text (schema: docs/cli-json.md)")
    fmt.add_argument("--jsonl", action="store_true", help="print one JSON object per "
                     "candidate on stdout as each finishes, then the summary object")
    talk = p.add_mutually_exclusive_group()
    talk.add_argument("-v", "--verbose", action="store_true", help="print one line per "
                      "candidate on stderr (also without a terminal; no dashboard)")
    talk.add_argument("-q", "--quiet", action="store_true", help="print only the answer: "
                      "the final mapping and tuning values (no dashboard, no summary)")
    p = sub.add_parser("results", help="what a results store holds: program, sizes, device, "
                       "outcome counts, best candidates")
    p.add_argument("store", help="the SQLite file written by mapper explore (or a Kernel "
                   "Tuner cache or T4 results file, .json)")
    p.add_argument("--top", type=_int_in(1, MAX_TOP), default=10, help="show the N best "
                   "(default 10)")
    p.add_argument("--format", choices=("kernel-tuner", "t4"), help="write the candidates as "
                   "a Kernel Tuner cache (its simulation mode replays it) or T4 results to "
                   "--out")
    p.add_argument("--out", help="--format: the JSON file to write")
    p.add_argument("--csv", help="also write every candidate to this CSV file (mapping in "
                   "short codes, one column per tuning parameter)")
    p.add_argument("--json", action="store_true", help="print everything as one JSON object "
                   "instead (schema: docs/cli-json.md)")
    p.add_argument("--compare", help="replay these strategies (e.g. solver,random,model) on "
                   "the stored candidates, without a device")
    p.add_argument("--seeds", type=_int_in(1, MAX_REPLAY_SEEDS), default=10, help="--compare: "
                   "seeds per strategy")
    p.add_argument("--target", type=float, default=0.9, help="--compare: fraction of the "
                   "best throughput to reach (default 0.9)")
    p = sub.add_parser("plot", help="PNG plots of a results store: best throughput against "
                       "time, time per stage, time-memory Pareto front")
    p.add_argument("store", help="the SQLite file written by mapper explore")
    p.add_argument("--out", help="folder for the PNGs (default: STORE without .sqlite + -plots)")
    add_tune_parser(sub)
    add_demo_parser(sub)
    return ap
