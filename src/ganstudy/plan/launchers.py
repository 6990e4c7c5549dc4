"""How a training job starts its ranks on the nodes it was given, by launcher (a site's key ``launcher``).

A launcher is an entry point of group ``ganstudy.launchers`` (ganstudy's own: mpiexec, srun, jsrun), or a
``module:attribute`` naming a ``Launcher``: a site whose scheduler starts ranks another way (Flux, PBS's
mpiexec variant) adds its own launcher in its own package, without editing ganstudy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ganstudy.registry import Registry, instance_of


@dataclass(frozen=True)
class RankLayout:
    """What a launcher is told of a training job: its ranks and how they share the nodes."""

    ranks: int
    ranks_per_node: int
    node_cores: int
    gpus_per_rank: int  # 0 on a CPU site
    threads: int  # torch threads (and cores) per rank: StudyLayout.threads


@dataclass(frozen=True)
class SchedulerSetting:
    """A setting every cluster job is submitted with: the account it is charged to, the partition (LSF:
    queue) it waits in, or the node kind it runs on. ``key``: the site file's key (account, partition,
    constraint); ``resource``: the profile resource
    the scheduler's Snakemake plugin reads; ``variables``: the environment variables that may name it
    instead; ``missing``: what happens to a job that names none, None where that is fine (any node);
    ``name``: what the scheduler calls it, where not ``key`` (LSF's project and queue)."""

    key: str
    resource: str
    variables: tuple[str, ...]
    missing: str | None
    name: str | None = None

    @property
    def called(self) -> str:
        return self.name or self.key


@dataclass(frozen=True)
class Launcher:
    """``line(layout)``: the prefix of a training job's shell line that starts its ranks.
    ``settings``: what every job of this launcher's scheduler is submitted with (account, partition).
    ``resources(warning_seconds)``: extra resources of a training job that this launcher's scheduler plugin
    reads (e.g. Slurm's end-of-wall-time signal). ``logs``: where the scheduler's own log of a job goes, as a
    cluster's dry-run says it."""

    line: Callable[[RankLayout], str]
    settings: tuple[SchedulerSetting, ...] = ()
    resources: Callable[[int], dict[str, object]] = field(default=lambda warning_seconds: {})
    logs: str = ""


def _mpiexec(layout: RankLayout) -> str:
    return f"mpiexec -n {layout.ranks}"


def _srun(layout: RankLayout) -> str:
    # Inside a Snakemake Slurm job the allocation's SLURM_* defaults are cleared: srun is told everything,
    # GPUs per task binding each rank to its own. A rank that fails ends the step at once (kill-on-bad-exit)
    # instead of leaving its peers to the heartbeat's timeout.
    line = f"srun -n {layout.ranks}"
    if layout.gpus_per_rank:
        line += f" --gpus-per-task={layout.gpus_per_rank}"
    if layout.threads > 1:
        line += f" --cpus-per-task={layout.threads}"
    return line + " --kill-on-bad-exit=1"


def _jsrun(layout: RankLayout) -> str:
    # Summit's resource sets: one rank each, with its share of a node's cores and its GPUs.
    cores = layout.node_cores // layout.ranks_per_node
    return (
        f"jsrun -n {layout.ranks} -r {layout.ranks_per_node} -a 1 -c {cores} -g {layout.gpus_per_rank} "
        f"-b packed:{cores}"
    )


def _slurm_resources(warning_seconds: int) -> dict[str, object]:
    # No --ntasks-per-gpu (srun binds GPUs per task instead), and the signal that the job's wall time ends.
    return {"tasks_per_gpu": 0, "slurm_extra": f"--signal=USR1@{warning_seconds}"}


MPIEXEC = Launcher(_mpiexec)
SRUN = Launcher(
    _srun,
    (
        SchedulerSetting(
            "account",
            "slurm_account",
            ("SBATCH_ACCOUNT", "SLURM_ACCOUNT"),
            "Slurm charges your default account, and a centre without one refuses every job",
        ),
        SchedulerSetting(
            "partition",
            "slurm_partition",
            ("SBATCH_PARTITION", "SLURM_PARTITION"),
            "every job waits in the cluster's default partition, whose nodes may not be the site's",
        ),
        # The plugin passes the resource on as sbatch -C.
        SchedulerSetting("constraint", "constraint", ("SBATCH_CONSTRAINT",), None),
    ),
    _slurm_resources,
    ".snakemake/slurm_logs/rule_<rule>/<wildcards>/<job id>.log under the working directory, deleted once the job "
    "succeeds (slurm-keep-successful-logs: true keeps them)",
)
JSRUN = Launcher(
    _jsrun,
    (
        SchedulerSetting(
            "account",
            "lsf_project",
            ("LSB_DEFAULTPROJECT",),
            "bsub -P is required on Summit-class machines: LSF refuses every job",
            "project",
        ),
        SchedulerSetting(
            "partition", "lsf_queue", ("LSB_DEFAULTQUEUE",), "every job waits in the cluster's default queue", "queue"
        ),
        # ganstudy bsub --select: -R "select[...]".
        SchedulerSetting("constraint", "lsf_select", (), None),
    ),
    logs="<rule>.<job id>.out and .err in the folder the profile's `ganstudy bsub --log-dir` names (profiles/summit: "
    "logs/lsf under the working directory)",
)

LAUNCHERS: Registry[Launcher] = Registry("launcher", "ganstudy.launchers", instance_of(Launcher))
