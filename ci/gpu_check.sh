#!/usr/bin/env bash
# The prepared check of a short GPU allocation (about 7.5 minutes on one H200 before the host part, 9 with the machine's start): our wheels (ci/gpu_wheels.sh)
# installed into the machine's Python, `benchmarks/gpu.py --short`, then the GPU tests that check CUDA graphs
# and the stacked updates. Output goes to $OUT (default: gpu-check/): the tests' log and the JSON record.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-check}
mkdir -p "$OUT"
python3 -m pip install --quiet --no-index --no-deps --no-compile .whl/*.whl || exit 1
# Open MPI refuses to start ranks as root without these (the machine runs commands as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout "${BENCH_SECONDS:-330}" python3 benchmarks/gpu.py --short --out "$OUT/short.json" 2>&1 | tail -n 30
timeout "${TEST_SECONDS:-210}" python3 -m pytest -m gpu -p no:cacheprovider -q -n 4 \
    -k "captured or cuda_graphs or host_values or population_stays or general_form or grid_on_cuda" tests/test_gpu.py 2>&1 | tee "$OUT/tests.log" | tail -n 40
