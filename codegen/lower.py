"""Lowering: a mapped (low-level) program and concrete sizes to OpenCL kernels.

``lower(program, sizes)`` walks the program once, like LIFT's code generator (CC'22 5.1,
GPGPU'20 3.3):

* ``build`` type-checks the program and builds its statement tree with
  :class:`codegen.builder.Builder`: layout primitives build views (:mod:`codegen.views`)
  and emit nothing; a map that computes becomes a loop (:mod:`codegen.emit`) writing
  through the *output view* of its consumer, or into a temporary (:mod:`codegen.memory`);
  ``reduce`` is a sequential loop over a private accumulator; user functions become C
  functions;
* ``split_kernels`` cuts the tree: top-level map nests that communicate through a global
  temporary become consecutive kernels (the kernel boundary is the global barrier OpenCL
  lacks);
* then each kernel gets its launch sizes (:mod:`codegen.launch`), its barriers and checks
  (:mod:`codegen.barriers`) and its source.

This module holds those steps after the builder and the entry points ``lower``, ``build``
and ``program_resources`` (what a program asks of a device, :mod:`codegen.resources`).
Any mapping that cannot run correctly raises one of :mod:`codegen.errors`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from codegen import barriers as bar
from codegen import views as vw
from codegen.accumulate import vector_accumulate
from codegen.builder import C_RESERVED, Builder
from codegen.contract import contract_multiply_adds
from codegen.device_description import DEFAULT_DEVICE, Device
from codegen.emit import kernel_source
from codegen.errors import (
    LocalMemoryError,
    LoweringError,
    MaxAllocationError,
    MemoryScopeError,
    PrivateMemoryError,
    UnsupportedError,
    UnvectorizableError,
)
from codegen.footprint import cache_features
from codegen.intensity import hot_loop_features
from codegen.lanes import Functions, lane_defaults, vectorise_loops
from codegen.launch import FREE_GROUP_MOST, configure, fit_private_local_size
from codegen.loop_split import split_flat_loops
from codegen.memory import Buf, dtype_of, has_tuple, natural_view, size_of, size_of_sym
from codegen.program import Buffer, CompiledProgram, Kernel
from codegen.resources import (
    Resource,
    global_resources,
    kernel_features,
    kernel_resources,
    program_features,
)
from codegen.stmt import Decl, Loop, Store, leaves_of, walk_stmts
from codegen.streaming import streamed_buffers
from ir.nodes import Lambda, Map, Node, size_names, walk
from ir.sym import Expr
from ir.typecheck import TypeInfo
from ir.types import ArrayType, Type, VectorType


def _stmt_buffers(s) -> tuple[set, set]:
    reads, writes = set(), set()
    for x in walk_stmts([s]):
        if isinstance(x, Store):
            writes.add(x.dest.buf)
            for leaf in leaves_of(x.value):
                reads.add(leaf.buf)
        elif isinstance(x, Decl):
            writes.add(x.buf)
    return reads, writes


def split_kernels(top: list) -> list[list]:
    """Cuts the top-level statements into kernels: a statement that reads a global
    temporary written by an earlier statement starts a later kernel; private and local
    values stay within one kernel."""
    info = [_stmt_buffers(s) for s in top]
    k = [0] * len(top)
    for _ in range(len(top) + 2):
        changed = False
        for j, (reads, _) in enumerate(info):
            for i in range(j):
                common = reads & info[i][1]
                if not common:
                    continue
                glob = any(b.space == "global" and b.role == "temp" for b in common)
                other = any(b.space != "global" for b in common)
                need = k[i] + 1 if glob else k[i]
                if need > k[j]:
                    k[j], changed = need, True
                if other and k[i] < k[j]:
                    k[i], changed = k[j], True
        if not changed:
            break
    for j, (reads, _) in enumerate(info):
        for i in range(j):
            for b in reads & info[i][1]:
                if b.space != "global" and k[i] != k[j]:
                    raise MemoryScopeError(
                        f"{b.space} buffer {b.name} would have to survive a kernel boundary "
                        "(its producer and consumer end up in different kernels); use global "
                        "memory for it")
                if b.space == "global" and b.role == "temp" and k[i] >= k[j]:
                    raise MemoryScopeError(f"internal: cannot order the kernels around {b.name}")
    groups: dict[int, list] = {}
    for idx, s in enumerate(top):
        groups.setdefault(k[idx], []).append(s)
    return [groups[g] for g in sorted(groups)]


def _mapping_text(program: Node) -> str:
    parts = {m.label: m.kind_text() for m in walk(program) if isinstance(m, Map) and m.label}
    return " ".join(f"{k}={parts[k]}" for k in sorted(parts)) or "(no labelled maps)"


def _output_shape(t: Type) -> tuple[int, ...]:
    shape = []
    while isinstance(t, ArrayType):
        shape.append(t.size.as_int())
        t = t.elem
    if isinstance(t, VectorType):
        shape.append(t.width.as_int())
    return tuple(shape)


def build(program: Node, sizes: Mapping[str, int], info: TypeInfo | None = None) -> Builder:
    """Type-checks ``program`` (unless its symbolic type ``info`` is given and ``sizes`` are
    known to meet its constraints) and builds its statement tree (one list for all kernels).

    The result's ``top`` holds the statements, ``inputs``/``out_buf`` the global buffers
    of the program's inputs and output. No launch configuration and no checks beyond the
    ones found while building (unmapped maps, nesting, vectorisation).
    """
    if not isinstance(program, Lambda):
        raise UnsupportedError("lower() takes a program: a lambda with typed inputs")
    vw.new_build()
    defaults = lane_defaults(program, sizes)
    if defaults.keys() - sizes.keys():
        sizes = {**defaults, **sizes}
    b = Builder(program, sizes, info)
    env: dict = {}
    b.inputs = []
    for p in program.params:
        pt = p.type
        assert pt is not None  # typecheck rejects program inputs without a type
        t = pt.subs(b.sizes) if pt.free_vars() else pt
        if has_tuple(t):
            raise UnsupportedError(f"input {p.name} has a tuple type {t}")
        usable = p.name.isidentifier() and p.name not in C_RESERVED
        cname = p.name if usable else b.fresh(f"in_{len(b.inputs)}")
        b.names.add(cname)
        buf = Buf(p.name, "global", dtype_of(t), size_of(t), "input", p.name, c_name=cname,
                  sym_count=size_of_sym(pt))
        b.inputs.append(buf)
        env[p.name] = natural_view(t, buf)
    out_t = b.ctype(program.body)
    if has_tuple(out_t):
        raise UnsupportedError(f"the program returns a tuple type {out_t}; return arrays")
    b.out_t = out_t
    sym_out = b.symtype(program.body)
    b.out_buf = Buf(b.fresh("out"), "global", dtype_of(out_t), size_of(out_t), "output",
                    sym_count=size_of_sym(sym_out) if sym_out is not None else None)
    b.emit_into(program.body, env, natural_view(out_t, b.out_buf))
    if not b.top:
        raise UnsupportedError("the program computes nothing")
    return b


def lower(
    program: Node,
    sizes: Mapping[str, int],
    *,
    device: Device | None = None,
    local_sizes: Mapping[int, int] | None = None,
    name: str = "kernel",
) -> CompiledProgram:
    """Lowers a mapped program with concrete ``sizes`` to OpenCL kernels.

    Raises a :class:`codegen.errors.LoweringError` subclass when the mapping cannot run
    correctly (the check that failed is its ``check``), ``ir.errors.ConstraintViolation``
    when the sizes break the program's algorithmic constraints. ``device`` supplies the
    limits and budgets (default: ``codegen.target.DEFAULT_DEVICE``).
    """
    cp = _lower(program, sizes, device, local_sizes, name, raise_issues=True)
    assert cp is not None  # without ``collect`` it returns the program
    return cp


def program_resources(program: Lambda, sizes: Mapping[str, int], *,
                      device: Device | None = None,
                      local_sizes: Mapping[int, int] | None = None,
                      info: TypeInfo | None = None,
                      features: dict[str, Expr] | None = None) -> list[Resource]:
    """What ``program`` asks of ``device`` (``codegen.resources``), in its symbolic sizes:
    lowered at ``sizes`` (one configuration) by the same code as :func:`lower`, without
    generating source and without raising the checks that ``sizes`` fail. ``info``: the
    program's type check, when the caller has it and ``sizes`` meet its constraints.
    ``features``, if given, receives ``codegen.resources.program_features``."""
    out: list[Resource] = []
    _lower(program, sizes, device, local_sizes, "kernel", raise_issues=False, collect=out,
           info=info, features=features)
    return out


def _lower(program: Node, sizes: Mapping[str, int], device: Device | None,
           local_sizes: Mapping[int, int] | None, name: str, raise_issues: bool,
           collect: list[Resource] | None = None, info: TypeInfo | None = None,
           features: dict[str, Expr] | None = None) -> CompiledProgram | None:
    """``lower``; with ``raise_issues=False`` the checks found after building are ignored
    (for experiments that test the checks themselves); with ``collect`` the resources are
    appended to it and no source is generated (returns None)."""
    limits = device or DEFAULT_DEVICE
    b = build(program, sizes, info)
    inputs, out_buf, out_t = b.inputs, b.out_buf, b.out_t
    assert out_buf is not None and out_t is not None  # build() sets them

    groups = split_kernels(b.top)
    base = name if name.isidentifier() and name not in C_RESERVED else None
    header: list[str] = []  # the kernels' comment, made when the first is printed
    funs = list(b.funs.values())
    kfeats: list[dict[str, Expr]] = []
    kernels: list[Kernel] = []
    issues: list[LoweringError] = []
    all_bufs = [*inputs, out_buf, *b.bufs]
    for ki, stmts in enumerate(groups):
        kname = base if (base and len(groups) == 1) else f"{name}_{ki}"
        if not kname.isidentifier():
            kname = f"kernel_{ki}"
        loops = [s for s in walk_stmts(stmts) if isinstance(s, Loop)]
        used: set[int] = set()
        written: set[str] = set()
        for s in walk_stmts(stmts):
            if isinstance(s, Store):
                used.add(id(s.dest.buf))
                written.add(s.dest.buf.name)
                used.update(id(leaf.buf) for leaf in leaves_of(s.value))
            elif isinstance(s, Decl):
                used.add(id(s.buf))
        kbufs = [x for x in all_bufs if id(x) in used]
        local_under_glb = set()
        for x in kbufs:
            if x.space == "local":
                local_under_glb |= set(x.glb_dims)
        cfg = configure(loops, local_sizes, limits, local_under_glb,
                        uses_local=any(x.space == "local" for x in kbufs))
        issues.extend(cfg.issues)
        synced: list[Loop] = []
        issues.extend(bar.analyze(stmts, cfg, b.map_of, synced))
        # after the analyses, which see a mapVec as its sequential loop: vector lanes
        try:
            vectorise_loops(stmts, Functions(b.funs, b.fun_of, b.fresh))
        except UnvectorizableError as e:
            issues.append(e)
            continue
        funs += [f for f in b.funs.values() if f not in funs]
        # the resources the candidate needs: without the optional vector accumulators
        if collect is not None:
            collect.extend(kernel_resources(kname, kbufs, loops, cfg, synced, limits,
                                            local_sizes))
            if features is not None:  # (only where the caller asked for them)
                kfeats.append({**kernel_features(kbufs, loops, cfg, limits, local_sizes),
                               **hot_loop_features(stmts, b.sizes),
                               **cache_features(stmts, limits.local_mem_size)})
            continue
        # the same iterations, in the same order (not for the counts above: their resources
        # and features describe the loop as written)
        split_flat_loops(stmts, b.fresh)
        # after the analysis: the rewrite only reassociates one work-item's private sums;
        # its accumulators get only the private memory the budgets leave
        pbase = bar.private_bytes(kbufs)
        room = limits.private_mem_size - pbase
        if limits.private_group_budget and cfg.local_size is not None:
            room = min(room, limits.private_group_budget // math.prod(cfg.local_size) - pbase)
        vbufs, helpers = vector_accumulate(stmts, b.fun_of, b.names, max_bytes=max(0, room))
        kbufs += vbufs
        # add(c, mult(a, b)) as one a * b + c, which the OpenCL compiler fuses (an FMA)
        helpers += contract_multiply_adds(stmts, b.fun_of)
        funs += [h for h in helpers if h not in funs]
        locs = [x for x in kbufs if x.space == "local"]
        lbytes = bar.local_bytes(locs)
        if lbytes > limits.local_mem_size:
            issues.append(LocalMemoryError(
                f"kernel {kname} needs {lbytes} bytes of local memory per work-group "
                f"({', '.join(f'{x.name}: {x.nbytes}' for x in locs)}) but {limits.name} has "
                f"{limits.local_mem_size}; use smaller tiles or global memory"))
        pbytes = bar.private_bytes(kbufs)
        local_size = cfg.local_size
        if pbytes > limits.private_mem_size:
            issues.append(PrivateMemoryError(
                f"kernel {kname} needs {pbytes} bytes of private memory per work-item "
                f"(budget {limits.private_mem_size}); use smaller private tiles"))
        elif local_size is None:  # chosen here: PoCL's own choice made copies 5x slower
            local_size = fit_private_local_size(cfg.global_size, pbytes, limits,
                                                most=None if pbytes else FREE_GROUP_MOST)
        elif (pbytes and limits.private_group_budget
              and local_size is not None  # (always, after the branch above)
              and math.prod(local_size) * pbytes > limits.private_group_budget):
            issues.append(PrivateMemoryError(
                f"kernel {kname}: a work-group of {math.prod(local_size)} work-items with "
                f"{pbytes} bytes of private memory each exceeds the budget of "
                f"{limits.private_group_budget} bytes per work-group; use smaller private "
                "tiles or smaller work-groups"))
        args = [x for x in kbufs if x.space == "global"]
        used_funs = _used_functions(stmts, funs)
        if not header:  # the sizes the program mentions: a size it does not mention
            # changes nothing in its kernels (a pipeline's stage lowered at a candidate's
            # sizes: the source, and so the compiled-program caches, stay the same)
            names = size_names(program)
            header = [f"mapping: {_mapping_text(program)}",
                      "sizes: " + " ".join(f"{k}={v}" for k, v in sorted(b.sizes.items())
                                           if k in names)]
        src = kernel_source(
            kname, [*header, f"kernel {ki + 1} of {len(groups)}: global size "
                             f"{cfg.global_size}, local size {local_size}"],
            used_funs, args, written, locs, stmts, streamed_buffers(stmts, args, limits))
        kernels.append(Kernel(
            name=kname, source=src, args=tuple(x.name for x in args),
            global_size=cfg.global_size, local_size=local_size,
            local_buffers=tuple(Buffer(x.name, "local", x.dtype, x.count, "temp") for x in locs),
            private_bytes=pbytes,
        ))
    glob = [x for x in all_bufs if x.space == "global"]
    for x in glob:
        if x.nbytes > limits.max_mem_alloc_size:
            issues.append(MaxAllocationError(
                f"global buffer {x.name} needs {x.nbytes} bytes but {limits.name} allocates "
                f"at most {limits.max_mem_alloc_size} at once"))
    total = sum(x.nbytes for x in glob)
    if total > limits.global_mem_size:
        issues.append(MaxAllocationError(
            f"the program needs {total} bytes of global memory but {limits.name} has "
            f"{limits.global_mem_size}"))
    if collect is not None:
        collect.extend(global_resources(glob, limits))
        if features is not None:
            features.update(program_features(kfeats, glob))
        return None
    if issues and raise_issues:
        raise min(issues, key=lambda e: e.priority)
    buffers = {x.name: Buffer(x.name, "global", x.dtype, x.count, x.role) for x in glob}
    return CompiledProgram(
        kernels=tuple(kernels),
        buffers=buffers,
        inputs=tuple(x.name for x in inputs),
        output=out_buf.name,
        output_shape=_output_shape(out_t),
    )


def _used_functions(stmts: list, funs: list[tuple[str, str]]) -> list[str]:
    names = set()

    def visit(v):
        if isinstance(v, vw.Call):
            names.add(v.fname)
            for a in v.args:
                visit(a)
        elif isinstance(v, vw.Sel):
            visit(v.then)
            visit(v.other)

    for s in walk_stmts(stmts):
        if isinstance(s, Store):
            visit(s.value)
    # and the functions those call (a vector version applying the scalar one lane by lane)
    grew = True
    while grew:
        grew = False
        called = " ".join(src for fname, src in funs if fname in names)
        for fname, _ in funs:
            if fname not in names and re.search(rf"\b{re.escape(fname)}\(", called):
                names.add(fname)
                grew = True
    return [src for fname, src in funs if fname in names]
