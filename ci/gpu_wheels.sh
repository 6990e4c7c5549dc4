#!/usr/bin/env bash
# The wheels a GPU machine without a package index needs beside its own PyTorch image (python3 3.12 with
# torch, numpy, scipy, scikit-learn, mpi4py, h5py, pandas, matplotlib; see docs/benchmarks.md): ganstudy
# itself and the packages of ours that the image lacks, into .whl/ (ignored by git), at the versions that
# `make setup` installed here from constraints.txt (run it first). ci/gpu_check.sh installs them there.
set -euo pipefail
cd "$(dirname "$0")/.."
MISSING=(torch-fidelity jsonschema jsonschema-specifications referencing rpds-py imbalanced-learn sklearn-compat)
PINS=$(.venv/bin/python -c "import importlib.metadata as m, sys; print(' '.join(f'{n}=={m.version(n)}' for n in sys.argv[1:]))" "${MISSING[@]}")
rm -rf .whl && mkdir .whl
python3 -m pip wheel --quiet --no-deps --wheel-dir .whl .
# shellcheck disable=SC2086  # one argument per pin
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    $PINS
ls .whl
