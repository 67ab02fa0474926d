#!/usr/bin/env bash
# Sets up everything liftmap needs in ./.venv (idempotent).
#
# The OpenCL device is Debian's PoCL (pocl-opencl-icd, PoCL 3.1) on the CPU, installed here
# with Oclgrind (the data-race checker) when apt is available and we are root. pip's PoCL
# (pocl-binary-distribution 3.0) is not installed: on AMD Zen 4 it fails liftmap's device
# probe (hangs or crashes on float16 fma) and runs ~10x slower, on Zen 5 it compiles nothing.
set -euo pipefail
cd "$(dirname "$0")"

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  need=""
  dpkg -s pocl-opencl-icd >/dev/null 2>&1 || need="$need pocl-opencl-icd"
  command -v oclgrind >/dev/null 2>&1 || need="$need oclgrind"
  if [ -n "$need" ]; then
    echo "installing Debian packages:$need"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null) \
      || echo "warning: could not install$need; liftmap needs an OpenCL device (e.g. pocl-opencl-icd)"
  fi
else
  echo "note: not root or no apt-get: install an OpenCL device yourself (Debian/Ubuntu:"
  echo "      pocl-opencl-icd and oclgrind; or a GPU vendor's OpenCL ICD)"
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
# dev: tests and type checks; kernel-tuner: its cache/T4 formats and restriction forms are
# tested against Kernel Tuner itself; cluster: the Ray evaluator is tested on a local cluster
.venv/bin/pip install -q -e ".[dev,kernel-tuner,cluster]"
echo "liftmap is set up in .venv (try: .venv/bin/python -m experiments.demo)"
