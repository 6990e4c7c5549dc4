"""The training modes by name, each as a ``TrainingMode``: what it needs (its generator-discriminator pairs,
its ranks and GPUs, the networks it trains, whether it learns the classes or scores while it trains) and,
by reference, the function that trains. Free of torch: the workflow plans a study from these declarations
without importing a mode, and a job loads the function it runs.

A mode is an entry point of group ``ganstudy.modes`` naming a ``TrainingMode`` (ganstudy's own: single,
conditional, per_class, grid, data_parallel); a lab's package adds its own in its own module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.contracts import ModeCheck, PairCount, TrainingFunction
from ganstudy.errors import GanstudyError
from ganstudy.parallel.rank_work import shard_rows
from ganstudy.parallel.topology import parse_shape, resolve_shape
from ganstudy.registry import Registry, contract_problems, not_installed, resolve_part
from ganstudy.train.job import job_settings

# How a mode's jobs take ranks: "one" (always 1), "per_pair" (one per pair, up to compute.max_ranks; more
# ranks than pairs are refused), "any" (compute.max_ranks unless the set-up sets ranks).
RANK_RULES = ("one", "per_pair", "any")


def one_pair(setup: Mapping[str, Any], classes: int | None) -> int | None:
    return 1


def one_pair_per_class(setup: Mapping[str, Any], classes: int | None) -> int | None:
    """None where the data's classes are known only once they are read."""
    return classes


def one_pair_per_cell(setup: Mapping[str, Any], classes: int | None) -> int | None:
    """A grid's cells: its shape's, or at most max_cells where the shape follows the ranks (auto)."""
    shape = setup["grid"]["shape"]
    return setup["grid"]["max_cells"] if shape == "auto" else parse_shape(shape).size


def no_problems(name: str, setup: Mapping[str, Any], ranks: int) -> list[str]:
    return []


def grid_problems(name: str, setup: Mapping[str, Any], ranks: int) -> list[str]:
    """A grid its topology cannot lay out on the job's ranks: a ring's shape or radius, too many cells."""
    grid = setup["grid"]
    try:
        resolve_shape(grid["shape"], ranks, 1, grid["max_cells"], grid["topology"], grid["ring_radius"])
    except GanstudyError as error:
        return [f"set-up '{name}': {error}"]
    return []


def shard_problems(name: str, setup: Mapping[str, Any], ranks: int) -> list[str]:
    """A data-parallel global batch that cannot be shared out over the job's ranks and accumulation steps."""
    try:
        global_batch = TrainingSettings.of(job_settings(dict(setup)), f"set-up '{name}'").global_batch(ranks)
        shard_rows(global_batch, ranks, setup["data_parallel"]["accumulation_steps"])
    except GanstudyError as error:
        return [f"set-up '{name}': {error}"]
    return []


@dataclass(frozen=True)
class TrainingMode:
    """A training mode's declaration. ``train`` names, as ``module:function``, the mode itself: called with a
    ``ganstudy.train.modes.TrainingContext`` on every rank, it returns the run's ``TrainingResult`` on rank 0
    and None on the others. ``pairs(setup, classes)``: the pairs a set-up trains (None: they depend on classes
    not yet known); ``pair_name`` says what they are in messages. ``gpus_per_rank``: the compute.gpus_per_rank
    values it can use (2: generator and discriminator on two GPUs). ``conditional``: the networks it trains
    take labels (True), do not (False), or either (None); ``any_task``: it trains networks of every task, not
    only generators of noise. ``learns_classes``: it needs data of several classes; ``scores_in_training``: it
    always scores its generators while it trains (a grid selects by FID), whatever score_period says.
    ``check(name, setup, ranks)``: what could never train on that many ranks, one line each naming the key.
    ``options``: a JSON schema of the set-up's ``mode_options`` (None: the mode takes none), checked with
    its defaults filled in when the study is read; the mode reads them as ``context.setup.mode_options``."""

    train: str
    pairs: Callable[[Mapping[str, Any], int | None], int | None] = one_pair
    pair_name: str = "pairs"
    ranks: str = "one"
    gpus_per_rank: tuple[int, ...] = (1, 2)
    conditional: bool | None = False
    any_task: bool = False
    learns_classes: bool = False
    scores_in_training: bool = False
    check: Callable[[str, Mapping[str, Any], int], list[str]] = no_problems
    options: Mapping[str, Any] | None = None

    def function(self, name: str) -> Callable[..., Any]:
        """The function that trains, imported now and held to its contract."""
        return resolve_part(self.train, f"training mode '{name}'", TrainingFunction)  # type: ignore[return-value]

    def missing_parts(self, name: str) -> list[str]:
        """Its function's module where it is not installed, found without importing it."""
        problem = not_installed(self.train, f"training mode '{name}'")
        return [problem] if problem else []


def _contract(value: object) -> str | None:
    if not isinstance(value, TrainingMode):
        return f"is of type {type(value).__name__}, not a ganstudy.train.mode_needs.TrainingMode"
    if value.ranks not in RANK_RULES:
        return f"has ranks '{value.ranks}', not one of {', '.join(RANK_RULES)}"
    if not value.gpus_per_rank or not set(value.gpus_per_rank) <= {1, 2}:
        return f"has gpus_per_rank {value.gpus_per_rank}: give the values of compute.gpus_per_rank it can use (1, 2)"
    if value.options is not None and not isinstance(value.options, Mapping):
        return f"has options of type {type(value.options).__name__}: give a JSON schema (a mapping) or None"
    problems = [*contract_problems(value.pairs, PairCount), *contract_problems(value.check, ModeCheck)]
    return "; ".join(problems) or None


TRAINING_MODES: Registry[TrainingMode] = Registry("training mode", "ganstudy.modes", _contract)

SINGLE = TrainingMode("ganstudy.train.single:train_single", any_task=True)
CONDITIONAL = TrainingMode("ganstudy.train.single:train_conditional", conditional=True, learns_classes=True)
PER_CLASS = TrainingMode(
    "ganstudy.train.per_class:train_per_class",
    pairs=one_pair_per_class,
    pair_name="classes",
    ranks="per_pair",
    learns_classes=True,
)
GRID = TrainingMode(
    "ganstudy.train.grid.mode:train_grid",
    pairs=one_pair_per_cell,
    pair_name="grid cells",
    ranks="per_pair",
    gpus_per_rank=(1,),
    scores_in_training=True,
    check=grid_problems,
)
# nccl binds a process to one GPU, so a rank's pair stays on one.
DATA_PARALLEL = TrainingMode(
    "ganstudy.train.data_parallel:train_data_parallel",
    ranks="any",
    gpus_per_rank=(1,),
    conditional=None,
    any_task=True,
    check=shard_problems,
)
