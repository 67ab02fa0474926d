"""Launch configuration: global and local sizes, thread counts of loops.

For each OpenCL dimension d used by a kernel:

* ``mapWrg(d)``/``mapLcl(d)`` (a *group* dimension): the local size is ``local_sizes[d]``
  or the largest trip count of the ``mapLcl(d)`` loops, clamped to the device
  (1 without ``mapLcl(d)``); the number of groups is the largest trip count of the
  ``mapWrg(d)`` loops (1 without); global size = groups x local size.
* ``mapGlb(d)`` only: the global size is the largest trip count of the ``mapGlb(d)``
  loops, rounded up to a multiple of ``local_sizes[d]`` when that is given (OpenCL 1.2
  needs it; the loops guard the extra work-items). Without local sizes ``configure``
  leaves them open (``local_size=None``) and the lowering fills them in with
  :func:`fit_private_local_size` (divisors of the global size), except in a kernel with
  local memory: then the local size is 1 (the work-items of a group would share it;
  inside a ``mapGlb(d)`` loop a larger given local size is a memory-scope error).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from codegen.device_description import Device
from codegen.errors import LoweringError, MemoryScopeError, WorkGroupSizeError
from codegen.stmt import Loop


@dataclass
class LaunchConfig:
    """Global/local sizes of one kernel and the thread counts its loops distribute over."""

    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    modes: dict[int, str]  # d -> "glb" | "grp" | "mixed" | "none"
    groups: dict[int, int]  # number of work-groups per group dimension
    local: dict[int, int | None]  # local size per dimension (None: chosen by the runtime)
    issues: list[LoweringError] = field(default_factory=list)



def configure(
    loops: list[Loop],
    local_sizes: Mapping[int, int] | None,
    limits: Device,
    local_under_glb: set[int],
    uses_local: bool = False,
) -> LaunchConfig:
    """Sizes of one kernel from its parallel loops; sets ``loop.threads``.

    Problems (a work-group too large for the device, local memory under ``mapGlb`` with
    a local size above 1) are returned in ``issues``, not raised.
    """
    given = dict(local_sizes or {})
    issues: list[LoweringError] = []
    par = [lp for lp in loops if lp.kind in ("glb", "wrg", "lcl")]
    ndims = max([lp.par_dim + 1 for lp in par] + [1])
    modes: dict[int, str] = {}
    trips: dict[tuple[str, int], list[int]] = {}
    for lp in par:
        trips.setdefault((lp.kind, lp.par_dim), []).append(lp.n)
    for d in range(ndims):
        g = (("wrg", d) in trips) or (("lcl", d) in trips)
        if g:
            modes[d] = "mixed" if ("glb", d) in trips else "grp"
        else:
            modes[d] = "glb" if ("glb", d) in trips else "none"

    local: dict[int, int | None] = {}
    defaulted: set[int] = set()
    for d in range(ndims):
        want = given.get(d)
        if modes[d] in ("grp", "mixed"):
            if want is None:
                lcl = trips.get(("lcl", d))
                want = min(max(lcl), limits.work_item_limit(d)) if lcl else 1
                defaulted.add(d)
        elif modes[d] == "glb":
            if d in local_under_glb:
                if want is not None and want > 1:
                    issues.append(MemoryScopeError(
                        f"local memory is allocated inside a mapGlb({d}) loop, so every "
                        f"work-item of a group needs its own copy, but local size {want} in "
                        f"dimension {d} puts {want} work-items in one group; use local size 1 "
                        "or map the enclosing map to mapWrg/mapLcl"))
                want = 1
            elif want is None and uses_local:
                want = 1  # local memory without mapWrg/mapLcl: one work-item per group
        elif modes[d] == "none":
            want = None  # an unused dimension has one work-item, whatever was asked
        local[d] = want
    need_local = any(m in ("grp", "mixed") for m in modes.values()) or any(
        v is not None for v in local.values())
    lsize: tuple[int, ...] | None = None
    if need_local:
        for d in range(ndims):
            if local[d] is None:
                local[d] = 1
                defaulted.add(d)
        _clamp(local, defaulted, limits)
        given_sizes: list[int] = []
        for d in range(ndims):
            ld = local[d]
            assert ld is not None  # every dimension has a local size now
            if ld > limits.work_item_limit(d):
                issues.append(WorkGroupSizeError(
                    f"local size {ld} in dimension {d} exceeds the device's maximum "
                    f"{limits.work_item_limit(d)} ({limits.name}); choose a smaller one"))
            given_sizes.append(ld)
        lsize = tuple(int(x) for x in given_sizes)
        total = math.prod(given_sizes)
        if total > limits.max_work_group_size:
            issues.append(WorkGroupSizeError(
                f"work-group size {total} (local sizes {tuple(local.values())}) exceeds the "
                f"device's maximum {limits.max_work_group_size} ({limits.name})"))

    groups: dict[int, int] = {}
    gsize: list[int] = []
    for d in range(ndims):
        m, ld = modes[d], local[d]
        if m in ("grp", "mixed"):
            wrg = trips.get(("wrg", d))
            groups[d] = max(wrg) if wrg else 1
            assert ld is not None  # a group dimension needs a local size (set above)
            gsize.append(groups[d] * ld)
        elif m == "glb":
            t = max(trips[("glb", d)])
            gsize.append(_round_up(t, ld) if ld else t)
        else:
            gsize.append(1)
    for lp in par:
        d = lp.par_dim
        if lp.kind == "glb":
            lp.threads = gsize[d]
        elif lp.kind == "wrg":
            lp.threads = groups[d]
        else:
            lp.threads = local[d]
    return LaunchConfig(tuple(gsize), lsize, modes, groups, local, issues)


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _clamp(local: dict, defaulted: set, limits: Device) -> None:
    """Halves default local sizes (largest first) until the group fits the device."""
    while math.prod(local.values()) > limits.max_work_group_size:
        cands = [d for d in defaulted if local[d] > 1]
        if not cands:
            return
        d = max(cands, key=lambda k: local[k])
        local[d] = -(-local[d] // 2)


def uniform_in_group(lp: Loop, cfg: LaunchConfig) -> bool:
    """True when every work-item of a group runs the same number of iterations of ``lp``
    (a barrier inside is then reached by all of them, CC'22 Section 4.6)."""
    if lp.kind in ("seq", "wrg"):
        return True
    n, t = lp.n, lp.threads
    assert t is not None  # configure() sets the threads of every parallel loop
    if lp.kind == "lcl":
        return n % t == 0
    ld = cfg.local.get(lp.par_dim)
    if ld is None:
        return n % t == 0
    return (n % t) % ld == 0


FREE_GROUP_MOST = 256  # work-items per group chosen for a kernel without private memory
GROUPS_PER_UNIT = 4  # work-groups per compute unit a free local size leaves, at least


def fit_private_local_size(global_size: tuple[int, ...], private_bytes: int,
                           limits: Device, most: int | None = None) -> tuple[int, ...]:
    """A local size for a kernel whose local size the mapping leaves free: each entry
    divides ``global_size`` and stays within the device's work-item limit of its
    dimension; the product stays within the device's work-group limit (and ``most``),
    and the work-items' private memory together within ``limits.private_group_budget``
    where the device has one (largest first in dimension 0). The groups number at least
    :data:`GROUPS_PER_UNIT` per compute unit where the work-items allow it.

    The lowering chooses it rather than the runtime: on PoCL the runtime's choice for a
    copy kernel of 128 x 116 x 116 work-items ran it 5x slower (2.4 ms against 0.47 ms
    with 128 x 2 x 1: the padding of a 128-channel 112 x 112 convolution). PoCL's CPU
    device runs a work-group on one thread: a 1x1 convolution of 784 work-items in one
    group of 784 ran in 2.8 ms on a 2-core Zen 3, in 1.6 ms as two groups and 1.5 ms
    as sixteen (several groups per core also even out a core that runs slow for a while)."""
    room = limits.max_work_group_size if most is None else min(most, limits.max_work_group_size)
    if limits.private_group_budget:
        room = min(room, max(1, limits.private_group_budget // max(1, private_bytes)))
    items = math.prod(global_size)
    room = min(room, max(1, items // (GROUPS_PER_UNIT * limits.max_compute_units)))
    return divisor_local_size(global_size, room, limits.work_item_limit)


def divisor_local_size(global_size: tuple[int, ...], room: int,
                       dim_limit: Callable[[int], int] | None = None) -> tuple[int, ...]:
    """Per dimension, dimension 0 first, the largest divisor of the global size that keeps
    the group within ``room`` work-items (and ``dim_limit(d)`` where given)."""
    out = []
    for d, g in enumerate(global_size):
        cap = max(1, min(g, room, dim_limit(d) if dim_limit else g))
        best = max(x for x in _divisors(g) if x <= cap) if g > 0 else 1
        out.append(best)
        room = max(1, room // best)
    return tuple(out)


def _divisors(n: int) -> list[int]:
    """The positive divisors of ``n`` (in O(sqrt n))."""
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i * i != n:
                large.append(n // i)
        i += 1
    return small + large[::-1]
