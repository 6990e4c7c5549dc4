"""Frozen dataclasses built from validated config sections: a stage reads attributes, never string keys.

``build(cls, section, where)`` makes a ``cls`` from a mapping whose keys are exactly the dataclass's
fields (optional ones may be missing), nested sections into nested dataclasses and JSON lists into
tuples; ``as_dict`` is its inverse, for the job description and provenance. A key the dataclass does
not know, or a required one that is missing, names itself and ``where`` it was read from.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from ganstudy.errors import GanstudyError

T = TypeVar("T")


def _dataclass_in(annotation: Any) -> type | None:
    """The dataclass an annotation names, alone or as ``X | None``."""
    if dataclasses.is_dataclass(annotation):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        found = [arg for arg in typing.get_args(annotation) if dataclasses.is_dataclass(arg)]
        return found[0] if found else None
    return None


def _frozen(value: Any) -> Any:
    """JSON lists as tuples, so that a settings object is hashable and cannot change."""
    if isinstance(value, list):
        return tuple(_frozen(item) for item in value)
    return value


def build(cls: type[T], section: Mapping[str, Any], where: str) -> T:
    """A ``cls`` from ``section`` (see the module's docstring)."""
    hints = typing.get_type_hints(cls)
    fields = {field.name: field for field in dataclasses.fields(cls)}
    unknown = sorted(set(section) - set(fields))
    if unknown:
        raise GanstudyError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(fields)}")
    required = [name for name, field in fields.items()
                if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING]
    missing = [name for name in required if name not in section]
    if missing:
        raise GanstudyError(f"{where}: missing key(s) {', '.join(missing)}")
    values = {}
    for name, value in section.items():
        nested = _dataclass_in(hints[name])
        values[name] = build(nested, value, f"{where}.{name}") if nested and isinstance(value, Mapping) else _frozen(value)
    return cls(**values)


def as_dict(settings: Any) -> dict[str, Any]:
    """The mapping ``build`` takes, with tuples as lists (JSON's form)."""

    def plain(value: Any) -> Any:
        if isinstance(value, (tuple, list)):
            return [plain(item) for item in value]
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        return value

    return {key: plain(value) for key, value in dataclasses.asdict(settings).items()}
