"""Sweeps: a set-up declared once with ``sweep:`` becomes one ordinary set-up per combination of values.

The study config is expanded right after it is validated, so that every later stage (the plan, the jobs,
the scores, the tables) sees only ordinary set-ups; each made set-up records where it came from and its
values (``swept``), which the sweep's statistics read. Names are stable: the declared name, then each
swept key and value in alphabetical order of the keys (``dcgan__batch_size=64__lr=0.0002``), so that
adding a value to a sweep adds set-ups and renames none.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Callable
from typing import Any

SWEEP, SWEPT, ZIP = "sweep", "swept", "zip"
# Keys that are no setting of a training: what a sweep could change in them is not a set-up of its own.
NOT_SWEPT = ("trials", "reference", SWEEP, SWEPT)
SETUP_NAME = re.compile(r"^[A-Za-z0-9_.=+-]+$")


def value_label(value: Any) -> str:
    """A value as a set-up name shows it: floats in their shortest exact form (2e-4 -> 0.0002), so that
    two values never share a label; booleans and null as YAML writes them; lists joined with '-'."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "-".join(value_label(item) for item in value)
    if isinstance(value, dict):
        return "-".join(f"{key}.{value_label(item)}" for key, item in sorted(value.items()))
    return repr(value) if isinstance(value, float) else str(value)


def swept_name(declared: str, values: dict[str, Any]) -> str:
    """The name of the set-up that ``values`` make of set-up ``declared``."""
    return "__".join([declared, *(f"{key}={value_label(values[key])}" for key in sorted(values))])


def combinations(sweep: dict[str, Any]) -> list[dict[str, Any]]:
    """Every combination of a sweep's values, in the order its lists give them (the zip group's lists
    paired element by element; their lengths are checked by ``sweep_problems``)."""
    factors = [[{key: value} for value in values] for key, values in sweep.items() if key != ZIP]
    paired = sweep.get(ZIP) or {}
    if paired:
        factors.append([dict(zip(paired, values)) for values in zip(*paired.values())])
    return [dict(item for part in parts for item in part.items()) for parts in itertools.product(*factors)]


def _set(section: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for parent in parents:
        section = section[parent]
    section[last] = copy.deepcopy(value)


def _has(section: dict[str, Any], dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(section, dict) or part not in section:
            return False
        section = section[part]
    return True


def _numeric_text(value: Any) -> bool:
    """Whether ``value`` is text that reads as a number (YAML 1.1 reads 1e-4, without a point, as text)."""
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def sweep_problems(declared: str, setup: dict[str, Any]) -> list[str]:
    """What is wrong with set-up ``declared``'s sweep itself (keys, list lengths), one line each."""
    sweep, where = setup[SWEEP], f"setups.{declared}.sweep"
    paired = sweep.get(ZIP) or {}
    keys = [key for key in sweep if key != ZIP] + list(paired)
    problems = []
    for key in keys:
        if key.split(".")[0] in NOT_SWEPT:
            problems.append(f"'{where}.{key}': {key.split('.')[0]} is not a training setting and cannot be swept")
        elif not _has(setup, key):
            problems.append(
                f"'{where}.{key}': set-up {declared} has no key {key} (a key inside a section is written "
                f"section.key, e.g. grid.population_size)"
            )
    for key in {key for key in keys if keys.count(key) > 1}:
        problems.append(f"'{where}': {key} is swept both on its own and under zip; give it once")
    lengths = {key: len(values) for key, values in paired.items()}
    if len(set(lengths.values())) > 1:
        problems.append(
            f"'{where}.zip': its lists pair up element by element and must be of one length, "
            f"got {', '.join(f'{key}: {n}' for key, n in lengths.items())}"
        )
    return problems


def expand_sweeps(setups: dict[str, dict[str, Any]], check: Callable[[dict[str, Any], str], list[str]]) -> list[str]:
    """Replace, in place and in order, every set-up with a sweep by the set-ups it makes; the problems,
    one line each (nothing is replaced when there are any). ``check(setup, where)`` validates a made
    set-up, filling its defaults, and names its problems from ``where``."""
    problems: list[str] = []
    expanded: dict[str, dict[str, Any]] = {}
    for declared, setup in setups.items():
        if setup.get(SWEPT) is not None and setup.get(SWEEP) is None:
            made = setup[SWEPT]
            if swept_name(made["from"], made["values"]) != declared:
                problems.append(
                    f"'setups.{declared}.swept' is written by ganstudy when it expands a sweep; "
                    f"remove it and declare the values under sweep"
                )
            expanded[declared] = setup
            continue
        if setup.get(SWEEP) is None:
            expanded[declared] = setup
            continue
        own = sweep_problems(declared, setup)
        problems += own
        if own:
            continue
        for values in combinations(setup[SWEEP]):
            name = swept_name(declared, values)
            made = copy.deepcopy({**setup, SWEEP: None, SWEPT: {"from": declared, "values": values}})
            for key, value in values.items():
                _set(made, key, value)
            shown = ", ".join(f"{key}={value!r}" for key, value in values.items())
            refused = check(made, f"setups.{name}")
            problems += [f"{line.rstrip()} (sweep of set-up {declared}: {shown})" for line in refused]
            if refused:
                problems += [
                    f"{text!r} is text to YAML; a number is written with a point, e.g. 1.0e-4"
                    for text in values.values()
                    if _numeric_text(text)
                ]
            if not SETUP_NAME.match(name):
                problems.append(
                    f"set-up {name} (sweep of set-up {declared}: {shown}): a value makes a name with characters "
                    f"other than letters, digits and _ - . = +; sweep values without them"
                )
            if name in expanded and (expanded[name].get(SWEPT) or {}).get("from") == declared:
                problems.append(
                    f"set-up {name}: the sweep of set-up {declared} gives these values twice ({shown}); give each once"
                )
            elif name in setups or name in expanded:
                problems.append(
                    f"set-up {name}: the sweep of set-up {declared} makes a set-up of a name that the study "
                    f"already has; rename one of them"
                )
            expanded[name] = made
    if not problems:
        setups.clear()
        setups.update(expanded)
    return problems


def sweep_lines(setups: dict[str, dict[str, Any]]) -> list[str]:
    """One line per sweep of an expanded study: the declared set-up, its swept keys and the set-ups made."""
    return [
        f"sweep of set-up {declared} over {', '.join(swept_keys(made))}: {len(made)} set-ups ({', '.join(made)})"
        for declared, made in sweep_levels(setups).items()
    ]


def swept_keys(levels: dict[str, dict[str, Any]]) -> list[str]:
    """A sweep's keys in alphabetical order, from its set-ups' values (``sweep_levels``)."""
    return sorted(next(iter(levels.values())))


def sweep_levels(setups: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Each sweep of an expanded study, by the set-up declared: its set-ups and their values of the swept keys."""
    levels: dict[str, dict[str, dict[str, Any]]] = {}
    for name, setup in setups.items():
        if setup.get(SWEPT):
            levels.setdefault(setup[SWEPT]["from"], {})[name] = setup[SWEPT]["values"]
    return levels
