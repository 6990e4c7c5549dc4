"""A workflow job's arguments made from its step's parser: the parser (in the step's stage module) is the
one declaration of what the step takes; a rule gives the values by the names the parser stores them under
(``run_record`` for ``--run-record``), and this writes them as the lines that ``ganstudy STEP @FILE`` reads
back. A name the step does not take, or an argument it requires and is not given, is refused when the
workflow is parsed, before any job."""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping
from typing import Any

from ganstudy.errors import GanstudyError


def _flag(action: argparse.Action) -> str:
    """The option's long form (``--run-record``), as a person would type it."""
    return next((flag for flag in action.option_strings if flag.startswith("--")), action.option_strings[0])


def _items(step: str, action: argparse.Action, value: Any) -> list[str]:
    """``value`` as the lines of one argument: a list or tuple gives one line per item."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if action.nargs is None and len(items) != 1:
        raise GanstudyError(f"ganstudy {step}: {action.dest} takes one value, the workflow gives {len(items)}: {items}")
    return [str(item) for item in items]


def _given(action: argparse.Action, value: Any) -> bool:
    """Whether ``value`` is given: not None or False, and not empty but for an option that takes none or more
    values (``--baselines`` alone: none)."""
    empty = isinstance(value, (list, tuple)) and not value
    return value is not None and value is not False and (not empty or action.nargs == "*")


def _required(action: argparse.Action) -> bool:
    return action.required or (not action.option_strings and action.nargs not in ("?", "*"))


def step_arguments(
    step: str, parser: argparse.ArgumentParser, values: Mapping[str, Any], on_the_command_line: Collection[str] = ()
) -> list[str]:
    """The arguments of a job of ``step`` (whose parser is ``parser``), in the order of ``values``: each value
    by its argument's name, an option as its flag and its values, a positional as its values. A value that
    is None or False is left out (the step's default), and so is an empty list but for an option of none or
    more values (given as its flag alone); True sets a flag. ``on_the_command_line``: the
    flags the rule's shell line gives itself (``--threads {threads}``)."""
    actions = {action.dest: action for action in parser._actions if action.dest != "help"}
    unknown = [name for name in values if name not in actions]
    if unknown:
        raise GanstudyError(
            f"ganstudy {step} takes no {', '.join(unknown)}: its arguments are {', '.join(actions)} "
            f"(ganstudy {step} --help)"
        )
    given = {name: value for name, value in values.items() if _given(actions[name], value)}
    doubled = [_flag(actions[name]) for name in given if set(actions[name].option_strings) & set(on_the_command_line)]
    if doubled:
        raise GanstudyError(
            f"ganstudy {step}: {', '.join(doubled)} given both in the rule's shell line and its arguments"
        )
    missing = [
        _flag(action) if action.option_strings else action.dest
        for name, action in actions.items()
        if _required(action) and name not in given and not set(action.option_strings) & set(on_the_command_line)
    ]
    if missing:
        raise GanstudyError(f"ganstudy {step} requires {', '.join(missing)}, which the workflow does not give")
    lines: list[str] = []
    for name, value in given.items():
        action = actions[name]
        if value is True and action.nargs == 0:
            lines.append(_flag(action))
        elif action.option_strings:
            lines += [_flag(action), *_items(step, action, value)]
        else:
            lines += _items(step, action, value)
    return lines
