"""Disassembly counts of the generated partial-convolution kernel (issue 9).

    POCL is asked to keep its compiled work-group functions; the script runs the pipeline
    once (real launch sizes), then counts in the partial kernel's shared object:
    ``vfmadd...ps`` on zmm/ymm registers, integer ``div``/``idiv``, ``vgather``, stack
    references ``(%rsp)`` and the instructions of the hottest (innermost, longest) loop.

    python -m experiments.disasm_conv --layer 19 --v 8 [--no-coalesce] [--omega 128]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile


def instructions(asm: str) -> list[str]:
    """The instructions of an ``objdump -d --no-show-raw-insn`` text."""
    return [ln.split("\t", 1)[-1].strip() for ln in asm.splitlines()
            if re.match(r"\s+[0-9a-f]+:\t", ln)]


def counts(ins: list[str]) -> dict[str, int]:
    """Counts of the instructions that matter for the convolution's speed."""
    return {
        "instructions": len(ins),
        "vfmadd_ps_zmm": sum(1 for i in ins if i.startswith("vfmadd") and "ps" in i.split()[0]
                             and "zmm" in i),
        "vfmadd_ps_ymm": sum(1 for i in ins if i.startswith("vfmadd") and "ps" in i.split()[0]
                             and "ymm" in i),
        "div_idiv": sum(1 for i in ins if re.match(r"i?div[lqw]?\b", i)),
        "vgather": sum(1 for i in ins if i.startswith("vgather")),
        "rsp_refs": sum(1 for i in ins if "(%rsp)" in i),
    }


def innermost_loop(asm: str) -> list[str]:
    """The instructions of the backward jump with the most FMAs (the hot loop), or []."""
    lines = [ln for ln in asm.splitlines() if re.match(r"\s+[0-9a-f]+:\t", ln)]
    addr = [int(ln.split(":")[0], 16) for ln in lines]
    best: list[str] = []
    for k, ln in enumerate(lines):
        m = re.search(r"\tj\w+\s+([0-9a-f]+)", ln)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target < addr[k]:
            body = [x.split("\t", 1)[-1].strip() for x, a in zip(lines, addr)
                    if target <= a <= addr[k]]
            score = (sum("vfmadd" in b for b in body), -len(body))
            if not best or score > (sum("vfmadd" in b for b in best), -len(best)):
                best = body
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layer", default="19")
    ap.add_argument("--no-coalesce", action="store_true")
    for k in ("theta", "rho", "kappa", "sigma", "omega", "v"):
        ap.add_argument(f"--{k}", type=int, default=None)
    ap.add_argument("--show", action="store_true", help="also print the hot loop's instructions")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not args.child:
        cache = tempfile.mkdtemp(prefix="pocl-disasm-")
        env = dict(os.environ, POCL_LEAVE_KERNEL_COMPILER_TEMP_FILES="1", POCL_CACHE_DIR=cache)
        subprocess.run([sys.executable, "-m", "experiments.disasm_conv", "--child",
                        *(argv if argv is not None else sys.argv[1:])], env=env, check=True)
        sos = subprocess.run(["find", cache, "-name", "*.so"], capture_output=True,
                             text=True).stdout.split()
        for so in sos:
            asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", so],
                                 capture_output=True, text=True).stdout
            if "partial" not in asm:
                continue
            loop = innermost_loop(asm)
            print(f"{so}: whole: {counts(instructions(asm))}")
            print(f"  hot loop: {counts(loop)}")
            if args.show:
                print("\n".join("    " + ins for ins in loop))
        return 0
    import numpy as np

    from codegen.runner import Runner
    from experiments.vgg16 import conv_stage_mappings, paper_like_tuning
    from ir.conv_layer import vgg16_layer
    from ir.programs import gpgpu20_conv_pipeline
    from mapper.candidates import build_pipeline

    layer = vgg16_layer(args.layer)
    tuning = paper_like_tuning(layer, v=args.v or 1)
    tuning.update({k: getattr(args, k) for k in tuning if getattr(args, k) is not None})
    pipe = gpgpu20_conv_pipeline(coalesce=not args.no_coalesce)
    cp = build_pipeline(pipe, conv_stage_mappings(pipe), {**layer.sizes(), **tuning})
    rng = np.random.default_rng(0)
    inputs = {"inputData": rng.standard_normal((layer.H, layer.W, layer.C), dtype=np.float32),
              "kernelsWeights": rng.standard_normal((layer.M, layer.K, layer.K, layer.C),
                                                    dtype=np.float32)}
    Runner().run(cp, inputs, repeats=1, warmup=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
