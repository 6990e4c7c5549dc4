"""Dropout masks keyed per block of rows (a grid cell's update): the bits of the independent pure-Python
hash, a block's mask the same alone or among any blocks, each call and layer its own masks, and a
stacked network's rows dropped as their lone networks drop them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from conftest import reference_mask
from ganstudy.core.counter_random import counter_key, scaled_mask
from ganstudy.errors import GanstudyError
from ganstudy.models.stacked_network import StackedNetwork
from ganstudy.parallel.keyed_dropout import keyed_dropout, keyed_masks

KEYS = np.array([0xC0FFEE, 2**64 - 5, 17], dtype=np.uint64)


def dropping(*ps: float) -> nn.Module:
    return keyed_dropout(nn.Sequential(nn.Flatten(), *(nn.Dropout(p) for p in ps))).train()


def test_a_block_s_mask_is_the_reference_of_its_key_layer_and_call():
    net = dropping(0.25, 0.5)
    ones = torch.ones(3 * 4, 5, 2)
    with keyed_masks(net, KEYS):
        first, second = net(ones), net(ones)
    for call, out in enumerate((first, second)):
        for block, key in enumerate(KEYS.tolist()):
            # Layer 0, then layer 1, each with its own call key: the reference's masks multiply.
            expected = reference_mask(counter_key(key, 0, call), 0, 4, 10, 0.75) * reference_mask(
                counter_key(key, 1, call), 0, 4, 10, 0.5
            )
            assert torch.equal(out[4 * block : 4 * block + 4], expected)
    assert not torch.equal(first, second)  # the second call under the same keys drops other units


def test_a_block_drops_the_same_units_alone_or_among_any_blocks():
    net = dropping(0.5)
    x = torch.randn(3 * 6, 8)
    with keyed_masks(net, KEYS):
        together = net(x)
    # A new scope counts calls from 0 again: each block alone gets its call-0 masks.
    for block in range(3):
        with keyed_masks(net, KEYS[block]):
            assert torch.equal(net(x[6 * block : 6 * block + 6]), together[6 * block : 6 * block + 6])
    with keyed_masks(net, KEYS[::-1]):
        reordered = net(torch.cat([x[12:], x[6:12], x[:6]]))
    assert torch.equal(reordered, torch.cat([together[12:], together[6:12], together[:6]]))


def test_outside_its_keys_a_training_layer_refuses_and_evaluation_passes_through():
    net = dropping(0.5)
    with pytest.raises(GanstudyError, match="KeyedDropout ran in training outside keyed_masks"):
        net(torch.ones(2, 3))
    with (
        keyed_masks(net, KEYS),
        pytest.raises(ValueError, match="a batch of 7 rows does not split into 3 equal blocks"),
    ):
        net(torch.ones(7, 3))
    x = torch.randn(4, 3)
    assert torch.equal(net.eval()(x), x)
    with keyed_masks(net := dropping(1.0), KEYS[:1]):
        assert torch.equal(net(x), torch.zeros_like(x))


@pytest.mark.parametrize("chunked", [False, True], ids=["one call", "in chunks"])
def test_a_stacked_network_drops_each_row_as_its_lone_network_drops_it(chunked, monkeypatch):
    import ganstudy.models.stacked_network as module

    if chunked:
        monkeypatch.setattr(module, "CALL_FLOATS", 2 * 4 * 10)  # two rows' activations per call
    lone = dropping(0.5, 0.2)
    stacked = StackedNetwork(nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Dropout(0.2)))
    assert stacked.trains and stacked.drops
    x = torch.randn(3, 4, 5, 2)
    with keyed_masks(stacked.twin, KEYS):
        first, second = stacked([], x, training=True), stacked([], x, training=True)
    for row, key in enumerate(KEYS):
        with keyed_masks(lone, key):
            assert torch.equal(first[row], lone(x[row]))
            assert torch.equal(second[row], lone(x[row]))
    # A lone row runs paired with a copy of itself, and keeps its own key.
    with keyed_masks(stacked.twin, KEYS[1:2]):
        alone = stacked([], x[1:2], training=True)
    with keyed_masks(lone, KEYS[1]):
        assert torch.equal(alone[0], lone(x[1]))
    with pytest.raises(ValueError, match="3 rows of a network with dropout train inside keyed_masks"):
        stacked([], x, training=True)


def test_a_mask_in_one_pass_has_the_bits_of_the_cpu_s_blocks_and_operators_that_do_not_grow_with_the_rows():
    """``whole`` (the grid's whole layout, a GPU's) hashes a mask in one pass; on a CPU by default, blocks
    of columns sized for the cache, more of them for more rows."""

    def made(rows: int, whole: bool | None) -> tuple[torch.Tensor, list[str]]:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            mask = scaled_mask(KEYS, 0, torch.Size([rows, 300]), 0.8, torch.float32, torch.device("cpu"), whole)
        return mask, sorted(event.key for event in profile.key_averages() for _ in range(event.count))

    (small, whole_small), (large, whole_large) = made(3 * 2, True), made(3 * 2000, True)
    (large_blocks, blocks_large) = made(3 * 2000, None)
    assert torch.equal(large, large_blocks) and torch.equal(small, large.view(3, 2000, 300)[:, :2].reshape(6, 300))
    assert whole_small == whole_large and len(blocks_large) > len(whole_large)
