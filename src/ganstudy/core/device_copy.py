"""Host tensors copied to a device without stopping the host."""

from __future__ import annotations

import torch


def to_device(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``host`` copied to ``device`` without stopping the host. From pageable memory a CUDA copy first waits
    for every kernel queued before it, which at each update (the defenders' rows, Adam's factors, the
    keys of dropout masks) would keep the host from queueing the next update's kernels while the GPU runs
    this one's; from pinned memory it is queued on the stream like a kernel, and torch keeps the pinned
    block until it has run."""
    if device.type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)
