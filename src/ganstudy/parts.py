"""The pluggable parts a study names (its data set, each set-up's network), looked up in their registries
when the study is read: a name that no registry knows, or a plugin that does not import or is of the
wrong type, stops the study before any job, naming the key that named it. (Modes and losses are the
schema's fixed choices.)"""

from __future__ import annotations

from typing import Any

from ganstudy.data.loaders import LOADERS
from ganstudy.errors import GanstudyError
from ganstudy.models import NETWORKS
from ganstudy.registry import Registry


def part_problems(config: dict[str, Any]) -> list[str]:
    """One line per named part that cannot be used, for a validated study config."""
    named: list[tuple[Registry, str, str]] = [(LOADERS, config["dataset"]["name"], "dataset.name")]
    named += [(NETWORKS, setup["network"], f"setups.{name}.network") for name, setup in config["setups"].items()]
    problems = []
    for registry, part, key in named:
        try:
            registry.get(part)
        except GanstudyError as error:
            problems.append(f"{key}: {error}")
    return problems
