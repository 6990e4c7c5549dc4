"""The preparing stage's settings, typed: ``dataset`` as a frozen dataclass built once when the preparing
command starts from the validated section (config.dataset_settings; workflow/schemas/config.schema.yaml
describes every key and its default). tests/test_settings.py checks that the fields are the schema's
keys with its defaults. Free of torch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ganstudy.data.loaders import LoadOptions
from ganstudy.typed import FrozenMapping, build


@dataclass(frozen=True)
class SmoteSettings:
    """``dataset.smote``: oversampling of the training split."""

    strategy: str = "none"
    factor: float = 15
    k_neighbors: int = 5


@dataclass(frozen=True)
class DatasetSettings:
    """``dataset`` as the preparing job sees it: ``direction`` only for the data sets that read it (None
    for the others)."""

    name: str = "digits"
    path: str | None = None
    mirror: str | None = None
    image_size: int | None = None
    channels: int | None = None
    direction: str | None = None
    options: Mapping[str, Any] = field(default_factory=FrozenMapping)
    smote: SmoteSettings = field(default_factory=SmoteSettings)
    test_fraction: float = 0.2

    @classmethod
    def of(cls, section: Mapping[str, Any], where: str = "dataset settings") -> DatasetSettings:
        """From a preparing job's ``--settings`` (keys left out take the schema's defaults)."""
        return build(cls, section, where)

    def load_options(self) -> LoadOptions:
        return LoadOptions(self.image_size, self.channels, self.direction or LoadOptions.direction, self.options)
