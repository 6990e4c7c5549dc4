"""What a dry-run of a cluster plan adds to Snakemake's own summary: how many of its jobs go to the scheduler
and how many run where Snakemake runs, and how to see the whole plan of a study that has nothing left to do."""

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


def job_counts(stats: Mapping[str, int], local_rules: Collection[str]) -> str:
    """The lines that split a plan's job stats (rule -> jobs, with "total") into the jobs submitted to the
    scheduler and those of the local rules, which run where Snakemake runs."""
    local = {rule: count for rule, count in stats.items() if rule in local_rules}
    submitted = stats["total"] - sum(local.values())
    return (
        f"To the scheduler: {submitted} of these {stats['total']} jobs. Where Snakemake runs (this machine, a "
        f"login node on a cluster): {sum(local.values())}, of rules {', '.join(sorted(local))} (the planner's "
        "files, tables, figures and the report, seconds each).\n"
        "A dry-run's launch lines show `--threads` as its own Snakemake caps them (at its --cores, 1 unless "
        "given); on the nodes each job runs with its rule's threads (`cpus_per_task` in its resources)."
    )


class WhereJobsRun(logging.Filter):
    """Adds to Snakemake's summary of a dry-run: after its job stats, where the jobs run (on a cluster
    executor, ``local_rules`` being those that run where Snakemake does); after its "Nothing to be done",
    how to see the whole plan."""

    def __init__(self, local_rules: Collection[str] | None):
        super().__init__()
        self.local_rules = None if local_rules is None else frozenset(local_rules)
        self.counted = False  # Snakemake repeats its job stats after the jobs' list: said once, after the first

    def filter(self, record: logging.LogRecord) -> bool:
        stats = getattr(record, "stats", None)
        if self.local_rules is not None and isinstance(stats, dict) and "total" in stats and not self.counted:
            record.msg = f"{record.msg}\n{job_counts(stats, self.local_rules)}\n"
            self.counted = True
        elif isinstance(record.msg, str) and record.msg.startswith(NOTHING_TO_DO):
            record.msg = f"{record.msg}\n{WHOLE_PLAN}"
        return True
