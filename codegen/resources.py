"""What a lowered program asks of the device, in the program's symbolic sizes.

The lowering (``codegen.lower``) decides which buffers a kernel allocates in which memory,
which loops set its work-group size and which loops a barrier sits in. The same run that
checks a candidate against the device records those decisions here, with every amount
kept as an expression over the program's size variables (``Buf.sym_count``,
``Loop.n_sym``). The tuning space (``mapper.tuning``) lowers one configuration of a
mapping, collects its :class:`Resource` values and turns each into a constraint, so
the space and the lowering's checks cannot drift apart:

* private bytes per work-item (the lowering's ``private-memory`` check),
* private bytes per work-group, where the device keeps a group's private arrays together
  and the mapping fixes the work-group size,
* local bytes per work-group (``local-memory``),
* bytes of every global buffer and of all together (``max-allocation``),
* synchronisability: every loop around a barrier runs the same number of iterations in
  every work-item of a group (``synchronizability``; CC'22 Section 4.6).

A part the lowering could not express symbolically (a buffer replicated over a loop whose
trip count is not a size of the program) makes the resource *inexact*: its amount is the
value at the lowered configuration, so its constraint is a guess the lowering still checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from codegen.buffers import ITEM_BYTES
from codegen.device_description import Device
from codegen.launch import LaunchConfig
from codegen.memory import Buf
from codegen.stmt import Loop
from ir.sym import Cst, Expr, Rel, smax, smin


@dataclass(frozen=True)
class Resource:
    """One condition a lowered program puts on its sizes: ``rel`` must hold."""

    check: str  # the lowering check it stands for (private-memory, local-memory, ...)
    rel: Rel
    origin: str  # readable: which kernel, which buffers or loops, which device limit
    exact: bool = True

    def __str__(self) -> str:
        return f"{self.rel}  [{self.check}: {self.origin}]"


def _bytes(bufs: Sequence[Buf]) -> tuple[Expr, bool, str]:
    """Symbolic bytes of ``bufs``, whether exact, and a readable sum."""
    total: Expr = Cst(0)
    exact = True
    parts = []
    for b in bufs:
        item = b.nbytes // max(1, b.count)
        if b.sym_count is None:
            n, exact = Cst(b.count), False
        else:
            n = b.sym_count
        if b.lanes is not None:  # item is one lane's scalar; the width is a size
            item = ITEM_BYTES[b.dtype.rstrip("0123456789")]
            n = n * b.lanes
        total = total + n * item
        parts.append(f"{b.name} {n}x{item}")
    return total, exact, " + ".join(parts)


def local_size_exprs(loops: Sequence[Loop], cfg: LaunchConfig, device: Device,
                     given: Mapping[int, int] | None = None) -> dict[int, Expr] | None:
    """The work-group size per dimension as ``codegen.launch.configure`` chooses it, in
    symbolic sizes: the largest ``mapLcl(d)`` trip count clamped to the device (an upper
    bound: ``configure`` may halve it further to fit the group), else the ``given`` or fixed
    size. None when the runtime chooses the local size."""
    if cfg.local_size is None:
        return None
    out: dict[int, Expr] = {}
    for d, ld in sorted(cfg.local.items()):
        lcl = [lp for lp in loops if lp.kind == "lcl" and lp.dim == d]
        syms = [lp.n_sym for lp in lcl if lp.n_sym is not None]
        if lcl and d not in (given or {}) and len(syms) == len(lcl):
            e = syms[0]
            for s in syms[1:]:
                e = smax(e, s)
            out[d] = smin(e, Cst(device.work_item_limit(d)))
        else:
            out[d] = Cst(int(ld or 1))
    return out


def kernel_resources(kname: str, kbufs: Sequence[Buf], loops: Sequence[Loop],
                     cfg: LaunchConfig, synced: Sequence[Loop], device: Device,
                     given: Mapping[int, int] | None = None) -> list[Resource]:
    """The resources of one kernel (its buffers, parallel loops, launch with the ``given``
    local sizes, barrier loops)."""
    out: list[Resource] = []
    priv = [b for b in kbufs if b.space == "private"]
    local_size = local_size_exprs(loops, cfg, device, given)
    if priv:
        pb, exact, text = _bytes(priv)
        out.append(Resource("private-memory", pb.le(device.private_mem_size),
                            f"kernel {kname}: private {text} bytes per work-item within the "
                            f"budget of {device.private_mem_size} ({device.name})", exact))
        if device.private_group_budget and local_size is not None:
            wg: Expr = Cst(1)
            for e in local_size.values():
                wg = wg * e
            out.append(Resource(
                "private-memory", (wg * pb).le(device.private_group_budget),
                f"kernel {kname}: work-group of {wg} work-items x private {text} bytes within "
                f"{device.private_group_budget} bytes per work-group ({device.name})", exact))
    locs = [b for b in kbufs if b.space == "local"]
    if locs:
        lb, exact, text = _bytes(locs)
        out.append(Resource("local-memory", lb.le(device.local_mem_size),
                            f"kernel {kname}: local {text} bytes per work-group within "
                            f"{device.local_mem_size} ({device.name})", exact))
    for lp in synced:
        if lp.kind not in ("lcl", "glb") or lp.n_sym is None or local_size is None:
            continue
        ls = local_size.get(lp.par_dim)
        if ls is None:
            continue
        if lp.kind == "lcl":
            rel, exact = (lp.n_sym % ls).eq(0), True
        else:  # the global size is rounded up from the trip counts: its value here
            rel, exact = ((lp.n_sym % Cst(lp.threads or 1)) % ls).eq(0), False
        out.append(Resource("synchronizability", rel,
                            f"kernel {kname}: a barrier inside {lp.what} ({lp.n_sym} "
                            "iterations): every work-item of a group runs the same number",
                            exact))
    return out


def kernel_features(kbufs: Sequence[Buf], loops: Sequence[Loop], cfg: LaunchConfig,
                    device: Device, given: Mapping[int, int] | None = None) -> dict[str, Expr]:
    """What a cost model can read off one kernel, in symbolic sizes: work-items launched,
    work-group size (1 when the runtime chooses it), private bytes per work-item and local
    bytes per work-group. Parts not known symbolically take their value here."""
    local = local_size_exprs(loops, cfg, device, given) or {}
    group: Expr = Cst(1)
    items: Expr = Cst(1)
    for d, mode in sorted(cfg.modes.items()):
        ls = local.get(d, Cst(cfg.local.get(d) or 1))
        if mode in ("grp", "mixed"):
            wrg = [lp.n_sym if lp.n_sym is not None else Cst(lp.n)
                   for lp in loops if lp.kind == "wrg" and lp.dim == d]
            groups = wrg[0] if wrg else Cst(1)
            for e in wrg[1:]:
                groups = smax(groups, e)
            items = items * groups * ls
        elif mode == "glb":
            glb = [lp.n_sym if lp.n_sym is not None else Cst(lp.n)
                   for lp in loops if lp.kind == "glb" and lp.dim == d]
            n = glb[0]
            for e in glb[1:]:
                n = smax(n, e)
            items = items * n
        group = group * ls
    return {"work_items": items, "group_size": group,
            "private_bytes": _bytes([b for b in kbufs if b.space == "private"])[0],
            "local_bytes": _bytes([b for b in kbufs if b.space == "local"])[0]}


SUMMED_FEATURES = ("cache_bytes",)  # program features that add up over kernels


def program_features(kernels: Sequence[dict[str, Expr]], glob: Sequence[Buf]) -> dict[str, Expr]:
    """A program's features: each kernel feature's largest value over its kernels (as a
    symbolic max; the bytes its kernels bring into the cache, ``cache_bytes``, summed),
    the number of kernels and the bytes of its global buffers."""
    out: dict[str, Expr] = {}
    for feats in kernels:
        for k, e in feats.items():
            if k not in out:
                out[k] = e
            else:
                out[k] = out[k] + e if k in SUMMED_FEATURES else smax(out[k], e)
    out["kernels"] = Cst(len(kernels))
    out["global_bytes"] = _bytes(glob)[0]
    return out


def global_resources(bufs: Sequence[Buf], device: Device) -> list[Resource]:
    """Every global buffer within the device's largest allocation, all within its memory."""
    out: list[Resource] = []
    for b in bufs:
        nb, exact, text = _bytes([b])
        out.append(Resource("max-allocation", nb.le(device.max_mem_alloc_size),
                            f"global buffer {text} bytes within the largest allocation of "
                            f"{device.max_mem_alloc_size} ({device.name})", exact))
    if len(bufs) > 1:
        total, exact, text = _bytes(bufs)
        out.append(Resource("max-allocation", total.le(device.global_mem_size),
                            f"global memory {text} bytes within {device.global_mem_size} "
                            f"({device.name})", exact))
    return out


def check(resources: Sequence[Resource], sizes: dict[str, int]) -> list[Resource]:
    """The resources ``sizes`` violate (for tests: the lowering must agree)."""
    bad = []
    for r in resources:
        try:
            ok = r.rel.subs(sizes).is_trivially_true
        except ZeroDivisionError:
            ok = False
        if not ok:
            bad.append(r)
    return bad


