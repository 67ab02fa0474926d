"""The showcase of ``mapper demo``: a program written plainly, run as written, then what the
default search makes of it.

As written means its outer maps parallel and everything else sequential and scalar
(:func:`as_written`): the kernel a direct translation gives. The default search, on what
``mapper explore FILE`` explores (``mapper.explore.task.program_variants``: the program,
its tilings, its input layouts), then chooses within the constraints which maps run in
parallel, which in vector lanes (code V, a reduction's lanes), the register blocks (``uX``:
vectors of a parallel map per work-item) and the variant. Both kernels are judged on the
same evaluation path (a worker lowers, builds, runs and checks each against the reference
interpreter); the search's answer is its end-of-run re-timed median.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mapper.encoding import FUSED, SEQ, VEC, MapCodes, short_code
from mapper.errors import ArgumentError

DEFAULT_SIZES = {"M": 512, "N": 512, "K": 512}  # the built-in matmul's
DEFAULT_BUDGET = "2m"  # time enough to probe the variants, as mapper explore does
MAX_MAPPINGS_SCANNED = 100_000  # valid mappings looked through for the as-written one

_LEVELS = {1: "work-items of a work-group", 2: "work-groups", 3: "work-items (global)"}


def code_meaning(code: int) -> str:
    """What a map code does, in words (``V``: the map's iterations in vector lanes)."""
    if code == SEQ:
        return "a loop in one work-item"
    if code == FUSED:
        return "fused into its parent's loop"
    if code == VEC:
        return "its iterations in the vector lanes of one work-item"
    return f"across {_LEVELS[code // 10]}, dimension {code % 10}"


@dataclass(frozen=True)
class Choice:
    """One choice of the answer: a map's code or a tuning value, with what it means."""

    name: str
    value: str
    meaning: str


@dataclass(frozen=True)
class Timed:
    """A kernel as the evaluation path judged it: ``label`` ``ok`` or why not, its median
    time (seconds) and GFLOP/s where it ran."""

    mapping: str
    tuning: dict[str, int]
    label: str
    time_s: float | None
    gflops: float | None
    runs: int
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.label == "ok"


@dataclass(frozen=True)
class DemoReport:
    """What ``run_plain_demo`` found: the program (``text``, from ``origin``), its sizes,
    how many valid mappings it has, the kernel as written and the search's answer (None
    where no candidate ran ok), the answer's choices and OpenCL source."""

    origin: str
    text: str
    sizes: dict[str, int]
    maps: tuple[str, ...]
    valid_mappings: int
    written: Timed
    answer: Timed | None
    evaluated: int
    budget: str
    choices: tuple[Choice, ...] = ()
    source: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    variant: str = "unfused"  # the variant of the program the answer is of

    @property
    def speedup(self) -> float | None:
        """The as-written kernel's time over the answer's (None where either did not run)."""
        if self.answer is None or not self.answer.time_s or not self.written.time_s:
            return None
        return self.written.time_s / self.answer.time_s

    @property
    def ok(self) -> bool:
        """Both kernels ran and matched the reference."""
        return self.written.ok and self.answer is not None and self.answer.ok

    def to_json(self) -> dict[str, Any]:
        def timed(t: Timed | None) -> dict[str, Any] | None:
            if t is None:
                return None
            return {"mapping": t.mapping, "tuning": t.tuning, "status": t.label,
                    "reason": t.reason, "time_s": t.time_s, "gflops": t.gflops,
                    "runs": t.runs}

        return {"program": self.origin, "text": self.text, "sizes": self.sizes,
                "maps": list(self.maps), "valid_mappings": self.valid_mappings,
                "as_written": timed(self.written), "answer": timed(self.answer),
                "speedup": self.speedup, "evaluated": self.evaluated, "budget": self.budget,
                "outcomes": self.counts, "variant": self.variant,
                "choices": [{"name": c.name, "value": c.value, "meaning": c.meaning}
                            for c in self.choices],
                "source": self.source}


def as_written(p) -> MapCodes:
    """The mapping a direct translation of ``p`` (a ``MappingProblem``) gives: the valid
    mapping with no map in vector lanes, the fewest parallel maps below the outer ones and
    the most outer maps parallel, global work-items preferred (``A=G0 B=S`` for a matmul)."""
    roots = [m for m in p.labels if p.tree.maps[m].parent is None]

    def key(m: MapCodes) -> tuple[int, int, int, int]:
        vec = sum(1 for c in m.values() if c == VEC)
        inner_par = sum(1 for k, c in m.items() if k not in roots and c >= 10)
        outer_seq = sum(1 for k in roots if m[k] < 10)
        not_global = sum(1 for k in roots if m[k] // 10 != 3)
        return (vec, inner_par, outer_seq, not_global)

    best: MapCodes | None = None
    for i, m in enumerate(p.enumerate()):
        if best is None or key(m) < key(best):
            best = m
        if key(best) == (0, 0, 0, 0) or i + 1 >= MAX_MAPPINGS_SCANNED:
            break
    if best is None:
        raise ArgumentError("the program has no valid mapping: mapper explain shows why")
    return best


def run_plain_demo(program: Any = None, sizes: Mapping[str, int] | None = None, *,
                   budget: str = DEFAULT_BUDGET, store: str | None = None,
                   device: str | None = None, seed: int = 0,
                   on_phase: Callable[[str], None] | None = None) -> DemoReport:
    """Runs ``program`` (a ``.lift`` path, program text or ``Lambda``; default the built-in
    plain matmul, ``ir.programs.plain_matmul``, at :data:`DEFAULT_SIZES`) as written, then
    explores it with the default search for ``budget`` (candidates in ``store``, a SQLite
    path, or in memory); ``on_phase`` hears what starts next."""
    from codegen.worker import WorkerPool
    from ir.nodes import Lambda
    from ir.programs import plain_matmul
    from ir.syntax import parse, parse_file, print_program
    from mapper.api import problem
    from mapper.explore import ExploreOptions, parse_budget
    from mapper.explore.task import program_variants
    from mapper.explore.variants import explore_variants, variant_store

    parse_budget(budget)  # a user's mistake before any work
    say = on_phase or (lambda _: None)
    origin = program if isinstance(program, str) and program.endswith(".lift") else \
        "the built-in plain matmul (ir.programs.plain_matmul)" if program is None else "program"
    if program is None:
        program = plain_matmul()
        sizes = dict(DEFAULT_SIZES if sizes is None else sizes)
    if sizes is None:
        raise ArgumentError("give the program's sizes, e.g. N=1024 (the built-in matmul's "
                            f"default is {DEFAULT_SIZES})")
    if isinstance(program, str):
        program = parse_file(program) if program.endswith(".lift") else parse(program)
    if not isinstance(program, Lambda):
        raise ArgumentError("the demo's program must declare its inputs (e.g. X : [float]N)")
    # what `mapper explore FILE` explores: the program, its tilings, its input layouts
    tasks = program_variants(program, sizes, name=origin)
    task = tasks["unfused"]
    p = problem(task.program)
    written_map = as_written(p)
    say(f"counting the valid mappings of {len(p.labels)} map(s)")
    n_valid = p.count()
    plan = p.width_plan(written_map).defaults(task.sizes)
    opts = ExploreOptions.of(device=device, seed=seed)
    with WorkerPool(device) as pool:
        say(f"running it as written: {written_map.short()}")
        o = pool.evaluate_candidate(task.lower_fn(written_map, plan), task.inputs,
                                    task.reference, timeout_s=opts.evaluation.timeout_s,
                                    repeats=opts.evaluation.repeats, flops=task.flops,
                                    **task.tolerance)
        written = Timed(written_map.short(), dict(plan), o.label, o.time_s, o.gflops,
                        len(o.times_s), o.reason)
        say(f"the default search, {budget}" + (f" (variants: {', '.join(tasks)})"
                                                 if len(tasks) > 1 else ""))
        stores = {n: variant_store(store, n, n == "unfused") for n in tasks}
        vr = explore_variants(tasks, budget=budget, stores=stores, pool=pool, options=opts)
    res, chosen = vr.results, tasks[vr.chosen]
    final, win = res.final, res.final_retimed
    answer: Timed | None = None
    choices: tuple[Choice, ...] = ()
    source = ""
    if final is not None:
        t = win.median_s if win is not None else final.time_s
        g = win.gflops if win is not None else final.gflops
        answer = Timed(final.short_mapping, dict(final.tuning), "ok", t, g,
                       win.n if win is not None else 1)
        choices = _choices(chosen, vr.chosen, final.mapping, final.tuning)
        source = "\n".join(k.source.rstrip("\n")
                           for k in chosen.lower_fn(final.mapping, final.tuning)().kernels)
    evaluated = res.evaluated + sum(r.evaluated for n, r in vr.probes.items()
                                    if n != vr.chosen)
    return DemoReport(origin, print_program(task.program), dict(task.sizes), tuple(p.labels),
                      n_valid, written, answer, evaluated, budget, choices, source,
                      dict(res.counts), vr.chosen)


def _choices(task, variant: str, mapping: Mapping[str, int], tuning: Mapping[str, int]
             ) -> tuple[Choice, ...]:
    """The answer's variant (where not the program as written), map codes and tuning
    values, each with what it means (a tuning parameter's meaning as the space inferred
    it)."""
    out = []
    if variant != "unfused":
        out.append(Choice("variant", variant, _variant_meaning(task, variant)))
    out += [Choice(k, short_code(c), code_meaning(c)) for k, c in mapping.items()]
    params = task.joint().tuning(mapping).params
    for k, v in sorted(tuning.items()):
        why = params[k].why if k in params else ""
        out.append(Choice(k, str(v), why))
    return tuple(out)


def _variant_meaning(task, variant: str) -> str:
    """What a variant of the program is, in words."""
    if variant.startswith(("layout-", "pad-")) and task.pipeline is not None:
        main = task.pipeline.stage("main").program
        said = []
        for st in task.pipeline.stages[:-1]:
            name = st.sources[0][0]
            if st.name == "layout":
                stored = next(q.type for q in main.params if q.name == name)
                said.append(f"input {name} stored as {stored} (a first kernel copies it so: "
                            "its reads are contiguous in the search's lanes)")
            else:
                said.append(f"input {name} padded once by a kernel of its own (no bounds "
                            "test where it is read)")
        return "; ".join(said)
    if variant.startswith("tiled-"):
        return f"the pipeline fused through tiling, its intermediates in {variant[6:]} memory"
    return variant
