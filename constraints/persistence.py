"""Persistence of a search space: a key hashing its parameters and restrictions, and its
group tables saved to (and loaded from) a ``.npz`` file instead of being enumerated again.

:class:`Persistent` holds these as methods of ``SearchSpace`` (one of its base classes).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from constraints.enumeration import (
    CHUNK_ROWS,
    KERNEL_TUNER_BLOCK_SIZE_NAMES,
    MAX_ROWS,
    GroupBuilder,
    Restrictions,
)
from constraints.errors import SpaceError
from constraints.restrictions import Restriction

__all__ = ["Persistent"]

_CACHE_VERSION = 1


class Persistent(GroupBuilder):
    """Cache key, ``save``, ``load`` and ``cached`` of ``SearchSpace``: a ``GroupBuilder``
    whose groups' tables can be written and read back instead of enumerated."""

    _names: list[str]
    _domains: dict[str, tuple[Any, ...]]
    _restrictions: tuple[Restriction, ...]
    _groups: list[tuple[str, ...]]
    _tables: list[np.ndarray]
    _deaths: list[tuple[int, int] | None]

    def cache_key(self) -> str:
        """Hash of the parameters (names, values) and restrictions (sources, origins).

        Callables are identified by their qualified name, bytecode and constants only:
        captured variables are not hashed."""
        h = hashlib.sha256()
        doc = {
            "v": _CACHE_VERSION,
            "params": [
                [n, [f"{type(v).__name__}:{v!r}" for v in self._domains[n]]] for n in self._names
            ],
            "restrictions": [
                [r.source, list(r.params), r.origin, _fingerprint(r)] for r in self._restrictions
            ],
        }
        h.update(json.dumps(doc, sort_keys=True).encode())
        return h.hexdigest()

    def save(self, path: str | Path) -> None:
        """Write the group tables to ``path`` (``.npz``), keyed by :meth:`cache_key`."""
        # Any: np.savez's **kwds share the signature with its bool allow_pickle
        arrays: dict[str, Any] = {f"table_{g}": t for g, t in enumerate(self._tables)}
        meta = {
            "key": self.cache_key(),
            "groups": [list(g) for g in self._groups],
            "deaths": [list(d) if d else None for d in self._deaths],
        }
        with open(path, "wb") as f:
            np.savez(f, meta=np.array(json.dumps(meta)), **arrays)

    @classmethod
    def load(
        cls,
        path: str | Path,
        params: Mapping[str, Sequence[Any]],
        restrictions: Restrictions = None,
        *,
        origins: Mapping[int, str] | None = None,
        max_threads: int | None = None,
        block_size_names: Sequence[str] = KERNEL_TUNER_BLOCK_SIZE_NAMES,
    ) -> Any:
        """Rebuild a space from :meth:`save` output without enumerating; raises
        :class:`SpaceError` if the file belongs to other parameters or restrictions."""
        space = cls.__new__(cls)
        space._setup(params, restrictions, origins, CHUNK_ROWS, max_threads, block_size_names)
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            if meta["key"] != space.cache_key() or meta["groups"] != [
                list(g) for g in space._groups
            ]:
                raise SpaceError(f"cache {path} was built for another space (stale key)")
            tables = [data[f"table_{g}"] for g in range(len(space._groups))]
        space._deaths = [tuple(d) if d else None for d in meta["deaths"]]
        space._finish(tables)
        return space

    @classmethod
    def cached(cls, path: str | Path, params: Mapping[str, Sequence[Any]],
               restrictions: Restrictions = None, *, max_rows: int | None = MAX_ROWS,
               **options: Any) -> Any:
        """Load from ``path`` when it matches, else build and save there. ``options`` are
        :meth:`load`'s keywords (``origins``, ``max_threads``, ``block_size_names``)."""
        try:
            return cls.load(path, params, restrictions, **options)
        except (OSError, KeyError, ValueError):  # missing, unreadable or stale: rebuild
            pass
        build: Any = cls  # SearchSpace's constructor (this base class has none of its own)
        space = build(params, restrictions, max_rows=max_rows, **options)
        space.save(path)
        return space


def _fingerprint(r: Restriction) -> str:
    if r.vectorised:
        return ""
    fn = getattr(r.scalar, "__wrapped_fn__", None)
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    return hashlib.sha256(code.co_code + repr(code.co_consts).encode()).hexdigest()
