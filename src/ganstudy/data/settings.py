"""The preparing stage's settings, typed: ``dataset`` as a frozen dataclass built once when the preparing
command starts from the validated section (config.dataset_settings; workflow/schemas/config.schema.yaml
describes every key), with the schema's defaults (ganstudy.config.schema). tests/test_settings.py checks that the
fields are the schema's keys. Free of torch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ganstudy.config.schema import schema_defaults
from ganstudy.config.typed import FrozenMapping, build
from ganstudy.data.loaders import LoadOptions

# The schema's defaults (ganstudy.config.schema): the one place they are written.
_SMOTE = schema_defaults("dataset", "smote")
_DATASET = schema_defaults("dataset")


@dataclass(frozen=True)
class SmoteSettings:
    """``dataset.smote``: oversampling of the training split."""

    strategy: str = _SMOTE["strategy"]
    factor: float = _SMOTE["factor"]
    k_neighbors: int = _SMOTE["k_neighbors"]


@dataclass(frozen=True)
class DatasetSettings:
    """``dataset`` as the preparing job sees it: ``direction`` only for the data sets that read it (None
    for the others)."""

    name: str = _DATASET["name"]
    path: str | None = _DATASET["path"]
    mirror: str | None = _DATASET["mirror"]
    image_size: int | None = _DATASET["image_size"]
    channels: int | None = _DATASET["channels"]
    direction: str | None = None
    options: Mapping[str, Any] = field(default_factory=FrozenMapping)
    smote: SmoteSettings = field(default_factory=SmoteSettings)
    test_fraction: float = _DATASET["test_fraction"]

    @classmethod
    def of(cls, section: Mapping[str, Any], where: str = "dataset settings") -> DatasetSettings:
        """From a preparing job's ``--settings`` (keys left out take the schema's defaults)."""
        return build(cls, section, where)

    def load_options(self) -> LoadOptions:
        return LoadOptions(self.image_size, self.channels, self.direction or LoadOptions.direction, self.options)
