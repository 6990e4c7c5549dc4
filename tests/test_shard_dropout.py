"""Dropout masks keyed by (call, layer, global row, element): the bits of an independent pure-Python
hash, the same masks for any split into ranks and micro-batches, one set of tensor operations whatever
the row count, and the statistics of dropout."""

from __future__ import annotations

import random

import pytest
import torch
from scipy import stats

from conftest import M32, lowbias32, reference_mask
from ganstudy.core import counter_random as module
from ganstudy.core.counter_random import hash32, scaled_mask
from ganstudy.errors import GanstudyError
from ganstudy.parallel.rank_work import shard_rows
from ganstudy.parallel.shard_dropout import row_masks, shard_dropout


def test_the_tensor_hash_is_lowbias32_bit_for_bit():
    values = [0, 1, 2**31 - 1, 2**31, M32] + [random.Random(7).getrandbits(32) for _ in range(5000)]
    assert hash32(torch.tensor(values)).tolist() == [lowbias32(v) for v in values]


@pytest.mark.parametrize("keep", [0.5, 0.8, 0.75])
def test_a_mask_is_the_reference_s_for_any_first_row_and_block(keep, monkeypatch):
    call = 0xDEADBEEF12345678
    expected = reference_mask(call, 5, 6, 37, keep)
    assert torch.equal(scaled_mask(call, 5, torch.Size([6, 37]), keep, torch.float32, torch.device("cpu")), expected)
    # Blocks of 2 columns (16 elements for 6 rows) hash the same elements as one block of all 37.
    monkeypatch.setattr(module, "_CPU_BLOCK", 16)
    assert torch.equal(scaled_mask(call, 5, torch.Size([6, 37]), keep, torch.float32, torch.device("cpu")), expected)


@pytest.mark.parametrize("ranks", [1, 2, 3])
@pytest.mark.parametrize("accumulation", [1, 2])
def test_masks_do_not_depend_on_how_the_batch_is_split(ranks, accumulation):
    """Each rank holds a contiguous share of the global batch, in micro-batches, as data_parallel splits it."""
    net = shard_dropout(
        torch.nn.Sequential(
            torch.nn.Conv2d(1, 2, 3), torch.nn.Dropout(0.25), torch.nn.Flatten(), torch.nn.Dropout(0.25)
        )
    )
    x = torch.randn(12, 1, 6, 6)
    with row_masks(net, 42, 0):
        whole = net(x)
    rows = shard_rows(12, ranks, accumulation)
    parts = []
    for offset in range(0, 12, rows):
        with row_masks(net, 42, offset):
            parts.append(net(x[offset : offset + rows]))
    assert torch.equal(torch.cat(parts), whole)
    with row_masks(net, 43, 0):
        assert not torch.equal(net(x), whole)  # another call, other masks


def test_the_mask_is_made_by_the_same_operations_for_2_or_200_rows():
    """Vectorised: no Python loop over rows (a CPU loops over blocks of columns, each for all rows)."""

    def operations(rows: int) -> list[str]:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            scaled_mask(99, 0, torch.Size([rows, 300]), 0.8, torch.float32, torch.device("cpu"))
        return sorted(event.key for event in profile.key_averages() for _ in range(event.count))

    assert operations(2) == operations(200)


def test_masks_have_dropout_s_statistics():
    keep = 0.8
    mask = scaled_mask(2024, 0, torch.Size([64, 4096]), keep, torch.float32, torch.device("cpu")) * keep
    kept = int(mask.sum())
    # Binomial: the kept count's two-sided p-value, and the values are exactly 0 and 1 / keep.
    assert stats.binomtest(kept, mask.numel(), keep).pvalue > 1e-4
    assert set(torch.unique(mask).tolist()) == {0.0, 1.0}
    # Neighbouring elements and neighbouring rows (the hash's weak spots if it mixed badly) are uncorrelated.
    for a, b in ((mask[:, :-1], mask[:, 1:]), (mask[:-1], mask[1:])):
        r, p = stats.pearsonr(a.flatten().numpy(), b.flatten().numpy())
        assert abs(r) < 0.02, (r, p)
    # Each row has its own mask, and a row at another global place another one.
    assert len({tuple(row.tolist()) for row in mask.bool()}) == 64
    shifted = scaled_mask(2024, 1, torch.Size([64, 4096]), keep, torch.float32, torch.device("cpu")) * keep
    assert torch.equal(shifted[:-1], mask[1:]) and not torch.equal(shifted, mask)


def test_two_layers_scale_and_compose_and_evaluation_passes_through():
    net = shard_dropout(torch.nn.Sequential(torch.nn.Identity(), torch.nn.Dropout(0.25), torch.nn.Dropout(0.25)))
    x = torch.ones(8, 500)
    with row_masks(net, 42, 0):
        whole = net(x)
    # Two layers of p=0.25 keep 9/16 of the units, scaled by 1/0.75 each.
    kept = (whole > 0).float().mean().item()
    assert kept == pytest.approx(9 / 16, abs=0.02) and whole.max().item() == pytest.approx(1 / 0.75**2)
    with pytest.raises(GanstudyError, match="outside row_masks"):
        net(x)
    net.eval()
    assert torch.equal(net(x), x)


def test_the_mask_has_the_input_s_dtype_and_gradient():
    layer = shard_dropout(torch.nn.Sequential(torch.nn.Dropout(0.5)))
    x = torch.randn(4, 10, dtype=torch.bfloat16, requires_grad=True)
    with row_masks(layer, 1, 0):
        y = layer(x)
    y.sum().backward()
    assert y.dtype == torch.bfloat16
    assert torch.equal(x.grad, (y != 0).to(torch.bfloat16) * 2)
