"""The statistics' settings, typed: ``statistics`` as a frozen dataclass built once by each statistics
step from the validated section (its ``--settings``), with the schema's defaults (ganstudy.config.schema).
tests/test_settings.py checks that the fields are the schema's keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ganstudy.config.schema import schema_defaults
from ganstudy.config.typed import build

_STATISTICS = schema_defaults("statistics")


@dataclass(frozen=True)
class Stopping:
    """When a set-up takes no more rounds beyond every comparison of it decided: ``beaten``, once another
    beats it significantly; ``futility`` (0: never), once each open comparison of it is unlikely to be
    decided by the schedule's ``most`` (its conditional power under the trend seen below ``futility``). Both
    are non-binding: the boundaries stay as they are, so stopping never raises a comparison's error."""

    beaten: bool = False
    futility: float = 0.0


# The rule without options: a set-up stops once every comparison of it is decided.
ONCE_DECIDED = Stopping()


@dataclass(frozen=True)
class StatisticsSettings:
    """``statistics``: the tests, the level, the flags and the tables' style."""

    min_trials: int = _STATISTICS["min_trials"]
    test: str = _STATISTICS["test"]
    failures: str = _STATISTICS["failures"]
    alpha: float = _STATISTICS["alpha"]
    stop_beaten: bool = _STATISTICS["stop_beaten"]
    futility: float = _STATISTICS["futility"]
    primary_metric: str | None = _STATISTICS["primary_metric"]
    convergence_window: float = _STATISTICS["convergence_window"]
    convergence_tolerance: float = _STATISTICS["convergence_tolerance"]
    degradation_tolerance: float = _STATISTICS["degradation_tolerance"]
    digits: int = _STATISTICS["digits"]

    @classmethod
    def of(cls, section: Mapping[str, Any], where: str = "statistics settings") -> StatisticsSettings:
        """From a statistics step's ``--settings`` (keys left out take the schema's defaults)."""
        return build(cls, section, where)

    def primary(self, metrics: list[str]) -> str:
        """The metric that heads the answer."""
        return self.primary_metric or metrics[0]

    def stopping(self) -> Stopping:
        """When a set-up on a schedule takes no more rounds."""
        return Stopping(self.stop_beaten, self.futility)
