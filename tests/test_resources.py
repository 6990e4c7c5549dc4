"""Job sizing: wall time per attempt, memory per node, and the peaks every run records."""

from __future__ import annotations

import subprocess
import sys

from ganstudy.core.resources import node_memory_mb, rank_memory_mb, retry_minutes


def test_a_retry_asks_for_the_wall_time_times_the_attempt_up_to_the_cap():
    assert [retry_minutes(50, attempt, 120) for attempt in (1, 2, 3)] == [50, 100, 120]


def test_the_memory_estimate_grows_with_the_split_and_with_cuda():
    # 1 GB base plus twice a 100 MiB split, plus 25%: (1024 + 200) * 1.25.
    assert rank_memory_mb(100 * 2**20, "cpu") == 1530
    assert rank_memory_mb(100 * 2**20, "cuda") == (3072 + 200) * 1.25
    assert node_memory_mb(6, 1530) == 9180


def test_peak_memory_sees_a_large_allocation():
    # In a fresh process: this one's peak may already be above anything the test allocates. Started from
    # this (large) process on purpose: the peak must be the child's own, not one inherited through exec.
    code = (
        "import numpy as np; from ganstudy.core.resources import peak_memory; before = peak_memory()['rss_mb']; "
        "block = np.ones(200 * 2**20 // 8); print(peak_memory()['rss_mb'] - before, peak_memory()['gpu_mb'])"
    )
    grown, gpus = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split(
        maxsplit=1
    )
    assert 190 <= float(grown) <= 260  # 200 MiB touched
    assert gpus.strip() == "{}"  # no CUDA initialised
