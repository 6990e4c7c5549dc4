"""Live networks that the per-cell loop reuses for the payloads it runs.

Building a module (and initialising weights that are overwritten at once) costs more than a small
network's forward pass, and ``load_state_dict`` walks the module tree with hooks and checks at every
load: an 18x18 digits grid's loop loads about 20,000 networks per iteration. A rank's cells share one
pool, since the loop engine runs one cell at a time, and a payload's tensors are copied straight into
the pooled network's (the names were checked once, when the pool built it).
"""

from __future__ import annotations

import torch
from torch import nn

from ganstudy.models import NetworkSpec, build_pair
from ganstudy.parallel.keyed_dropout import dropout_layers, keyed_dropout


class NetworkPool:
    """Networks of one set-up on one device, by kind (0 generator, 1 discriminator) and slot."""

    def __init__(self, network: str, spec: NetworkSpec, device: torch.device) -> None:
        self.network, self.spec, self.device = network, spec, device
        self._nets: dict[int, list[nn.Module]] = {0: [], 1: []}
        self._tensors: dict[int, list[dict[str, torch.Tensor]]] = {0: [], 1: []}

    def build(self, kind: int) -> nn.Module:
        """A new network of ``kind``, its nn.Dropout layers keyed (the cell's update names their masks); its
        random initialisation advances no stream of the caller's."""
        with torch.random.fork_rng(devices=[]):
            return keyed_dropout(build_pair(self.network, self.spec)[kind]).to(self.device)

    def drops(self) -> bool:
        """Whether the set-up's networks have nn.Dropout layers (keyed: ``KeyedDropout``)."""
        return any(dropout_layers(self.get(kind, 0)) for kind in (0, 1))

    def get(self, kind: int, slot: int) -> nn.Module:
        nets = self._nets[kind]
        while len(nets) <= slot:
            net = self.build(kind)
            nets.append(net)
            self._tensors[kind].append(net.state_dict(keep_vars=True))
        return nets[slot]

    def loaded(self, params: dict[str, torch.Tensor], kind: int, slot: int) -> nn.Module:
        """The pooled network at ``slot`` holding ``params`` (a state dict of the set-up's network)."""
        net = self.get(kind, slot)
        targets = self._tensors[kind][slot]
        if params.keys() != targets.keys():
            # Not the set-up's network: load_state_dict names the missing and unexpected keys.
            net.load_state_dict(params)
        with torch.no_grad():
            for name, target in targets.items():
                target.copy_(params[name])
        return net
