"""FusedAdam is torch.optim.Adam(fused=True) to the bit, with its state dict, and training ranks that step
with it never import torch._dynamo (the import every torch.optim optimiser pays on its first call)."""

from __future__ import annotations

import copy
import subprocess

import pytest
import torch

from conftest import SCHEMA, train_command
from ganstudy.config.validate import validate_study_config
from ganstudy.train.fused_adam import FusedAdam

BETAS = (0.5, 0.999)


def network() -> torch.nn.Module:
    torch.manual_seed(3)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5), torch.nn.Linear(5, 1)
    )


def train(net: torch.nn.Module, optimizer, steps: int, seed: int, frozen: int | None = None) -> None:
    """``steps`` updates on a fixed random batch stream; the parameter at index ``frozen`` gets no gradient."""
    batches = torch.Generator().manual_seed(seed)
    parameters = list(net.parameters())
    for _ in range(steps):
        inputs = torch.randn(7, 1, 8, 8, generator=batches)
        optimizer.zero_grad(set_to_none=True)
        (net(inputs) ** 2).mean().backward()
        if frozen is not None:
            parameters[frozen].grad = None
        optimizer.step()


def assert_same(a: torch.nn.Module, b: torch.nn.Module, state_a: dict, state_b: dict) -> None:
    for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y)
    assert state_a["param_groups"] == state_b["param_groups"]
    assert state_a["state"].keys() == state_b["state"].keys()
    for index, values in state_a["state"].items():
        assert values.keys() == state_b["state"][index].keys()
        for name, value in values.items():
            other = state_b["state"][index][name]
            assert value.dtype == other.dtype and torch.equal(value, other), (index, name)


@pytest.mark.parametrize("lr", [2e-4, 0.05])
def test_fused_adam_takes_torch_s_fused_steps_and_keeps_its_state_dict(lr):
    ours, theirs = network(), network()
    mine = FusedAdam(ours.parameters(), lr, BETAS)
    reference = torch.optim.Adam(theirs.parameters(), lr=lr, betas=BETAS, fused=True)
    # The frozen parameter gets no state, as in torch; then it trains like the others.
    train(ours, mine, 3, seed=1, frozen=2)
    train(theirs, reference, 3, seed=1, frozen=2)
    assert 2 not in mine.state_dict()["state"]
    train(ours, mine, 4, seed=2)
    train(theirs, reference, 4, seed=2)
    assert_same(ours, theirs, mine.state_dict(), reference.state_dict())
    # Not a copy of the update that happens to agree at one rate: the steps moved the weights.
    assert not torch.equal(ours[0].weight, network()[0].weight)


def test_a_state_dict_of_either_loads_into_the_other_and_training_goes_on_alike():
    ours, theirs = network(), network()
    mine = FusedAdam(ours.parameters(), 1e-3, BETAS)
    train(ours, mine, 3, seed=1)
    # torch's Adam continues from FusedAdam's state, and FusedAdam from torch's. Copies, as from a checkpoint:
    # either keeps the loaded tensors that need no conversion.
    theirs.load_state_dict(ours.state_dict())
    reference = torch.optim.Adam(theirs.parameters(), lr=1e-3, betas=BETAS, fused=True)
    reference.load_state_dict(copy.deepcopy(mine.state_dict()))
    resumed_net = network()
    resumed_net.load_state_dict(ours.state_dict())
    resumed = FusedAdam(resumed_net.parameters(), 0.5, BETAS)
    resumed.load_state_dict(copy.deepcopy(reference.state_dict()))
    assert resumed.param_groups[0]["lr"] == 1e-3  # the groups' settings come from the state dict
    for net, optimizer in ((ours, mine), (theirs, reference), (resumed_net, resumed)):
        train(net, optimizer, 3, seed=2)
    assert_same(ours, theirs, mine.state_dict(), reference.state_dict())
    assert_same(resumed_net, theirs, resumed.state_dict(), reference.state_dict())
    with pytest.raises(ValueError, match="different number of parameter groups or parameters"):
        FusedAdam(list(network().parameters())[:2], 1e-3, BETAS).load_state_dict(mine.state_dict())


def test_a_gradient_scaler_steps_it_as_torch_s_and_skips_a_step_with_an_inf_gradient_alike():
    ours, theirs = network(), network()
    mine = FusedAdam(ours.parameters(), 1e-3, BETAS)
    reference = torch.optim.Adam(theirs.parameters(), lr=1e-3, betas=BETAS, fused=True)
    for net, optimizer in ((ours, mine), (theirs, reference)):
        scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
        batches = torch.Generator().manual_seed(4)
        for step in range(4):
            optimizer.zero_grad(set_to_none=True)
            scaler.scale((net(torch.randn(7, 1, 8, 8, generator=batches)) ** 2).mean()).backward()
            if step == 2:
                net[0].weight.grad[0, 0, 0, 0] = float("inf")  # the step the scaler must skip
            scaler.step(optimizer)
            scaler.update()
        assert scaler.get_scale() == 128.0  # halved once, for the inf
    assert_same(ours, theirs, mine.state_dict(), reference.state_dict())
    assert mine.state_dict()["state"][0]["step"].item() == 3


def setup(**keys) -> dict:
    keys = {"iterations": 1, "batch_size": 50, "score_period": 0, **keys}
    return validate_study_config({"setups": {"s": keys}}, SCHEMA)["setups"]["s"]


@pytest.mark.mpi
@pytest.mark.parametrize(
    "keys, ranks",
    [
        ({"mode": "single"}, None),
        ({"mode": "data_parallel"}, 2),
        ({"mode": "grid", "grid": {"shape": "2x2", "data_ratio": 0.05, "fitness_sample_size": 50}}, 2),
    ],
    ids=["single", "data_parallel", "grid"],
)
def test_training_ranks_never_import_torch_dynamo(tmp_path, digits_dir, scoring, env, keys, ranks):
    classifier, reference = scoring if keys["mode"] == "grid" else (None, None)
    command = train_command(
        setup(**keys),
        digits_dir / "train.npz",
        tmp_path / "out",
        seed=1,
        ranks=ranks,
        classifier=classifier,
        reference=reference,
    )
    # Python lists every module each rank imports on its standard error.
    done = subprocess.run(
        command, capture_output=True, text=True, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "out" / "generator.pt").is_file()
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "torch.optim" in imported and "torch._dynamo" not in imported
