"""The map encoding of CC'22 Table 2 and the ``MapCodes`` value.

0 mapSeq, 1 fused with the outer map, 2 mapVec (CC'22 Table 1's level V: the map's
iterations run in the vector lanes of one work-item), 10-12 mapLcl(0-2), 20-22 mapWrg(0-2),
30-32 mapGlb(0-2). Division by 10 gives the level, modulo 10 the dimension: mapVec is of
level 0 like mapSeq (it distributes nothing over work-items), so every rule about the
parallelism hierarchy treats it as sequential.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from collections.abc import Mapping as AbcMapping

from mapper.errors import MappingError

SEQ, FUSED, VEC = 0, 1, 2
CODES: tuple[int, ...] = (0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32)
PARALLEL_CODES = (10, 11, 12, 20, 21, 22, 30, 31, 32)
_LEVEL = {1: "mapLcl", 2: "mapWrg", 3: "mapGlb"}
_KIND_CODE = {"mapLcl": 10, "mapWrg": 20, "mapGlb": 30}


def code_name(code: int) -> str:
    """``20`` -> ``mapWrg(0)``; ``0`` -> ``mapSeq``; ``1`` -> ``fused``; ``2`` -> ``mapVec``."""
    if code == SEQ:
        return "mapSeq"
    if code == FUSED:
        return "fused"
    if code == VEC:
        return "mapVec"
    if code in PARALLEL_CODES:
        return f"{_LEVEL[code // 10]}({code % 10})"
    raise MappingError(f"{code} is not a map code; codes are {', '.join(map(str, CODES))}")


def short_code(code: int) -> str:
    """``0`` -> ``S``, ``1`` -> ``F``, ``2`` -> ``V``, ``20`` -> ``W0``, ``11`` -> ``L1``,
    ``32`` -> ``G2``: the form every mapping prints in."""
    if code in PARALLEL_CODES:
        return "?LWG"[code // 10] + str(code % 10)
    # code_name raises MappingError, naming the codes, for a code that is none of them
    return {SEQ: "S", FUSED: "F", VEC: "V"}.get(code) or code_name(code)


def parse_code(text: str) -> int:
    """``"20"``, ``"mapWrg(0)"``, ``"W0"``, ``"seq"``, ``"fused"``, ``"V"`` -> the code."""
    t = text.strip()
    if re.fullmatch(r"\d+", t):
        c = int(t)
        if c not in CODES:
            raise MappingError(f"{c} is not a map code; codes are {', '.join(map(str, CODES))}")
        return c
    low = t.lower()
    if low in ("s", "seq", "mapseq", "0"):
        return SEQ
    if low in ("f", "fused", "1"):
        return FUSED
    if low in ("v", "vec", "mapvec", "2"):
        return VEC
    m = re.fullmatch(r"(mapLcl|mapWrg|mapGlb|L|W|G)\(?([0-2])\)?", t)
    if m:
        kind = {"L": "mapLcl", "W": "mapWrg", "G": "mapGlb"}.get(m.group(1), m.group(1))
        return _KIND_CODE[kind] + int(m.group(2))
    raise MappingError(
        f"cannot read {text!r} as a map code: use a number (0, 1, 2, 10-12, 20-22, 30-32), "
        "mapSeq, fused, mapVec, mapLcl(d), mapWrg(d), mapGlb(d) or the short forms S, F, V, "
        "L0, W1, G2"
    )


class FrozenNames(AbcMapping[str, int]):
    """A read-only, hashable mapping of names to ints (held in ``_items``), equal to any
    mapping with the same items: the base of map codes and tuning values."""

    __slots__ = ("_items",)
    _items: dict[str, int]

    def __getitem__(self, k: str) -> int:
        return self._items[k]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AbcMapping):
            return self._items == dict(other)
        return NotImplemented


class MapCodes(FrozenNames):
    """An assignment of codes to map labels; prints in short codes, ``A=W0 B=L0 C=S D=F``
    (``names()``: ``A=mapWrg(0) ...``, ``numeric()``: ``A=20 ...``)."""

    __slots__ = ()

    def __init__(self, codes: AbcMapping[str, int] | None = None, **kw: int):
        d = dict(codes or {}, **kw)
        for k, v in d.items():
            if v not in CODES:
                raise MappingError(f"map {k}: {v!r} is not a map code "
                                   f"({', '.join(map(str, CODES))})")
        self._items = dict(d)

    @classmethod
    def parse(cls, text: str) -> MapCodes:
        """``"A=20 B=10 C=mapLcl(0) D=S"`` (separated by spaces or commas)."""
        codes = {}
        for part in re.split(r"[\s,]+", text.strip()):
            if not part:
                continue
            if "=" not in part:
                raise MappingError(f"expected LABEL=CODE, got {part!r} (e.g. 'A=20 B=mapLcl(0)')")
            k, v = part.split("=", 1)
            k = k.strip()
            if k in codes:
                raise MappingError(f"map {k} is given twice in {text.strip()!r}; give each map "
                                   "one code")
            codes[k] = parse_code(v)
        return cls(codes)

    def __str__(self) -> str:
        return self.short()

    def __repr__(self) -> str:
        return f"MapCodes({self})"

    def short(self) -> str:
        """``A=W0 B=L0 C=L0 D=S``: the form mappings print in."""
        return " ".join(f"{k}={short_code(v)}" for k, v in self._items.items())

    def names(self) -> str:
        """``A=mapWrg(0) B=mapLcl(0) C=mapLcl(0) D=mapSeq``."""
        return " ".join(f"{k}={code_name(v)}" for k, v in self._items.items())

    def numeric(self) -> str:
        """``A=20 B=10 C=10 D=0``: the numbers of CC'22 Table 2 (the store's form)."""
        return " ".join(f"{k}={v}" for k, v in self._items.items())

    def to_json(self) -> dict[str, str]:
        """``{"A": "W0", "B": "L0"}`` (short codes, as ``--mapping`` and ``parse`` read)."""
        return {k: short_code(v) for k, v in self._items.items()}
