"""Runs a pickled ``CompiledProgram`` once; started by ``codegen.oclgrind`` under Oclgrind.

Usage: ``oclgrind [checks] python -m codegen.oclgrind_child JOB.pkl OUT.npy``. Oclgrind
preloads its OpenCL runtime, so the only platform this process sees is the simulator.
Exit status 0: ran (output saved); 3: the build failed (log on stderr); 4: a launch failed.
"""

from __future__ import annotations

import pickle
import sys

import numpy as np


def main(argv: list[str]) -> int:
    """Loads the job, runs every kernel once on the first platform, saves the output."""
    job_path, out_path = argv[1], argv[2]
    with open(job_path, "rb") as f:
        program, inputs = pickle.load(f)
    import pyopencl as cl

    from codegen.runner import BuildError, Runner

    runner = Runner(cl.get_platforms()[0].get_devices()[0])
    try:
        res = runner.run(program, inputs, repeats=0, warmup=1)
    except BuildError as e:
        print(f"BUILD FAILED kernel {e.kernel}:\n{e.log}", file=sys.stderr)
        return 3
    except cl.Error as e:
        print(f"LAUNCH FAILED: {e}", file=sys.stderr)
        return 4
    np.save(out_path, res.output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
