"""Random orders of a space's indices: uniform draws of distinct indices and seeded
bijections on ``range(count)`` that visit every index once.

``SearchSpace.iter_random`` shuffles an index array up to :data:`MATERIALISE_MAX` and above
walks a :class:`Feistel` bijection lazily; ``SearchSpace.sample`` draws with
:func:`random_indices`. Counts of 2**63 and more (Python ints) are handled without numpy.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import numpy as np

__all__ = ["MATERIALISE_MAX", "Feistel", "random_indices"]

MATERIALISE_MAX = 1_000_000
"""``iter_random`` shuffles an index array up to this count, above it uses a Feistel network."""


def random_indices(
    count: int, k: int, seed: int | None, replace: bool
) -> Sequence[int] | np.ndarray:
    """``k`` indices drawn uniformly from ``range(count)`` (distinct unless ``replace``); an
    int64 array when ``count < 2**63``."""
    if count < 1 << 63:
        rng = np.random.default_rng(seed)
        if replace:
            return rng.integers(0, count, size=k, dtype=np.int64)
        return rng.choice(count, size=k, replace=False)
    rnd = random.Random(seed)
    if replace:
        return [rnd.randrange(count) for _ in range(k)]
    # count >= 2**63 >> k: distinct uniform draws by rejection (random.sample needs len())
    chosen: dict[int, None] = {}
    while len(chosen) < k:
        chosen.setdefault(rnd.randrange(count))
    return list(chosen)


class Feistel:
    """Seeded pseudo-random bijection on range(n): a balanced 6-round Feistel network on the
    smallest even number of bits covering n, restricted to range(n) by cycle walking."""

    def __init__(self, n: int, seed: int | None) -> None:
        bits = max(2, (n - 1).bit_length())
        bits += bits % 2
        self.n = n
        self.half = bits // 2
        self.mask = (1 << self.half) - 1
        self.nbytes = max(1, (self.half + 7) // 8)
        rnd = random.Random(seed)
        self.keys = [rnd.getrandbits(128).to_bytes(16, "little") for _ in range(6)]

    def _round(self, key: bytes, x: int) -> int:
        h = hashlib.blake2b(x.to_bytes(self.nbytes, "little"), key=key, digest_size=16)
        return int.from_bytes(h.digest(), "little") & self.mask

    def _permute(self, x: int) -> int:
        left, right = x >> self.half, x & self.mask
        for key in self.keys:
            left, right = right, left ^ self._round(key, right)
        return (left << self.half) | right

    def __call__(self, i: int) -> int:
        x = self._permute(i)
        while x >= self.n:
            x = self._permute(x)
        return x
