"""A study's trials: each set-up's number, and the schedule of looks where the config's ``trials`` is one
(``{first, step, most}``). Made once from the validated config by each process that needs it (the plan, a
statistics step, ``ganstudy status``) and handed on as these objects; across a process boundary a schedule
travels as its JSON (``Schedule.to_json``), read back by its one parser (``Schedule.parse``). Light to import:
the plan reads it at every parse of the workflow."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from math import comb, prod
from typing import Any

import numpy as np

TrialsValue = int | Mapping[str, int]


@dataclass(frozen=True)
class Schedule:
    """Trials per set-up at each look: ``first``, then ``step`` more at a time, up to ``most``."""

    first: int
    step: int
    most: int

    def __post_init__(self) -> None:
        if not (2 <= self.first <= self.most and self.step >= 1):
            raise ValueError(
                f"schedule first {self.first}, step {self.step}, most {self.most}: needs 2 <= first <= most and "
                "step >= 1 (e.g. first 8, step 4, most 24)"
            )

    @property
    def looks(self) -> tuple[int, ...]:
        counts = list(range(self.first, self.most, self.step)) + [self.most]
        return tuple(counts)

    def fractions(self) -> np.ndarray:
        """The information fraction of each look: its trials over ``most``."""
        return np.array(self.looks, float) / self.most

    def rounds(self) -> tuple[int, ...]:
        """The trials per set-up each round adds: ``first``, then ``step`` (the last, what is left to ``most``)."""
        return tuple(int(n) for n in np.diff((0, *self.looks)))

    def relabellings(self) -> int:
        """The ways of relabelling two set-ups' trials within rounds (each set-up keeping its trials per round)."""
        return prod(comb(2 * n, n) for n in self.rounds())

    def fixed(self) -> Schedule:
        """The fixed design of ``most`` trials: one look at the end."""
        return Schedule(self.most, 1, self.most)

    def to_json(self) -> str:
        """The schedule as it crosses a process boundary: the config's own form, ``{"first", "step", "most"}``."""
        return json.dumps(asdict(self))

    @classmethod
    def parse(cls, text: str) -> Schedule:
        """The one parser of a schedule given as text: the JSON of ``to_json`` (an arguments file's) or
        FIRST,STEP,MOST as a person types it (``ganstudy plan-trials --schedule 8,4,24``)."""
        try:
            if text.lstrip().startswith("{"):
                parts = json.loads(text)
            else:
                numbers = text.split(",")
                parts = dict(zip(("first", "step", "most"), numbers)) if len(numbers) == 3 else {}
            if not isinstance(parts, dict) or sorted(parts) != ["first", "most", "step"]:
                raise ValueError
            first, step, most = (int(str(parts[key]).strip()) for key in ("first", "step", "most"))
        except ValueError:
            raise ValueError(
                f"{text!r} is not a schedule: FIRST,STEP,MOST (three whole numbers, e.g. 8,4,24) or "
                '{"first": 8, "step": 4, "most": 24}'
            ) from None
        return cls(first, step, most)

    @classmethod
    def of(cls, trials: TrialsValue) -> Schedule | None:
        """The config's ``trials`` as a schedule; None where it is a fixed number."""
        return None if isinstance(trials, int) else cls(trials["first"], trials["step"], trials["most"])


@dataclass(frozen=True)
class StudyTrials:
    """Each set-up's trials (its own ``setups.<name>.trials``, else the study's: a schedule's most) and the
    study's schedule (None: a fixed number of trials)."""

    per_setup: dict[str, int]
    schedule: Schedule | None

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> StudyTrials:
        """From a validated study config."""
        schedule = Schedule.of(config["trials"])
        most = config["trials"] if schedule is None else schedule.most
        per_setup = {name: setup.get("trials") or most for name, setup in config["setups"].items()}
        return cls(per_setup, schedule)
