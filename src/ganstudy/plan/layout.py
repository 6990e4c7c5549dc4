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

from ganstudy.core.resources import MIN_RANK_MB, node_memory_mb, rank_memory_mb, retry_minutes
from ganstudy.errors import GanstudyError
from ganstudy.plan.launchers import RankLayout
from ganstudy.train.mode_needs import TRAINING_MODES, TrainingMode

# What a set-up may change without changing the work it does: the speed-up compares such set-ups.
_NOT_WORK = ("ranks", "trials", "reference", "sweep", "swept")


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
    # No scheduler places the ranks (mpiexec on this machine): every rank runs here, whatever its cores.
    one_machine: bool = False

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], data_classes: int | None, site: str = "this machine", one_machine: bool = False
    ) -> StudyLayout:
        return cls(config["setups"], config["compute"], config["dataset"]["name"], data_classes, site, one_machine)

    def mode(self, name: str) -> TrainingMode:
        """A set-up's training mode, as it declares its needs (ganstudy.train.mode_needs)."""
        return TRAINING_MODES.get(self.setups[name]["mode"])

    def pairs(self, name: str) -> int:
        """Generator-discriminator pairs a set-up trains, as its mode counts them (one per grid cell or class,
        else one)."""
        pairs = self.mode(name).pairs(self.setups[name], self.data_classes)
        if pairs is None:
            raise ClassesUnknown(
                f"set-up '{name}' trains one pair per class of dataset '{self.dataset}', whose number of "
                f"classes is known only once it is read: set setups.{name}.ranks"
            )
        return pairs

    def ranks(self, name: str) -> int:
        """MPI ranks of a set-up's training jobs, by its mode's rule: 1; or its ranks, else one per pair
        capped by compute.max_ranks; or its ranks, else compute.max_ranks."""
        setup, rule = self.setups[name], self.mode(name).ranks
        if rule == "one":
            return 1
        if setup["ranks"]:
            return setup["ranks"]
        if rule == "any":
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
        """Ranks that fit on one node: one per GPU group, or per ``threads`` cores on a CPU site."""
        if self.compute["node_gpus"]:
            return max(1, self.compute["node_gpus"] // self.compute["gpus_per_rank"])
        return max(1, self.compute["node_cores"] // self.threads)

    @property
    def threads(self) -> int:
        """Torch threads, and cores, of each rank: compute.threads_per_job where set; else, training on GPU
        nodes' GPUs, the node's cores shared among its ranks, as jsrun's resource sets share them (not one
        core per rank beside idle ones); else one. On the CPU (a CPU site, or device cpu on GPU nodes) more
        threads would split a stacked grid's work at points that depend on its cells per rank, and so give
        other bits on another rank count; a GPU's kernels do not depend on the host's threads."""
        if self.compute["threads_per_job"] is not None:
            return self.compute["threads_per_job"]
        if self.compute["node_gpus"] and self.compute["device"] != "cpu":
            return max(1, self.compute["node_cores"] // self.ranks_per_node)
        return 1

    @property
    def gpus_per_rank(self) -> int:
        """GPUs of each training rank: gpus_per_rank on GPU nodes, none on a CPU site (node_gpus 0). They
        are asked for whatever compute.device says: device cpu on GPU nodes is a choice, not a mistake."""
        return self.compute["gpus_per_rank"] if self.compute["node_gpus"] else 0

    def nodes(self, ranks: int) -> int:
        """Whole nodes a training job of ``ranks`` ranks asks for (bsub -nnodes, sbatch -N); one where no
        scheduler places them."""
        return 1 if self.one_machine else math.ceil(ranks / self.ranks_per_node)

    def rank_layout(self, ranks: int) -> RankLayout:
        """What the launcher is told of a job of ``ranks`` ranks."""
        return RankLayout(ranks, self.ranks_per_node, self.compute["node_cores"], self.gpus_per_rank, self.threads)

    def memory_mb(self, name: str, train_bytes: int) -> int:
        """Memory (MB) per node of a set-up's training job (sbatch --mem): the ranks that share a node, each
        holding a training split of ``train_bytes`` besides its libraries and networks (ganstudy.core.resources),
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
            mode = self.mode(name)
            if mode.ranks == "per_pair" and setup["ranks"]:
                try:
                    most = self.pairs(name)
                except ClassesUnknown:
                    continue  # the job refuses
                if setup["ranks"] > most:
                    problems.append(
                        f"setups.{name}.ranks: {setup['ranks']} ranks for {most} {mode.pair_name}; a rank holds at "
                        f"least one: set ranks to at most {most}"
                    )
            if self.gpus_per_rank and self.gpus_per_rank not in mode.gpus_per_rank:
                problems.append(
                    f"setups.{name}.mode: mode {setup['mode']} trains with {' or '.join(map(str, mode.gpus_per_rank))} "
                    f"GPU(s) per rank, but compute.gpus_per_rank is {self.gpus_per_rank} on site '{self.site}': set "
                    f"compute.gpus_per_rank: {mode.gpus_per_rank[0]} in the study, or train the set-up in another mode"
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
            if name in known:
                problems += self.mode(name).check(name, setup, known[name])
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
        chosen = compute["threads_per_job"]  # null: a share of the node, which fits
        if self.gpus_per_rank and chosen and chosen * self.ranks_per_node > compute["node_cores"]:
            problems.append(
                f"compute.threads_per_job={chosen} for each of the {self.ranks_per_node} ranks a node of site "
                f"'{self.site}' holds is more than its {compute['node_cores']} cores: the jobs could never start; "
                f"lower threads_per_job to {max(1, compute['node_cores'] // self.ranks_per_node)} or remove it (null: "
                "the node's cores shared among its ranks)"
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
