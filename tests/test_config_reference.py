"""The configuration reference in docs/ is generated from the schemas and current; a key without a
description or a default fails."""

from __future__ import annotations

import subprocess

from conftest import REPO
from ganstudy.config.reference import schema_gaps


def test_the_committed_reference_is_what_the_schemas_generate(tmp_path, env):
    out = tmp_path / "reference.md"
    # From another directory: the schemas are found beside the package, in its checkout.
    done = subprocess.run(
        ["ganstudy", "config-reference", "--out", str(out)], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text() == (REPO / "docs" / "config-reference.md").read_text(), (
        "docs/config-reference.md is stale: run `ganstudy config-reference` and commit it"
    )
    text = out.read_text()
    for key in ("setups.<name>.grid.shape", "evaluation.metrics", "compute.node_gpus", "node_mem_mb"):
        assert f"`{key}`" in text, key


def test_an_undocumented_key_is_a_gap():
    schema = {
        "type": "object",
        "properties": {
            "documented": {"type": "integer", "description": "A key.", "default": 1},
            "bare": {"type": "string"},
            "section": {
                "type": "object",
                "description": "A section.",
                "default": {},
                "required": ["must"],
                "properties": {
                    "must": {"type": "number", "description": "Required: needs no default."},
                    "hidden": {"type": "number", "default": 0},
                },
            },
        },
    }
    assert schema_gaps(schema, "s.yaml") == [
        "s.yaml: bare has no description",
        "s.yaml: bare has no default",
        "s.yaml: section.hidden has no description",
    ]
