"""The network a set-up builds for its data, refused before training when mode, network and data do not fit."""

from __future__ import annotations

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.data.arrays import Split
from ganstudy.errors import GanstudyError
from ganstudy.models import NetworkSpec, get_network
from ganstudy.train.network_check import check_pair


def network_spec(
    setup: TrainingSettings, data: Split, conditional: bool = False, any_task: bool = False
) -> NetworkSpec:
    """The set-up's network for this data; ``conditional`` says whether the mode feeds labels, ``any_task``
    whether it trains networks of every task (single, data_parallel) or of the noise task only."""
    name = setup.network
    network = get_network(name)
    if network.task != "noise" and not any_task:
        raise GanstudyError(
            f"mode '{setup.mode}' trains networks of noise only, but network '{name}' maps {network.task} "
            "inputs: train it with mode single or data_parallel"
        )
    if network.conditional != conditional:
        raise GanstudyError(
            f"network '{name}' is conditional: train it with mode 'conditional'"
            if not conditional
            else f"mode '{setup.mode}' trains a conditional network such as dccgan, not '{name}'"
        )
    if network.task != "noise" and data.conditions is None:
        raise GanstudyError(
            f"network '{name}' is trained on data with conditions (task '{network.task}'), but the prepared "
            "split has none: use a data set of the kind its task learns, or a network of task 'noise'"
        )
    classes = int(data.labels.max()) + 1 if conditional else 0
    conditions = data.condition_shape if network.task != "noise" else None
    spec = NetworkSpec(
        data.image_shape, setup.latent_dim, setup.hidden_units, classes, conditions, setup.network_options
    )
    check_pair(setup, spec)
    return spec
