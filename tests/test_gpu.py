"""Every training mode on CUDA through `ganstudy train` under mpiexec, as the CPU tests run them: the
same results as the CPU within float32 rounding, the same bits on 1 and 2 ranks and after a resume
with compute.deterministic, and the classifier's scores on the GPU. Skipped where torch finds no GPU;
`make test-gpu` runs them (`pytest -m gpu`)."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import SCHEMA, assert_trained_alike, spec_file
from ganstudy.config.validate import validate_study_config
from ganstudy.core.counter_random import scaled_mask
from ganstudy.evaluate.fid import FidScorer
from ganstudy.models.artifact import load_generator, sample_generator
from ganstudy.train.grid.draws import MUSTANGS_LOSSES
from jobs import kill_job, start_job, wait_for
from test_data_parallel_mpi import settings as dp_settings
from test_grid_mpi import assert_same
from test_grid_mpi import command as grid_command
from test_grid_mpi import result as grid_result
from test_grid_mpi import settings as grid_settings
from test_per_class_mpi import assert_same_generators
from test_per_class_mpi import command as train_command
from test_per_class_mpi import settings as per_class_settings
from test_tasks import paired_setup, save_tiny_split
from test_training import _setup as single_settings

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: torch finds none on this machine"),
]

CUDA = {"device": "cuda"}


def need_gpus(count: int) -> None:
    if torch.cuda.device_count() < count:
        pytest.skip(f"needs {count} GPUs, this node has {torch.cuda.device_count()}")


def run(line: list[str], env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run(line, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def record(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())


def losses(out: Path) -> list[dict[str, float | None]]:
    # An empty cell is a score not taken at that iteration (fid between score_period's points).
    with (out / "losses.csv").open() as handle:
        return [{k: float(v) if v else None for k, v in row.items()} for row in csv.DictReader(handle)]


def assert_ran_on_cuda(out: Path, ranks: int = 1, discriminator: str = "cuda:0", deterministic: bool = True) -> None:
    """run.json says the job trained on the GPU and recorded what decides the GPU's kernels."""
    facts = record(out)
    assert facts["world_size"] == ranks and facts["device"].startswith("cuda:")
    assert facts["discriminator_device"] == discriminator
    names = {torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())}
    assert len(facts["device_names"]) == ranks and all(set(rank) <= names for rank in facts["device_names"])
    assert (
        facts["cuda"]["torch_cuda"] == torch.version.cuda and facts["cuda"]["cudnn"] == torch.backends.cudnn.version()
    )
    assert facts["deterministic"] is deterministic and facts["tf32"] is False


def assert_finite_float32(out: Path) -> None:
    generator, _ = load_generator(out / "generator.pt")
    for name, tensor in generator.state_dict().items():
        if tensor.is_floating_point():
            assert tensor.dtype == torch.float32 and torch.isfinite(tensor).all(), name
    assert all(torch.isfinite(torch.tensor([row["d_loss"], row["g_loss"]])).all() for row in losses(out))


# --- every mode on CUDA ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mode, network, deterministic",
    [
        ("single", "dcgan", True),
        ("conditional", "dccgan", True),
        ("conditional", "dccgan", False),
    ],
)
def test_single_and_conditional_train_on_cuda(mode, network, deterministic, digits_dir, tmp_path, env):
    setup = single_settings(mode=mode, network=network, iterations=2, batch_size=64, latent_dim=16, checkpoint_period=0)
    run(train_command(1, setup, tmp_path, digits_dir, **CUDA, deterministic=deterministic), env)
    assert_ran_on_cuda(tmp_path, deterministic=deterministic)
    assert_finite_float32(tmp_path)
    generator, _ = load_generator(tmp_path / "generator.pt")
    assert (generator.labels is not None) == (mode == "conditional")


def test_a_dcgan_grid_stacked_in_the_general_form_on_cuda_gives_the_same_bits_on_1_and_2_ranks(
    digits_dir, scoring, tmp_path, env
):
    # On a GPU the whole layout (auto) stacks dcgan's cells: grouped convolutions through cuDNN, batch norms
    # and dropout masks keyed per row, hashed on the GPU. A stack shape whose rows differ from their pairs
    # would warn and run row by row: correct, but the GPU's launches would grow with the cells again.
    setup = {
        **grid_settings(shape="3x3", fitness_sample_size=32, score_sample_size=64, data_ratio=0.1),
        "network": "dcgan",
        "iterations": 2,
    }
    for ranks in (1, 2):
        done = run(grid_command(ranks, setup, tmp_path / f"n{ranks}", digits_dir, scoring, **CUDA), env)
        assert "network dcgan: cells stacked (general form)" in done.stderr
        assert "gives other bits than a row paired" not in done.stderr
        assert_ran_on_cuda(tmp_path / f"n{ranks}", ranks)
    assert_same(grid_result(tmp_path / "n1"), grid_result(tmp_path / "n2"))


@pytest.mark.parametrize("batch_cells", [True, False], ids=["stacked", "loop"])
def test_the_grid_on_cuda_gives_the_same_bits_on_1_and_2_ranks(batch_cells, digits_dir, scoring, tmp_path, env):
    # The grid scores its cells with the classifier on the GPU (FidScorer) while it trains. Stacked, a
    # rank's 4 cells meet cuBLAS as a batch of 4 matrices on 1 rank and of 2 on 2 ranks: this checks
    # that cuBLAS computes each matrix of a batch the same way whatever the batch count.
    setup = grid_settings(batch_cells=batch_cells)
    for ranks in (1, 2):
        run(grid_command(ranks, setup, tmp_path / f"n{ranks}", digits_dir, scoring, **CUDA), env)
        assert_ran_on_cuda(tmp_path / f"n{ranks}", ranks)
    # Two ranks share one GPU, or take one each: deterministic kernels give the same bits either way.
    assert_same(grid_result(tmp_path / "n1"), grid_result(tmp_path / "n2"))


def test_per_class_on_cuda_gives_the_same_bits_on_1_and_2_ranks(digits_dir, tmp_path, env):
    setup = per_class_settings()
    for ranks in (1, 2):
        run(train_command(ranks, setup, tmp_path / f"n{ranks}", digits_dir, **CUDA), env)
        assert_ran_on_cuda(tmp_path / f"n{ranks}", ranks)
    assert_same_generators(tmp_path / "n1", tmp_path / "n2")


def test_per_class_with_two_gpus_per_rank_puts_the_discriminator_on_the_second(digits_dir, tmp_path, env):
    need_gpus(2)
    setup = per_class_settings()
    run(train_command(1, setup, tmp_path / "one", digits_dir, **CUDA), env)
    run(train_command(1, setup, tmp_path / "two", digits_dir, **CUDA, gpus_per_rank=2), env)
    assert_ran_on_cuda(tmp_path / "two", discriminator="cuda:1")
    # Identical GPUs, deterministic kernels, every random draw from a seeded generator: where the
    # discriminator lives must not change a bit.
    assert_same_generators(tmp_path / "one", tmp_path / "two")


@pytest.mark.parametrize("ranks", [1, 2])
def test_data_parallel_trains_over_nccl(ranks, digits_dir, tmp_path, env):
    # nccl binds each rank to a GPU of its own: two ranks need two GPUs.
    need_gpus(ranks)
    # The perceptron: its float32 products stay out of TF32 on the GPU (cuDNN's convolutions would not),
    # and 512 rows make two Adam steps of one pass, few enough that rounding does not grow chaotic.
    setup = dp_settings(batch_size=512, iterations=1)
    run(train_command(ranks, setup, tmp_path / f"n{ranks}", digits_dir, **CUDA), env)
    assert_ran_on_cuda(tmp_path / f"n{ranks}", ranks)
    assert record(tmp_path / f"n{ranks}")["data_parallel"]["backend"] == "nccl"
    assert_finite_float32(tmp_path / f"n{ranks}")
    if ranks == 2:
        run(train_command(1, setup, tmp_path / "n1", digits_dir, **CUDA), env)
        one, _ = load_generator(tmp_path / "n1" / "generator.pt")
        two, _ = load_generator(tmp_path / "n2" / "generator.pt")
        # As on the CPU (test_data_parallel_mpi): two half-batch gradients summed by nccl differ from
        # one whole-batch gradient in the last bits only.
        assert_trained_alike(one.state_dict(), two.state_dict())


@pytest.mark.parametrize("ranks", [1, 2])
def test_fp16_with_gradient_scaling_and_zero_trains_float32_weights(ranks, digits_dir, tmp_path, env):
    need_gpus(ranks)
    options = {"zero": True}
    run(
        train_command(
            ranks,
            dp_settings(network="dcgan", batch_size=64, iterations=1, data_parallel=options),
            tmp_path / "fp32",
            digits_dir,
            **CUDA,
        ),
        env,
    )
    fp16 = dp_settings(network="dcgan", batch_size=64, iterations=1, data_parallel={**options, "amp": "fp16"})
    run(train_command(ranks, fp16, tmp_path / "fp16", digits_dir, **CUDA), env)
    facts = record(tmp_path / "fp16")["data_parallel"]
    assert facts["amp"] == "fp16" and facts["zero"] is True and facts["backend"] == "nccl"
    # Autocast computes in fp16 but the weights, the Adam state and the losses stay float32 and finite
    # (the gradient scaler skips the steps whose scaled gradients overflowed).
    assert_finite_float32(tmp_path / "fp16")
    half, _ = load_generator(tmp_path / "fp16" / "generator.pt")
    full, _ = load_generator(tmp_path / "fp32" / "generator.pt")
    # Otherwise autocast did nothing.
    assert any(not torch.equal(half.state_dict()[k], v) for k, v in full.state_dict().items() if v.is_floating_point())


@pytest.mark.parametrize("ranks", [1, 2])
def test_zero_3_with_cpu_offload_trains_what_plain_data_parallelism_trains_on_cuda(ranks, digits_dir, tmp_path, env):
    """fully_shard over nccl with the shards in pinned host memory, copied to the GPU layer by layer."""
    need_gpus(ranks)
    setup = dp_settings(batch_size=512, iterations=1)
    offload = dp_settings(batch_size=512, iterations=1, data_parallel={"zero": 3, "offload": "cpu"})
    for name, section in (("plain", setup), ("offload", offload)):
        run(train_command(ranks, section, tmp_path / name, digits_dir, **CUDA), env)
    assert_ran_on_cuda(tmp_path / "offload", ranks)
    facts = record(tmp_path / "offload")["data_parallel"]
    assert (facts["zero"], facts["offload"], facts["backend"]) == (3, "cpu", "nccl")
    plain, _ = load_generator(tmp_path / "plain" / "generator.pt")
    sharded, _ = load_generator(tmp_path / "offload" / "generator.pt")
    assert_trained_alike(plain.state_dict(), sharded.state_dict())


@pytest.mark.parametrize("network", ["pix2pix", "calo3d"])
def test_paired_and_energy_networks_train_to_the_same_bits_twice_on_cuda(network, tmp_path, env):
    # compute.deterministic makes torch refuse any CUDA kernel without a deterministic backward (calo3d's
    # AvgPool3d had none: seen on an H100 in benchmarks/data_parallel_networks.py); every layer of the
    # two networks must have one, and two runs must then agree bit for bit.
    setup = paired_setup(mode="data_parallel", network=network, **save_tiny_split(network, tmp_path / "train.npz"))
    for out in ("a", "b"):
        run(train_command(1, setup, tmp_path / out, tmp_path, **CUDA), env)
    assert_ran_on_cuda(tmp_path / "a")
    assert_finite_float32(tmp_path / "a")
    assert_same_generators(tmp_path / "a", tmp_path / "b")


# --- CUDA against the CPU, and against itself ------------------------------------------------------


@pytest.fixture(scope="module")
def cpu_and_cuda(digits_dir, env, tmp_path_factory) -> dict[str, Path]:
    """The same short run of Lipizzaner's perceptron GAN (no dropout, no convolution) on each device."""
    folder = tmp_path_factory.mktemp("cpu_and_cuda")
    setup = single_settings(iterations=3, checkpoint_period=0)
    outs = {device: folder / device for device in ("cpu", "cuda")}
    for device, out in outs.items():
        run(train_command(1, setup, out, digits_dir, device=device), env)
    return outs


def test_a_cuda_run_matches_the_cpu_run_within_float32_rounding(cpu_and_cuda):
    assert_ran_on_cuda(cpu_and_cuda["cuda"])
    # Weights start equal (built on the CPU, then moved) and batch order and noise come from CPU
    # generators, so the runs differ only in the order cuBLAS and the CPU's BLAS sum float32 products
    # (about 1e-7 relative per operation; torch keeps float32 matmuls out of TF32 by default). Perturbing
    # the initial weights by 1e-6 relative on the CPU moves these losses by under 1e-6 relative and the
    # weights by under 4e-6 after 3 passes (42 Adam steps); the tolerances leave a 100-fold margin, and a
    # real fault (another batch order or noise, a step skipped) moves weights by ~lr = 2e-4 per step.
    cpu, cuda = losses(cpu_and_cuda["cpu"]), losses(cpu_and_cuda["cuda"])
    assert [row["iteration"] for row in cuda] == [1, 2, 3]
    for a, b in zip(cpu, cuda):
        assert b["d_loss"] == pytest.approx(a["d_loss"], rel=1e-3) and b["g_loss"] == pytest.approx(
            a["g_loss"], rel=1e-3
        )
    on_cpu, _ = load_generator(cpu_and_cuda["cpu"] / "generator.pt")
    on_cuda, _ = load_generator(cpu_and_cuda["cuda"] / "generator.pt")
    for key, value in on_cpu.state_dict().items():
        torch.testing.assert_close(
            on_cuda.state_dict()[key], value, rtol=0, atol=1e-4, msg=lambda m, key=key: f"{key}: {m}"
        )


def test_a_killed_cuda_run_resumes_to_the_same_bits_as_an_uninterrupted_one(digits_dir, tmp_path, env):
    # The DC-GAN: cuDNN convolutions and dropout from the GPU's random stream, both of which a
    # non-deterministic run or a badly restored checkpoint would change. Enough passes that the job is
    # still running when its second checkpoint is complete.
    setup = single_settings(
        network="dcgan", iterations=40, batch_size=32, latent_dim=16, checkpoint_period=1, checkpoints_kept=2
    )
    run(train_command(1, setup, tmp_path / "whole", digits_dir, **CUDA), env)
    checkpoints = tmp_path / "ckpt"
    job = start_job(train_command(1, setup, tmp_path / "resumed", digits_dir, checkpoints, **CUDA), env)
    wait_for(lambda: len(list(checkpoints.glob("pair/iter-*/COMPLETE"))) >= 2, job)
    kill_job(job)
    assert not (tmp_path / "resumed" / "run.json").exists()
    done = run(train_command(1, setup, tmp_path / "resumed", digits_dir, checkpoints, **CUDA), env)
    assert "resumed from the checkpoint of iteration" in done.stderr
    assert_ran_on_cuda(tmp_path / "resumed")
    assert_same_generators(tmp_path / "whole", tmp_path / "resumed")

    def untimed(out):
        return [{k: v for k, v in row.items() if k not in ("seconds", "score_seconds")} for row in losses(out)]

    assert untimed(tmp_path / "whole") == untimed(tmp_path / "resumed")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_dropout_masks_on_cuda_are_the_cpu_s_bit_for_bit(dtype):
    """Hashed on the GPU in one go, on the CPU in blocks of columns: the same kept units, the same scale."""
    shape = torch.Size([48, 8, 25, 25, 25])  # calo3d's discriminator maps, a rank's share of a batch
    cpu = scaled_mask(0xC0FFEE << 20, 96, shape, 0.8, dtype, torch.device("cpu"))
    cuda = scaled_mask(0xC0FFEE << 20, 96, shape, 0.8, dtype, torch.device("cuda"))
    assert cuda.device.type == "cuda" and torch.equal(cuda.cpu(), cpu)


def test_a_stacked_update_sends_its_host_values_without_stopping_the_host():
    """The whole layout's per-update values from the host (the defenders' rows, Adam's factors) reach the GPU
    from pinned memory, queued like kernels: torch's sync debug mode raises at any call that makes the
    host wait for the device, as a copy from pageable memory does."""
    from ganstudy.core.device_copy import to_device
    from ganstudy.train.grid.population import Individual
    from ganstudy.train.grid.stacked import StackedPlayers, chosen_losses
    from ganstudy.train.losses import LOSSES
    from test_stacked_cells import SPECS, pairs

    cuda, spec = torch.device("cuda"), SPECS[0]
    nets = pairs(spec, 3)
    payloads = [Individual(g, torch.optim.Adam(g.parameters(), lr=1e-3), 1e-3, 0.0, "x/G").payload() for g, _ in nets]
    net = nets[0][0].stacked()
    players = StackedPlayers(net, payloads, (0.5, 0.999), cuda, row_by_row=False)
    z = torch.randn(3, 6, spec.latent_dim, device=cuda)
    steps = []
    for checked in (False, True, True):  # the first update unchecked: it allocates the pinned blocks
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error" if checked else "default")
        try:
            frozen = players.rows_of(to_device(torch.tensor([2, 0, 1]), cuda))
            net(players.params, z).square().mean().backward()
            players.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        steps.append([p.detach().clone() for p in players.params])
    assert all(torch.equal(f, p[[2, 0, 1]]) for f, p in zip(frozen, steps[1]))
    assert not any(torch.equal(a, b) for a, b in zip(steps[1], steps[2]))
    # Mustangs: each row's drawn loss picked on the device from all three, by an index sent alike.
    losses = [LOSSES.get(name) for name in MUSTANGS_LOSSES]
    out = torch.randn(3, 6, device=cuda)  # a stacked discriminator's logits: [rows, samples]
    choice = to_device(torch.tensor([0, 1, 0]), cuda)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        values = chosen_losses(losses, choice, lambda loss: loss.generator(out))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(values, torch.cat([losses[k].generator(out[[r]]) for r, k in enumerate([0, 1, 0])]))


def test_a_stacked_population_stays_on_the_device_and_crosses_the_wire_bit_for_bit():
    """A pass's trained rows become payloads on the GPU without the host waiting, the next pass stacks them
    there, and only the wire to another rank (or a checkpoint) takes them to the host and back."""
    import pickle

    from ganstudy.parallel.exchange import from_wire, placed, to_wire
    from ganstudy.train.grid.population import Individual
    from ganstudy.train.grid.stacked import StackedPlayers
    from test_stacked_cells import SPECS, pairs

    cuda, spec = torch.device("cuda"), SPECS[0]
    gens = [g.to(cuda) for g, _ in pairs(spec, 3)]
    payloads = [Individual(g, torch.optim.Adam(g.parameters(), lr=1e-3), 1e-3, 0.0, "x/G").payload() for g in gens]
    net = gens[0].stacked()
    players = StackedPlayers(net, payloads, (0.5, 0.999), cuda, row_by_row=False)
    net(players.params, torch.randn(3, 6, spec.latent_dim, device=cuda)).square().mean().backward()
    players.step()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        made = players.payloads(payloads)
    finally:
        torch.cuda.set_sync_debug_mode("default")

    def tensors(state):
        return [
            t
            for p in state
            for t in [*p["params"].values(), *(v for s in p["adam"]["state"].values() for v in s.values())]
        ]

    assert all(t.device == cuda for t in tensors(made))
    again = StackedPlayers(net, made, (0.5, 0.999), cuda, row_by_row=False)
    assert all(torch.equal(a, b) for a, b in zip(again.params + again.exp_avg, players.params + players.exp_avg))
    assert again.steps == players.steps == [1, 1, 1]
    wire = pickle.loads(pickle.dumps(to_wire(made), protocol=5))
    back, host = from_wire(wire, cuda), placed(made, torch.device("cpu"))
    assert all(t.device == cuda for t in tensors(back)) and all(t.device.type == "cpu" for t in tensors(host))
    assert all(
        torch.equal(a, b.cuda()) and torch.equal(a, c) for a, b, c in zip(tensors(made), tensors(host), tensors(back))
    )


@pytest.mark.parametrize("population", [1, 2])
@pytest.mark.parametrize("loss", ["bce", "mustangs"])
def test_a_captured_stacked_update_replays_the_eager_update_bit_for_bit(population, loss):
    """compute.cuda_graphs: a pass's generator and discriminator updates recorded as CUDA graphs and
    replayed on new inputs give the parameters and Adam moments that the same updates give eagerly."""
    from ganstudy.train.grid.population import Individual
    from ganstudy.train.grid.stacked import CapturedUpdate, StackedEngine, StackedPlayers, UpdateInputs
    from ganstudy.train.losses import LOSSES
    from test_stacked_cells import SPECS, pairs

    cuda, spec, cells, batch = torch.device("cuda"), SPECS[0], 3, 6
    rows = cells * population
    nets = pairs(spec, rows)
    g_net, d_net = nets[0][0].stacked(), nets[0][1].stacked()
    candidates = tuple(LOSSES.get(n) for n in MUSTANGS_LOSSES) if loss == "mustangs" else (LOSSES.get(loss),)
    images = torch.rand(40, *spec.image_shape, device=cuda) * 2 - 1

    def players():
        made = lambda k: [  # noqa: E731
            Individual(pair[k], torch.optim.Adam(pair[k].parameters()), 1e-3 * (1 + r), 0.0, "x").payload()
            for r, pair in enumerate(nets)
        ]
        return [
            StackedPlayers(net, made(k), (0.5, 0.999), cuda, row_by_row=False) for k, net in enumerate((g_net, d_net))
        ]

    engine = StackedEngine(g_net, d_net, whole=True)
    results = []
    for graphed in (False, True):
        gens, discs = players()
        updates = []
        for attackers, opponents, seen in ((gens, discs, None), (discs, gens, images)):
            run = lambda inputs, a=attackers, o=opponents, i=seen: engine._stacked_update(a, o, candidates, i, inputs)  # noqa: E731
            updates.append(CapturedUpdate(run) if graphed else run)
        values = []
        for step in range(5):  # the warm-up, the capture, then replays on new inputs
            draw = torch.Generator().manual_seed(step)
            for (attackers, _, seen), update in zip(((gens, discs, None), (discs, gens, images)), updates):
                inputs = UpdateInputs(
                    torch.randn(rows, batch, spec.latent_dim, generator=draw).to(cuda),
                    attackers.next_factors().to(cuda),
                    None if population == 1 else torch.randint(rows, (rows,), generator=draw).to(cuda),
                    torch.randint(3, (rows,), generator=draw).to(cuda) if loss == "mustangs" else None,
                    None if seen is None else torch.randint(40, (rows, batch), generator=draw).to(cuda),
                )
                values.append(update(inputs).clone())
        results.append(
            ([t.detach().clone() for p in (gens, discs) for t in p.params + p.exp_avg + p.exp_avg_sq], values)
        )
    (eager, eager_values), (graphed, graphed_values) = results
    assert all(torch.equal(a, b) for a, b in zip(eager_values, graphed_values))
    assert all(torch.equal(a, b) for a, b in zip(eager, graphed))
    assert not torch.equal(eager_values[-1], eager_values[-3])


@pytest.mark.parametrize("population", [1, 2])
def test_a_grid_with_cuda_graphs_trains_the_bits_of_one_without(population, digits_dir, scoring, tmp_path, env):
    """The whole run: compute.cuda_graphs true and false give the same generator, mixture weights and cell
    scores, and run.json says which replayed its updates."""
    setup = grid_settings(population_size=population)
    for graphs in (True, False):
        out = tmp_path / str(graphs)
        run(grid_command(1, setup, out, digits_dir, scoring, cuda_graphs=graphs, **CUDA), env)
        assert_ran_on_cuda(out)
        assert record(out)["cuda_graphs"] is graphs and record(out)["cuda_graphs_used"] is graphs
    assert_same(grid_result(tmp_path / "True"), grid_result(tmp_path / "False"))


def test_a_grid_checkpointed_with_cuda_graphs_resumes_without_them_to_the_same_bits(digits_dir, scoring, tmp_path, env):
    setup = grid_settings(checkpoint_period=1, checkpoints_kept=2)
    setup["iterations"] = 8
    run(grid_command(1, setup, tmp_path / "whole", digits_dir, scoring, cuda_graphs=True, **CUDA), env)
    checkpoints = tmp_path / "ckpt"
    resumed = lambda graphs: grid_command(  # noqa: E731
        1, setup, tmp_path / "resumed", digits_dir, scoring, checkpoints, cuda_graphs=graphs, **CUDA
    )
    job = start_job(resumed(True), env)
    wait_for(lambda: any(checkpoints.glob("iter-*/COMPLETE")), job)
    kill_job(job)
    done = run(resumed(False), env)
    assert "resumed from the checkpoint of iteration" in done.stderr
    assert record(tmp_path / "resumed")["cuda_graphs_used"] is False
    assert_same(grid_result(tmp_path / "whole"), grid_result(tmp_path / "resumed"))


# --- scoring with the classifier (no Inception) on the GPU -------------------------------------------


def test_the_classifier_scores_the_same_on_the_gpu_and_the_cpu(cpu_and_cuda, scoring):
    classifier, reference = scoring
    generator, spec = load_generator(cpu_and_cuda["cuda"] / "generator.pt")
    noise = torch.rand(1000, 1, 8, 8, generator=torch.Generator().manual_seed(0)) * 2 - 1
    samples = sample_generator(generator, spec.latent_dim, 1000, 3, 500)
    on_gpu = FidScorer(classifier, reference, torch.device("cuda", 0))
    on_cpu = FidScorer(classifier, reference, torch.device("cpu"))
    for images in (noise, samples):
        # cuDNN runs float32 convolutions in TF32 by default (10-bit mantissa, ~1e-3 relative per
        # layer): FID moves by about that much, far from it being of other features (O(1)).
        assert on_gpu.fid(images) == pytest.approx(on_cpu.fid(images), rel=1e-2)


def test_evaluate_scores_a_cuda_trained_generator_like_the_cpu_trained_one(cpu_and_cuda, scoring, tmp_path, env):
    classifier, reference = scoring
    evaluation = validate_study_config(
        {"evaluation": {"samples": 1000, "metrics": ["fid", "isc", "label_tvd"]}}, SCHEMA
    )["evaluation"]
    scores = {}
    for device, out in cpu_and_cuda.items():
        line = [
            "ganstudy",
            "evaluate",
            "--spec",
            spec_file(tmp_path / "evaluation.json", "evaluation", evaluation, seed=5),
            "--generator",
            str(out / "generator.pt"),
            "--run-record",
            str(out / "run.json"),
            "--classifier",
            str(classifier),
            "--reference",
            str(reference),
            "--trial",
            "0",
            "--out",
            str(tmp_path / f"{device}.json"),
        ]
        run(line, env)
        scores[device] = json.loads((tmp_path / f"{device}.json").read_text())["scores"]
    # The weights agree to 1e-4 (test above): a few pixels of the 1000 samples round to the next of 256
    # grey levels, which moves FID and IS by far less than 1% and flips at most a few labels.
    assert scores["cuda"]["fid"] == pytest.approx(scores["cpu"]["fid"], rel=1e-2)
    assert scores["cuda"]["isc"] == pytest.approx(scores["cpu"]["isc"], rel=1e-2)
    assert scores["cuda"]["label_tvd"] == pytest.approx(scores["cpu"]["label_tvd"], abs=1e-2)


@pytest.fixture
def scoring_flags():
    """A scoring job's CUDA settings (scoring_device: float32, deterministic kernels) in this test only: the
    other tests run in this process under torch's defaults."""
    from ganstudy.evaluate.extractor import scoring_device

    backends = torch.backends
    saved = (
        backends.cudnn.allow_tf32,
        backends.cuda.matmul.allow_tf32,
        backends.cudnn.deterministic,
        backends.cudnn.benchmark,
        torch.are_deterministic_algorithms_enabled(),
    )
    assert scoring_device("cuda") == "cuda" and not backends.cudnn.allow_tf32
    yield
    backends.cudnn.allow_tf32, backends.cuda.matmul.allow_tf32, backends.cudnn.deterministic = saved[:3]
    backends.cudnn.benchmark = saved[3]
    torch.use_deterministic_algorithms(saved[4])


def test_inception_features_on_the_gpu_are_the_cpu_s_within_float32_rounding(
    stand_in_inception, digits_dir, tmp_path, scoring_flags
):
    """A scoring job given a GPU (evaluation.extractor a network on GPU nodes) extracts there, in float32 (no
    TF32): the same features as on the CPU within float32 rounding, returned on the CPU, and reference
    statistics alike."""
    from ganstudy.data.arrays import Split, load_split, save_split, to_uint8
    from ganstudy.evaluate.extractor import inception_extractor
    from ganstudy.evaluate.scores import reference_statistics

    extractor = inception_extractor(stand_in_inception[0], None)
    split = load_split(digits_dir / "test.npz")
    save_split(tmp_path / "real.npz", Split(split.images[:64], split.labels[:64]))
    images = torch.from_numpy(to_uint8(split.images[:64]))
    on_cpu = extractor.features(images, ["2048", "logits_unbiased"], 32)
    on_gpu = extractor.features(images, ["2048", "logits_unbiased"], 32, "cuda")
    for layer in on_cpu:
        assert on_gpu[layer].device.type == "cpu"
        torch.testing.assert_close(on_gpu[layer], on_cpu[layer], rtol=1e-3, atol=1e-3)
    means = {}
    for device in ("cpu", "cuda"):
        reference_statistics(tmp_path / "real.npz", extractor, "2048", 32, tmp_path / f"{device}.npz", 1, device)
        means[device] = torch.from_numpy(np.load(tmp_path / f"{device}.npz")["mu"])
    torch.testing.assert_close(means["cuda"], means["cpu"], rtol=1e-3, atol=1e-3)


def test_evaluate_on_cuda_records_the_gpu_it_scored_on(cpu_and_cuda, digits_dir, stand_in_inception, tmp_path, env):
    from ganstudy.data.arrays import file_digest

    weights = stand_in_inception[0]
    inception = {"extractor": "inception", "inception_weights": str(weights), "inception_sha256": file_digest(weights)}
    evaluation = validate_study_config(
        {"evaluation": {"samples": 64, "batch_size": 32, "metrics": ["fid"], **inception}}, SCHEMA
    )["evaluation"]
    spec = spec_file(tmp_path / "evaluation.json", "evaluation", evaluation, seed=5)
    settings, quality, out = ["--spec", spec], tmp_path / "quality.npz", cpu_and_cuda["cuda"]
    real = ["--split", str(digits_dir / "test.npz"), "--extractor", "quality", "--out", str(quality)]
    run(["ganstudy", "reference-stats", *settings, *real, "--device", "cuda"], env)
    scored = ["--generator", str(out / "generator.pt"), "--run-record", str(out / "run.json")]
    against = ["--quality-reference", str(quality), "--trial", "0", "--out", str(tmp_path / "s.json")]
    run(["ganstudy", "evaluate", *settings, *scored, *against, "--device", "cuda"], env)
    record = json.loads((tmp_path / "s.json").read_text())
    assert record["scored_on"] == torch.cuda.get_device_name() and record["scores"]["fid"] > 0
