#!/usr/bin/env bash
# The wheels a GPU machine without a package index needs beside its own PyTorch image (python3 3.12 with
# torch, numpy, scipy, scikit-learn, mpi4py, h5py, pandas, matplotlib; see docs/benchmarks.md): ganstudy
# itself and the packages of ours that the image lacks, into .whl/ (ignored by git). ci/gpu_check.sh
# installs them there.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .whl && mkdir .whl
python3 -m pip wheel --quiet --no-deps --wheel-dir .whl .
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    torch-fidelity==0.4.0 jsonschema==4.25.1 jsonschema-specifications==2025.9.1 referencing==0.37.0 \
    rpds-py==0.28.0 imbalanced-learn==0.14.0 sklearn-compat==0.1.5
ls .whl
