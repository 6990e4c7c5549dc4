"""Counter-based draws: their distributions against scipy's, and a key's bits independent of the keys
drawn beside it (the property the grid's bit-identity on any rank count rests on)."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import torch
from scipy import stats

from ganstudy.core.counter_random import (
    _log,
    _sin_cos,
    counter_key,
    counter_keys,
    integers,
    mix64,
    normal,
    random_bits,
    uniform,
)

CPU = torch.device("cpu")
KEYS = [counter_key(2026, "test", k) for k in range(37)]


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1.2e-6), (torch.float64, 1e-12)])
def test_the_polynomial_log_sine_and_cosine_are_torchs_within_the_dtypes_precision(dtype, tolerance):
    u = torch.cat(
        [torch.linspace(2.0**-24, 1.0, 100_001, dtype=dtype), torch.tensor([2.0**-24, 0.5, 1.0], dtype=dtype)]
    )
    torch.testing.assert_close(_log(u), torch.log(u), rtol=tolerance, atol=tolerance)
    x = torch.linspace(0, math.pi / 2, 100_001, dtype=dtype)[:-1]
    sin, cos = _sin_cos(x)
    torch.testing.assert_close(sin, torch.sin(x), rtol=0, atol=tolerance)
    torch.testing.assert_close(cos, torch.cos(x), rtol=0, atol=tolerance)


def test_normal_draws_are_standard_normal():
    z = normal(KEYS, 20_000, CPU).double().numpy()
    values = z.ravel()
    assert stats.kstest(values, "norm").pvalue > 1e-3
    assert abs(values.mean()) < 4 / math.sqrt(values.size) and abs(values.std() - 1) < 4 / math.sqrt(values.size)
    assert abs(stats.kurtosis(values)) < 0.02 and abs(stats.skew(values)) < 0.01
    # The two values of a Box-Muller pair are independent, and so are neighbouring rows.
    assert abs(np.corrcoef(z[:, 0::2].ravel(), z[:, 1::2].ravel())[0, 1]) < 0.01
    assert abs(np.corrcoef(z[:-1].ravel() ** 2, z[1:].ravel() ** 2)[0, 1]) < 0.01
    assert np.abs(values).max() < 5.9


def test_uniform_and_integer_draws_are_uniform():
    u = uniform(KEYS, 5_000, CPU).numpy().ravel()
    assert u.min() >= 0 and u.max() < 1 and stats.kstest(u, "uniform").pvalue > 1e-3
    picks = integers([counter_key(7, k) for k in range(30_000)], 1, [3] * 30_000)[:, 0].numpy()
    counts = np.bincount(picks, minlength=3)
    assert len(counts) == 3 and stats.chisquare(counts).pvalue > 1e-3


@pytest.mark.parametrize("count", [1, 7, 800, 3_001])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_keys_draws_are_the_same_bits_alone_and_among_any_keys(count, dtype, monkeypatch):
    together = normal(KEYS, count, CPU, dtype)
    # Another block width too: on a CPU the pairs are made a block at a time.
    monkeypatch.setattr("ganstudy.core.counter_random._CPU_PAIRS", 5)
    for first, last in ((0, 1), (5, 6), (3, 20), (36, 37)):
        assert torch.equal(normal(KEYS[first:last], count, CPU, dtype), together[first:last])
    # A longer draw starts with the shorter one; all pairs in one pass (a GPU's way) give the same bits.
    assert torch.equal(normal(KEYS, count + 3, CPU, dtype)[:, :count], together)
    assert torch.equal(normal(KEYS, count, CPU, dtype, whole=True), together)
    assert torch.equal(random_bits(KEYS[4:9], count, CPU), random_bits(KEYS, count, CPU)[4:9])


def test_keys_differ_by_every_part():
    keys = {
        counter_key(1, "g", 0),
        counter_key(1, "g", 1),
        counter_key(1, "d", 0),
        counter_key(2, "g", 0),
        counter_key(1, "g", 0, 0),
    }
    assert len(keys) == 5 and all(0 <= k < 2**64 for k in keys)
    assert counter_key(1, "g", 0) == counter_key(1, "g", 0)


def _splitmix64(state: int) -> int:
    """The first output of Vigna's splitmix64 from ``state``, in Python's unbounded integers."""
    z = (state + 0x9E3779B97F4A7C15) % 2**64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
    return z ^ (z >> 31)


def test_keys_are_splitmix64_chains_one_at_a_time_or_many_at_once():
    # splitmix64's published outputs: seed 0 and seed 1234567 (Vigna's reference test value).
    assert mix64(0) == 0xE220A8397B1DCDAF and mix64(1234567) == 6457827717110365317
    expected = lambda seed, step: _splitmix64(_splitmix64(_splitmix64(seed % 2**64) ^ zlib.crc32(b"g")) ^ step)  # noqa: E731
    seeds = [0, 5, 2**63 + 11, 2**64 - 1, -3]
    assert [counter_key(seed, "g", 7) for seed in seeds] == [expected(seed, 7) for seed in seeds]
    many = counter_keys(
        np.array([seed % 2**64 for seed in seeds], dtype=np.uint64)[None, :], "g", np.arange(4)[:, None]
    )
    assert many.shape == (4, 5) and many.dtype == np.uint64
    assert [[int(key) for key in row] for row in many] == [
        [expected(seed, step) for seed in seeds] for step in range(4)
    ]
    # Keys as an array draw what the same keys as Python ints draw.
    assert torch.equal(normal(many.ravel(), 9, CPU), normal([int(key) for key in many.ravel()], 9, CPU))
