"""The lowering's fingerprint: a hash of the source that turns a candidate into a timed
kernel, part of every results-store key.

A stored measurement belongs to the kernel the library built when it was measured. The
version number alone does not change when the lowering does (a new local-size policy, a
new register block), so a store filled before such a change would answer with the old
kernel's time. The fingerprint hashes the files of the packages that build, launch and
time a kernel (``ir``, ``codegen``, ``constraints``, and ``mapper``'s own modules, not its
explorer or command line, whose code does not change a kernel): any edit there gives new
keys, and the candidate is measured again. Editing the explorer keeps the stored results.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

# the packages (folders beside this one's parent) whose every file decides a kernel
KERNEL_PACKAGES = ("ir", "codegen", "constraints")
# mapper's own modules decide the mapping's meaning; its sub-packages do not
MAPPER_TOP = "mapper"
SUFFIXES = (".py", ".json")


def kernel_sources(root: Path | None = None) -> list[Path]:
    """The files the fingerprint hashes, in a fixed order."""
    base = root if root is not None else Path(__file__).resolve().parents[2]
    files: list[Path] = []
    for pkg in KERNEL_PACKAGES:
        files += [p for p in (base / pkg).rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    files += [p for p in (base / MAPPER_TOP).glob("*") if p.suffix in SUFFIXES and p.is_file()]
    return sorted(files, key=lambda p: p.relative_to(base).as_posix())


@functools.lru_cache(maxsize=1)
def lowering_fingerprint() -> str:
    """12 hex digits of SHA-256 over the kernel-deciding sources (their paths and bytes);
    ``"nosource"`` where the files cannot be read (an installation without them)."""
    base = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    files = kernel_sources(base)
    if not files:
        return "nosource"
    for p in files:
        h.update(p.relative_to(base).as_posix().encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()[:12]
