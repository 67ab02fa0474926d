"""The TVM benchmark's parts that need no TVM (experiments/bench_tvm.py): the layer from
``--layer`` or ``--sizes`` as ``mapper explore conv`` reads them, its NCHW shapes, the
conversion of liftmap's HWC/MKKC inputs to NCHW/MCKK (checked by computing the convolution
both ways), the target dict, the budget and the best-so-far curve's reach."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from experiments import bench_tvm as bt
from mapper.data import conv2d_reference


def test_layer_from_layer_or_sizes() -> None:
    assert bt.parse_layer_args("19", None).sizes() == {"C": 512, "H": 28, "W": 28, "M": 512,
                                                       "K": 3, "S": 1, "P": 1}
    assert bt.parse_layer_args("19/2", None).H == 14
    assert bt.parse_layer_args(None, None).C == 512  # layer 19 by default
    s = bt.parse_layer_args(None, "C=64,H=56,W=56,M=128,S=2")
    assert (s.C, s.H, s.W, s.M, s.K, s.S, s.P) == (64, 56, 56, 128, 3, 2, 1)
    assert bt.parse_layer_args(None, "C=8,H=7,W=7,M=4,K=1,P=0").P == 0


@pytest.mark.parametrize("layer, sizes, says", [
    ("19", "C=1,H=3,W=3,M=1", "not both"),
    (None, "C=1,H=3,W=3", "missing M"),
    (None, "C=1,H=3,W=3,M=1,Q=2", "no size Q"),
    (None, "C=1,H=x,W=3,M=1", "NAME=INTEGER"),
])
def test_bad_layer_arguments_say_what_is_wrong(layer, sizes, says) -> None:
    with pytest.raises(ValueError, match=says):
        bt.parse_layer_args(layer, sizes)


def test_nchw_shapes_and_conversion_compute_the_same_convolution() -> None:
    layer = bt.parse_layer_args(None, "C=3,H=7,W=6,M=4,S=2,P=1")
    sh = bt.nchw_shapes(layer)
    assert sh == {"data": (1, 3, 7, 6), "kernel": (4, 3, 3, 3),
                  "output": (1, 4, layer.out_h, layer.out_w)}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 6, 3)).astype(np.float32)  # HWC
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)  # MKKC
    xn, wn = bt.to_nchw(x, w)
    assert xn.shape == sh["data"] and wn.shape == sh["kernel"]
    xp = np.pad(xn[0].astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    out = np.zeros(sh["output"][1:])
    for i in range(layer.out_h):
        for j in range(layer.out_w):
            patch = xp[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3]
            out[:, i, j] = np.einsum("ckl,mckl->m", patch, wn)
    ref = conv2d_reference(x, w, 2, 1)  # liftmap's reference: (H', W', M)
    np.testing.assert_allclose(out.transpose(1, 2, 0), ref, rtol=1e-5, atol=1e-5)


def test_target_budget_and_curve() -> None:
    assert bt.llvm_target("znver3", 2) == {"kind": "llvm", "mcpu": "znver3", "num-cores": 2}
    assert bt.parse_seconds("10m") == 600 and bt.parse_seconds("90") == 90
    assert bt.parse_seconds("15s") == 15 and bt.parse_seconds("0.5h") == 1800
    with pytest.raises(ValueError):
        bt.parse_seconds("0s")
    c = bt.Curve([(1.0, math.inf), (2.0, 4.0), (3.0, 1.08), (5.0, 1.0)])
    assert c.best == 1.0
    assert c.reach(0.9) == (3, 3.0)  # 1.08 <= 1 / 0.9
    assert c.reach(0.95) == (4, 5.0)
    assert bt.Curve([(1.0, math.inf)]).reach(0.9) is None


def test_matmul_sizes_read_as_one_or_three_numbers() -> None:
    assert bt.parse_matmul("1024") == (1024, 1024, 1024)
    assert bt.parse_matmul("64, 32,16") == (64, 32, 16)
    for bad in ("0", "64,32", "a", "64,32,-1", ""):
        with pytest.raises(ValueError, match="M,N,K or one size"):
            bt.parse_matmul(bad)


def test_matmul_takes_no_layer(capsys) -> None:
    assert bt.main(["--matmul", "16", "--layer", "19"]) == 2
    assert "--matmul takes no --layer" in capsys.readouterr().err


@pytest.mark.slow
def test_the_matmul_is_searched_checked_and_timed_beside_numpy(tmp_path, capsys) -> None:
    out = tmp_path / "m.json"
    rc = bt.main(["--matmul", "32,16,8", "--budget", "5s", "--rounds", "1", "--repeats", "1",
                  "--settle", "0", "--population", "16", "--trials-per-iter", "8",
                  "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "matmul 32x8 by 8x16" in text and "liftmap: " in text
    assert re.search(r"GFLOP/s, median of 1 interleaved rounds x 1: liftmap [\d.]+ .*"
                     r"numpy [\d.]+ .*liftmap / numpy [\d.]+x", text), text
    saved = json.loads(out.read_text())
    assert saved["matmul"] == {"M": 32, "N": 16, "K": 8} and saved["flops"] == 2 * 32 * 16 * 8


def test_the_table_reads_the_runs_json_files(tmp_path, capsys) -> None:
    conv = {"layer": {"C": 64, "M": 128, "H": 56, "W": 56, "K": 3, "S": 2, "P": 1},
            "tvm": {"trials": 64}, "liftmap": {"variant": "kernels", "evaluated": 500},
            "liftmap_gflops": {"median": 200.0}, "TVM_gflops": {"median": 100.0},
            "PyTorch_gflops": {"median": 250.0}}
    mm = {"matmul": {"M": 8, "N": 4, "K": 2}, "liftmap_gflops": {"median": 30.0},
          "TVM_gflops": {"median": 60.0}, "numpy_gflops": {"median": 60.0}}
    files = []
    for name, run in (("conv", conv), ("mm", mm)):
        files.append(str(tmp_path / f"{name}.json"))
        with open(files[-1], "w") as fh:
            json.dump(run, fh)
    assert bt.main(["--table", *files]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2].startswith("| conv (64 -> 128, 56x56, stride 2) | 64 | 100.0 | 200.0 "
                             "(kernels, 500) | PyTorch 250.0 | 2.00x | 0.80x |")
    assert "| mm (matmul 8x4x2) | - | 60.0 |" in out[3] and out[3].endswith("| 0.50x | 0.50x |")
    assert out[4].endswith("| **1.00x** | **0.63x** |")  # geometric means
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert bt.main(["--table", str(bad)]) == 2
    assert "not a bench_tvm --json file" in capsys.readouterr().err
