"""What a dry-run adds to Snakemake's own summary: how many of its jobs only write the planner's files, on a
cluster how many go to the scheduler and how many run where Snakemake runs, and how to see the whole plan of a
study that has nothing left to do."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

# Snakemake's line for a plan with no job (snakemake.common.NOTHING_TO_BE_DONE_MSG, not imported: this
# module stays free of Snakemake for its tests).
NOTHING_TO_DO = "Nothing to be done"
WHOLE_PLAN = (
    "The study is finished as the config describes it: `snakemake -n -F` (with the same profile) lists every job "
    "of its plan, `ganstudy status <config>` its trials."
)


def planner_jobs(stats: Mapping[str, int], planner_rules: Collection[str]) -> str | None:
    """The line that says how many of a dry-run's jobs (``stats``: rule -> jobs, with "total") only write the
    planner's own files (``planner_rules``), which a real run writes before any job and leaves out of its
    table; None where there are none."""
    planner = {rule: count for rule, count in stats.items() if rule in planner_rules}
    if not planner:
        return None
    files = sum(planner.values())
    return (
        f"Of these {stats['total']} jobs, {files} write the planner's own files (rules "
        f"{', '.join(sorted(planner))}: arguments, specs, job files), which a real run writes before any job "
        f"and leaves out of its table: {stats['total'] - files} jobs of work."
    )


def job_counts(stats: Mapping[str, int], local_rules: Collection[str], logs: tuple[str, str]) -> str:
    """The lines that split a plan's job stats (rule -> jobs, with "total") into the jobs submitted to the
    scheduler and those of the local rules, which run where Snakemake runs, and say where a job's logs go
    (``logs``: the study's log folder, and where the scheduler writes its own)."""
    local = {rule: count for rule, count in stats.items() if rule in local_rules}
    submitted = stats["total"] - sum(local.values())
    study_logs, scheduler_logs = logs
    return (
        f"To the scheduler: {submitted} of these {stats['total']} jobs. Where Snakemake runs (this machine, a "
        f"login node on a cluster): {sum(local.values())}, of rules {', '.join(sorted(local))} (the planner's "
        "files, tables, figures and the report, seconds each).\n"
        "A dry-run's launch lines show `--threads` as its own Snakemake caps them (at its --cores, 1 unless "
        "given); on the nodes each job runs with its rule's threads (`cpus_per_task` in its resources).\n"
        f"Logs: each job's own output in {study_logs}/ (the log: of its rule); the scheduler's own log of a job: "
        f"{scheduler_logs or 'as the scheduler keeps it'}."
    )


class WhereJobsRun(logging.Filter):
    """Adds to Snakemake's summary of a dry-run: after its job stats, how many of its jobs write the planner's
    own files (``planner_rules``) and, on a cluster executor, where the jobs run (``local_rules`` being those
    that run where Snakemake does) and where their logs go (``logs``: job_counts); after its "Nothing to be
    done", how to see the whole plan. Snakemake prints the job stats again after the jobs' list: the table is
    shown once."""

    def __init__(
        self, local_rules: Collection[str] | None, planner_rules: Collection[str], logs: tuple[str, str] = ("", "")
    ):
        super().__init__()
        self.local_rules = None if local_rules is None else frozenset(local_rules)
        self.planner_rules, self.logs = frozenset(planner_rules), logs
        self.counted = False

    def filter(self, record: logging.LogRecord) -> bool:
        stats = getattr(record, "stats", None)
        if isinstance(stats, dict) and "total" in stats:
            if self.counted:
                return False
            said = [planner_jobs(stats, self.planner_rules)]
            if self.local_rules is not None:
                said.append(job_counts(stats, self.local_rules, self.logs))
            if lines := "\n".join(filter(None, said)):
                record.msg = f"{record.msg}\n{lines}\n"
            self.counted = True
        elif isinstance(record.msg, str) and record.msg.startswith(NOTHING_TO_DO):
            record.msg = f"{record.msg}\n{WHOLE_PLAN}"
        return True
