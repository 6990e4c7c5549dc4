"""torch.optim.Adam(fused=True) without torch.optim: the same kernel, state and state dict, without the import.

Every torch.optim optimiser imports torch._dynamo on its first call (its methods are wrapped to keep
torch.compile out): about 2,000 modules, triton, sympy and FSDP among them, 2.5 s of a CPU core here and
more where a node reads its Python from a shared file system, paid by every rank of every training job
before its first step. The pair-training modes and the grid's cells need plain Adam only, so they step
here: ``torch._fused_adam_``, the kernel that ``torch.optim.Adam(fused=True)`` calls, on the same
per-parameter state, hence the same bits (tests/test_fused_adam.py). Its state dict is torch's, so a
checkpoint loads into either. ZeRO and sharded weights keep torch.optim (torch.distributed reads its
optimisers' internals), and so does RMSprop.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

_FIXED = {
    "weight_decay": 0,
    "amsgrad": False,
    "maximize": False,
    "foreach": None,
    "capturable": False,
    "differentiable": False,
    "fused": True,
    "decoupled_weight_decay": False,
}


class FusedAdam:
    """Adam with torch.optim.Adam(fused=True)'s update, as its parameter groups, state and state dict
    define it; a GradScaler steps it as it steps torch's fused Adam (the scale and the inf flag it sets as
    ``grad_scale`` and ``found_inf`` go to the kernel)."""

    # A GradScaler passes its scale and inf flag to the kernel instead of unscaling the gradients itself.
    _step_supports_amp_scaling = True

    def __init__(
        self, parameters: Iterable[torch.nn.Parameter], lr: float, betas: tuple[float, float], eps: float = 1e-8
    ) -> None:
        self.defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, **_FIXED}
        self.param_groups: list[dict[str, Any]] = [{**self.defaults, "params": list(parameters)}]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for parameter in group["params"]:
                if parameter.grad is None:
                    continue
                if set_to_none:
                    parameter.grad = None
                else:
                    parameter.grad.detach_().zero_()

    def _state_of(self, parameter: torch.Tensor) -> dict[str, torch.Tensor]:
        if parameter not in self.state:
            # torch's fused Adam keeps its step count on the parameter's device, in float32.
            self.state[parameter] = {
                "step": torch.zeros((), dtype=torch.float32, device=parameter.device),
                "exp_avg": torch.zeros_like(parameter, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(parameter, memory_format=torch.preserve_format),
            }
        return self.state[parameter]

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            # One kernel call per device and dtype, as torch groups them; the update is per element.
            tensors: dict[tuple[torch.device, torch.dtype], list[list[torch.Tensor]]] = {}
            for parameter in group["params"]:
                if parameter.grad is None:
                    continue
                if parameter.grad.is_sparse:
                    raise RuntimeError("Adam does not support sparse gradients")
                state = self._state_of(parameter)
                lists = tensors.setdefault((parameter.device, parameter.dtype), [[], [], [], [], []])
                for found, value in zip(
                    lists, (parameter, parameter.grad, state["exp_avg"], state["exp_avg_sq"], state["step"])
                ):
                    found.append(value)
            beta1, beta2 = group["betas"]
            # Set by a GradScaler for this step only (it deletes them after), as for torch's fused Adam.
            scale, inf = getattr(self, "grad_scale", None), getattr(self, "found_inf", None)
            for (device, _), (parameters, grads, exp_avgs, exp_avg_sqs, steps) in tensors.items():
                grad_scale = None if scale is None else scale.to(device, non_blocking=True)
                found_inf = None if inf is None else inf.to(device, non_blocking=True)
                torch._foreach_add_(steps, 1)
                torch._fused_adam_(
                    parameters,
                    grads,
                    exp_avgs,
                    exp_avg_sqs,
                    [],
                    steps,
                    amsgrad=False,
                    lr=group["lr"],
                    beta1=beta1,
                    beta2=beta2,
                    weight_decay=0,
                    eps=group["eps"],
                    maximize=False,
                    grad_scale=grad_scale,
                    found_inf=found_inf,
                )
                if found_inf is not None:
                    # A skipped step (inf in the gradients) does not count.
                    torch._foreach_sub_(steps, [found_inf] * len(steps))

    def state_dict(self) -> dict[str, Any]:
        """torch.optim's form: state by parameter index, groups with the indices of their parameters."""
        index: dict[torch.Tensor, int] = {}
        groups = []
        for group in self.param_groups:
            for parameter in group["params"]:
                index.setdefault(parameter, len(index))
            groups.append(
                {**{k: v for k, v in group.items() if k != "params"}, "params": [index[p] for p in group["params"]]}
            )
        return {"state": {index[p]: dict(s) for p, s in self.state.items()}, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """A state dict of this class or of torch.optim.Adam(fused=True), as torch loads one: the groups'
        settings from it, the moments in each parameter's dtype and device, the step in float32."""
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups) or any(
            len(s["params"]) != len(g["params"]) for s, g in zip(saved, self.param_groups)
        ):
            raise ValueError("loaded state dict has a different number of parameter groups or parameters")
        parameters = {i: p for s, g in zip(saved, self.param_groups) for i, p in zip(s["params"], g["params"])}
        self.state = {}
        for key, values in state_dict["state"].items():
            parameter = parameters[int(key)]
            self.state[parameter] = {
                name: value.to(dtype=torch.float32 if name == "step" else parameter.dtype, device=parameter.device)
                for name, value in values.items()
            }
        self.param_groups = [{**s, "params": g["params"]} for s, g in zip(saved, self.param_groups)]


# What a mode steps its players with: torch's optimiser (ZeRO, sharded weights, RMSprop) or this Adam.
AnyOptimizer = torch.optim.Optimizer | FusedAdam
