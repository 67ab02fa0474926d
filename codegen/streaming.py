"""Streaming (non-temporal) stores: which of a kernel's buffers bypass the cache.

A kernel that writes a buffer larger than the device's last-level cache evicts every line
it writes before anything reads it again; an ordinary store first reads the line it
writes (a read for ownership), so a copy-like kernel moves three bytes for every two it
needs. A non-temporal store writes the line without reading it. The printer
(``codegen.emit``) emits one (``__builtin_nontemporal_store``, which PoCL's Clang lowers
to ``vmovntps``) for a whole vector stored at an aligned address (its index a multiple
of its width: buffers are aligned far beyond a vector) into a buffer :func:`streamed_buffers`
names. Other stores into such a buffer stay ordinary; the work-group's end orders them.
"""

from __future__ import annotations

from collections.abc import Iterable

from codegen.device_description import Device
from codegen.stmt import Store, leaves_of, walk_stmts

__all__ = ["streamed_buffers"]


def streamed_buffers(stmts: list, bufs: Iterable, device: Device) -> frozenset[str]:
    """The global buffers of ``bufs`` that the kernel ``stmts`` writes and never reads,
    each larger than ``device``'s last-level cache (a CPU's, as it reports it; none where
    it reports none, or on another kind of device)."""
    cache = device.global_mem_cache_size
    if device.type != "cpu" or cache <= 0:
        return frozenset()
    written: set[str] = set()
    read: set[str] = set()
    for s in walk_stmts(stmts):
        if isinstance(s, Store):
            written.add(s.dest.buf.name)
            read.update(leaf.buf.name for leaf in leaves_of(s.value))
    return frozenset(b.name for b in bufs if b.space == "global" and b.name in written
                     and b.name not in read and b.nbytes > cache)
