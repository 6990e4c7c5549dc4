"""A dry-run beside the run that holds the study. Snakemake plans it without taking its own lock, logs
"Error: Directory cannot be locked" (and exits 0), and, with --rerun-incomplete (the profiles'), gives each
job the running run has under way the reason "Forced execution": its outputs are marked incomplete until
it ends. These notices say instead which run holds the study, what it is running, and why those jobs are
listed. No Snakemake import: the workflow installs the filter."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

# Snakemake's words (snakemake.persistence.Persistence.lock_warn_only, snakemake.dag's reasons).
SNAKEMAKE_LOCKED = "Error: Directory cannot be locked. Another Snakemake instance is running."
FORCED = "Forced execution"
RUNNING = "under way in the run that holds the study (incomplete until it ends)"


def held_notice(holder: str | None, running: Sequence[str], status_command: str) -> str:
    """What a dry-run says in place of Snakemake's lock error: the run that holds the study (``holder``:
    study_lock.live_holder; None where only Snakemake's own lock in .snakemake/ is held) and the trials it
    is training (``running``)."""
    if holder is None:
        held = (
            "Snakemake's lock in .snakemake/locks is held: another Snakemake runs in this working directory, or one "
            "was killed (then `snakemake --unlock`, with nothing running)"
        )
    else:
        held = f"a run holds this study: {holder}"
    training = f"; training now: {', '.join(running)}" if running else ""
    return (
        f"{held}{training}. This dry-run plans beside it and changes nothing: the jobs under way are listed as "
        f"to do, with the reason '{RUNNING}'; `{status_command}` shows each trial's progress."
    )


class HeldStudyNotices(logging.Filter):
    """In a dry-run: Snakemake's lock error replaced by ``notice()`` (held_notice, made only then), and once it
    is seen, unless the user forced jobs (``forced_by_user``: -F, -R, --forcerun), its "Forced execution"
    reasons by what they are here: jobs the live run has under way."""

    def __init__(self, notice: Callable[[], str], forced_by_user: bool):
        super().__init__()
        self.notice, self.forced_by_user, self.held = notice, forced_by_user, False

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(SNAKEMAKE_LOCKED):
            record.msg, self.held = self.notice(), True
        if not self.held or self.forced_by_user:
            return True
        reason = getattr(record, "reason", None)
        if isinstance(reason, str) and FORCED in reason:
            record.reason = reason.replace(FORCED, RUNNING)
        if isinstance(record.msg, str) and record.msg.startswith("Reasons:"):
            record.msg = record.msg.replace(f"    {FORCED}:", f"    {RUNNING}:")
        return True
