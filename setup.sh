#!/usr/bin/env bash
# Sets up everything liftmap needs in ./.venv (idempotent).
#
# The OpenCL device is PoCL on the CPU. pip's pocl-binary-distribution (PoCL 3.0, LLVM 14)
# cannot compile for CPUs newer than its LLVM (AMD Zen 5 reports "unknown target CPU"), so
# where apt is available and we are root, Debian's PoCL (and Oclgrind, the data-race
# checker) are installed too; liftmap picks the first device that builds a test kernel.
set -euo pipefail
cd "$(dirname "$0")"

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  need=""
  dpkg -s pocl-opencl-icd >/dev/null 2>&1 || need="$need pocl-opencl-icd"
  command -v oclgrind >/dev/null 2>&1 || need="$need oclgrind"
  if [ -n "$need" ]; then
    echo "installing Debian packages:$need"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null) \
      || echo "warning: could not install$need; pip's PoCL will be used where it works"
  fi
else
  echo "note: not root or no apt-get: using pip's PoCL only (install pocl-opencl-icd and"
  echo "      oclgrind yourself if kernels fail to build with 'unknown target CPU')"
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e ".[dev]"
echo "liftmap is set up in .venv (try: .venv/bin/mapper demo)"
