"""Fusion through tiling (Forma): a pipeline of stencil stages computed tile by tile.

A program whose result is an image computed from an input image by stencils, point-wise
functions and zips (a blur then a Laplacian, Harris corners, convolution layers) has an
output pixel ``(i, j)`` that depends only on the input window ``(i .. i+hH, j .. j+hW)``:
``hH``, ``hW`` (the halo) are the input's height and width minus the output's, read from
the types. :func:`fuse_through_tiling` rewrites such a program into one that cuts the input
into overlapping ``(t+hH) x (t+hW)`` tiles (step ``t``), runs the whole pipeline on each tile
(its ``t x t`` output tile), and puts the tiles back together::

    crop o join o mapTU(mapTV(join) o transpose) o mapTY(mapTX(\\tile -> P[image := tile]))
      $ slideStrictND(2, (t + hH, t + hW), (t, t)) $ pad $ image

Each intermediate image of the pipeline then exists per tile only: with ``memory="local"``
(or ``"private"``) its producer writes it into that memory (``toLocal``/``toPrivate``),
a tile's worth plus its halo, instead of the whole image through global memory; the
overlap between neighbouring tiles is computed again (the redundant work Forma trades for
the memory traffic). ``t`` is a new size variable, a tuning parameter; where it does not
divide the output, the image is padded to a whole number of tiles (the pipeline computes
on the padding) and the result cropped back (the lowering guards the last tiles' writes),
and where it does both amounts are zero. The mapping of the tile maps and of the stages
inside them is the mapping problem's, as for any program.
"""

from __future__ import annotations

from collections.abc import Iterable

from ir import nodes
from ir.builders import compose, join, map_, pad2d, slide_nd, transpose, zip_nd
from ir.errors import IRError
from ir.sym import Var, sym
from ir.types import ArrayType

MEMORIES = ("global", "local", "private")


class TilingError(IRError, ValueError):
    """A program that cannot be fused through tiling as asked (the message says why)."""


def _halo(inp: ArrayType, out: object, name: str) -> tuple[int, int]:
    """The halo of ``out`` (the program's result type) over the image ``inp``: the input's
    outer two lengths minus the output's, when both are constants."""
    if not (isinstance(out, ArrayType) and isinstance(out.elem, ArrayType)
            and isinstance(inp.elem, ArrayType)):
        raise TilingError(f"the program's result is not an image (an array of arrays): "
                          f"{out}; tiling needs the result's two outer dimensions to be the "
                          f"input {name}'s minus a halo")
    halo = []
    for a, b in ((inp.size, out.size), (inp.elem.size, out.elem.size)):
        d = sym(a) - sym(b)
        h = d.as_int() if d.is_const else None
        if h is None or h < 0:
            raise TilingError(
                f"the result's dimensions ({out.size}, {out.elem.size}) are not those of "
                f"{name} ({inp.size}, {inp.elem.size}) less a constant halo: the program "
                "is not a stencil pipeline over that image")
        halo.append(h)
    return halo[0], halo[1]


def _spine_calls(e: nodes.Node) -> set[int]:
    """The ids of the map calls that produce the program's result (the last stage): from
    the body, through compositions, ``let`` bodies and layout calls, to the first call of
    a map that computes."""
    from ir.computes import computes

    out: set[int] = set()
    while isinstance(e, nodes.FunCall):
        f = e.f.f if isinstance(e.f, nodes.ToMem) else e.f
        if isinstance(f, nodes.Map) and computes(f.f):
            out.add(id(e))
            return out
        if isinstance(f, nodes.Lambda):
            e = f.body
        elif e.args:
            e = e.args[0]
        else:
            return out
    return out


def _stage_calls(e: nodes.Node) -> list[nodes.FunCall]:
    """The calls of maps that are not inside another map's function (the stages, and the
    layout maps of ``slideND`` and the like, which compute nothing)."""
    found: list[nodes.FunCall] = []
    stack: list[nodes.Node] = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, nodes.FunCall):
            f = n.f.f if isinstance(n.f, nodes.ToMem) else n.f
            if isinstance(f, nodes.Map):
                found.append(n)
                stack.extend(n.args)  # the map's function is inside it: not a stage
                continue
        if isinstance(n, nodes.Map):
            continue
        stack.extend(n.children())
    return found


def _map_of(n: nodes.Node) -> nodes.Map | None:
    """The map a call calls (through a memory annotation), or None."""
    if not isinstance(n, nodes.FunCall):
        return None
    f = n.f.f if isinstance(n.f, nodes.ToMem) else n.f
    return f if isinstance(f, nodes.Map) else None


def _fresh_labels(program: nodes.Node, wanted: tuple[str, ...]) -> tuple[str, ...]:
    used = {m.label for m in nodes.maps_in(program) if m.label}
    out = []
    for w in wanted:
        label, k = w, 2
        while label in used:
            label, k = f"{w}{k}", k + 1
        used.add(label)
        out.append(label)
    return tuple(out)


def fuse_through_tiling(program: nodes.Node, *, image: str | None = None,
                        tile: str = "t", memory: str = "local",
                        unfused: Iterable[str] = ()) -> nodes.Lambda:
    """``program`` computed tile by tile (see the module docstring): ``image`` names the
    input that is tiled (default: the only two-or-more-dimensional input whose shape the
    result follows), ``tile`` the new size variable (the output tile's side), ``memory``
    where each intermediate image of a tile lives (``global``: no annotation).
    ``unfused`` names stages (by their outer map's label) whose edge to their consumers is
    not fused: each is computed whole, before the tiles, as in the program, and its image
    is tiled like the input image (with its own halo). Raises :class:`TilingError` for a
    program that is not a stencil pipeline over one image or an unknown stage."""
    from ir.computes import computes
    from ir.typecheck import typecheck

    if memory not in MEMORIES:
        raise TilingError(f"memory {memory!r}: give one of {', '.join(MEMORIES)}")
    if not isinstance(program, nodes.Lambda) or not program.params:
        raise TilingError("fusion through tiling takes a program with declared inputs")
    info = typecheck(program)
    sizes_used = set()
    for p in program.params:
        if p.type is not None:
            sizes_used |= {str(v) for v in p.type.free_vars()}
    if tile in sizes_used:
        raise TilingError(f"the tile size {tile!r} is already a size of the program: give "
                          "another name (tile=...)")
    images = [p for p in program.params
              if isinstance(p.type, ArrayType) and isinstance(p.type.elem, ArrayType)]
    if image is not None:
        names = [p.name for p in images]
        images = [p for p in images if p.name == image]
        if not images:
            raise TilingError(f"no input image {image!r}: the program's two-or-more-"
                              f"dimensional inputs are {names}")
    halos = {}
    for p in images:
        assert isinstance(p.type, ArrayType)
        try:
            halos[p.name] = _halo(p.type, info.type, p.name)
        except TilingError as e:
            if image is not None:
                raise
            last = e
    if not halos:
        raise TilingError(str(last) if images else
                          "the program has no two-dimensional input image to tile")
    if len(halos) > 1:
        raise TilingError(f"several inputs could be the image: {sorted(halos)}; name one "
                          "(image=...)")
    (name, (hh, hw)), = halos.items()
    body: nodes.Node = program.body
    spine = _spine_calls(body)
    calls = _stage_calls(body)
    spine_maps = {m.uid for c in calls if id(c) in spine and (m := _map_of(c)) is not None}
    stage_calls = [(c, m) for c in calls if id(c) not in spine and (m := _map_of(c))
                   is not None and computes(m.f) and m.uid not in spine_maps]
    # stages left unfused: computed whole before the tiles, their images tiled inputs
    inputs: list[tuple[str, int, int]] = []
    cut: dict[int, tuple[str, nodes.FunCall]] = {}
    if unfused:
        by_label = {m.label: (c, m) for c, m in stage_calls if m.label}
        unknown = sorted(set(unfused) - set(by_label))
        if unknown:
            raise TilingError(f"no stage {', '.join(unknown)} whose image another stage "
                              f"reads: the program's are {', '.join(sorted(by_label)) or 'none'}")
        params = {p.name for p in program.params}
        taken = params | {n.name for n in nodes.walk(program) if isinstance(n, nodes.Param)}
        for label in sorted(set(unfused)):
            c, m = by_label[label]
            free = {n.name for n in nodes.walk(c) if isinstance(n, nodes.Param)} - params
            bound = {q.name for n in nodes.walk(c) if isinstance(n, nodes.Lambda)
                     for q in n.params}
            if free - bound:
                raise TilingError(f"stage {label} reads {', '.join(sorted(free - bound))}, "
                                  "bound inside the program: it cannot be computed before "
                                  "the tiles")
            pname = next(f"{label}{k or ''}Image" for k in range(len(taken) + 1)
                         if f"{label}{k or ''}Image" not in taken)
            taken.add(pname)
            st = info.types.get(id(c))
            if not isinstance(st, ArrayType):
                raise TilingError(f"stage {label}'s result has no array type: {st}")
            inputs.append((pname, *_halo(st, info.type, f"stage {label}'s image")))
            cut[m.uid] = (pname, c)
        def cut_out(n: nodes.Node) -> nodes.Node | None:
            m = _map_of(n)
            return nodes.Param(cut[m.uid][0]) if m is not None and m.uid in cut else None

        body = nodes.rebuild(body, cut_out)
    if any(isinstance(n, nodes.Param) and n.name == name for n in nodes.walk(body)):
        inputs.insert(0, (name, hh, hw))
    # each intermediate image still fused is written to `memory`, per tile
    if memory != "global":
        stages = {m.uid for _, m in stage_calls} - set(cut)

        def annotate(n: nodes.Node) -> nodes.Node | None:
            if isinstance(n, nodes.FunCall) and isinstance(n.f, nodes.Map) \
                    and n.f.uid in stages:
                return nodes.FunCall(nodes.ToMem(n.f, memory), n.args)
            return None

        body = nodes.rebuild(body, annotate)
    tile_p = nodes.Param("tile")
    if len(inputs) == 1:
        reads: dict[str, nodes.ExprNode] = {inputs[0][0]: tile_p}
    else:
        reads = {n: nodes.FunCall(nodes.Get(k), (tile_p,)) for k, (n, _, _) in enumerate(inputs)}
    body = nodes.rebuild(body, lambda n: reads.get(n.name)
                         if isinstance(n, nodes.Param) else None)
    ty, tx, tu, tv = _fresh_labels(program, ("TY", "TX", "TU", "TV"))
    t = Var(tile)
    # tiles that do not divide the output: each tiled image padded to a whole number of
    # tiles (plus its halo), the result cropped back (zero amounts where t divides it)
    assert isinstance(info.type, ArrayType) and isinstance(info.type.elem, ArrayType)
    extra = tuple(((sym(n) + t - 1) // t) * t - sym(n)
                  for n in (info.type.size, info.type.elem.size))
    grids = [nodes.FunCall(slide_nd(2, (t + h, t + w), (t, t), strict=True),
                           (nodes.FunCall(pad2d(0, extra[0], 0, extra[1]), (nodes.Param(n),)),))
             for n, h, w in inputs]
    tiles = grids[0] if len(grids) == 1 else zip_nd(2, *grids)
    assert isinstance(body, nodes.ExprNode)  # rewrites keep an expression one
    per_tile = nodes.FunCall(map_(map_(nodes.Lambda((tile_p,), body), tx), ty), (tiles,))
    untile = nodes.FunCall(join(), (nodes.FunCall(
        map_(compose(map_(join(), tv), transpose()), tu), (per_tile,)),))
    out: nodes.ExprNode = nodes.FunCall(pad2d(0, -extra[0], 0, -extra[1]), (untile,))
    if cut:  # the unfused stages first, their images bound for the tiles
        out = nodes.FunCall(nodes.Lambda(tuple(nodes.Param(n) for n, _ in cut.values()), out),
                            tuple(c for _, c in cut.values()))
    return nodes.Lambda(program.params, out)


def tiling_variants(program: nodes.Node, tiling: str = "auto",
                    unfused: Iterable[str] = ()) -> dict[str, nodes.Node]:
    """The programs ``mapper explore --tiling`` explores, by variant name: ``none`` the
    program itself (``unfused``); ``local``/``private``/``global`` its fusion through
    tiling with the intermediates in that memory (``tiled-<memory>``, or
    ``tiled-<memory>-<stages>-unfused`` with the stages ``unfused`` computed before the
    tiles; a program that is no stencil pipeline raises :class:`TilingError`); ``auto``
    the unfused program, then the local and the private tiling where the program tiles
    (else the program alone)."""
    unfused = tuple(sorted(set(unfused)))
    if unfused and tiling not in MEMORIES:
        raise TilingError("stages left unfused go with one tiling: local, private or global")
    if tiling == "none":
        return {"unfused": program}
    if tiling in MEMORIES:
        name = f"tiled-{tiling}" + (f"-{'-'.join(unfused)}-unfused" if unfused else "")
        return {name: fuse_through_tiling(program, memory=tiling, unfused=unfused)}
    if tiling != "auto":
        raise TilingError(f"tiling {tiling!r}: give none, auto or one of {', '.join(MEMORIES)}")
    out: dict[str, nodes.Node] = {"unfused": program}
    for memory in ("local", "private"):
        try:
            out[f"tiled-{memory}"] = fuse_through_tiling(program, memory=memory)
        except TilingError:
            return {"unfused": program}
    return out


def recomputed_work(program: nodes.Node, tiled: nodes.Node, sizes: dict[str, int],
                    values, tile: str = "t") -> dict[int, float]:
    """The work a tiling does per tile side, as a multiple of the program's (Forma's
    redundant computation: each tile computes its intermediates' halo again, and ragged
    tiles compute their padding): ``count_flops`` of ``tiled`` at ``tile = v`` for each
    ``v`` of ``values``, over ``program``'s at ``sizes`` (which must give every size of
    ``program``; an ``ir.flops.FlopsError`` says which is missing)."""
    from ir.flops import count_flops

    base = count_flops(program, sizes)
    if base <= 0:
        raise TilingError("the program performs no floating-point work: there is no "
                          "recomputed work to measure")
    return {int(v): count_flops(tiled, {**sizes, tile: int(v)}) / base for v in values}

