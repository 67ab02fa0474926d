"""An analytic cost prior: what a candidate should cost before anything was measured.

The ``model`` strategy ranks its first proposals by this score and gives it to its learned
model as one more feature. It reads only what the lowering states symbolically for every
candidate (``mapper.tuning.TuningProblem.features``: work-items, work-group size, private
bytes per work-item), its vector widths and the device, so it applies to any program:

* **parallel balance**: work-groups over the device's compute units; ``g`` groups on ``c``
  units take ``ceil(g / c)`` waves, so the useful fraction is ``g / (c * ceil(g / c))``
  (fewer groups than units leave units idle);
* on a **CPU**, SIMD comes from the kernel's own vector types (PoCL does not vectorise
  across work-items running long loops): the widest ``asVector`` width of the candidate
  over the device's preferred float width;
* on a CPU, **spills**: private data per work-item beyond the vector register file (32
  vector registers with 16-lane floats, as AVX-512 has, else 16) costs its excess ratio;
* on a **GPU**, occupancy: work-items against ``2048`` resident per compute unit.

The score is the sum of the logarithms of these factors (0 is the best a candidate can
get); only its order matters. It is a guess in the spirit of SConv's analytical tiling
model, not a measurement: the learned model corrects it as soon as candidates ran. A
small register block is not penalised: the private bytes the lowering states do not count
the vector accumulators it may add (``codegen.accumulate``), so they say when a block is
too large, not how large it should be; that is left to measurements and the local search.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ir.errors import LiftmapError

VECTOR_WHY = "asVector width"  # how mapper.tuning names the domain of a vector width


def feature_values(tuning_problem: Any, tuning: Mapping[str, int]) -> dict[str, float]:
    """The lowered kernel's features (``TuningProblem.features``) at ``tuning``; a feature
    the lowering could not express for this mapping is left out."""
    vals: dict[str, float] = {}
    for k, e in getattr(tuning_problem, "features", {}).items():
        try:
            vals[k] = float(e.evaluate(tuning))
        except (LiftmapError, ArithmeticError):  # not expressible here (e.g. x / 0)
            continue
    return vals


def vector_width(tuning_problem: Any, tuning: Mapping[str, int]) -> int:
    """The widest ``asVector`` width among the candidate's tuning parameters (1: none)."""
    params = getattr(tuning_problem, "params", {}) or {}
    widths = [int(tuning[p]) for p, tp in params.items()
              if p in tuning and VECTOR_WHY in str(getattr(tp, "why", ""))]
    return max(widths, default=1)


def prior_score(feats: Mapping[str, float], width: int, device: Any) -> float:
    """The analytic score (log scale, higher is faster) of one candidate on ``device``
    (a ``codegen.target.Device``; ``None``: a 2-unit CPU with 16-lane floats)."""
    cus = max(1, int(getattr(device, "max_compute_units", 2) or 2))
    kind = getattr(device, "type", "cpu")
    items = max(1.0, feats.get("work_items", 1.0))
    group = max(1.0, feats.get("group_size", 1.0))
    groups = max(1.0, items / group)
    score = math.log(groups / (cus * math.ceil(groups / cus)))
    if kind == "gpu":
        return score + math.log(min(1.0, items / (cus * 2048.0)))
    native = max(1, int(getattr(device, "preferred_vector_width_float", 16) or 16))
    score += math.log(min(width, native) / native)
    regs = feats.get("private_bytes", 0.0) / (4.0 * native)  # in native vectors
    file = 32 if native >= 16 else 16
    if regs > file:  # the register block cannot stay in registers: every extra one spills
        score -= math.log(regs / file)
    return score
