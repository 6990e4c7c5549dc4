"""A set-up's training settings, typed: one frozen dataclass per section of ``setups.<name>`` in the
study's schema (workflow/schemas/config.schema.yaml describes every key and its default), built once
when a training job starts. tests/test_settings.py checks that the fields are the schema's keys.

Below the stages, not in train/: the workflow plans from them, and evaluation scores a generator as it
trained (a paired generator's batch norm rows), which must not make evaluate import the training."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ganstudy.config import training_settings
from ganstudy.errors import GanstudyError
from ganstudy.typed import FrozenMapping, build


@dataclass(frozen=True)
class GridSettings:
    """``grid``: Lipizzaner's coevolutionary grid."""

    shape: str = "2x2"
    min_cells: int = 1
    max_cells: int = 1024
    batch_cells: bool = True
    population_size: int = 1
    tournament_size: int = 2
    n_replacements: int = 1
    replacement: str = "always"
    mutation_probability: float = 0.5
    mutation_rate: float = 0.0001
    mixture_sigma: float = 0.01
    fitness_sample_size: int = 1000
    fitness_mode: str = "average"
    score_sample_size: int = 1000
    data_ratio: float = 1.0
    cell_classes: tuple[int, ...] | None = None
    discriminator_skip: int = 1
    heartbeat_timeout: float = 300


@dataclass(frozen=True)
class DataParallelSettings:
    """``data_parallel``: one pair trained over the ranks on shards of each global batch."""

    amp: str = "none"
    accumulation_steps: int = 1
    clip_norm: float | None = None
    zero: bool | int = False
    offload: str = "none"
    scaling: str = "strong"
    batch_norm: str = "global"

    def __post_init__(self) -> None:
        if self.offload != "none" and self.zero_stage < 2:
            raise GanstudyError(f"data_parallel.offload {self.offload} moves sharded weights, gradients and optimiser state "
                                f"to the host, which ZeRO stage {self.zero_stage} does not shard: set data_parallel.zero to 2 or 3, "
                                "or offload to none")

    @property
    def zero_stage(self) -> int:
        """0 (no sharding) to 3; ``zero: true`` is stage 1, as before stages 2 and 3 existed."""
        return int(self.zero)


@dataclass(frozen=True)
class JitterSettings:
    """``jitter``: pix2pix's resize-and-crop and flip of training pairs (pix2pix only)."""

    load_size: int | None = None
    flip: bool = False


@dataclass(frozen=True)
class EnergyLoopSettings:
    """``energy_loop``: 3DGAN's training step (calo3d only)."""

    fake_energies: str = "uniform"
    fake_energy_range: tuple[float, float] = (0.1, 5.0)
    sum_fit: tuple[float, ...] = (0.0018, -0.023, 0.11, -0.28, 2.21)
    label_flip: float = 0.05
    split_discriminator_step: bool = True
    generator_steps: int = 2
    optimizer: str = "rmsprop"
    discriminator_fakes: str = "predict"


@dataclass(frozen=True)
class TrainingSettings:
    """A set-up as its training job sees it: the schema's keys without ``reference`` (the published
    result it is compared with), and the network-only keys only for the networks that read them
    (None for the others)."""

    mode: str
    network: str
    latent_dim: int
    hidden_units: int
    loss: str
    iterations: int
    batch_size: int
    lr: float
    betas: tuple[float, float]
    score_period: int
    score_samples: int
    checkpoint_period: int
    checkpoints_kept: int
    ranks: int | None = None
    trials: int | None = None
    network_options: Mapping[str, Any] = field(default_factory=FrozenMapping)
    data_parallel: DataParallelSettings = field(default_factory=DataParallelSettings)
    grid: GridSettings = field(default_factory=GridSettings)
    l1_weight: float | None = None
    lr_decay_iterations: int | None = None
    jitter: JitterSettings | None = None
    energy_loss_weights: tuple[float, float, float] | None = None
    energy_loop: EnergyLoopSettings | None = None

    def global_batch(self, ranks: int) -> int:
        """Rows of one optimiser step on ``ranks`` ranks: batch_size, or batch_size per rank when
        data_parallel.scaling is weak (Horovod's recipe)."""
        weak = self.mode == "data_parallel" and self.data_parallel.scaling == "weak"
        return self.batch_size * ranks if weak else self.batch_size

    def rank_lr(self, ranks: int) -> float:
        """The learning rate on ``ranks`` ranks: lr, or lr times the rank count under weak scaling."""
        weak = self.mode == "data_parallel" and self.data_parallel.scaling == "weak"
        return self.lr * ranks if weak else self.lr

    def batch_norm_rows(self, ranks: int) -> int:
        """Rows that batch norm normalises together in one training forward on ``ranks`` ranks: the
        global batch; with data_parallel's accumulation one micro-batch of every rank (synchronised
        batch norm); with its per-rank batch norm one rank's micro-batch. A paired generator, whose batch
        norm runs on its input's statistics also when scored, is scored in groups of this size so that
        its scores see the statistics it trained with."""
        rows = self.global_batch(ranks) // self.data_parallel.accumulation_steps
        per_rank = self.mode == "data_parallel" and self.data_parallel.batch_norm == "per_rank"
        return rows // ranks if per_rank else rows

    @classmethod
    def of(cls, section: dict[str, Any], where: str = "training settings") -> TrainingSettings:
        """From a job's settings (the JSON of ``--settings``)."""
        return build(cls, section, where)

    @classmethod
    def from_config(cls, setup: dict[str, Any], where: str = "set-up") -> TrainingSettings:
        """From a validated ``setups.<name>`` section, as its training job sees it (without the
        published result it is compared with, and without other networks' keys)."""
        return cls.of(training_settings(setup), where)
