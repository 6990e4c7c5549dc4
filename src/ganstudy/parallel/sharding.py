"""ZeRO stages 2 and 3 (Rajbhandari et al., SC 2020) with optional CPU offload, through torch's
fully_shard (FSDP2), the maintained implementation in PyTorch itself, on the default process group
(gloo on CPUs, nccl on GPUs).

Each conv and linear layer is one sharding unit and the rest of a network (norm layers, embeddings)
another, so stage 3 holds one layer's whole weights at a time, whatever the network: a plugin's
network needs no wrapping policy of its own. Gradients are reduce-scattered in the backward pass as
the mean over ranks, so a trainer adds no all-reduce of its own. Stage 1 stays with torch's
ZeroRedundancyOptimizer (train/data_parallel.py).

Checkpoints and the finished generator hold whole tensors (gathered on rank 0, in host memory), so a
run written with one stage or rank count resumes with another, and an artifact loads like any mode's.
torch's FSDP modules are imported where they are used: they take over a second to import, which every
job that does not shard would pay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

# Where a sharding unit starts: layers whose weights dominate a GAN's memory.
UNIT_LAYERS = (nn.modules.conv._ConvNd, nn.Linear)


def _full() -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # Whole tensors on rank 0, in host memory: a checkpoint never needs the GPU memory of a whole network.
    return StateDictOptions(full_state_dict=True, cpu_offload=True)


@dataclass(frozen=True)
class Sharding:
    """ZeRO ``stage`` 2 or 3 over the default process group; ``offload`` keeps the shards on the host."""

    stage: int
    offload: bool

    def shard(self, network: nn.Module, device: torch.device) -> nn.Module:
        """``network`` (already on ``device``) sharded in place over the ranks; returns it."""
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard

        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        # Pinned host memory overlaps the copies with compute on a GPU; pinning needs a CUDA driver.
        policy = CPUOffloadPolicy(pin_memory=device.type == "cuda") if self.offload else OffloadPolicy()
        # Stage 2 keeps the gathered weights from the forward to the backward pass; stage 3 frees them.
        options = {"mesh": mesh, "reshard_after_forward": self.stage == 3, "offload_policy": policy}
        for module in [m for m in network.modules() if m is not network and isinstance(m, UNIT_LAYERS)]:
            fully_shard(module, **options)
        fully_shard(network, **options)
        return network


def full_state(network: nn.Module) -> dict[str, torch.Tensor]:
    """A sharded network's whole state on rank 0 ({} on the others); a collective."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(network, options=_full())


def full_optimizer_state(network: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The whole optimiser state of a sharded network on rank 0 ({} on the others); a collective."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    return get_optimizer_state_dict(network, optimizer, options=_full())


def load_full_state(
    network: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any], optimizer_state: dict[str, Any]
) -> None:
    """Shard whole states that every rank has read (a checkpoint) into ``network`` and ``optimizer``."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict, set_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True)
    set_model_state_dict(network, state, options=options)
    set_optimizer_state_dict(network, optimizer, optimizer_state, options=options)
