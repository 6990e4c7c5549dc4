"""A set-up's training settings, typed: one frozen dataclass per section of ``setups.<name>`` in the
study's schema (workflow/schemas/config.schema.yaml describes every key), built once when a training job
starts. The defaults are the schema's (ganstudy.config.schema); tests/test_settings.py checks that the fields are
its keys.

Below the stages, not in train/: the workflow plans from them, and evaluation scores a generator as it
trained (a paired generator's batch norm rows), which must not make evaluate import the training."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ganstudy.config.schema import schema_defaults
from ganstudy.config.typed import FrozenMapping, build
from ganstudy.errors import GanstudyError

# The schema's defaults (ganstudy.config.schema): the one place they are written.
_GRID = schema_defaults("setups", "grid")
_DATA_PARALLEL = schema_defaults("setups", "data_parallel")
_JITTER = schema_defaults("setups", "jitter")
_ENERGY_LOOP = schema_defaults("setups", "energy_loop")


@dataclass(frozen=True)
class GridSettings:
    """``grid``: Lipizzaner's coevolutionary grid."""

    shape: str = _GRID["shape"]
    topology: str = _GRID["topology"]
    ring_radius: int = _GRID["ring_radius"]
    min_cells: int = _GRID["min_cells"]
    max_cells: int = _GRID["max_cells"]
    batch_cells: bool = _GRID["batch_cells"]
    population_size: int = _GRID["population_size"]
    tournament_size: int = _GRID["tournament_size"]
    n_replacements: int = _GRID["n_replacements"]
    replacement: str = _GRID["replacement"]
    mutation_probability: float = _GRID["mutation_probability"]
    mutation_rate: float = _GRID["mutation_rate"]
    mixture_sigma: float = _GRID["mixture_sigma"]
    fitness_sample_size: int = _GRID["fitness_sample_size"]
    fitness_mode: str = _GRID["fitness_mode"]
    score_sample_size: int = _GRID["score_sample_size"]
    data_ratio: float = _GRID["data_ratio"]
    cell_classes: tuple[int, ...] | None = _GRID["cell_classes"]
    discriminator_skip: int = _GRID["discriminator_skip"]
    heartbeat_timeout: float = _GRID["heartbeat_timeout"]


@dataclass(frozen=True)
class DataParallelSettings:
    """``data_parallel``: one pair trained over the ranks on shards of each global batch."""

    amp: str = _DATA_PARALLEL["amp"]
    accumulation_steps: int = _DATA_PARALLEL["accumulation_steps"]
    clip_norm: float | None = _DATA_PARALLEL["clip_norm"]
    zero: bool | int = _DATA_PARALLEL["zero"]
    offload: str = _DATA_PARALLEL["offload"]
    scaling: str = _DATA_PARALLEL["scaling"]
    batch_norm: str = _DATA_PARALLEL["batch_norm"]

    def __post_init__(self) -> None:
        if self.offload != "none" and self.zero_stage < 2:
            raise GanstudyError(
                f"data_parallel.offload {self.offload} moves sharded weights, gradients and optimiser state "
                f"to the host, which ZeRO stage {self.zero_stage} does not shard: set data_parallel.zero to 2 or 3, "
                "or offload to none"
            )

    @property
    def zero_stage(self) -> int:
        """0 (no sharding) to 3; ``zero: true`` is stage 1, as before stages 2 and 3 existed."""
        return int(self.zero)


@dataclass(frozen=True)
class JitterSettings:
    """``jitter``: pix2pix's resize-and-crop and flip of training pairs (pix2pix only)."""

    load_size: int | None = _JITTER["load_size"]
    flip: bool = _JITTER["flip"]


@dataclass(frozen=True)
class EnergyLoopSettings:
    """``energy_loop``: 3DGAN's training step (calo3d only)."""

    fake_energies: str = _ENERGY_LOOP["fake_energies"]
    fake_energy_range: tuple[float, float] = _ENERGY_LOOP["fake_energy_range"]
    sum_fit: tuple[float, ...] = _ENERGY_LOOP["sum_fit"]
    label_flip: float = _ENERGY_LOOP["label_flip"]
    split_discriminator_step: bool = _ENERGY_LOOP["split_discriminator_step"]
    generator_steps: int = _ENERGY_LOOP["generator_steps"]
    optimizer: str = _ENERGY_LOOP["optimizer"]
    discriminator_fakes: str = _ENERGY_LOOP["discriminator_fakes"]


@dataclass(frozen=True)
class TrainingSettings:
    """A set-up as its training job sees it: the schema's keys without ``reference`` (the published
    result it is compared with), and a training task's own keys only for the networks of that task
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
    mode_options: Mapping[str, Any] = field(default_factory=FrozenMapping)
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
