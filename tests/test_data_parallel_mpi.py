"""Data-parallel training under mpiexec -n 1/2: the all-reduced gradients are those of the whole global
batch in one process, accumulation and ZeRO change nothing but memory, clipping bounds the norm, and
the training mode runs end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from conftest import REPO, SCHEMA, assert_trained_alike, train_command
from ganstudy.config.validate import validate_study_config
from ganstudy.core.seeding import pair_seeds
from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.artifact import load_generator
from ganstudy.parallel.rank_work import shard_rows
from ganstudy.parallel.shard_dropout import row_masks, shard_dropout

pytestmark = pytest.mark.mpi

PROBE = REPO / "tests" / "dp_probe.py"
BASE = {
    "mode": "data_parallel",
    "batch_size": 16,
    "latent_dim": 8,
    "hidden_units": 32,
    "iterations": 2,
    "checkpoint_period": 0,
    "score_period": 0,
}
# Float sums in another order (two half-batch gradients added vs one whole-batch reduction, batch-norm
# statistics summed over ranks) differ in the last bits: 1e-5 relative is a thousand float32 ulps, far
# below any real discrepancy (a wrong shard or a missing average is off by O(1)).
TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}


def settings(**keys) -> dict:
    options = keys.pop("data_parallel", {})
    return validate_study_config({"setups": {"p": {**BASE, **keys, "data_parallel": options}}}, SCHEMA)["setups"]["p"]


def probe(action: str, ranks: int, setup: dict, out: Path, env: dict) -> dict:
    command = ["mpiexec", "-n", str(ranks), sys.executable, str(PROBE), action, json.dumps(setup), str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out)


def reference_steps(setup: dict) -> dict:
    """One process, plain torch modules, the whole global batch: the discriminator's gradient of a fresh
    pair, and the generator's gradient of another fresh pair (what dp_probe's 'steps' computes)."""
    from dp_probe import fixed_data, fixed_noise

    data = fixed_data(setup["network"])
    conditional = setup["network"] == "dccgan"
    spec = NetworkSpec(data.image_shape, setup["latent_dim"], setup["hidden_units"], 4 if conditional else 0)
    seeds = pair_seeds(7, 0)
    rows = setup["batch_size"]
    real = torch.from_numpy(data.images[:rows])
    labels = torch.from_numpy(data.labels[:rows]) if conditional else None
    noise = fixed_noise(rows, setup["latent_dim"])
    call = (lambda net, x: net(x, labels)) if conditional else (lambda net, x: net(x))

    def fresh():
        torch.manual_seed(seeds["init"])
        generator, discriminator = build_pair(setup["network"], spec)
        # Standard batch norm; dropout with the masks the global batch's rows get.
        draws = torch.Generator().manual_seed(seeds["dropout"])
        return generator, shard_dropout(discriminator), lambda: int(torch.randint(0, 2**62, (1,), generator=draws))

    generator, discriminator, draw = fresh()
    seed_real, seed_fake = draw(), draw()
    with torch.no_grad():
        fake = call(generator, noise)
    with row_masks(discriminator, seed_real, 0):
        d_real = call(discriminator, real)
    with row_masks(discriminator, seed_fake, 0):
        d_fake = call(discriminator, fake)
    bce = F.binary_cross_entropy_with_logits
    d_loss = bce(d_real, torch.ones_like(d_real)) + bce(d_fake, torch.zeros_like(d_fake))
    d_loss.backward()
    d_grads = {name: p.grad.clone() for name, p in discriminator.named_parameters()}

    generator, discriminator, draw = fresh()
    with row_masks(discriminator, draw(), 0):
        d_fake = call(discriminator, call(generator, noise))
    g_loss = bce(d_fake, torch.ones_like(d_fake))
    g_loss.backward()
    g_grads = {name: p.grad.clone() for name, p in generator.named_parameters()}
    return {"d_loss": d_loss.detach(), "d_grads": d_grads, "g_loss": g_loss.detach(), "g_grads": g_grads}


def assert_close_dicts(a: dict, b: dict, **tolerance) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], **tolerance, msg=lambda m, key=key: f"{key}: {m}")


@pytest.mark.parametrize("network", ["perceptron4", "dcgan", "dccgan"])
@pytest.mark.parametrize("ranks", [1, 2])
def test_allreduced_gradients_are_the_whole_batch_gradient(network, ranks, tmp_path, env):
    setup = settings(network=network)
    got = probe("steps", ranks, setup, tmp_path / "steps.pt", env)
    want = reference_steps(setup)
    # Each rank's loss is its shard's mean: their mean is the whole batch's loss.
    torch.testing.assert_close(got["d_loss"], want["d_loss"], **TOLERANCE)
    torch.testing.assert_close(got["g_loss"], want["g_loss"], **TOLERANCE)
    assert_close_dicts(got["d_grads"], want["d_grads"], **TOLERANCE)
    assert_close_dicts(got["g_grads"], want["g_grads"], **TOLERANCE)


@pytest.mark.parametrize("ranks", [1, 2])
def test_accumulating_two_micro_batches_is_one_double_batch(ranks, tmp_path, env):
    # 4 rows per micro-batch: 2 micro-batches on each of 1 or 2 ranks make the global batch of 8 or 16.
    setup = settings(network="perceptron4", batch_size=8 * ranks, data_parallel={"accumulation_steps": 2})
    got = probe("steps", ranks, setup, tmp_path / "steps.pt", env)
    want = reference_steps(setup)
    assert_close_dicts(got["d_grads"], want["d_grads"], **TOLERANCE)
    assert_close_dicts(got["g_grads"], want["g_grads"], **TOLERANCE)


def test_clipping_scales_the_averaged_gradient_down_to_the_norm(tmp_path, env):
    limit = 1e-4
    setup = settings(network="dcgan", data_parallel={"clip_norm": limit})
    got = probe("steps", 2, setup, tmp_path / "steps.pt", env)
    want = reference_steps(setup)
    for player in ("d_grads", "g_grads"):
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in got[player].values()]))
        full = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in want[player].values()]))
        # (torch divides by norm + 1e-6: on gradients of norm ~0.01 that is 1e-4 relative.)
        assert full > 10 * limit and norm == pytest.approx(limit, rel=1e-3)
        # Same direction: the unclipped gradient scaled by limit / norm.
        scaled = {k: v * (limit / full) for k, v in want[player].items()}
        assert_close_dicts(got[player], scaled, rtol=1e-3, atol=1e-10)


def test_zero_sharded_adam_trains_the_same_weights_as_plain_adam(tmp_path, env):
    plain = probe("train", 2, settings(network="dcgan"), tmp_path / "plain.pt", env)
    zero = probe("train", 2, settings(network="dcgan", data_parallel={"zero": True}), tmp_path / "zero.pt", env)
    assert len(plain["history"]) == 2
    assert_close_dicts(zero["generator"], plain["generator"], **TOLERANCE)
    assert_close_dicts(zero["discriminator"], plain["discriminator"], **TOLERANCE)


@pytest.mark.parametrize(
    "zero", [{"zero": 2}, {"zero": 3}, {"zero": 3, "offload": "cpu"}], ids=["stage2", "stage3", "stage3-offload"]
)
@pytest.mark.parametrize("network", ["dcgan", "calo3d"])
def test_sharded_weights_gradients_and_state_train_the_same_weights_as_plain_data_parallelism(
    network, zero, tmp_path, env
):
    """ZeRO stages 2 and 3 (torch's fully_shard), with and without CPU offload: on 2 ranks the same
    weights as one replica per rank, after two steps of each player (calo3d: RMSprop, split updates)."""
    sizes = {"latent_dim": 4, "hidden_units": 2} if network == "calo3d" else {}
    plain = probe("train", 2, settings(network=network, **sizes), tmp_path / "plain.pt", env)
    sharded = probe("train", 2, settings(network=network, data_parallel=zero, **sizes), tmp_path / "sharded.pt", env)
    assert_close_dicts(sharded["generator"], plain["generator"], **TOLERANCE)
    assert_close_dicts(sharded["discriminator"], plain["discriminator"], **TOLERANCE)
    for a, b in zip(plain["history"], sharded["history"]):
        assert a["d_loss"] == pytest.approx(b["d_loss"], rel=1e-5) and a["g_loss"] == pytest.approx(
            b["g_loss"], rel=1e-5
        )


def test_zero_3_leaves_each_rank_its_shard_of_every_parameter(tmp_path, env):
    got = probe(
        "layout", 2, settings(network="dcgan", data_parallel={"zero": 3, "offload": "cpu"}), tmp_path / "layout.pt", env
    )
    first, second = got["layouts"]
    assert first.keys() == second.keys()
    for name, (local, whole, device, kind) in first.items():
        # Sharded along dim 0: rank 0 holds the first ceil(n/2) rows, rank 1 the rest, in host memory.
        assert kind == "DTensor" and device == "cpu", name
        assert local + second[name][0] == whole and local >= whole / 2, name
    # dcgan's generator: its linear layer and three convolutions are units of their own, and the rest one.
    assert got["units"] == 5


def test_two_ranks_train_what_one_rank_trains(tmp_path, env):
    one = probe("train", 1, settings(network="dcgan"), tmp_path / "one.pt", env)
    two = probe("train", 2, settings(network="dcgan"), tmp_path / "two.pt", env)
    # Six Adam steps per player: last-bit differences of each step's sums, amplified only where a gradient cancels.
    assert_trained_alike(one["generator"], two["generator"])
    for a, b in zip(one["history"], two["history"]):
        assert a["d_loss"] == pytest.approx(b["d_loss"], rel=1e-5) and a["g_loss"] == pytest.approx(
            b["g_loss"], rel=1e-5
        )


def test_weak_scaling_is_strong_scaling_of_the_per_rank_batch_times_the_ranks_at_the_rate_times_the_ranks(
    tmp_path, env
):
    """Horovod's recipe (Hesam et al.): batch_size rows per rank and lr x ranks."""
    weak = probe(
        "train",
        2,
        settings(network="dcgan", batch_size=8, lr=0.0002, data_parallel={"scaling": "weak"}),
        tmp_path / "weak.pt",
        env,
    )
    strong = probe("train", 2, settings(network="dcgan", batch_size=16, lr=0.0004), tmp_path / "strong.pt", env)
    assert_close_dicts(weak["generator"], strong["generator"], rtol=1e-6, atol=1e-7)
    assert_close_dicts(weak["discriminator"], strong["discriminator"], rtol=1e-6, atol=1e-7)


def test_per_rank_batch_norm_is_horovod_s_and_differs_from_the_global_one_on_two_ranks(tmp_path, env):
    per_rank = {"data_parallel": {"batch_norm": "per_rank"}}
    one = probe("train", 1, settings(network="dcgan", **per_rank), tmp_path / "one.pt", env)
    # On one rank both normalise the same rows; only the kernels differ (torch's layer vs the synchronised one).
    assert_trained_alike(
        one["generator"], probe("train", 1, settings(network="dcgan"), tmp_path / "g1.pt", env)["generator"]
    )
    two = probe("train", 2, settings(network="dcgan", **per_rank), tmp_path / "two.pt", env)
    two_global = probe("train", 2, settings(network="dcgan"), tmp_path / "g2.pt", env)
    assert any(
        not torch.allclose(two["generator"][key], two_global["generator"][key], rtol=1e-3, atol=1e-4)
        for key in two["generator"]
    )


def test_bf16_autocast_changes_the_numbers_a_little(tmp_path, env):
    setup = settings(network="dcgan", data_parallel={"amp": "bf16"})
    got = probe("steps", 2, setup, tmp_path / "steps.pt", env)
    want = reference_steps(setup)
    # bf16 keeps 8 bits of mantissa: close to float32, but not equal (else autocast did nothing).
    assert got["d_loss"] != want["d_loss"]
    torch.testing.assert_close(got["d_loss"], want["d_loss"], rtol=2e-2, atol=0)
    torch.testing.assert_close(got["g_loss"], want["g_loss"], rtol=2e-2, atol=0)


# calo3d: 3DGAN's loop (split discriminator updates, two generator updates, label flips) with RMSprop.
@pytest.mark.parametrize("zero", [{"zero": True}, {"zero": 3, "offload": "cpu"}], ids=["stage1", "stage3-offload"])
@pytest.mark.parametrize("network", ["dcgan", "calo3d"])
def test_a_resumed_zero_run_gives_the_same_bits(network, zero, tmp_path, env):
    sizes = {"latent_dim": 4, "hidden_units": 2} if network == "calo3d" else {}
    setup = settings(network=network, iterations=3, checkpoint_period=1, data_parallel=zero, **sizes)
    got = probe("resume", 2, setup, tmp_path / "resume.pt", env)
    for net in ("", "_d"):
        whole, resumed = got[f"whole{net}"], got[f"resumed{net}"]
        for key in whole:
            assert torch.equal(whole[key], resumed[key]), key


def test_the_mode_writes_a_plain_generator_and_the_shard_timings(digits_dir, tmp_path, env):
    setup = settings(network="dccgan", batch_size=32, iterations=1)
    out = tmp_path / "run"
    command = train_command(setup, digits_dir / "train.npz", out, seed=5, ranks=2, name="dp")
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    generator, _ = load_generator(out / "generator.pt")
    assert type(generator).__name__ == "ConditionalGenerator"
    record = json.loads((out / "run.json").read_text())
    assert record["world_size"] == 2 and record["data_parallel"]["backend"] == "gloo"
    assert record["data_parallel"]["rows_per_micro_batch"] == 16 and record["data_parallel"]["global_batch"] == 32
    profile = (out / "profile.csv").read_text().splitlines()
    assert {line.split(",")[1] for line in profile[1:]} == {"shard0", "shard1"}
    assert {line.split(",")[3] for line in profile[1:]} == {"compute", "allreduce", "step"}


def test_a_global_batch_that_does_not_split_is_named(digits_dir, tmp_path, env):
    with pytest.raises(
        GanstudyError, match="batch_size 30 does not split into 2 rank.* x 2 micro-batch.*multiple of 4"
    ):
        shard_rows(30, 2, 2)
    setup = settings(batch_size=33)
    command = train_command(setup, digits_dir / "train.npz", tmp_path / "run", seed=5, ranks=2, name="dp")
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode != 0 and "batch_size 33 does not split into 2 rank(s)" in done.stderr
    assert "Traceback" not in done.stderr


def test_fp16_on_the_cpu_is_refused_with_the_alternative(digits_dir, tmp_path, env):
    setup = settings(data_parallel={"amp": "fp16"})
    command = train_command(setup, digits_dir / "train.npz", tmp_path / "run", seed=5, name="dp", device="cpu")
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode != 0 and "amp fp16 needs a GPU" in done.stderr and "use bf16" in done.stderr


def test_global_batch_norm_in_one_process_is_torch_s_batch_norm():
    from ganstudy.parallel.sync_batchnorm import GlobalBatchNorm

    torch.manual_seed(0)
    ours, theirs = GlobalBatchNorm(3, eps=0.8, momentum=0.1), torch.nn.BatchNorm2d(3, eps=0.8, momentum=0.1)
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5)
        theirs.bias.uniform_(-0.5, 0.5)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(6, 3, 4, 4) * 3 + 1
    for norm in (ours, theirs):
        x.grad = None
        x.requires_grad_(True)
        (norm(x) ** 3).sum().backward()
        norm.out, norm.grad = norm(x.detach()), x.grad.clone()
    torch.testing.assert_close(ours.out, theirs.out, **TOLERANCE)
    torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(ours.weight.grad, theirs.weight.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(ours.bias.grad, theirs.bias.grad, rtol=1e-4, atol=1e-5)
    for key in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(ours, key), getattr(theirs, key), **TOLERANCE)
    ours.eval(), theirs.eval()
    torch.testing.assert_close(ours(x.detach()), theirs(x.detach()), **TOLERANCE)
