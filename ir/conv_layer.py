"""Convolution layer shapes (:class:`ConvLayer`: checked on construction, or made from named
sizes with :meth:`ConvLayer.from_sizes`) and the layer presets: VGG-16's nine unique
convolution layers (GPGPU'20 Table 3), by number, optionally scaled (:func:`parse_layer`:
``"19"``, ``"19/2"``)."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass

from ir.errors import LiftmapError

__all__ = [
    "VGG16_LAYERS",
    "ConvLayer",
    "ConvPresetError",
    "ConvShapeError",
    "parse_layer",
    "vgg16_layer",
]


class ConvShapeError(LiftmapError, ValueError):
    """A convolution layer's sizes that no convolution has (the message names the layer and
    the size, and says what to give instead), or sizes that name no size of a convolution."""


class ConvPresetError(LiftmapError, ValueError):
    """A layer that no preset table has, or a scale that is not a whole number of 1 or more
    (the message names the layers there are)."""


_CONV_SIZE_MEANING = {"C": "input channels", "H": "input height", "W": "input width",
                      "M": "kernels (output channels)", "K": "kernel size", "S": "stride",
                      "P": "padding"}
_CONV_DEFAULTS = {"K": 3, "S": 1, "P": 1}


@dataclass(frozen=True)
class ConvLayer:
    """A convolution layer: input ``C x H x W``, ``M`` kernels ``K x K``, stride S, pad P.

    The sizes are checked on construction: integers (numpy's included; stored as ``int``),
    ``C, H, W, M, K, S >= 1``, ``P >= 0``, and the kernel fits the padded input
    (``K <= H + 2P`` and ``K <= W + 2P``, so the output has at least one row and column);
    else :class:`ConvShapeError`, one line naming the layer and the size.
    """

    name: str
    C: int
    H: int
    W: int
    M: int
    K: int = 3
    S: int = 1
    P: int = 1

    def __post_init__(self) -> None:
        where = f"convolution {self.name}"
        for key, meaning in _CONV_SIZE_MEANING.items():
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise ConvShapeError(f"{where}: {key}={v!r} is not an integer: give the "
                                     f"{meaning} as a whole number")
            object.__setattr__(self, key, int(v))
            least = 0 if key == "P" else 1
            if v < least:
                raise ConvShapeError(f"{where}: {key}={v} is less than {least}: give "
                                     f"{key} >= {least} ({meaning})")
        for side in ("H", "W"):
            padded = getattr(self, side) + 2 * self.P
            if self.K > padded:
                raise ConvShapeError(
                    f"{where}: K={self.K} is larger than the padded input ({side} + 2P = "
                    f"{padded}): give K <= {padded} or more padding")

    @classmethod
    def from_sizes(cls, sizes: Mapping[str, int], name: str | None = None) -> ConvLayer:
        """The layer of named sizes: ``C, H, W, M`` given, ``K, S, P`` 3, 1, 1 unless given
        (``{"C": 64, "H": 56, "W": 56, "M": 128, "S": 2}``); named ``CxHxW-Mm-Kk-Ss-Pp``
        unless ``name`` is given. :class:`ConvShapeError` for a name that is no size of a
        convolution, a missing size, or sizes no convolution has."""
        unknown = sorted(set(sizes) - _CONV_SIZE_MEANING.keys())
        if unknown:
            raise ConvShapeError(f"conv has no size {', '.join(unknown)}: its sizes are C, H, "
                                 "W, M (input channels, height, width, kernels) and K, S, P "
                                 "(kernel size 3, stride 1, padding 1 unless given)")
        need = ("C", "H", "W", "M")
        missing = [k for k in need if k not in sizes]
        if missing:
            raise ConvShapeError(f"conv needs sizes {', '.join(need)} (K, S, P optional); "
                                 f"missing {', '.join(missing)}")
        v = {**_CONV_DEFAULTS, **sizes}
        if name is None:
            name = f"{v['C']}x{v['H']}x{v['W']}-M{v['M']}-K{v['K']}-S{v['S']}-P{v['P']}"
        return cls(name, v["C"], v["H"], v["W"], v["M"], v["K"], v["S"], v["P"])

    @property
    def out_h(self) -> int:
        return (self.H + 2 * self.P - self.K) // self.S + 1

    @property
    def out_w(self) -> int:
        return (self.W + 2 * self.P - self.K) // self.S + 1

    @property
    def flops(self) -> int:
        """2 * multiply-adds, as the papers count a layer's work."""
        return 2 * self.out_h * self.out_w * self.M * self.C * self.K * self.K

    def sizes(self) -> dict[str, int]:
        return {"H": self.H, "W": self.W, "C": self.C, "M": self.M, "K": self.K,
                "S": self.S, "P": self.P}


# ------------------------------------------------------------------ presets

# GPGPU'20 Table 3: the nine unique VGG-16 convolution layer configurations, each named by
# the numbers of the layers that have its shape ("12,14": layers 12 and 14)
VGG16_LAYERS: tuple[ConvLayer, ...] = (
    ConvLayer("0", 3, 224, 224, 64),
    ConvLayer("2", 64, 224, 224, 64),
    ConvLayer("5", 64, 112, 112, 128),
    ConvLayer("7", 128, 112, 112, 128),
    ConvLayer("10", 128, 56, 56, 256),
    ConvLayer("12,14", 256, 56, 56, 256),
    ConvLayer("17", 256, 28, 28, 512),
    ConvLayer("19,21", 512, 28, 28, 512),
    ConvLayer("24,26,28", 512, 14, 14, 512),
)

def vgg16_layer(name: str) -> ConvLayer:
    """A VGG-16 layer by its number, e.g. ``vgg16_layer("19")``; :class:`ConvPresetError`
    (a ``ValueError``) otherwise."""
    for layer in VGG16_LAYERS:
        if name == layer.name or name in layer.name.split(","):
            return layer
    raise ConvPresetError(
        f"no VGG-16 layer {name!r}; layers: {[la.name for la in VGG16_LAYERS]}")


def parse_layer(text: str) -> ConvLayer:
    """``"19"`` or ``"19/2"`` (a VGG-16 layer, H and W divided by 2) -> ``ConvLayer``;
    :class:`ConvPresetError` (a ``ValueError``) for an unknown layer or scale, and
    :class:`ConvShapeError` for a scale that leaves no convolution."""
    name, _, scale = text.partition("/")
    base = vgg16_layer(name)
    try:
        k = int(scale) if scale else 1
    except ValueError:
        raise ConvPresetError(f"the layer scale must be a whole number, got {scale!r}") \
            from None
    if k < 1:
        raise ConvPresetError(f"the layer scale must be >= 1, got {k}")
    if k == 1:
        return base
    return ConvLayer(f"{base.name}/{k}", base.C, base.H // k, base.W // k, base.M, base.K,
                     base.S, base.P)
