"""GPGPU'20's hand mapping of the partial convolution and its hand-picked tuning (Table 4),
as the paper reproduction, the benchmarks and the demo use them. The layers themselves (its
Table 3, VGG-16's nine unique convolution layers) are library data: ``ir.conv_layer``
(``VGG16_LAYERS``, ``vgg16_layer``, ``parse_layer``).
"""

from __future__ import annotations

from ir.conv_layer import ConvLayer
from ir.pipeline import Pipeline
from mapper.candidates import default_stage_mappings, first_mapping

# Hand-picked tuning values of GPGPU'20 Table 4 (layer 7) and the paper's hand mapping.
PAPER_TUNING_LAYER7 = {"theta": 5, "kappa": 4, "sigma": 3, "omega": 144, "rho": 11, "v": 4}
PAPER_HAND_MAPPING = {"T": "mapWrg(1)", "G": "mapWrg(0)", "W": "mapLcl(1)", "C": "mapLcl(0)"}


def conv_stage_mappings(pipeline: Pipeline) -> dict[str, dict[str, int]]:
    """The GPGPU'20 hand mapping for the partial convolution (mapWrg(1), mapWrg(0),
    mapLcl(1), mapLcl(0), inner maps sequential); the other stages as the library maps the
    stages it does not explore (``mapper.candidates.default_stage_mappings``)."""
    out = default_stage_mappings(pipeline, skip=("partial",))
    out["partial"] = first_mapping(pipeline.stage("partial").program, PAPER_HAND_MAPPING)
    return {st.name: out[st.name] for st in pipeline.stages}


def paper_like_tuning(layer: ConvLayer, theta: int = 5, v: int = 1) -> dict[str, int]:
    """Tuning values in the spirit of GPGPU'20 Table 4 for any layer: the paper's values for
    layer 7, else tile ``theta``, the smallest padding ``rho`` that makes the tiles fit,
    ``kappa`` in (4, 2, 1) dividing M, ``sigma`` in (3, 2, 1) dividing the windows per tile,
    ``omega`` the largest divisor of C*K*K up to 144 (and a multiple of ``v``)."""
    if (layer.C, layer.H, layer.W, layer.M, layer.K, layer.S, layer.P) == \
            (128, 112, 112, 128, 3, 1, 1):
        return {**PAPER_TUNING_LAYER7, "v": v}
    ts = theta - (layer.K - layer.S)
    rho = next(r for r in range(0, 10 * ts + 1)
               if (layer.H + 2 * layer.P + r - theta) % ts == 0
               and (layer.W + 2 * layer.P + r - theta) % ts == 0)
    n_wt = (theta - layer.K) // layer.S + 1
    ws = layer.C * layer.K * layer.K
    kappa = next(k for k in (4, 2, 1) if layer.M % k == 0)
    sigma = next(s for s in (3, 2, 1) if (n_wt * n_wt) % s == 0)
    omega = max(d for d in range(v, 145, v) if ws % d == 0)
    return {"theta": theta, "rho": rho, "kappa": kappa, "sigma": sigma, "omega": omega, "v": v}
