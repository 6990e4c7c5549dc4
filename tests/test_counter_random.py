"""Counter-based draws: their distributions against scipy's, and a key's bits independent of the keys
drawn beside it (the property the grid's bit-identity on any rank count rests on)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from ganstudy.counter_random import _log, _sin_cos, counter_key, integers, normal, random_bits, uniform

CPU = torch.device("cpu")
KEYS = [counter_key(2026, "test", k) for k in range(37)]


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1.2e-6), (torch.float64, 1e-12)])
def test_the_polynomial_log_sine_and_cosine_are_torchs_within_the_dtypes_precision(dtype, tolerance):
    u = torch.cat([torch.linspace(2.0**-24, 1.0, 100_001, dtype=dtype), torch.tensor([2.0**-24, 0.5, 1.0], dtype=dtype)])
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
    monkeypatch.setattr("ganstudy.counter_random._CPU_PAIRS", 5)
    for first, last in ((0, 1), (5, 6), (3, 20), (36, 37)):
        assert torch.equal(normal(KEYS[first:last], count, CPU, dtype), together[first:last])
    # A longer draw starts with the shorter one.
    assert torch.equal(normal(KEYS, count + 3, CPU, dtype)[:, :count], together)
    assert torch.equal(random_bits(KEYS[4:9], count, CPU), random_bits(KEYS, count, CPU)[4:9])


def test_keys_differ_by_every_part():
    keys = {counter_key(1, "g", 0), counter_key(1, "g", 1), counter_key(1, "d", 0), counter_key(2, "g", 0), counter_key(1, "g", 0, 0)}
    assert len(keys) == 5 and all(0 <= k < 2**64 for k in keys)
    assert counter_key(1, "g", 0) == counter_key(1, "g", 0)
