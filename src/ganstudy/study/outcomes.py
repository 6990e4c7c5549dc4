"""How a training run ended (run.json's ``outcome``): finished, or diverged. A run whose losses stopped being
finite is an outcome of its trial, not a failed job.

The job ends as a finished run does, with every output of the train rule, marked diverged in run.json
(``outcome``); its scores are then inf in every metric (the evaluate step), which the rank tests count as worse
than every finite score (ganstudy.stats.tests.outcomes), so that a set-up cannot win by losing its unstable
trials. Free of torch: the evaluate, status and statistics steps read the mark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ganstudy.errors import GanstudyError

# run.json's "outcome": a run that trained to its last iteration, or one whose losses stopped being finite.
FINISHED, DIVERGED = "finished", "diverged"


class TrainingDiverged(GanstudyError):
    """Losses that are no longer finite. ``where``: per trainer (a pair, a class), the iteration and the
    losses it stopped at; ``history`` and ``profile``: the run's losses.csv and profile.csv rows so far,
    the non-finite row last."""

    def __init__(
        self,
        message: str,
        where: dict[str, dict[str, Any]],
        history: list[dict[str, Any]],
        profile: list[dict[str, Any]],
    ) -> None:
        super().__init__(message)
        self.where, self.history, self.profile = where, history, profile

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        # Per-class ranks hand their classes' outcomes to rank 0 in a gather, which pickles them.
        return type(self), (str(self), self.where, self.history, self.profile)

    def record(self) -> dict[str, Any]:
        """What run.json says of the divergence."""
        return {"outcome": DIVERGED, "diverged": self.where, "diverged_message": str(self)}


def diverged(record: Mapping[str, Any]) -> bool:
    """Whether a run.json (or a score file, which carries its run's outcome) is of a diverged run."""
    return record.get("outcome") == DIVERGED


def divergence_parts(record: Mapping[str, Any]) -> list[str]:
    """Where each trainer of a diverged run stopped, e.g. "class3 after iteration 2 of 50"."""
    return [
        f"{trainer} after iteration {facts['iteration']} of {facts['iterations']}"
        for trainer, facts in record["diverged"].items()
    ]


def divergence_text(record: Mapping[str, Any]) -> str:
    """Where a diverged run stopped, in one line."""
    return "; ".join(divergence_parts(record))
