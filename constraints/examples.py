"""Tuning spaces of auto-tuners' examples, shared by the tests and ``experiments.bench_space``.

``DEDISPERSION_PARAMS`` and ``DEDISPERSION_RESTRICTIONS``: Kernel Tuner's dedispersion example
(restrictions as strings, in the form :class:`constraints.space.SearchSpace` accepts).
"""

from __future__ import annotations

__all__ = ["DEDISPERSION_PARAMS", "DEDISPERSION_RESTRICTIONS"]

DEDISPERSION_PARAMS: dict[str, list[int]] = {
    "block_size_x": [1, 2, 4, 8, 16, 32],
    "block_size_y": list(range(32, 257, 8)),
    "block_size_z": [1],
    "tile_size_x": [1, 2, 3, 4],
    "tile_size_y": list(range(1, 9)),
    "tile_stride_x": [0, 1],
    "tile_stride_y": [0, 1],
    "loop_unroll_factor_channel": [0],
}
DEDISPERSION_RESTRICTIONS: list[str] = [
    "32 <= block_size_x * block_size_y <= 1024",
    "tile_size_x > 1 or tile_stride_x == 0",
    "tile_size_y > 1 or tile_stride_y == 0",
]
