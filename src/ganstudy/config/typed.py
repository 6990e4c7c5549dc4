"""Frozen dataclasses built from validated config sections: a stage reads attributes, never string keys.

``build(cls, section, where)`` makes a ``cls`` from a mapping whose keys are exactly the dataclass's fields
(optional ones may be missing), nested sections into nested dataclasses, other JSON objects into
FrozenMappings and JSON lists into tuples; ``as_dict`` is its inverse, for the job description and provenance.
A key the dataclass does not know, or a required one that is missing, names itself and ``where`` it was read
from.
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


class FrozenMapping(Mapping[str, Any]):
    """A JSON object that cannot change and can be hashed (a plugin network's options in settings)."""

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items = {key: _frozen(value) for key, value in (items or {}).items()}

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> typing.Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._items.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __repr__(self) -> str:
        return repr(self._items)


def _frozen(value: Any) -> Any:
    """JSON lists as tuples and objects as FrozenMappings, so that a settings object is hashable and
    cannot change."""
    if isinstance(value, list):
        return tuple(_frozen(item) for item in value)
    if isinstance(value, Mapping):
        return FrozenMapping(value)
    return value


def build(cls: type[T], section: Mapping[str, Any], where: str) -> T:
    """A ``cls`` from ``section`` (see the module's docstring)."""
    hints = typing.get_type_hints(cls)
    fields = {field.name: field for field in dataclasses.fields(cls)}
    unknown = sorted(set(section) - set(fields))
    if unknown:
        raise GanstudyError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(fields)}")
    required = [
        name
        for name, field in fields.items()
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    ]
    missing = [name for name in required if name not in section]
    if missing:
        raise GanstudyError(f"{where}: missing key(s) {', '.join(missing)}")
    values = {}
    for name, value in section.items():
        nested = _dataclass_in(hints[name])
        values[name] = (
            build(nested, value, f"{where}.{name}") if nested and isinstance(value, Mapping) else _frozen(value)
        )
    return cls(**values)


def as_dict(settings: Any) -> dict[str, Any]:
    """The mapping ``build`` takes (from a dataclass or a FrozenMapping), with tuples as lists and mappings
    as dicts (JSON's form)."""

    def plain(value: Any) -> Any:
        if isinstance(value, (tuple, list)):
            return [plain(item) for item in value]
        if isinstance(value, Mapping):
            return {key: plain(item) for key, item in value.items()}
        return value

    items = settings.items() if isinstance(settings, Mapping) else dataclasses.asdict(settings).items()
    return {key: plain(value) for key, value in items}
