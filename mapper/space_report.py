"""The tuning space of a program as a document (``mapper space``): built in a spawned,
memory-capped worker process with a time limit, so that a space too large for the machine
is one clear error instead of an exhausted machine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ir.errors import IRTypeError
from ir.source_map import parse_mapped
from mapper.errors import MapperError, library_errors

MAX_RANGE = 1 << 22  # the most values an inferred or given tuning range may list


class SpaceBuildError(MapperError):
    """The tuning space could not be built: ``kind`` is ``nothing`` (every size given),
    ``timeout``, ``too-large``, ``memory``, ``killed`` or ``error`` (the program's own
    error, raised in the worker: its message)."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


def space_document(path: str, sizes: dict[str, int], domains: dict,
                   max_value: int | None, device, mapping: str | None,
                   tiling: str = "none", unfused: tuple[str, ...] = ()) -> dict:
    """Build the tuning space of the program in ``path`` (fused through tiling with its
    intermediates in ``tiling`` memory, unless ``none``, the stages ``unfused`` computed
    whole before the tiles; with ``mapping`` applied, if
    given): the JSON document of ``mapper space`` (see docs/cli-json.md), less ``command``
    and ``schema``. Type errors name the file, line and column."""
    from mapper.api import lower_mapping, problem
    from mapper.tuning import infer_tuning

    prog, source = parse_mapped(path)
    plain = prog
    if tiling != "none":
        from ir.tiling import fuse_through_tiling

        prog = fuse_through_tiling(prog, memory=tiling, unfused=unfused)
    try:
        if mapping:
            prog = lower_mapping(problem(prog), mapping)
        t0 = time.perf_counter()
        _check_ranges(prog, sizes, domains, max_value, device)
        tp = infer_tuning(prog, sizes, domains=domains, max_value=max_value, device=device)
    except IRTypeError as e:
        source.attach(e)
        raise
    if not tp.params:
        hint = "" if mapping else (
            "; a mapping adds parameters of its own (vector lanes, register blocks): give "
            "one with --mapping to see them")
        raise SpaceBuildError("nothing", f"every size of {path} is given, so there is "
                              "nothing to tune: leave out the sizes to tune (mapper show "
                              f"--sizes checks a complete set){hint}")
    sp = tp.space
    n = sp.count()
    recomputed = None
    if tiling != "none" and "t" in tp.params and len(tp.params["t"].domain) <= 64:
        from ir.flops import FlopsError
        from ir.tiling import recomputed_work

        try:
            recomputed = recomputed_work(plain, prog, sizes, tp.params["t"].domain)
        except FlopsError:  # other sizes are tuned too: no single multiple per tile side
            recomputed = None
    return {"file": path, "sizes": sizes, "mapping": mapping, "device": device.describe(),
            "parameters": [{"name": p.name, "values": len(p.domain), "domain": list(p.domain),
                            "why": p.why} for p in tp.params.values()],
            "restrictions": [{"origin": origin, "restriction": src}
                             for src, origin in tp.restrictions],
            "groups": [list(g) for g in sp.groups], "order": list(sp.order),
            "count": n, "cartesian": sp.cartesian_size(),
            "seconds": time.perf_counter() - t0, "note": tp.resource_note or None,
            "recomputed_work": None if recomputed is None else
            {str(k): round(v, 4) for k, v in recomputed.items()}}


def _check_ranges(prog, sizes: dict[str, int], domains: dict, max_value: int | None,
                  device) -> None:
    """Refuses a space whose parameters with no domain of their own (a plain range up to
    ``max_value``, by default twice the largest size, as ``explore`` has it) would list more
    than ``MAX_RANGE`` values; parameters with a domain of their own (a split's divisors, a
    tile side, a vector width) are never refused for the sizes' magnitude."""
    from mapper.tuning import infer_tuning

    hi = max_value or 2 * max([*sizes.values(), 1])
    if hi <= MAX_RANGE:
        return
    probe = infer_tuning(prog, sizes, domains=domains, max_value=1, device=device)
    ranged = [p.name for p in probe.params.values() if p.why.startswith("range")]
    if ranged:
        raise SpaceBuildError(
            "too-large", f"the sizes make the inferred tuning ranges 1..{hi:,} (twice the "
            f"largest size), too many values to list for {', '.join(ranged)}: give their "
            f"upper end with --max (at most {MAX_RANGE:,}, e.g. --max 4096) or their values "
            f"with --domain (e.g. --domain {ranged[0]}=1..1024)")


def memory_budget() -> int:
    """Bytes of address space a space-building worker may add: half the machine's memory."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 8 << 30


def _worker(conn, memory: int, *a) -> None:
    """Worker process: cap its memory, build the space, send ``(kind, payload)`` back:
    ``ok`` with the document, ``error`` with a library message, ``too-large``, ``memory``
    or ``bug`` with a traceback."""
    import traceback

    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        cap = used + memory
        if hard == resource.RLIM_INFINITY or cap < hard:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ImportError, OSError, ValueError):  # pragma: no cover - not Linux
        pass
    try:
        from constraints.restrictions import SpaceTooLargeError

        try:
            conn.send(("ok", space_document(*a)))
        except SpaceTooLargeError as e:
            conn.send(("too-large", str(e)))
        except MemoryError:
            conn.send(("memory", ""))
        except Exception as e:  # noqa: BLE001 - sorted into the user's and bugs below
            if isinstance(e, library_errors()):
                conn.send(("error", str(e)))
            else:
                conn.send(("bug", traceback.format_exc()))
    finally:
        conn.close()


class SpaceWorkerError(RuntimeError):
    """The space-building worker failed with an error that is not the user's (a bug); the
    message holds the worker's traceback."""


def build_space_document(path: str, sizes: dict[str, int], domains: dict,
                         max_value: int | None, device, mapping: str | None, *,
                         tiling: str = "none", unfused: tuple[str, ...] = (),
                         timeout_s: float | None = None,
                         on_wait: Callable[[float], None] | None = None) -> dict:
    """``space_document`` in a worker process (spawned) with a memory cap (half the
    machine's memory) and a time limit (``timeout_s``, None: none): a space too large for
    the machine is a ``SpaceBuildError``, not an exhausted machine. ``on_wait(seconds)``
    is called about every 0.2 s while the worker builds (a progress display)."""
    import multiprocessing

    hint = ("narrow a parameter with --domain NAME=LO..HI (e.g. --domain s0=1..64), lower "
            "--max, or fix more sizes with --sizes")
    ctx = multiprocessing.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, daemon=True,
                       args=(send, memory_budget(), path, sizes, domains, max_value,
                             device, mapping, tiling, unfused))
    limit = timeout_s if timeout_s is not None and timeout_s > 0 else None
    t0 = time.monotonic()
    msg = None
    try:
        proc.start()
        send.close()
        while msg is None:
            if recv.poll(0.2):
                try:
                    msg = recv.recv()
                except EOFError:  # the worker died without a word (killed)
                    break
            elif not proc.is_alive() and not recv.poll(0):
                break
            elif limit is not None and time.monotonic() - t0 > limit:
                raise SpaceBuildError(
                    "timeout", f"building the tuning space took more than --timeout "
                    f"{limit:g} s and was stopped: {hint}, or raise --timeout (0: no limit)")
            if on_wait is not None:
                on_wait(time.monotonic() - t0)
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        recv.close()
    if msg is None:
        raise SpaceBuildError("killed", f"building the tuning space stopped (worker exit "
                              f"status {proc.exitcode}; out of memory?): {hint}")
    kind, payload = msg
    if kind == "ok":
        return payload
    if kind == "too-large":
        raise SpaceBuildError("too-large", f"the tuning space is too large to build: "
                              f"{payload} From the command line: {hint}.")
    if kind == "memory":
        raise SpaceBuildError("memory", "building the tuning space needs more than half the "
                              f"machine's memory: {hint}")
    if kind == "error":
        raise SpaceBuildError("error", payload)
    raise SpaceWorkerError("building the tuning space failed in its worker:\n" + payload)
