"""Tune the tiled matmul of examples/kernels/matmul.cl with mapper.explore.tune.tune_kernel, the way
Kernel Tuner's tune_kernel is called (run from the repository root):

    .venv/bin/python examples/tune_matmul.py [N] [BUDGET]
"""

import sys

import numpy as np

from mapper.explore.tune import tune_kernel

n = int(sys.argv[1]) if len(sys.argv) > 1 else 256
budget = int(sys.argv[2]) if len(sys.argv) > 2 else 20
rng = np.random.default_rng(0)
A = rng.random((n, n), dtype=np.float32)
B = rng.random((n, n), dtype=np.float32)
C = np.zeros((n, n), dtype=np.float32)

tune_params = {
    "block_size_x": [8, 16, 32, 64],
    "block_size_y": [1, 2, 4, 8],
    "tile_size_x": [1, 2, 4, 8],
    "tile_size_y": [1, 2, 4, 8],
}
res = tune_kernel(
    "matmul", "examples/kernels/matmul.cl", (n, n), [C, A, B, np.int32(n)], tune_params,
    restrictions=["block_size_x * block_size_y >= 16", "tile_size_x * tile_size_y <= 32"],
    grid_div_x=["block_size_x", "tile_size_x"], grid_div_y=["block_size_y", "tile_size_y"],
    answer=[A @ B, None, None, None], atol=1e-3, flops=2 * n**3, budget=budget,
    store="results/tune-matmul.sqlite")
print(res.summary())
