"""The configuration reference (docs/config-reference.md), generated from the JSON schemas of the study
(workflow/schemas/config.schema.yaml) and of the site (site.schema.yaml), so that it cannot drift from
what the workflow validates: every key with its type, default, allowed values and description. A key
without a description, or an optional one without a default, is an error (``schema_gaps``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

SCHEMAS = (
    ("config.schema.yaml", "Study config", "A study's YAML file (`--configfile`); every key is optional."),
    (
        "site.schema.yaml",
        "Site",
        "What a node is: `profiles/<name>/site.yaml`, named by the profile (profiles/README.md).",
    ),
)


def _entries(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(dotted key, its schema) for every key below ``schema``, depth first in the schema's order; a map of
    user-named entries (set-ups, references) appears as ``<name>``."""
    for name, sub in schema.get("properties", {}).items():
        key = f"{path}.{name}" if path else name
        yield key, sub
        yield from _entries(sub, key)
    named = schema.get("additionalProperties")
    if isinstance(named, dict) and (named.get("properties") or named.get("additionalProperties")):
        yield from _entries(named, f"{path}.<name>")


def _type(sub: dict[str, Any]) -> str:
    kind = sub.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    return " or ".join("null" if k == "null" else k for k in kinds)


def _value(value: Any) -> str:
    return "`" + json.dumps(value, ensure_ascii=False) + "`"


def _limits(sub: dict[str, Any]) -> str:
    parts = []
    if "enum" in sub:
        parts.append("one of " + ", ".join(_value(v) for v in sub["enum"]))
    for word, key in (
        ("at least", "minimum"),
        ("above", "exclusiveMinimum"),
        ("at most", "maximum"),
        ("below", "exclusiveMaximum"),
    ):
        if key in sub:
            parts.append(f"{word} {sub[key]}")
    if "pattern" in sub:
        parts.append(f"matches `{sub['pattern']}`")
    return "; ".join(parts)


def schema_gaps(schema: dict[str, Any], where: str) -> list[str]:
    """Keys a newcomer could not look up: no description, or optional without a default."""
    gaps = []
    for key, sub in _entries(schema, ""):
        required = key.rsplit(".", 1)[-1] in _required_of(schema, key)
        if not sub.get("description"):
            gaps.append(f"{where}: {key} has no description")
        if "default" not in sub and not required:
            gaps.append(f"{where}: {key} has no default")
    return gaps


def _required_of(schema: dict[str, Any], key: str) -> list[str]:
    """The ``required`` list of the object that holds ``key``."""
    parent = schema
    for part in key.split(".")[:-1]:
        parent = (
            parent.get("additionalProperties", {}) if part == "<name>" else parent.get("properties", {}).get(part, {})
        )
    return parent.get("required", [])


def reference(schema_dir: str | Path) -> str:
    """The Markdown reference of both schemas."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from the JSON schemas in `workflow/schemas/` by `ganstudy config-reference` (the tests check",
        "that it is current and that every key has a description and a default); do not edit by hand.",
        "",
    ]
    for file, title, about in SCHEMAS:
        schema = yaml.safe_load((Path(schema_dir) / file).read_text())
        lines += [f"## {title}", "", about, ""]
        for key, sub in _entries(schema, ""):
            depth = key.count(".")
            header = "###" if depth == 0 else "####"
            lines += [f"{header} `{key}`", ""]
            facts = [f"type {_type(sub)}"]
            if "default" in sub:
                facts.append(f"default {_value(sub['default'])}")
            if _limits(sub):
                facts.append(_limits(sub))
            lines += ["*" + "; ".join(facts) + "*", "", " ".join(sub.get("description", "").split()), ""]
    return "\n".join(lines).rstrip() + "\n"


def write_reference(schema_dir: str | Path, out: str | Path) -> list[str]:
    """Write the reference; return the schemas' gaps (empty: complete)."""
    gaps = []
    for file, _, _ in SCHEMAS:
        gaps += schema_gaps(yaml.safe_load((Path(schema_dir) / file).read_text()), file)
    Path(out).write_text(reference(schema_dir))
    return gaps
