"""compute.deterministic: the same bits from the same inputs on a GPU, at some cost in speed; and
compute.tf32: float32 matrix products and convolutions in TensorFloat-32 on a GPU, faster and coarser.

On the CPU the training is deterministic anyway (every random draw comes from a seeded generator and
the CPU kernels do not race), so only CUDA needs switching: cuDNN picks its convolution algorithm
by timing (benchmark) and some of its and cuBLAS's kernels accumulate in a scheduling-dependent order.
"""

from __future__ import annotations

import os

import torch

# cuBLAS's two workspace configurations that make its results reproducible; it reads the variable
# when its first handle is created, so it must be set before the first matrix product on the GPU.
CUBLAS_DETERMINISTIC = (":4096:8", ":16:8")


def configure_determinism(device: torch.device, deterministic: bool) -> None:
    """Switch torch's CUDA kernels to deterministic ones (or to the fastest) for training on ``device``.

    Call it before the first CUDA computation of the process. A CPU device changes nothing."""
    if device.type != "cuda":
        return
    if deterministic:
        if os.environ.get("CUBLAS_WORKSPACE_CONFIG") not in CUBLAS_DETERMINISTIC:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_DETERMINISTIC[0]
        # An operation without a deterministic CUDA kernel then raises instead of silently varying.
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    else:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = False
        # Timing the convolution algorithms once per shape pays off over a training run's many steps.
        torch.backends.cudnn.benchmark = True


def configure_tf32(device: torch.device, allowed: bool) -> None:
    """TF32 (a 10-bit mantissa in the products, float32 sums) for float32 matrix products and cuDNN
    convolutions on ``device``, or full float32 for both. torch's own defaults differ between the two
    (products in float32, convolutions in TF32); a study says which it wants, once. A CPU changes nothing."""
    if device.type != "cuda":
        return
    torch.backends.cuda.matmul.allow_tf32 = allowed
    torch.backends.cudnn.allow_tf32 = allowed
