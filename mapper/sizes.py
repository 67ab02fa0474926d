"""The size variables of a program and the checks of size values given for them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from numbers import Integral

from ir.nodes import Node, size_names
from ir.types import shape_of
from mapper.errors import ArgumentError, InputError, SizeError, value_text

MAX_SIZE = 2**31 - 1  # sizes index OpenCL buffers with int


def parse_sizes(text: str | None, minimum: int = 1) -> dict[str, int]:
    """``"N=64,s0=16"`` -> ``{"N": 64, "s0": 16}``; names once each, values
    ``minimum``..2^31-1."""
    out: dict[str, int] = {}
    if not text:
        return out
    for part in text.replace(" ", ",").split(","):
        if not part:
            continue
        if "=" not in part:
            raise SizeError(f"sizes are NAME=VALUE pairs separated by commas, got {part!r}")
        k, v = (x.strip() for x in part.split("=", 1))
        if not k.isidentifier() or not k.isascii():
            raise SizeError(f"size name {k!r} in {part!r} is not a name (e.g. N=64)")
        if k in out:
            raise SizeError(f"size {k} is given twice ({k}={out[k]} and {part})")
        if not re.fullmatch(r"[+-]?[0-9]+", v):
            raise SizeError(f"size {k} must be an integer, got {v!r}")
        digits = v.lstrip("+-").lstrip("0")
        if v.startswith("-") or len(digits) > len(str(MAX_SIZE)) or int(v) > MAX_SIZE \
                or int(v) < minimum:
            shown = v if len(v) <= 20 else f"{v[:8]}...({len(digits)} digits)"
            raise SizeError(f"size {k}={shown} is out of range: a size must be an integer in "
                           f"{minimum}..{MAX_SIZE}")
        out[k] = int(v)
    return out


def sizes_argument(sizes: object, what: str = "sizes") -> dict:
    """``sizes`` as a dict when it maps size names to values; else ``ArgumentError`` saying
    what is expected (the values are checked where they are used: ``check_sizes``)."""
    if not isinstance(sizes, Mapping) or not all(isinstance(k, str) for k in sizes):
        raise ArgumentError(f"{what} must be a dict from size names to integers, such as "
                            f"{{'N': 4096}}; got {value_text(sizes)}")
    return dict(sizes)


def check_sizes(prog: Node, sizes: Mapping[str, int], where: str = "the program", *,
                complete: bool = False, flag: str = "--sizes",
                extra: frozenset[str] = frozenset(),
                names: frozenset[str] | None = None) -> None:
    """Unknown size names raise ``SizeError`` naming the program's sizes; with
    ``complete``, so does a missing one; a value must be a non-negative integer.
    ``where`` names the program (its path) in the message; ``extra`` are sizes a mapping
    adds (the vector widths of its V maps, ``mapper.apply.vector_width_names``);
    ``names``: the program's sizes where the caller has them (else walked for)."""
    names = (size_names(prog) if names is None else names) | extra
    have = ", ".join(sorted(names)) or "none"
    unknown = sorted(set(sizes) - names)
    if unknown:
        raise SizeError(f"{where} has no size {', '.join(unknown)}; its sizes are: {have}")
    missing = sorted(names - set(sizes))
    if complete and missing:
        raise SizeError(f"give a value for every size of {where}: missing "
                        f"{', '.join(missing)} (e.g. {flag} "
                        + ",".join(f"{k}=..." for k in missing) + ")")
    bad = [k for k, v in sizes.items()
           if isinstance(v, bool) or not isinstance(v, Integral) or v < 0]
    if bad:
        raise SizeError(f"size {bad[0]}={sizes[bad[0]]!r} of {where} is not a "
                        "non-negative integer")


def check_input_sizes(prog: Node, sizes: Mapping[str, int], where: str | None = None, *,
                      how: str = "in the sizes") -> None:
    """Every size an input's shape names is given in ``sizes`` (an exploration tunes the
    other sizes, not the shape of its data): else ``InputError`` naming the first input with
    a size missing, ``where`` the program is (its path) and ``how`` to give it."""
    for p in getattr(prog, "params", ()):
        dims, _ = shape_of(p.type)
        missing = sorted(set().union(*(d.free_vars() for d in dims)) - sizes.keys(),
                         key=str) if dims else []
        if missing:
            of = f" of {where}" if where else ""
            raise InputError(f"input {p.name}{of} has size(s) {', '.join(map(str, missing))} "
                             f"that are not given: give them {how} (the other sizes are tuned)")
