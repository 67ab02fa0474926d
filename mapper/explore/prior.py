"""An analytic cost prior: what a candidate should cost before anything was measured.

The ``model`` strategy ranks its first proposals by this score and gives it to its learned
model as one more feature. It reads only what the lowering states symbolically for every
candidate (``mapper.tuning.TuningProblem.features``: work-items, work-group size, private
bytes per work-item), its vector widths and the device, so it applies to any program:

* **parallel balance**: work-groups over the device's compute units; ``g`` groups on ``c``
  units take ``ceil(g / c)`` waves, so the useful fraction is ``g / (c * ceil(g / c))``
  (fewer groups than units leave units idle);
* on a **CPU**, SIMD comes from the kernel's own vector types (PoCL does not vectorise
  across work-items running long loops): the elements per vector operation of the
  candidate (the geometric mean over its vector widths, a width that leaves a tail
  counted by the elements its vectors compute: :func:`simd_width`) over the device's
  preferred float width;
* on a CPU, **spills**: private data per work-item beyond the vector register file (32
  vector registers with 16-lane floats, as AVX-512 has, else 16) costs its excess ratio
  (half of it, in log scale, where the innermost reduction's register block is known:
  :data:`PRIVATE_WEIGHT`);
* on a CPU, the **innermost reduction** (``codegen.intensity``): operations per value
  loaded from memory (a small register block is load-bound) and its register block against
  the register file (a large one spills);
* **redundant work**: the operations of the innermost reduction in all (work-items x
  iterations x operations x vector width) against half the program's FLOP count, where
  it is known (tiles that cover padding or overlap compute more than the program asks);
* **memory traffic**: the program's FLOPs per byte of its global buffers (inputs, output
  and the intermediates its kernels pass on, such as partial sums), where both are known,
  against :data:`FLOPS_PER_BYTE`: a candidate that writes many partial sums to global
  memory and reads them back is bound by that traffic, however well its reduction runs;
* on a CPU, **cache traffic**: the program's FLOPs per byte its kernels bring into a
  core's cache (``codegen.footprint``: data re-read because one iteration of a loop, or
  one row of work-items, touches more than the cache holds), against
  :data:`CACHE_FLOPS_PER_BYTE`: a tile whose weights outgrow the cache reads them again
  for every tile;
* on a **GPU**, occupancy: work-items against ``2048`` resident per compute unit.

The score is the sum of the logarithms of these factors (0 is the best a candidate can
get); only its order matters. It is a guess in the spirit of SConv's analytical tiling
model, not a measurement: the learned model corrects it as soon as candidates ran.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from codegen.footprint import LANES
from ir.errors import LiftmapError

# how mapper.tuning names the domain of a vector width: asVector's, mapVec's (code V)
VECTOR_WHYS = ("asVector width", "lanes width")


def feature_values(tuning_problem: Any, tuning: Mapping[str, int]) -> dict[str, float]:
    """The lowered kernel's features (``TuningProblem.features``) at ``tuning``; a feature
    the lowering could not express for this mapping is left out. The lanes of an
    ``asVector`` read (``codegen.footprint.LANES``) are the candidate's vector width."""
    vals: dict[str, float] = {}
    exprs = getattr(tuning_problem, "feature_exprs", None)
    env: Mapping[str, int]
    lanes = {LANES: vector_width(tuning_problem, tuning)}
    if exprs is not None:  # a TuningProblem: evaluated at its sizes, never substituted
        env = {**tuning_problem.sizes, **tuning, **lanes}
    else:
        exprs, env = getattr(tuning_problem, "features", {}), {**tuning, **lanes}
    for k, e in exprs.items():
        try:
            vals[k] = float(e.evaluate(env))
        except (LiftmapError, ArithmeticError):  # not expressible here (e.g. x / 0)
            continue
    return vals


def _widths(tuning_problem: Any, tuning: Mapping[str, int]) -> dict[str, int]:
    """The candidate's vector widths (``asVector``, maps in lanes): parameter -> width."""
    params = getattr(tuning_problem, "params", {}) or {}
    return {p: int(tuning[p]) for p, tp in params.items()
            if p in tuning and any(w in str(getattr(tp, "why", "")) for w in VECTOR_WHYS)}


def vector_width(tuning_problem: Any, tuning: Mapping[str, int]) -> int:
    """The widest vector width (``asVector``, or a map in lanes) among the candidate's
    tuning parameters (1: none)."""
    return max(_widths(tuning_problem, tuning).values(), default=1)


def simd_width(tuning_problem: Any, tuning: Mapping[str, int]) -> float:
    """The elements a vector operation of the candidate computes: the geometric mean, over
    its vector widths above 1 (``asVector``, maps in lanes), of each one's elements per
    vector; a map in lanes of ``n`` iterations with a width ``w`` that does not divide
    ``n`` computes ``n / ceil(n / w)`` (its last vector overlaps the one before). 1 where
    it has no vector. A pipeline whose stages run in 16 and 2 lanes scores as 5.7 lanes,
    not 16: each stage takes its share of the time."""
    lengths = getattr(tuning_problem, "lane_lengths", {}) or {}
    env = {**(getattr(tuning_problem, "sizes", {}) or {}), **tuning}
    logs = []
    for p, width in _widths(tuning_problem, tuning).items():
        if width <= 1:
            continue
        w = float(width)
        if p in lengths:
            try:
                n = int(lengths[p].evaluate(env))
            except (LiftmapError, ArithmeticError):
                n = 0
            if n > 0:
                w = n / math.ceil(n / w)
        logs.append(math.log(w))
    return math.exp(sum(logs) / len(logs)) if logs else 1.0


def work(feats: Mapping[str, float], width: int) -> float | None:
    """The scalar operations the kernel's innermost reduction performs in all
    (``codegen.intensity``), or None without one."""
    ops, trips = feats.get("loop_ops", 0.0), feats.get("loop_trips", 0.0)
    if ops <= 0 or trips <= 0:
        return None
    return max(1.0, feats.get("work_items", 1.0)) * trips * ops * width


def prior_score(feats: Mapping[str, float], width: int, device: Any,
                least_work: float | None = None, simd: float | None = None) -> float:
    """The analytic score (log scale, higher is faster) of one candidate on ``device``
    (a ``codegen.target.Device``; ``None``: a 2-unit CPU with 16-lane floats). ``width``:
    the widest vector width (:func:`vector_width`), ``simd`` the elements per vector
    operation (:func:`simd_width`; default ``width``).
    ``least_work``: the work the program needs (half its FLOP count: a multiply-add is
    two); a candidate doing more (tiles over padding, overlapping tiles) loses the excess
    ratio."""
    cus = max(1, int(getattr(device, "max_compute_units", 2) or 2))
    kind = getattr(device, "type", "cpu")
    items = max(1.0, feats.get("work_items", 1.0))
    group = max(1.0, feats.get("group_size", 1.0))
    groups = max(1.0, items / group)
    score = math.log(groups / (cus * math.ceil(groups / cus)))
    done = work(feats, width)
    if least_work and done:
        score += math.log(min(1.0, least_work / done))
    score += traffic_term(feats, least_work)
    if kind == "gpu":
        return score + math.log(min(1.0, items / (cus * 2048.0)))
    native = max(1, int(getattr(device, "preferred_vector_width_float", 16) or 16))
    score += cache_term(feats, least_work, native)
    score += math.log(min(width if simd is None else simd, native) / native)
    regs = feats.get("private_bytes", 0.0) / (4.0 * native)  # in native vectors
    file = 32 if native >= 16 else 16
    if regs > file:  # the register block cannot stay in registers: every extra one spills
        # half where the innermost reduction's own register block is known (it is judged
        # in ``reduction_term``): private memory also holds copies not live in the loop
        score -= math.log(regs / file) * (PRIVATE_WEIGHT if feats.get("loop_registers")
                                          else 1.0)
    return score + reduction_term(feats, width, native, file)


# The weight of the private-memory spill term where the reduction's register block is
# known. Measured: on the stored evaluations of ten direct convolutions on an AVX2 core
# (5x5, 1x1, stride 2, 3 channels; 432-791 each), the best measured kernel among the
# prior's top ten reached 0.44-0.95 of each store's best with weight 1 and 0.75-0.95
# with 0.5 (a 5x5 layer: 0.44 -> 0.81; its 3-pixel x 32-kernel block holds 16 vector
# registers, but its private memory counts 24); with 0, four stores fell (0.80 -> 0.63
# the most). ``python -m experiments.prior_recall STORE... --private-weight 1,0.5,0``.
PRIVATE_WEIGHT = 0.5


FLOPS_PER_BYTE = 32.0  # FLOPs per byte of global buffers below which traffic binds


def traffic_term(feats: Mapping[str, float], least_work: float | None) -> float:
    """The program's FLOPs (twice ``least_work``) per byte of its global buffers
    (``global_bytes``) over :data:`FLOPS_PER_BYTE`, capped at 1, in log scale (0 where
    either is unknown).

    Between two candidates that both fall below the constant, the term charges the
    ratio of their traffic, as if both were bound by it. The constant is measured: on
    the stored evaluations of three direct convolutions on an AVX2 core (a 1x1, a
    stride-2 and a 3-channel 224 x 224 one: 508-621 each), the rank correlation of the
    prior with the measured speeds rose from 0.59, 0.51 and 0.70 without the term to
    0.77, 0.73 and 0.85 with 32 (0.76, 0.66 and 0.85 with 16). A 1x1 convolution whose
    channels were summed in 32 partial sums ran at 15 GFLOP/s, in one sum at 60-90."""
    nbytes = feats.get("global_bytes", 0.0)
    if not least_work or nbytes <= 0:
        return 0.0
    return math.log(min(1.0, 2.0 * least_work / nbytes / FLOPS_PER_BYTE))


# FLOPs per byte brought into a core's cache, per float lane of the device's vectors,
# below which that traffic binds
CACHE_FLOPS_PER_BYTE = 1.0


def cache_term(feats: Mapping[str, float], least_work: float | None,
               native: int = 16) -> float:
    """On a CPU, the program's FLOPs (twice ``least_work``) per byte its kernels bring
    into a core's cache (``cache_bytes``: ``codegen.footprint``, the re-reads of data that
    does not stay in the cache counted) over :data:`CACHE_FLOPS_PER_BYTE` times the
    device's float lanes per vector (``native``), capped at 1, in log scale (0 where
    either is unknown). A tile of work-items whose data outgrows the cache reads it again
    from the shared cache or the memory for every tile.

    The threshold grows with the vector width: a core's FLOPs per cycle do, the bytes per
    cycle it gets from the shared cache do not. Measured on the stored evaluations of
    direct and Winograd convolutions (``python -m experiments.prior_recall``; 81-2572
    candidates each): with 1 FLOP per byte per lane, the best measured kernel among the
    prior's top ten rose on an AVX-512 Xeon (16 lanes, 2 MiB L2) from 0.74 to 1.00 of the
    store's best on a 512-channel Winograd layer and their median from 0.38-0.53 to
    0.64-0.73 on three; on a Zen 5 (1 MiB L2) from 0.70-0.82 to 0.96-1.00 on four stores;
    on a Zen 3 (8 lanes, 512 KiB L2) their median from 0.57 to 0.83 on a Winograd layer,
    0.63 to 0.55 on a stride-2 direct one (``docs/exploration.md``)."""
    nbytes = feats.get("cache_bytes", 0.0)
    if not least_work or nbytes <= 0:
        return 0.0
    return math.log(min(1.0, 2.0 * least_work / nbytes / (CACHE_FLOPS_PER_BYTE * native)))


LOADS_PER_OP = 2.0  # operations per loaded value at which a reduction stops being load-bound


def reduction_term(feats: Mapping[str, float], width: int, native: int, file: int) -> float:
    """The innermost reduction's share (log scale) of a CPU core's peak
    (``codegen.intensity``'s features; 0 without them): operations per loaded value over
    :data:`LOADS_PER_OP`, capped at 1, and the register block (its accumulators, and the
    loaded or staged operands it holds for their reuse: ``loop_operands``, else one) over
    the register file, squared, where it does not fit.

    The constant is measured: the convolution's winners on an AVX2 core (2 FMA and 2 load
    ports) reach 0.44, 0.60 and 0.77 of the FMA peak with 0.89, 1.2 and 1.7 operations
    per load, and 0.33-0.5 with a block that spills (``docs/exploration.md``)."""
    ops, loads = feats.get("loop_ops", 0.0), feats.get("loop_loads", 0.0)
    if ops <= 0 or loads <= 0:
        return 0.0
    score = math.log(min(1.0, ops / loads / LOADS_PER_OP))
    held = (feats.get("loop_registers", 0.0) + feats.get("loop_operands", 1.0)) \
        * max(1, math.ceil(width / native))
    if held > file:
        score -= 2 * math.log(held / file)
    return score
