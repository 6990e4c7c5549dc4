"""The network contract, checked on one tiny batch when a training job starts: a network's builder
returns two torch modules; the generator, called as its training task calls it, returns images of the
data's shape; the discriminator answers in the shape the task takes (one logit per row for noise
networks), and its answer gives a finite loss whose gradient reaches the generator.
A plugin that breaks it is named here, not by a shape error deep in a training loop."""

from __future__ import annotations

import torch
from torch import nn

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.errors import GanstudyError
from ganstudy.models import NETWORKS, NetworkSpec, build_pair, get_network
from ganstudy.train.losses import LOSSES
from ganstudy.train.tasks import TASKS, TrainingData

ROWS = 2
# (network, spec) pairs this process has checked: every mode asks for its spec, some more than once.
_checked: set[str] = set()


def check_pair(setup: TrainingSettings, spec: NetworkSpec) -> None:
    """Raise, naming the network, its origin and what to fix, when its pair breaks the contract."""
    key = f"{setup.network} {spec!r}"
    if key in _checked:
        return
    network = get_network(setup.network)
    # A fresh pair on the CPU, its random draws in a forked stream: the training's numbers stay as they were.
    named = f"network '{setup.network}' ({NETWORKS.origin(setup.network)})"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        try:
            problem = _problem(setup, spec, network.task)
        except GanstudyError as refusal:  # the builder's own: it says what to change; this says whose it is
            raise GanstudyError(f"{named}: {refusal}") from None
    if problem:
        raise GanstudyError(f"{named} {problem}; fix its builder")
    _checked.add(key)


def _problem(setup: TrainingSettings, spec: NetworkSpec, task_name: str) -> str | None:
    try:
        pair = build_pair(setup.network, spec)
    except GanstudyError:
        raise  # the builder's own refusal (an image size it cannot take) says what to do
    except Exception as exc:  # a plugin's builder may fail in any way; name the plugin either way
        return f"did not build for {spec}: {type(exc).__name__}: {exc}"
    if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(net, nn.Module) for net in pair)):
        return f"built {type(pair).__name__}, not a (generator, discriminator) tuple of torch modules"
    generator, discriminator = pair
    generator.train(), discriminator.train()
    task = TASKS.get(task_name)(setup)
    images = torch.rand(ROWS, *spec.image_shape) * 2 - 1
    labels = torch.zeros(ROWS, dtype=torch.long) if spec.num_classes else None
    conditions = torch.rand(ROWS, *spec.condition_shape) + 0.5 if spec.condition_shape is not None else None
    data = TrainingData(images, labels, conditions)
    try:
        batch = task.draw(data, torch.arange(ROWS), torch.Generator().manual_seed(0), torch.device("cpu"))
        fake = task.fake(generator, batch)
    except Exception as exc:
        return f"generator failed on a batch of {ROWS} as task '{task_name}' calls it: {type(exc).__name__}: {exc}"
    if not isinstance(fake, torch.Tensor) or tuple(fake.shape) != (ROWS, *spec.image_shape):
        found = tuple(fake.shape) if isinstance(fake, torch.Tensor) else type(fake).__name__
        return f"generator returned {found} for {ROWS} rows, not images of shape {(ROWS, *spec.image_shape)}"
    try:
        answer = task.judge(discriminator, fake, batch)
    except Exception as exc:
        return f"discriminator failed on a batch of {ROWS} as task '{task_name}' calls it: {type(exc).__name__}: {exc}"
    shape = task.answer_shape(ROWS)
    if shape is not None and (not isinstance(answer, torch.Tensor) or tuple(answer.shape) != shape):
        found = tuple(answer.shape) if isinstance(answer, torch.Tensor) else type(answer).__name__
        return f"discriminator answered {found} for {ROWS} rows, not {shape} (what task '{task_name}' takes)"
    try:
        loss = task.generator_loss(LOSSES.get("bce"), answer, fake, batch).mean()
    except Exception as exc:
        return f"discriminator's answer gave no loss as task '{task_name}' computes it: {type(exc).__name__}: {exc}"
    if not torch.isfinite(loss):
        return f"gave a non-finite generator loss ({float(loss)}) on a batch of {ROWS}"
    loss.backward()
    if not any(p.grad is not None and p.grad.abs().sum() > 0 for p in generator.parameters()):
        return "gave a generator loss whose gradient does not reach the generator's parameters"
    return None
