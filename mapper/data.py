"""The data a program runs on: inputs of its declared shapes (random or checked), the
reference interpreter's result, and the tolerance the comparison allows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from codegen.program import DTYPES
from ir.nodes import Lambda
from mapper.errors import InputError, value_text


def random_inputs(program: Lambda, sizes: Mapping[str, int], seed: int = 0) -> dict:
    """Random float32 inputs of the program's declared shapes (scalars as 1-element)."""
    from ir.types import shape_of

    rng = np.random.default_rng(seed)
    out = {}
    for p in program.params:
        dims, _ = shape_of(p.type)
        shape = tuple(d.evaluate(sizes) for d in dims)
        out[p.name] = rng.standard_normal(shape or (1,)).astype(np.float32)
    return out


def reduction_tolerance(reference) -> dict[str, float]:
    """Comparison tolerance for results of long float32 reductions against a float64
    reference: ``rtol=1e-4`` and ``atol=1e-5 * max|reference|``. Summing thousands of
    terms in float32 can leave an output that cancels to ~0 off by a few 1e-4 (seen:
    4e-4 on a 4608-term sum), while a wrong element is off by the outputs' scale. The
    scale is over the finite values (an infinity or NaN in the reference would make every
    finite value match)."""
    ref = np.abs(np.asarray(reference, dtype=np.float64))
    ref = ref[np.isfinite(ref)]
    scale = float(ref.max()) if ref.size else 0.0
    return {"rtol": 1e-4, "atol": max(1e-4, 1e-5 * scale)}


def _declared_shape(param, sizes: Mapping[str, int]) -> tuple[tuple[int, ...], str]:
    from ir.types import shape_of

    dims, elem = shape_of(param.type)
    scalar = getattr(elem, "name", "float")
    return tuple(d.evaluate(sizes) for d in dims), scalar if scalar in DTYPES else "float"


def check_inputs(program: Lambda, sizes: Mapping[str, int],
                 inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``inputs`` as arrays of the program's declared shapes and element types (a scalar
    input as a 1-element array); ``InputError`` names what is missing, unknown or of the
    wrong shape."""
    if not isinstance(inputs, Mapping) or not all(isinstance(k, str) for k in inputs):
        raise InputError(f"inputs must be a dict from the program's input names to arrays "
                         f"(or None for random ones); got {value_text(inputs)}")
    names = [p.name for p in program.params]
    unknown = sorted(set(inputs) - set(names))
    missing = [n for n in names if n not in inputs]
    if unknown or missing:
        raise InputError("the inputs do not match the program's: "
                         + "; ".join(x for x in (
                             f"unknown {', '.join(unknown)}" if unknown else "",
                             f"missing {', '.join(missing)}" if missing else "") if x)
                         + f" (the program's inputs are {', '.join(names)})")
    out: dict[str, np.ndarray] = {}
    for p in program.params:
        shape, scalar = _declared_shape(p, sizes)
        try:
            a = np.asarray(inputs[p.name], dtype=DTYPES[scalar])
        except (TypeError, ValueError) as e:
            raise InputError(f"input {p.name} is not an array of {scalar}: {e}") from None
        if not shape:
            if a.size != 1:
                raise InputError(f"input {p.name} is a scalar ({p.type}); got an array of "
                                 f"shape {a.shape}")
            a = a.reshape(1)
        elif a.shape != shape:
            raise InputError(f"input {p.name} : {p.type} has shape {shape} for these sizes; "
                             f"got shape {a.shape}")
        out[p.name] = a
    return out


def reference_result(program: Lambda, inputs: Mapping[str, np.ndarray],
                     sizes: Mapping[str, int]) -> np.ndarray:
    """What the reference interpreter computes for ``inputs`` (1-element scalars
    unwrapped)."""
    from ir.interp import evaluate

    scalars = {p.name for p in program.params if not _declared_shape(p, sizes)[0]}
    return evaluate(program, {k: (v.reshape(())[()] if k in scalars else v)
                              for k, v in inputs.items()}, sizes)


def conv2d_reference(x: np.ndarray, w: np.ndarray, stride: int = 1,
                     pad: int = 0) -> np.ndarray:
    """A direct convolution in float64 (``x`` HWC, ``w`` MKKC, zero padding ``pad`` on
    each side) -> float32 ``[outH, outW, M]``: the witness convolution kernels are checked
    against."""
    H, W, _ = x.shape
    M, K = w.shape[0], w.shape[1]
    xp = np.pad(x.astype(np.float64), ((pad, pad), (pad, pad), (0, 0)))
    oh, ow = (H + 2 * pad - K) // stride + 1, (W + 2 * pad - K) // stride + 1
    out = np.zeros((oh, ow, M))
    for i in range(K):
        for j in range(w.shape[2]):
            patch = xp[i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]
            out += patch @ w[:, i, j, :].astype(np.float64).T
    return out.astype(np.float32)

