"""Hand-written OpenCL programs (``CompiledProgram``s) in the layout of the IR programs
(input ``[H][W][C]``, weights ``[M][K][K][C]``, output ``[outH][outW][M]``): a vector add, a
naive direct convolution, a tiled one with a local-memory barrier and a register-tiled one,
with the random inputs and float64 reference they are checked against. They test the runner
and are the baseline the generated kernels are measured against (labelled "hand-written"
wherever they are reported)."""

from __future__ import annotations

import numpy as np

from codegen.launch import FREE_GROUP_MOST, divisor_local_size
from codegen.program import Buffer, CompiledProgram, Kernel
from ir.conv_layer import ConvLayer


def im2col_conv(x: np.ndarray, w: np.ndarray, stride: int = 1, pad: int = 1) -> np.ndarray:
    """``x: [H, W, C]``, ``w: [M, K, K, C]`` -> ``[outH, outW, M]`` by im2col + one matmul."""
    H, W, C = x.shape
    M, K, _, _ = w.shape
    xp = np.pad(x, ((pad, pad), (pad, pad), (0, 0)))
    oh, ow = (H + 2 * pad - K) // stride + 1, (W + 2 * pad - K) // stride + 1
    s0, s1, s2 = xp.strides
    cols = np.lib.stride_tricks.as_strided(
        xp, (oh, ow, K, K, C), (s0 * stride, s1 * stride, s0, s1, s2), writeable=False)
    cols = np.ascontiguousarray(cols).reshape(oh * ow, K * K * C)  # the im2col matrix
    return (cols @ w.reshape(M, K * K * C).T).reshape(oh, ow, M)


def conv_inputs(layer: ConvLayer, seed: int = 0) -> dict[str, np.ndarray]:
    """Random ``inputData [H,W,C]`` and ``kernelsWeights [M,K,K,C]`` (float32)."""
    rng = np.random.default_rng(seed)
    return {
        "inputData": rng.standard_normal((layer.H, layer.W, layer.C), dtype=np.float32),
        "kernelsWeights": (rng.standard_normal((layer.M, layer.K, layer.K, layer.C),
                                               dtype=np.float32) / np.sqrt(layer.K ** 2 * layer.C)
                           ).astype(np.float32),
    }


def conv_reference(layer: ConvLayer, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The layer computed by numpy im2col+matmul in float64, ``[outH, outW, M]``."""
    return im2col_conv(inputs["inputData"].astype(np.float64),
                       inputs["kernelsWeights"].astype(np.float64), layer.S, layer.P)


# ------------------------------------------------------------------ hand-written OpenCL


def vector_add_program(n: int, *, off_by_one: bool = False,
                       local_size: int | None = None) -> CompiledProgram:
    """``out = a + b``; ``off_by_one`` reads ``b[i+1]`` (wrong result, clamped in bounds)."""
    idx = "min(i + 1, N - 1)" if off_by_one else "i"
    src = f"""#define N {n}
kernel void vadd(global const float* a, global const float* b, global float* out) {{
  int i = get_global_id(0);
  if (i < N) out[i] = a[i] + b[{idx}];
}}
"""
    gs = n if local_size is None else -(-n // local_size) * local_size
    return CompiledProgram(
        kernels=(Kernel("vadd", src, ("a", "b", "out"), (gs,),
                        None if local_size is None else (local_size,)),),
        buffers={"a": Buffer("a", "global", "float", n, "input"),
                 "b": Buffer("b", "global", "float", n, "input"),
                 "out": Buffer("out", "global", "float", n, "output")},
        inputs=("a", "b"), output="out", output_shape=(n,), flops=n)


def _conv_buffers(layer: ConvLayer, extra: dict[str, Buffer] | None = None) -> dict:
    bufs = {
        "inputData": Buffer("inputData", "global", "float", layer.H * layer.W * layer.C,
                            "input"),
        "kernelsWeights": Buffer("kernelsWeights", "global", "float",
                                 layer.M * layer.K * layer.K * layer.C, "input"),
        "output": Buffer("output", "global", "float", layer.out_h * layer.out_w * layer.M,
                         "output"),
    }
    bufs.update(extra or {})
    return bufs


def _defines(layer: ConvLayer) -> str:
    return (f"#define H {layer.H}\n#define W {layer.W}\n#define C {layer.C}\n"
            f"#define M {layer.M}\n#define K {layer.K}\n#define S {layer.S}\n"
            f"#define P {layer.P}\n#define OH {layer.out_h}\n#define OW {layer.out_w}\n")


def naive_conv_program(layer: ConvLayer) -> CompiledProgram:
    """One work-item per output element ``(m, x, y)``; padding by bounds checks."""
    src = _defines(layer) + """
kernel void conv_naive(global const float* in, global const float* w, global float* out) {
  int m = get_global_id(0), x = get_global_id(1), y = get_global_id(2);
  float acc = 0.0f;
  for (int ky = 0; ky < K; ky++) {
    int iy = y * S - P + ky;
    if (iy < 0 || iy >= H) continue;
    for (int kx = 0; kx < K; kx++) {
      int ix = x * S - P + kx;
      if (ix < 0 || ix >= W) continue;
      global const float* ip = in + (iy * W + ix) * C;
      global const float* wp = w + ((m * K + ky) * K + kx) * C;
      for (int c = 0; c < C; c++) acc += ip[c] * wp[c];
    }
  }
  out[(y * OW + x) * M + m] = acc;
}
"""
    k = Kernel("conv_naive", src, ("inputData", "kernelsWeights", "output"),
               (layer.M, layer.out_w, layer.out_h))
    return CompiledProgram((k,), _conv_buffers(layer), ("inputData", "kernelsWeights"),
                           "output", (layer.out_h, layer.out_w, layer.M), flops=layer.flops)


def local_tiled_conv_program(layer: ConvLayer, tm: int = 4, tx: int = 4, *,
                             barrier: bool = True) -> CompiledProgram:
    """A work-group ``(tm, tx)`` computes ``tm`` kernels x ``tx`` pixels of one output row; it
    first copies the input patch it needs into local memory, then synchronises with a
    barrier (``barrier=False`` leaves the barrier out: a data race)."""
    pw = (tx - 1) * layer.S + layer.K  # patch width
    patch = layer.K * pw * layer.C
    gm = -(-layer.M // tm) * tm
    gx = -(-layer.out_w // tx) * tx
    sync = "barrier(CLK_LOCAL_MEM_FENCE);" if barrier else ""
    src = _defines(layer) + f"""#define TM {tm}
#define TX {tx}
#define PW {pw}
#define PATCH {patch}
kernel void conv_local(global const float* in, global const float* w, global float* out) {{
  local float tile[PATCH];
  int lm = get_local_id(0), lx = get_local_id(1);
  int m = get_global_id(0), x = get_global_id(1), y = get_global_id(2);
  int x0 = get_group_id(1) * TX * S - P, y0 = y * S - P;
  for (int i = lx * TM + lm; i < PATCH; i += TM * TX) {{
    int c = i % C, px = (i / C) % PW, py = i / (C * PW);
    int iy = y0 + py, ix = x0 + px;
    tile[i] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? in[(iy * W + ix) * C + c] : 0.0f;
  }}
  {sync}
  if (m < M && x < OW) {{
    float acc = 0.0f;
    for (int ky = 0; ky < K; ky++)
      for (int kx = 0; kx < K; kx++) {{
        local const float* tp = tile + (ky * PW + lx * S + kx) * C;
        global const float* wp = w + ((m * K + ky) * K + kx) * C;
        for (int c = 0; c < C; c++) acc += tp[c] * wp[c];
      }}
    out[(y * OW + x) * M + m] = acc;
  }}
}}
"""
    k = Kernel("conv_local", src, ("inputData", "kernelsWeights", "output"),
               (gm, gx, layer.out_h), (tm, tx, 1),
               local_buffers=(Buffer("tile", "local", "float", patch),), private_bytes=4)
    return CompiledProgram((k,), _conv_buffers(layer), ("inputData", "kernelsWeights"),
                           "output", (layer.out_h, layer.out_w, layer.M), flops=layer.flops)


def register_tiled_conv_program(layer: ConvLayer, px: int = 7, vw: int = 16, nv: int = 1,
                                wg: tuple[int, int] = (1, 8)) -> CompiledProgram:
    """Three kernels: pad the input, transpose the weights to ``[K][K][C][M]``, convolve.

    In the convolution each work-item computes ``px`` consecutive output pixels of one row
    for ``nv`` vectors of ``vw`` kernels (``floatN`` accumulators held in registers): per
    input channel it loads ``nv`` weight vectors and ``px`` input scalars and does
    ``px * nv`` vector multiply-adds (``a*b + c``, contracted by ``-cl-mad-enable``).
    Requires stride 1, ``outW % px == 0`` and ``M % (vw * nv) == 0``.
    """
    mv = vw * nv
    if layer.S != 1 or layer.out_w % px or layer.M % mv:
        raise ValueError(f"register-tiled kernel needs S=1, outW % {px} == 0, M % {mv} == 0")
    gx, gy = layer.M // mv, layer.out_w // px
    if gx % wg[0] or gy % wg[1]:
        raise ValueError(f"work-group {wg} does not divide the grid {(gx, gy)}")
    hp, wp = layer.H + 2 * layer.P, layer.W + 2 * layer.P
    d = _defines(layer) + f"#define HP {hp}\n#define WP {wp}\n#define PX {px}\n"
    pad_src = d + """
kernel void pad(global const float* in, global float* padded) {
  int c = get_global_id(0), x = get_global_id(1), y = get_global_id(2);
  int iy = y - P, ix = x - P;
  padded[(y * WP + x) * C + c] =
      (iy >= 0 && iy < H && ix >= 0 && ix < W) ? in[(iy * W + ix) * C + c] : 0.0f;
}
"""
    wt_src = d + """
kernel void weights_kkcm(global const float* w, global float* wt) {
  int m = get_global_id(0), c = get_global_id(1), kk = get_global_id(2);
  wt[(kk * C + c) * M + m] = w[(m * K * K + kk) * C + c];
}
"""
    vt = f"float{vw}"
    decl = " ".join(f"{vt} a{i}_{j} = ({vt})(0.0f);" for i in range(px) for j in range(nv))
    loads = " ".join(f"{vt} w{j} = vload{vw}(0, wrow + c * M + {j * vw});" for j in range(nv))
    upd = " ".join(f"{{ float x = ip[{i} * C]; "
                   + " ".join(f"a{i}_{j} = x * w{j} + a{i}_{j};" for j in range(nv)) + " }"
                   for i in range(px))
    store = " ".join(f"vstore{vw}(a{i}_{j}, 0, op + {i} * M + {j * vw});"
                     for i in range(px) for j in range(nv))
    conv_src = d + f"""
kernel void conv_regtile(global const float* padded, global const float* wt,
                         global float* out) {{
  int m0 = get_global_id(0) * {mv}, x0 = get_global_id(1) * PX, y = get_global_id(2);
  {decl}
  for (int ky = 0; ky < K; ky++)
    for (int kx = 0; kx < K; kx++) {{
      global const float* irow = padded + ((y + ky) * WP + x0 + kx) * C;
      global const float* wrow = wt + (ky * K + kx) * C * M + m0;
      for (int c = 0; c < C; c++) {{
        global const float* ip = irow + c;
        {loads}
        {upd}
      }}
    }}
  global float* op = out + (y * OW + x0) * M + m0;
  {store}
}}
"""
    extra = {
        "padded": Buffer("padded", "global", "float", hp * wp * layer.C),
        "weightsKKCM": Buffer("weightsKKCM", "global", "float",
                              layer.M * layer.K * layer.K * layer.C),
    }
    kernels = (
        # local sizes chosen as the lowering chooses them for its copies (not the runtime)
        Kernel("pad", pad_src, ("inputData", "padded"), (layer.C, wp, hp),
               divisor_local_size((layer.C, wp, hp), FREE_GROUP_MOST)),
        Kernel("weights_kkcm", wt_src, ("kernelsWeights", "weightsKKCM"),
               (layer.M, layer.C, layer.K * layer.K),
               divisor_local_size((layer.M, layer.C, layer.K * layer.K), FREE_GROUP_MOST)),
        Kernel("conv_regtile", conv_src, ("padded", "weightsKKCM", "output"),
               (gx, gy, layer.out_h), (wg[0], wg[1], 1), private_bytes=4 * px * mv),
    )
    return CompiledProgram(kernels, _conv_buffers(layer, extra), ("inputData", "kernelsWeights"),
                           "output", (layer.out_h, layer.out_w, layer.M), flops=layer.flops)


def hand_program(layer: ConvLayer, px: int | None = None) -> tuple[CompiledProgram, str]:
    """The register-tiled hand-written program with the largest fitting tile, and its label
    (``ValueError`` where the kernel does not apply: a stride other than 1)."""
    vw, nv = (16, 2) if layer.M % 32 == 0 else (16, 1) if layer.M % 16 == 0 else (1, 1)
    for p in ([px] if px else [7, 8, 6, 4, 5, 3, 2, 1]):
        if layer.out_w % p == 0:
            gy = layer.out_w // p
            wgy = max(d for d in range(1, 9) if gy % d == 0)
            prog = register_tiled_conv_program(layer, p, vw, nv, (1, wgy))
            return prog, f"hand-written OpenCL, {p} px x {vw * nv} kernels (float{vw})"
    raise ValueError("no tile fits")
