"""Winograd's F(2x2, 3x3) as a pipeline of plain programs (``ir.winograd``): its
transforms against the direct convolution (numpy, float64), the IR stages against them
(the reference interpreter), and the pipeline built and run on the device."""

from __future__ import annotations

import numpy as np
import pytest

from ir.conv_layer import ConvLayer
from ir.errors import InvalidOptionError
from ir.pipeline import run_pipeline
from ir.winograd import (
    applies,
    input_matrix,
    output_matrix,
    sizes,
    transform_weights,
    winograd_pipeline,
)
from mapper.data import conv2d_reference


@pytest.fixture(scope="module")
def pool():
    from codegen.worker import WorkerPool

    with WorkerPool() as p:
        yield p


def _data(H, W, C, M, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((H, W, C)).astype(np.float32),
            rng.standard_normal((M, 3, 3, C)).astype(np.float32))


def _winograd_numpy(x, w, m=2):
    """The stages as the programs state them, in float64 numpy: tiles over the padding
    below and right where m does not divide the output, their extra outputs cropped."""
    H, W, C = x.shape
    n = m + 2
    TH, TW = -(-H // m), -(-W // m)
    bt, at = input_matrix(m).astype(np.float64), output_matrix(m).astype(np.float64)
    pad = np.pad(x.astype(np.float64), ((1, m * TH - H + 1), (1, m * TW - W + 1), (0, 0)))
    tiles = np.stack([pad[m * i:m * i + n, m * j:m * j + n]
                      for i in range(TH) for j in range(TW)])  # [T][k][l][C]
    W1 = np.einsum("ik,tklc->itlc", bt, tiles)
    V = np.einsum("jl,itlc->ijtc", bt, W1).reshape(n * n, TH * TW, C)
    P = np.einsum("xtc,xcm->xtm", V, transform_weights(w, m).astype(np.float64))
    Z = np.einsum("ai,ijtm->atjm", at, P.reshape(n, n, TH * TW, -1))
    Y = np.einsum("bj,atjm->tabm", at, Z)
    M = w.shape[0]
    full = Y.reshape(TH, TW, m, m, M).transpose(0, 2, 1, 3, 4).reshape(m * TH, m * TW, M)
    return full[:H, :W]


@pytest.mark.parametrize("m,shape", [(2, (2, 2, 1, 1)), (2, (6, 4, 3, 5)), (2, (8, 10, 4, 2)),
                                     (4, (4, 4, 1, 1)), (4, (8, 12, 3, 5)),
                                     (2, (7, 5, 3, 2)), (4, (7, 7, 2, 3)), (4, (1, 6, 2, 2))])
def test_the_transforms_compute_the_direct_convolution(m, shape):
    x, w = _data(*shape)
    want = conv2d_reference(x, w, 1, 1).astype(np.float64)
    got = _winograd_numpy(x, w, m)
    assert got.shape == want.shape
    # float32 weights transformed in float64 and rounded once: float32 precision
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m,H,W", [(2, 4, 6), (4, 8, 12), (2, 5, 3), (4, 7, 5), (4, 3, 9)])
def test_the_pipeline_computes_the_direct_convolution_in_the_interpreter(m, H, W):
    """Output sizes that m divides, and others: the last tiles reach past the output and
    the crop stage drops what they computed there."""
    C, M = 3, 4
    x, w = _data(H, W, C, M, seed=1)
    inputs = {"inputData": x, "BT": input_matrix(m), "U": transform_weights(w, m),
              "AT": output_matrix(m)}
    got = np.asarray(run_pipeline(winograd_pipeline(m), inputs, sizes(H, W, C, M, m)))
    assert got.shape == (H, W, M)
    np.testing.assert_allclose(got, conv2d_reference(x, w, 1, 1), rtol=1e-4, atol=1e-4)


def test_the_crop_is_left_out_where_the_tiles_cover_the_output():
    crop = winograd_pipeline(4).stages[-1]
    assert crop.name == "crop"
    assert crop.identity_at(sizes(8, 12, 3, 4, 4))
    assert not crop.identity_at(sizes(7, 12, 3, 4, 4))
    assert not crop.identity_at(sizes(8, 13, 3, 4, 4))
    assert sizes(7, 13, 3, 4, 4) == {"TH": 2, "TW": 4, "H": 7, "W": 13, "C": 3, "M": 4}


def test_only_the_written_tiles():
    with pytest.raises(InvalidOptionError, match="m in \\(2, 4\\), not 3"):
        winograd_pipeline(3)
    assert applies(3, 1, 1, 28, 28, 4) and applies(3, 1, 1, 14, 14, 4)
    assert not applies(3, 1, 1, 12, 12, 3)


def test_the_transforms_run_their_innermost_maps_in_lanes():
    """The stages a search does not explore, mapped with ``lanes``: the map over channels
    (input) and over kernels (output) in vector lanes, the outer maps global; without
    ``lanes`` nothing is."""
    from mapper.candidates import default_stage_mappings
    from mapper.encoding import VEC

    maps = default_stage_mappings(winograd_pipeline(), skip=("gemm",), lanes=True)
    assert set(maps) == {"input_rows", "input_cols", "output_rows", "output_cols", "crop"}
    assert maps["input_rows"] == {"A": 32, "B": 31, "L": 30, "C": VEC}
    assert maps["input_cols"] == {"A": 32, "J": 31, "B": 30, "C": VEC}
    assert maps["output_rows"] == {"A": 32, "T": 31, "J": 30, "M": VEC}
    assert maps["output_cols"]["K"] == VEC and maps["output_cols"]["G"] == 32
    plain = default_stage_mappings(winograd_pipeline(), skip=("gemm",))
    assert all(VEC not in mp.values() for mp in plain.values())


def test_winograd_applies_to_3x3_stride_1_padding_1_of_any_size():
    assert applies(3, 1, 1, 28, 28) and applies(3, 1, 1, 7, 8) and applies(3, 1, 1, 6, 6, 4)
    # where the tiles past the output cost more products than Winograd saves
    assert not applies(3, 1, 1, 2, 2, 4) and not applies(3, 1, 1, 1, 1) and applies(3, 1, 1, 2, 2)
    assert not applies(3, 2, 1, 28, 28) and not applies(1, 1, 0, 28, 28)
    assert not applies(3, 1, 0, 8, 8) and not applies(3, 1, 1, 0, 8)
    with pytest.raises(InvalidOptionError, match="3x3 kernels"):
        transform_weights(np.zeros((4, 1, 1, 4), np.float32))
    from mapper.explore.task import winograd_task

    with pytest.raises(InvalidOptionError, match="stride 1"):
        winograd_task(ConvLayer("s2", 8, 8, 4, 4, 3, 2, 1))


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.parametrize("m,H,W", [(2, 8, 8), (4, 8, 8), (2, 7, 9), (4, 7, 7)])
def test_the_pipeline_runs_on_the_device_within_its_tolerance(pool, m, H, W):
    """A few candidates of the matrix products' stage, built through the public path and
    run against the float64 direct convolution within the Winograd tolerance; sizes m
    does not divide run the crop stage too."""
    from mapper.explore import explore
    from mapper.explore.options import ExploreOptions
    from mapper.explore.task import WINOGRAD_ERRORS, winograd_task

    task = winograd_task(ConvLayer("small", 32, H, W, 16, 3, 1, 1), m=m)
    direct = task.tolerance["rtol"] / WINOGRAD_ERRORS[m]
    assert direct == pytest.approx(1e-4)
    res = explore(task, strategy="solver", budget=6, pool=pool,
                  options=ExploreOptions.of(retime=0, seed=1))
    assert res.best is not None, res.counts
    assert "wrong-result" not in res.counts, res.counts


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_conv_variants_add_winograd_where_it_applies():
    from mapper.explore.task import conv_variants

    tasks = conv_variants(ConvLayer("a", 8, 8, 8, 8, 3, 1, 1))
    assert list(tasks) == ["window", "kernels", "winograd", "winograd4"]
    assert tasks["winograd"].stage == "gemm" and tasks["winograd"].name.endswith(":winograd")
    assert tasks["winograd4"].name.endswith(":winograd4")
    assert tasks["winograd4"].tolerance["rtol"] == 8 * tasks["winograd"].tolerance["rtol"]
    assert list(conv_variants(ConvLayer("a", 8, 2, 2, 8))) == ["window", "kernels", "winograd"]
    assert list(conv_variants(ConvLayer("s2", 8, 8, 8, 8, 3, 2, 1))) == ["window", "kernels"]
    assert "winograd" not in conv_variants(ConvLayer("a", 8, 8, 8, 8), winograd=False)


def _conv_tasks(*argv):
    from mapper.cli.args import build_parser
    from mapper.cli.explore import _explore_tasks

    return _explore_tasks(build_parser().parse_args(["explore", "conv", *argv]))


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_the_command_line_chooses_the_algorithm():
    from mapper.cli.common import CliError

    four, even, s2 = "C=8,H=8,W=8,M=8", "C=8,H=2,W=2,M=8", "C=8,H=8,W=8,M=8,S=2"
    assert list(_conv_tasks("--sizes", four)) == ["window", "kernels", "winograd", "winograd4"]
    assert list(_conv_tasks("--sizes", even)) == ["window", "kernels", "winograd"]
    assert list(_conv_tasks("--sizes", "C=8,H=7,W=7,M=8")) == ["window", "kernels",
                                                               "winograd", "winograd4"]
    assert list(_conv_tasks("--sizes", four, "--algorithm", "direct")) == ["window", "kernels"]
    assert list(_conv_tasks("--sizes", four, "--algorithm", "winograd")) == ["winograd"]
    assert list(_conv_tasks("--sizes", four, "--algorithm", "winograd4")) == ["winograd4"]
    assert list(_conv_tasks("--sizes", four, "--vectorise", "kernels")) == ["kernels"]
    assert list(_conv_tasks("--sizes", s2)) == ["window", "kernels"]  # where it applies only
    with pytest.raises(CliError, match="stride 1.*--algorithm direct or auto"):
        _conv_tasks("--sizes", s2, "--algorithm", "winograd")
    with pytest.raises(CliError, match="no less than the direct convolution on a 2x2"):
        _conv_tasks("--sizes", even, "--algorithm", "winograd4")
    with pytest.raises(CliError, match="does not go with --algorithm winograd"):
        _conv_tasks("--sizes", four, "--algorithm", "winograd", "--vectorise", "window")


def test_algorithm_goes_with_conv(capsys):
    from mapper.cli import main

    rc = main(["explore", "examples/cc22_listing3.lift", "--sizes", "N=1024",
               "--algorithm", "winograd"])
    assert rc == 2 and "--algorithm goes with the program name conv" in capsys.readouterr().err


def test_stages_nobody_tunes_take_the_devices_native_width():
    """The transforms (not explored) run their lanes at the device's preferred width where
    it divides (16 on an AVX-512 CPU), the public default 8 otherwise; the explored stage
    keeps the widths it is given."""
    import dataclasses

    from codegen.target import DEFAULT_DEVICE
    from mapper.candidates import build_pipeline, default_stage_mappings, native_lanes

    pipe = winograd_pipeline()
    maps = default_stage_mappings(pipe, skip=("gemm",), lanes=True)
    maps["gemm"] = {"D": 32, "E": 31, "F": 30}
    sizes = {"TH": 2, "TW": 2, "H": 4, "W": 4, "C": 32, "M": 48}
    for pref, want in ((16, 16), (8, 8), (1, 8)):
        dev = dataclasses.replace(DEFAULT_DEVICE, preferred_vector_width_float=pref)
        assert native_lanes(dev)[0] == max(pref, 8)
        prog = build_pipeline(pipe, maps, sizes, device=dev, explored="gemm")
        src = {k.name: k.source for k in prog.kernels}
        assert f"vC={want}" in src["input_rows"] and f"vC={want}" in src["input_cols"]
        assert f"vM={want}" in src["output_rows"] and f"vK={want}" in src["output_cols"]
    # 48 kernels: 16 divides them, so the output stages take 16; 24 only 8
    dev = dataclasses.replace(DEFAULT_DEVICE, preferred_vector_width_float=16)
    prog = build_pipeline(pipe, maps, {**sizes, "M": 24}, device=dev, explored="gemm")
    assert "vK=8" in {k.name: k.source for k in prog.kernels}["output_cols"]


@pytest.mark.slow
@pytest.mark.opencl
def test_explore_conv_algorithm_winograd4_has_its_own_store(tmp_path, capsys):
    import json

    from mapper.cli import main

    store = tmp_path / "conv.sqlite"
    rc = main(["explore", "conv", "--sizes", "C=8,H=8,W=8,M=16", "--budget", "2",
               "--store", str(store), "--algorithm", "winograd4", "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    doc = json.loads(out.out)
    assert doc["store"] == str(tmp_path / "conv.winograd4.sqlite") and doc["candidates"] == 2
    assert not store.exists()  # the direct variants did not run


def test_a_variant_by_its_name():
    from mapper.explore.task import conv_task

    layer = ConvLayer("a", 8, 8, 8, 8)
    assert conv_task(layer, "winograd4").name.endswith(":winograd4")
    assert conv_task(layer, "kernels").name.endswith(":kernels")
    with pytest.raises(InvalidOptionError, match="no convolution variant 'lanes'"):
        conv_task(layer, "lanes")
    with pytest.raises(InvalidOptionError, match="layer b: F.4x4, 3x3. would multiply no"):
        conv_task(ConvLayer("b", 8, 2, 2, 8), "winograd4")
