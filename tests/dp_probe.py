"""Run under mpiexec by test_data_parallel_mpi.py: builds DataParallelTrainers on fixed data and saves,
from rank 0, what the test compares with a single-process reference.

    mpiexec -n W python dp_probe.py ACTION SETTINGS_JSON OUT
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.core.seeding import pair_seeds
from ganstudy.parallel.process_group import torch_process_group
from ganstudy.parallel.world import mpi_world
from ganstudy.train.data_parallel import DataParallelTrainer
from ganstudy.train.job import job_settings
from ganstudy.train.network_spec import network_spec
from ganstudy.train.tasks import Batch

CPU = (torch.device("cpu"), torch.device("cpu"))


def fixed_data(network: str):
    """48 images of 8x8 in [-1, 1] and their labels (0..3), the same in every process; for calo3d, 48
    showers of 5x5x7 with their primary energies."""
    from ganstudy.data.arrays import Split

    generator = torch.Generator().manual_seed(0)
    labels = (torch.arange(48) % 4).numpy()
    if network == "calo3d":
        energy = 0.1 + 4.9 * torch.rand(48, 1, generator=generator)
        showers = torch.rand(48, 1, 5, 5, 7, generator=generator) * energy.view(48, 1, 1, 1, 1) / 20
        return Split(showers.numpy(), labels, conditions=energy.numpy())
    images = (torch.rand(48, 1, 8, 8, generator=generator) * 2 - 1).numpy()
    return Split(images, labels)


NOISE_SEED = 1


def fixed_noise(rows: int, latent: int) -> torch.Tensor:
    return torch.randn(rows, latent, generator=torch.Generator().manual_seed(NOISE_SEED))


def fixed_batch(pair: DataParallelTrainer, rows: torch.Tensor) -> Batch:
    """The pair's batch of ``rows`` with fixed_noise's noise (the task draws it from a stream seeded alike)."""
    return pair.task.draw(pair.data, rows, torch.Generator().manual_seed(NOISE_SEED), pair.g_device)


def trainer(section: dict, world) -> DataParallelTrainer:
    setup = TrainingSettings.of(job_settings(section))
    data = fixed_data(setup.network)
    conditional = setup.network == "dccgan"
    spec = network_spec(setup, data, conditional=conditional, any_task=True)
    return DataParallelTrainer(
        setup,
        spec,
        data.images,
        data.labels if conditional else None,
        pair_seeds(7, 0),
        CPU,
        world,
        conditions=data.conditions,
    )


def global_mean(loss: torch.Tensor, world) -> torch.Tensor:
    """A step returns its shard's loss: the global batch's loss is the mean over ranks."""
    import torch.distributed as dist

    if world.size > 1:
        dist.all_reduce(loss)
    return loss / world.size


def grads(network: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in network.named_parameters()}


def main() -> None:
    action, setup, out = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])
    world = mpi_world()
    saved: dict = {}
    with torch_process_group(world, CPU[0]):
        batch = torch.arange(setup["batch_size"])
        if action == "steps":
            # One discriminator step of a fresh pair, then one generator step of another fresh pair.
            first = trainer(setup, world)
            saved["d_loss"] = global_mean(first._discriminator_update(fixed_batch(first, batch)), world)
            saved["d_grads"] = grads(first.discriminator)
            second = trainer(setup, world)
            saved["g_loss"] = global_mean(second._generator_update(fixed_batch(second, batch)), world)
            saved["g_grads"] = grads(second.generator)
        elif action == "train":
            pair = trainer(setup, world)
            pair.train(None)
            saved = {
                "generator": pair.full_state(pair.generator),
                "discriminator": pair.full_state(pair.discriminator),
                "history": pair.history,
            }
        elif action == "layout":
            # What each rank holds of each parameter: its shard's elements and device, against the whole's.
            pair = trainer(setup, world)
            from torch.distributed.tensor import DTensor

            layout = {}
            for net in ("generator", "discriminator"):
                for name, p in getattr(pair, net).named_parameters():
                    local = p.to_local() if isinstance(p, DTensor) else p
                    layout[f"{net}.{name}"] = (local.numel(), p.numel(), str(local.device), type(p).__name__)
            units = sum(type(m).__name__.startswith("FSDP") for m in pair.generator.modules())
            saved = {"layouts": world.comm.gather(layout, root=0), "units": units}
        elif action == "resume":
            # A run that keeps its checkpoints, then a fresh start resuming from the older one of the two.
            folder = out.parent / f"{out.stem}-checkpoints"
            whole = trainer(setup, world)
            whole.train(folder)
            if world.is_root:
                iterations = sorted(folder.glob("pair/iter-*"))
                shutil.rmtree(iterations[-1])
            world.comm.Barrier()
            resumed = trainer(setup, world)
            resumed.train(folder)
            saved = {
                "whole": whole.full_state(whole.generator),
                "resumed": resumed.full_state(resumed.generator),
                "whole_d": whole.full_state(whole.discriminator),
                "resumed_d": resumed.full_state(resumed.discriminator),
            }
    if world.is_root:
        torch.save(saved, out)


if __name__ == "__main__":
    main()
