"""How a study's training jobs lay out on the nodes: each set-up's generator-discriminator pairs and ranks,
the ranks per node, the nodes and GPUs a job asks for, its memory and wall time, and the settings that
could never be laid out (refused before any job is queued).

"Ranks" are MPI processes throughout; a set-up's "pairs" are what it trains (one per grid cell or class).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ganstudy.errors import GanstudyError
from ganstudy.parallel.partition import shard_rows
from ganstudy.parallel.topology import parse_shape
from ganstudy.plan.launchers import RankLayout
from ganstudy.resources import MIN_RANK_MB, node_memory_mb, rank_memory_mb, retry_minutes
from ganstudy.setup_settings import TrainingSettings

# What a set-up may change without changing the work it does: the speed-up compares such set-ups.
_NOT_WORK = ("ranks", "trials", "reference", "sweep", "swept")
# The modes whose jobs run several ranks; the others train on one.
MULTI_RANK_MODES = ("grid", "per_class", "data_parallel")


class ClassesUnknown(GanstudyError):
    """A per-class set-up's pairs on data whose classes are known only once they are read."""


@dataclass(frozen=True)
class StudyLayout:
    """The layout of a study's training jobs on the site's nodes, from its validated config (``compute``
    completed from the site) and the data's classes where known before any job (None: once read)."""

    setups: Mapping[str, Mapping[str, Any]]
    compute: Mapping[str, Any]
    dataset: str
    data_classes: int | None
    site: str = "this machine"  # the site's name, for messages

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], data_classes: int | None, site: str = "this machine"
    ) -> StudyLayout:
        return cls(config["setups"], config["compute"], config["dataset"]["name"], data_classes, site)

    def pairs(self, name: str) -> int:
        """Generator-discriminator pairs a set-up trains: one per grid cell or per class, else one."""
        setup = self.setups[name]
        if setup["mode"] == "per_class":
            if self.data_classes is None:
                raise ClassesUnknown(
                    f"set-up '{name}' trains per class on dataset '{self.dataset}', whose number of "
                    f"classes is known only once it is read: set setups.{name}.ranks"
                )
            return self.data_classes
        if setup["mode"] == "grid":
            shape = setup["grid"]["shape"]
            return setup["grid"]["max_cells"] if shape == "auto" else parse_shape(shape).size
        return 1

    def ranks(self, name: str) -> int:
        """MPI ranks of a set-up's training jobs: its ranks, else one per grid cell or per class capped by
        compute.max_ranks (data_parallel: max_ranks); 1 for the one-rank modes."""
        setup = self.setups[name]
        if setup["mode"] not in MULTI_RANK_MODES:
            return 1
        if setup["ranks"]:
            return setup["ranks"]
        if setup["mode"] == "data_parallel":
            return self.compute["max_ranks"]
        return max(1, min(self.pairs(name), self.compute["max_ranks"]))

    def known_ranks(self) -> dict[str, int]:
        """Ranks of every set-up whose rank count the config decides; a per-class set-up on data whose
        classes are known only once read is left out (its training job names the problem)."""
        known = {}
        for name in self.setups:
            try:
                known[name] = self.ranks(name)
            except ClassesUnknown:
                pass
        return known

    def pairs_per_rank(self, name: str) -> float:
        """A set-up's pairs per rank (its ranks' where the classes are known only once read)."""
        ranks = self.ranks(name)
        try:
            return self.pairs(name) / ranks
        except ClassesUnknown:
            return 1.0

    @property
    def ranks_per_node(self) -> int:
        """Ranks that fit on one node: one per GPU group, or per threads_per_job cores on a CPU site."""
        if self.compute["node_gpus"]:
            return max(1, self.compute["node_gpus"] // self.compute["gpus_per_rank"])
        return max(1, self.compute["node_cores"] // self.compute["threads_per_job"])

    @property
    def gpus_per_rank(self) -> int:
        """GPUs of each training rank: gpus_per_rank on GPU nodes, none on a CPU site (node_gpus 0). They
        are asked for whatever compute.device says: device cpu on GPU nodes is a choice, not a mistake."""
        return self.compute["gpus_per_rank"] if self.compute["node_gpus"] else 0

    def nodes(self, ranks: int) -> int:
        """Whole nodes a training job of ``ranks`` ranks asks for (bsub -nnodes, sbatch -N)."""
        return math.ceil(ranks / self.ranks_per_node)

    def rank_layout(self, ranks: int) -> RankLayout:
        """What the launcher is told of a job of ``ranks`` ranks."""
        return RankLayout(
            ranks, self.ranks_per_node, self.compute["node_cores"], self.gpus_per_rank, self.compute["threads_per_job"]
        )

    def memory_mb(self, name: str, train_bytes: int) -> int:
        """Memory (MB) per node of a set-up's training job (sbatch --mem): the ranks that share a node, each
        holding a training split of ``train_bytes`` besides its libraries and networks (ganstudy.resources),
        or compute.mem_mb_per_rank each when set; refused when a node has less."""
        per_rank = self.compute["mem_mb_per_rank"]
        if per_rank is None:
            device = "cpu" if self.compute["device"] == "cpu" or not self.gpus_per_rank else "cuda"
            per_rank = rank_memory_mb(train_bytes, device)
        memory = node_memory_mb(min(self.ranks(name), self.ranks_per_node), per_rank)
        if self.compute["node_mem_mb"] is not None and memory > self.compute["node_mem_mb"]:
            raise GanstudyError(
                f"set-up {name}: its ranks on one node need {memory} MB, more than a node's "
                f"{self.compute['node_mem_mb']} MB (node_mem_mb, site '{self.site}'): the job could never start; lower "
                "compute.mem_mb_per_rank or the ranks per node (compute.threads_per_job)"
            )
        return memory

    def runtime_minutes(self, attempt: int) -> int:
        """Wall-time minutes of a training job's attempt: a retry (the job was stopped at its limit and
        resumes from its checkpoint) asks for train_minutes times the attempt, up to max_train_minutes."""
        return retry_minutes(self.compute["train_minutes"], attempt, self.compute["max_train_minutes"])

    def problems(self, training_images: int | None) -> list[str]:
        """What could never be laid out, each naming its key and what to do: more ranks than a grid has cells
        or a set-up classes (ranks that idle, and nodes for them), a batch larger than the training split
        (``training_images`` where known before any job), a data-parallel batch that cannot be shared out
        over its ranks, and wall-time and memory settings that cannot work."""
        return [*self._rank_problems(), *self._batch_problems(training_images), *self._compute_problems()]

    def _rank_problems(self) -> list[str]:
        problems = []
        for name, setup in self.setups.items():
            if setup["mode"] in ("grid", "per_class") and setup["ranks"]:
                try:
                    most = self.pairs(name)
                except ClassesUnknown:
                    continue  # the job refuses
                if setup["ranks"] > most:
                    what = "classes" if setup["mode"] == "per_class" else "grid cells"
                    problems.append(
                        f"setups.{name}.ranks: {setup['ranks']} ranks for {most} {what}; a rank holds at least "
                        f"one: set ranks to at most {most}"
                    )
        return problems

    def _batch_problems(self, images: int | None) -> list[str]:
        problems = [
            f"setups.{name}.batch_size: {setup['batch_size']} is larger than the training split's {images} images: "
            "lower batch_size"
            for name, setup in self.setups.items()
            if images is not None and setup["batch_size"] > images
        ]
        known = self.known_ranks()
        for name, setup in self.setups.items():
            if setup["mode"] == "data_parallel" and name in known:
                try:
                    global_batch = TrainingSettings.from_config(setup, f"set-up '{name}'").global_batch(known[name])
                    shard_rows(global_batch, known[name], setup["data_parallel"]["accumulation_steps"])
                except GanstudyError as error:
                    problems.append(f"set-up '{name}': {error}")
        return problems

    def _compute_problems(self) -> list[str]:
        compute = self.compute
        problems = []
        if compute["max_train_minutes"] < compute["train_minutes"]:
            problems.append(
                f"compute.max_train_minutes={compute['max_train_minutes']} is below compute.train_minutes="
                f"{compute['train_minutes']}: a retry could not even ask for the first attempt's wall time"
            )
        if compute["wall_warning_minutes"] >= compute["train_minutes"]:
            problems.append(
                f"compute.wall_warning_minutes={compute['wall_warning_minutes']} must be below "
                f"compute.train_minutes={compute['train_minutes']}: the job would be told to stop as soon as it starts"
            )
        if compute["mem_mb_per_rank"] is not None and compute["mem_mb_per_rank"] < MIN_RANK_MB:
            problems.append(
                f"compute.mem_mb_per_rank={compute['mem_mb_per_rank']} is below the {MIN_RANK_MB} MB a rank "
                "needs for Python, torch and MPI alone: raise it, or remove the key to let ganstudy estimate it"
            )
        if compute["node_cores"] < self.ranks_per_node:
            problems.append(
                f"compute.node_cores={compute['node_cores']} leaves the {self.ranks_per_node} ranks a node of site "
                f"'{self.site}' holds (one per {compute['gpus_per_rank']} of its {compute['node_gpus']} GPUs) "
                "without a core each: set node_cores to the cores of a node (in the site file, or in the study's "
                "compute section)"
            )
        return problems


def speedup_baselines(setups: Mapping[str, Mapping[str, Any]], ranks: Mapping[str, int]) -> dict[str, str]:
    """Each multi-rank set-up's baseline: the first set-up that runs on one rank with otherwise the same
    settings (only ranks and trials may differ), as seed 000 compared a grid on one core and on many.
    Set-ups missing from ``ranks`` (their rank count is not known yet) take no part."""

    def work(name: str) -> dict[str, Any]:
        return {key: value for key, value in setups[name].items() if key not in _NOT_WORK}

    singles = [name for name in setups if ranks.get(name) == 1]
    baselines = {}
    for name in setups:
        if ranks.get(name, 1) > 1:
            found = next((single for single in singles if work(single) == work(name)), None)
            if found:
                baselines[name] = found
    return baselines
