"""Convolution shapes are checked when a ``ConvLayer`` is made: one typed error, one line."""

from __future__ import annotations

import numpy as np
import pytest

from ir.conv_layer import VGG16_LAYERS, ConvLayer, ConvShapeError, parse_layer
from ir.errors import LiftmapError


@pytest.mark.parametrize("sizes, out", [
    (dict(C=8, H=14, W=14, M=8), (14, 14)),                   # 3x3, stride 1, pad 1
    (dict(C=2, H=7, W=7, M=2, K=3, S=2, P=1), (4, 4)),        # stride 2, odd input
    (dict(C=3, H=8, W=6, M=4, K=3, S=2, P=0), (3, 2)),        # stride 2, no padding
    (dict(C=16, H=5, W=9, M=4, K=1, S=1, P=0), (5, 9)),       # 1x1 kernel, no padding
    (dict(C=16, H=5, W=9, M=4, K=1, S=2, P=0), (3, 5)),       # 1x1 kernel, stride 2
    (dict(C=1, H=1, W=1, M=1, K=3, S=1, P=1), (1, 1)),        # K == H + 2P: one output
    (dict(C=1, H=3, W=3, M=1, K=3, S=1, P=0), (1, 1)),        # K == H, no padding
])
def test_valid_shapes(sizes, out):
    layer = ConvLayer("ok", **sizes)
    assert (layer.out_h, layer.out_w) == out
    assert layer.flops > 0


def test_existing_layers_stay_valid():
    for layer in VGG16_LAYERS:
        assert layer.out_h == layer.H and layer.out_w == layer.W
    assert parse_layer("24/8").H == 1  # 14 // 8 = 1: 1 + 2 >= 3, still a convolution


def test_numpy_integers_are_stored_as_int():
    layer = ConvLayer("np", np.int64(4), np.int32(6), 6, 4)
    assert type(layer.C) is int and type(layer.H) is int
    assert layer.sizes() == {"H": 6, "W": 6, "C": 4, "M": 4, "K": 3, "S": 1, "P": 1}


@pytest.mark.parametrize("sizes, needle", [
    (dict(C=0, H=8, W=8, M=8), "C=0"),
    (dict(C=8, H=0, W=8, M=8), "H=0"),
    (dict(C=8, H=8, W=-1, M=8), "W=-1"),
    (dict(C=8, H=8, W=8, M=0), "M=0"),
    (dict(C=8, H=8, W=8, M=8, K=0), "K=0"),
    (dict(C=8, H=8, W=8, M=8, S=0), "S=0"),
    (dict(C=8, H=8, W=8, M=8, P=-1), "P=-1"),
    (dict(C=8, H=4, W=4, M=8, K=9, P=0), "K=9 is larger than the padded input (H + 2P = 4)"),
    (dict(C=8, H=4, W=4, M=8, K=9, P=2), "K=9 is larger than the padded input (H + 2P = 8)"),
    (dict(C=8, H=9, W=2, M=8, K=5, P=1), "K=5 is larger than the padded input (W + 2P = 4)"),
    (dict(C=8.0, H=8, W=8, M=8), "C=8.0 is not an integer"),
    (dict(C=8, H="8", W=8, M=8), "H='8' is not an integer"),
    (dict(C=8, H=8, W=8, M=8, S=True), "S=True is not an integer"),
    (dict(C=8, H=8, W=8, M=8, P=None), "P=None is not an integer"),
])
def test_invalid_shapes_raise_one_typed_line(sizes, needle):
    with pytest.raises(ConvShapeError) as info:
        ConvLayer("custom", **sizes)
    msg = str(info.value)
    assert msg.startswith("convolution custom: ")
    assert needle in msg
    assert "give" in msg  # says what to do
    assert "\n" not in msg
    assert isinstance(info.value, LiftmapError) and isinstance(info.value, ValueError)


def test_kernel_message_says_the_largest_kernel():
    with pytest.raises(ConvShapeError, match=r"give K <= 7 or more padding"):
        ConvLayer("custom", C=1, H=5, W=5, M=1, K=9, P=1)


def test_a_scale_that_empties_the_layer_is_a_value_error():
    with pytest.raises(ConvShapeError, match=r"convolution 24,26,28/16: H=0"):
        parse_layer("24/16")
    with pytest.raises(ValueError):  # what the CLI and parse_layer's callers catch
        parse_layer("24/16")
