"""The three witnesses on one program: the solver's valid mappings, the lowering's checks
and the kernels' behaviour on the device must agree.

For every valid mapping (as the solver gives them) the program is lowered and run on the
device, and the result is compared with the reference interpreter. Agreement means every
valid mapping ends ``ok``; the one expected exception is ``rejected:synchronizability``,
which depends on concrete sizes and local sizes and is checked only at lowering time
(CC'22 Section 4.6). Anything else is a disagreement, reported with its outcome.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from codegen.errors import LoweringError
from codegen.program import Outcome, Status
from ir.interp import evaluate
from ir.nodes import Lambda
from mapper.api import enumerate_mappings
from mapper.candidates import build_candidate
from mapper.data import random_inputs
from mapper.encoding import MapCodes

EXPECTED_REJECTIONS = ("synchronizability",)


@dataclass
class WitnessReport:
    """Per valid mapping, the outcome on the device; ``disagreements`` lists the others."""

    outcomes: list[tuple[MapCodes, Outcome]]

    @property
    def disagreements(self) -> list[tuple[MapCodes, Outcome]]:
        return [(m, o) for m, o in self.outcomes
                if not (o.ok or (o.status == "rejected" and o.check in EXPECTED_REJECTIONS))]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for _, o in self.outcomes:
            out[o.label] = out.get(o.label, 0) + 1
        return out


def check_program(program: Lambda, sizes: Mapping[str, int], runner, *, fusion: str = "free",
                  limit: int | None = None, seed: int = 0, rtol: float = 1e-4,
                  atol: float = 1e-4) -> WitnessReport:
    """Lower and run every valid mapping (or ``limit`` of them in a seeded random order)."""
    inputs = random_inputs(program, sizes, seed)
    ref_inputs = {k: (v[0] if v.shape == (1,) and not _is_array(program, k) else v)
                  for k, v in inputs.items()}
    reference = evaluate(program, ref_inputs, sizes)
    from codegen.target import Device

    device = Device.from_limits(runner.limits)
    outcomes = []
    order = "random" if limit else "solver"
    for m in enumerate_mappings(program, fusion=fusion, order=order, seed=seed, limit=limit):
        try:
            cp = build_candidate(program, m, sizes, fusion=fusion, device=device)
        except LoweringError as e:
            outcomes.append((m, Outcome(Status.REJECTED, str(e), check=e.check)))
            continue
        outcomes.append((m, runner.evaluate(cp, inputs, reference, rtol=rtol, atol=atol,
                                            repeats=1, warmup=0)))
    return WitnessReport(outcomes)


def _is_array(program: Lambda, name: str) -> bool:
    from ir.types import ArrayType

    return any(p.name == name and isinstance(p.type, ArrayType) for p in program.params)
