"""The device a program is mapped for, from the CLI's ``--device`` text (:func:`resolve`).

The description itself, :class:`Device` with its presets (:data:`PRESETS`: ``pocl-cpu``,
``h100``), :data:`DEFAULT_DEVICE` and :func:`stable_memory_size`, is
:mod:`codegen.device_description`'s; every name of it is importable from here, where the
mapper, the experiments and the tests import them. :func:`resolve` is here because it
needs both the descriptions and the live devices (:func:`codegen.device.select_device`):
this module depends on :mod:`codegen.device`, which depends on the descriptions only
(issue 23: ``target`` and ``device`` imported each other).
"""

from __future__ import annotations

import os

from codegen.device import ENV_VAR, select_device
from codegen.device_description import (
    DEFAULT_DEVICE,
    H100,
    POCL_CPU,
    PRESETS,
    VOLATILE_MEMORY_FIELDS,
    Device,
    DeviceDescriptionError,
    stable_memory_size,
)
from codegen.opencl_env import DeviceError

__all__ = [
    "DEFAULT_DEVICE", "H100", "POCL_CPU", "PRESETS", "VOLATILE_MEMORY_FIELDS", "Device",
    "DeviceDescriptionError", "resolve", "stable_memory_size",
]


def resolve(spec: str | Device | None) -> Device:
    """A ``Device`` from the CLI's ``--device`` text: a preset name (``pocl-cpu``,
    ``h100``), a path to a JSON description, or a live OpenCL device spec (as
    ``codegen.device.select_device`` takes it). ``None``: the device ``LIFTMAP_DEVICE``
    names (``DeviceDescriptionError`` when it names none, as for ``--device``), else the
    live default device if OpenCL has one, else :data:`DEFAULT_DEVICE`."""
    if isinstance(spec, Device):
        return spec
    if spec is not None and spec.lower() in PRESETS:
        return PRESETS[spec.lower()]
    if spec is not None and (spec.endswith(".json") or os.path.sep in spec):
        return Device.load(spec)
    try:
        return Device.from_opencl(select_device(spec))
    except DeviceError as e:
        if spec is None and not os.environ.get(ENV_VAR):
            return DEFAULT_DEVICE
        raise DeviceDescriptionError(
            f"{e}\n(--device also takes a preset: {', '.join(PRESETS)}, or a JSON "
            "description saved with `mapper device --save FILE`)") from None

