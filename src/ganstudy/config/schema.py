"""The study config's schema, shipped in the package (workflow/schemas links here, as the Snakemake
template lays a workflow out), and the defaults it gives each key: the one place a default is written.
The settings dataclasses take theirs from here."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

SCHEMAS_DIR = Path(__file__).resolve().parents[1] / "schemas"
CONFIG_SCHEMA = SCHEMAS_DIR / "config.schema.yaml"


@functools.cache
def _properties() -> dict[str, Any]:
    # libyaml's loader where PyYAML has it: every command and training job reads the schema as it starts
    # (0.02 s against the pure-Python loader's 0.19 s on an AMD EPYC).
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(CONFIG_SCHEMA.read_text(encoding="utf-8"), Loader=loader)["properties"]


def _frozen(value: Any) -> Any:
    # A frozen dataclass's default must not be a list.
    return tuple(_frozen(item) for item in value) if isinstance(value, list) else value


def schema_defaults(*section: str) -> dict[str, Any]:
    """Each key's default in the config section at ``section`` (property names; ``"setups"`` is one set-up),
    lists as tuples; a key without a default is left out."""
    properties = _properties()
    for depth, name in enumerate(section):
        node = properties[name]
        if depth == 0 and name == "setups":
            node = node.get("additionalProperties") or next(iter(node["patternProperties"].values()))
        properties = node["properties"]
    return {key: _frozen(value["default"]) for key, value in properties.items() if "default" in value}
