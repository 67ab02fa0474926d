"""The device a program is mapped for, as a value: one :class:`Device` that every stage takes.

A :class:`Device` holds what the tuning space, the lowering, the launch and the runner
need to know about an OpenCL device: its name and type, work-group limits, memory sizes,
compute units, preferred float vector width, floating-point extensions, and the private
memory budgets the lowering enforces (OpenCL has no query for those). It comes from

* a live OpenCL device (:meth:`Device.from_opencl`),
* a saved JSON description (:meth:`Device.load`, :meth:`Device.save`): a space can be built
  and candidates lowered for a GPU on a machine that has none,
* a named preset (:data:`PRESETS`): ``pocl-cpu`` (PoCL's CPU device on the development
  machine) and ``h100`` (an NVIDIA H100 80GB through NVIDIA's OpenCL 3.0).

Stages that are not given one use :data:`DEFAULT_DEVICE`, defined here and nowhere else.
Nothing here selects or opens a device: the live devices are :mod:`codegen.device`'s (which
describes one with :meth:`Device.from_opencl`), and :func:`codegen.target.resolve` turns
the CLI's ``--device`` text into a ``Device``; ``codegen.target`` re-exports every name of
this module, which is where code outside ``codegen`` imports them from.

A live device's memory sizes (``max_mem_alloc_size``, ``global_mem_size``) enter its
``Device`` rounded down to a power of two (:func:`stable_memory_size`): PoCL's CPU device
reports them from the machine's momentary free memory, and the tuning space's constraints
must not change between two runs on the same machine (same seed, same candidates). The
rounded value never exceeds what the device reports, so the space and the lowering stay
within the real limits; the runner checks launches against the real ones
(``codegen.device.device_limits``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ir.errors import LiftmapError


class DeviceDescriptionError(LiftmapError, ValueError):
    """A device description (preset name, JSON file, live spec) that cannot be used."""


# the memory sizes a live device reports from the momentary free memory (PoCL's CPU device)
VOLATILE_MEMORY_FIELDS = ("max_mem_alloc_size", "global_mem_size")


def stable_memory_size(nbytes: int) -> int:
    """``nbytes`` rounded down to a power of two (``1 << floor(log2(nbytes))``).

    What a live device's memory sizes become in its :class:`Device`: free-memory-dependent
    reports of one machine (1.7 GiB or 1.9 GiB of largest allocation) become the same value
    (1 GiB), never more than reported. A value that is not a positive integer is returned
    unchanged (the ``Device`` refuses it with its own message).
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
        return nbytes
    return 1 << (nbytes.bit_length() - 1)


@dataclass(frozen=True)
class Device:
    """An OpenCL device as the mapper sees it (sizes in bytes)."""

    name: str
    type: str = "cpu"  # "cpu" | "gpu" | "other"
    platform: str = ""
    max_work_group_size: int = 1024
    max_work_item_sizes: tuple[int, ...] = (1024, 1024, 64)
    max_work_item_dimensions: int = 3
    local_mem_size: int = 48 << 10
    max_mem_alloc_size: int = 1 << 30
    global_mem_size: int = 4 << 30
    max_compute_units: int = 1
    preferred_vector_width_float: int = 1
    # CL_DEVICE_GLOBAL_MEM_CACHE_SIZE (a CPU's last-level cache under PoCL); 0: not known
    global_mem_cache_size: int = 0
    fp64: bool = False
    fp16: bool = False
    extensions: tuple[str, ...] = ()
    # budgets of the lowering, not device queries:
    private_mem_size: int = 16 << 10  # private bytes per work-item
    # private bytes of a whole work-group, where the implementation keeps every work-item's
    # private arrays of a group together (PoCL's CPU device: on one thread's stack);
    # 0: no such budget (GPUs keep private arrays per thread)
    private_group_budget: int = 0
    source: str = "default"  # where the description came from

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_work_item_sizes",
                           tuple(int(x) for x in self.max_work_item_sizes))
        object.__setattr__(self, "extensions", tuple(self.extensions))
        for f in ("max_work_group_size", "local_mem_size", "max_mem_alloc_size",
                  "global_mem_size", "max_compute_units", "private_mem_size"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise DeviceDescriptionError(f"device {self.name!r}: {f} must be a positive "
                                             f"integer, not {v!r}")
        if not self.max_work_item_sizes or min(self.max_work_item_sizes) < 1:
            raise DeviceDescriptionError(f"device {self.name!r}: max_work_item_sizes must be "
                                         f"positive integers, not {self.max_work_item_sizes}")

    def work_item_limit(self, dim: int) -> int:
        """The device's maximum work-items in dimension ``dim`` (1 beyond its dimensions)."""
        return self.max_work_item_sizes[dim] if dim < len(self.max_work_item_sizes) else 1

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able values (tuples become lists in JSON)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None) -> Device:
        """From :meth:`to_dict`'s output (unknown keys are refused, missing ones default)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise DeviceDescriptionError(
                f"unknown device field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        if "name" not in data:
            raise DeviceDescriptionError("a device description needs a 'name'")
        kw = dict(data)
        for k in ("max_work_item_sizes", "extensions"):
            if k in kw:
                kw[k] = tuple(kw[k])
        if source is not None:
            kw["source"] = source
        try:
            return cls(**kw)
        except TypeError as e:
            raise DeviceDescriptionError(f"bad device description: {e}") from None

    @classmethod
    def from_limits(cls, limits: Mapping[str, Any]) -> Device:
        """From ``codegen.device.device_limits``'s dict (what a worker reports); the keys
        that are not fields (version strings) are dropped. The memory sizes, which that dict
        holds as the device reports them, are rounded down to a power of two
        (:func:`stable_memory_size`), as :meth:`from_opencl` does: equal for two reports of
        one device that differ only in the free memory."""
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in limits.items() if k in known}
        for k in VOLATILE_MEMORY_FIELDS:
            if k in data:
                data[k] = stable_memory_size(data[k])
        return cls.from_dict(data, source=str(limits.get("source", "opencl")))

    def save(self, path: str | os.PathLike) -> None:
        """Writes the description as JSON (read it back with :meth:`load`)."""
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=2)
            f.write("\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> Device:
        """A description saved with :meth:`save` (or written by hand)."""
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as e:
            raise DeviceDescriptionError(f"cannot read device description {path}: "
                                         f"{e.strerror}") from None
        except json.JSONDecodeError as e:
            raise DeviceDescriptionError(f"{path} is not JSON: {e}") from None
        except UnicodeDecodeError as e:
            bad = e.object[e.start]
            raise DeviceDescriptionError(f"{path} is not UTF-8 text (byte 0x{bad:02x} at "
                                         f"offset {e.start}); save it as UTF-8 JSON") from None
        if not isinstance(data, dict):
            raise DeviceDescriptionError(f"{path}: a device description is a JSON object")
        return cls.from_dict(data, source=f"file:{path}")

    @classmethod
    def from_opencl(cls, device: Any) -> Device:
        """The description of a live ``pyopencl.Device``; the private budgets follow its
        type (a CPU gets PoCL's, a GPU a per-work-item budget only). The memory sizes are
        rounded down to a power of two (:func:`stable_memory_size`): PoCL reports them from
        the free memory, and the space built for the device must not follow that."""
        import pyopencl as cl

        exts = tuple(sorted(set(device.extensions.split())))
        kind = ("cpu" if device.type & cl.device_type.CPU
                else "gpu" if device.type & cl.device_type.GPU else "other")
        budget = POCL_CPU if kind == "cpu" else H100
        return cls(
            name=str(device.name).strip(),
            type=kind,
            platform=str(device.platform.name).strip(),
            max_work_group_size=int(device.max_work_group_size),
            max_work_item_sizes=tuple(int(x) for x in device.max_work_item_sizes),
            max_work_item_dimensions=int(device.max_work_item_dimensions),
            local_mem_size=int(device.local_mem_size),
            max_mem_alloc_size=stable_memory_size(int(device.max_mem_alloc_size)),
            global_mem_size=stable_memory_size(int(device.global_mem_size)),
            max_compute_units=int(device.max_compute_units),
            preferred_vector_width_float=int(device.preferred_vector_width_float),
            global_mem_cache_size=int(getattr(device, "global_mem_cache_size", 0) or 0),
            fp64="cl_khr_fp64" in exts or bool(getattr(device, "double_fp_config", 0)),
            fp16="cl_khr_fp16" in exts,
            extensions=exts,
            private_mem_size=budget.private_mem_size,
            private_group_budget=budget.private_group_budget,
            source="opencl",
        )

    def describe(self) -> str:
        """One line: name, type, the limits that shape the space."""
        return (f"{self.name} ({self.type}, {self.max_compute_units} compute units; "
                f"work-group <= {self.max_work_group_size}, local memory "
                f"{self.local_mem_size} B, private budget {self.private_mem_size} B/work-item"
                + (f", {self.private_group_budget} B/work-group" if self.private_group_budget
                   else "") + f"; from {self.source})")


def load_presets(path: Path | None = None) -> dict[str, Device]:
    """The described devices of ``presets.json`` (beside this module): name -> Device, each
    with source ``preset:NAME``; a key starting with ``_`` is a note, not a field."""
    data = json.loads((path or Path(__file__).with_name("presets.json")).read_text())
    return {name: Device.from_dict({k: v for k, v in d.items() if not k.startswith("_")},
                                   source=f"preset:{name}") for name, d in data.items()}


# the 2-core development machine's PoCL CPU device, and an H100 as NVIDIA's OpenCL reports it
PRESETS: dict[str, Device] = load_presets()
POCL_CPU, H100 = PRESETS["pocl-cpu"], PRESETS["h100"]
DEFAULT_DEVICE = POCL_CPU
