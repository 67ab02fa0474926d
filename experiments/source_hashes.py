"""Hashes of the OpenCL sources the library generates, and how long it takes to get them:
the witness that a refactoring changed no kernel (a script, not a test).

For each example with known sizes (``experiments.oracle.EXAMPLE_SIZES``, first point):
its valid mappings are enumerated (timed) and up to ``--per-example`` of them lowered
(each timed); then the convolution pipeline with the paper's hand mapping on three scaled
VGG-16 layers, and ``--samples`` candidates drawn from each convolution variant's joint
space (seed 0). Prints one line per candidate ``<id> <sha256 of its sources>`` to
``--out``, and the medians of the enumeration and lowering times to stdout. Run it under
two checkouts (``PYTHONPATH=<checkout>``) and ``diff`` the outputs:

    PYTHONPATH=$OLD .venv/bin/python experiments/source_hashes.py --out old.txt
    PYTHONPATH=. .venv/bin/python experiments/source_hashes.py --out new.txt
    diff old.txt new.txt

It imports what it needs from where each checkout keeps it, so an older tree works too.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time


def _sha(program) -> str:
    return hashlib.sha256("\n".join(k.source for k in program.kernels).encode()).hexdigest()


def _paper():
    """``(parse_layer, conv_stage_mappings, paper_like_tuning)`` wherever the tree has them."""
    try:
        from experiments.vgg16 import conv_stage_mappings, paper_like_tuning
    except ImportError:  # before the paper's specifics left the library
        from mapper.candidates import conv_stage_mappings, paper_like_tuning
    try:
        from ir.conv_layer import parse_layer
    except ImportError:  # before the VGG-16 table was library data (ir/conv_layer.py)
        try:
            from experiments.vgg16 import parse_layer
        except ImportError:
            from mapper.explore.task import parse_layer
    return parse_layer, conv_stage_mappings, paper_like_tuning


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="file for the hashes")
    ap.add_argument("--per-example", type=int, default=40)
    ap.add_argument("--samples", type=int, default=60,
                    help="joint-space samples per convolution variant (0: none)")
    ap.add_argument("--examples", help="comma-separated example paths (default: all known)")
    args = ap.parse_args(argv)

    from experiments.oracle import EXAMPLE_SIZES
    from ir.programs import gpgpu20_conv_pipeline
    from ir.syntax import parse_file
    from mapper.api import enumerate_mappings
    try:
        from mapper.candidates import build_candidate, build_pipeline
    except ImportError:  # before every build went through MappingProblem.build
        from mapper.candidates import (  # type: ignore[attr-defined,no-redef]
            lower_candidate as build_candidate,
        )
        from mapper.candidates import (  # type: ignore[attr-defined,no-redef]
            lower_pipeline as build_pipeline,
        )
    from mapper.explore.task import Task

    try:
        from mapper.explore.task import conv_variants
    except ImportError:  # before the kernel-vectorised variant
        def conv_variants(layer):  # type: ignore[misc]
            return {"window": Task.conv_layer(layer)}

    parse_layer, conv_stage_mappings, paper_like_tuning = _paper()
    lines: list[str] = []
    enum_s: list[float] = []
    lower_s: list[float] = []
    refused = 0
    wanted = args.examples.split(",") if args.examples else sorted(EXAMPLE_SIZES)
    for path in wanted:
        points = EXAMPLE_SIZES[path]
        prog = parse_file(path)
        t = time.perf_counter()
        maps = list(enumerate_mappings(prog))
        enum_s.append(time.perf_counter() - t)
        for m in maps[:args.per_example]:
            t = time.perf_counter()
            try:
                cp = build_candidate(prog, dict(m), points[0])
            except Exception as e:  # noqa: BLE001 - a refusal is recorded by its type
                lines.append(f"{path} {dict(m)} refused {type(e).__name__}")
                refused += 1
                continue
            lower_s.append(time.perf_counter() - t)
            lines.append(f"{path} {sorted(dict(m).items())} {_sha(cp)}")
    pipe = gpgpu20_conv_pipeline()
    hand = conv_stage_mappings(pipe)  # the hand mapping does not depend on the layer
    for name in ("0/8", "7/8", "19/4"):
        layer = parse_layer(name)
        sizes = {**layer.sizes(), **paper_like_tuning(layer)}
        cp = build_pipeline(pipe, hand, sizes)
        lines.append(f"conv hand {name} {_sha(cp)}")
        if name != "19/4" or not args.samples:
            continue
        for variant, task in conv_variants(layer).items():
            for m, cfg in task.joint().sample(args.samples, seed=0, per_mapping=True):
                t = time.perf_counter()
                try:
                    cp = task.lower_fn(m, cfg)()
                except Exception as e:  # noqa: BLE001 - a refusal is recorded by its type
                    lines.append(f"conv {variant} {dict(m)} {dict(cfg)} refused "
                                 f"{type(e).__name__}")
                    refused += 1
                    continue
                lower_s.append(time.perf_counter() - t)
                lines.append(f"conv {variant} {sorted(dict(m).items())} "
                             f"{sorted(dict(cfg).items())} {_sha(cp)}")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines)} candidates ({refused} refused) -> {args.out}; enumeration of "
          f"{len(enum_s)} examples: median {statistics.median(enum_s) * 1e3:.1f} ms, total "
          f"{sum(enum_s):.2f} s; lowering: median {statistics.median(lower_s) * 1e3:.1f} ms "
          f"per candidate over {len(lower_s)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
