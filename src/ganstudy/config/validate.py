"""Load and validate a study config against workflow/schemas/config.schema.yaml.

Validation fills every default into the config, so the rest of the code (and the provenance
record) sees the complete study, and reports *all* problems at once with the key's full path.
"""

from __future__ import annotations

import copy
import difflib
import os
from collections.abc import Iterator
from typing import Any

import jsonschema
import yaml

from ganstudy.config.pretrained import EXTRACTOR_KEYS
from ganstudy.config.sweep_expansion import expand_sweeps
from ganstudy.errors import GanstudyError


class ConfigError(GanstudyError):
    """The study config does not match the schema."""


def _defaults_filling(validator_class: type) -> type:
    validate_properties = validator_class.VALIDATORS["properties"]

    def properties_with_defaults(validator: Any, properties: dict, instance: Any, schema: dict) -> Iterator:
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if name not in instance and "default" in subschema:
                    instance[name] = copy.deepcopy(subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": properties_with_defaults})


_Validator = _defaults_filling(jsonschema.Draft202012Validator)


def _key_path(path: Any) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def _describe(error: jsonschema.ValidationError) -> str:
    where = _key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        lines = []
        for key in sorted(set(error.instance) - set(allowed)):
            full = f"{where}.{key}" if error.absolute_path else key
            hint = difflib.get_close_matches(key, allowed, n=1)
            did_you_mean = f" (did you mean '{hint[0]}'?)" if hint else ""
            lines.append(f"unknown key '{full}'{did_you_mean}; allowed here: {', '.join(allowed)}")
        return "\n".join(lines)
    if error.validator == "type":
        kinds = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"'{where}' must be of type {' or '.join(kinds)}, got {error.instance!r}"
    if error.validator == "enum":
        return f"'{where}' must be one of {error.validator_value}, got {error.instance!r}"
    if error.validator == "pattern" and error.schema.get("description"):
        return f"'{where}': {error.instance!r} is not allowed here. {error.schema['description']}"
    if error.validator == "pattern" or (error.validator == "propertyNames"):
        return f"'{where}': {error.message}"
    return f"'{where}': {error.message}"


def validate_study_config(config: dict[str, Any], schema_path: str | os.PathLike[str]) -> dict[str, Any]:
    """Check ``config`` in place, filling defaults, and expand its sweeps into set-ups
    (ganstudy.config.sweep_expansion); raise ConfigError naming every bad key."""
    with open(schema_path, encoding="utf-8") as handle:
        schema = yaml.safe_load(handle)
    if not isinstance(config, dict):
        raise ConfigError(f"the study config must be a mapping of keys to values, got {type(config).__name__}")
    errors = sorted(_Validator(schema).iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        details = "\n".join(f"  - {_describe(e)}" for e in errors)
        raise ConfigError(f"invalid study config:\n{details}\nSee {schema_path} for every key, its type and default.")
    setup_schema = schema["properties"]["setups"]["additionalProperties"]
    problems = expand_sweeps(config["setups"], lambda setup, where: section_problems(setup, setup_schema, where))
    if problems:
        details = "\n".join(f"  - {problem}" for problem in problems)
        raise ConfigError(f"invalid sweep:\n{details}\nSee {schema_path} (setups.*.sweep).")
    return config


def section_problems(section: dict[str, Any], schema: dict[str, Any], where: str) -> list[str]:
    """Check one section in place against a part's own schema (a plugin's options), filling its
    defaults; one line per problem, each key named from ``where``."""
    try:
        _Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return [f"{where}: its schema is not a valid JSON schema ({exc.message})"]
    errors = sorted(_Validator(schema).iter_errors(section), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{where}: {_describe(error)}" for error in errors]


class _NoDuplicatesLoader(yaml.SafeLoader):
    """YAML that refuses a key twice in one mapping: the plain loader keeps the last one silently, so a
    set-up written twice under one name would vanish from the study."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # "<<: *defaults": the keys written beside it override the merged ones on purpose
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(
                    f"{key_node.start_mark.name}: key '{key}' appears twice in one mapping (lines {seen[key]} "
                    f"and {line}); YAML would keep only the second: rename or merge them"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: str | os.PathLike[str], what: str = "study config") -> Any:
    """A YAML file's content; a missing file, invalid YAML or a key given twice raise ConfigError naming it."""
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.load(handle, Loader=_NoDuplicatesLoader)  # noqa: S506 (a SafeLoader)
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {path} is not valid YAML: {exc}") from None


def load_study_config(config_path: str | os.PathLike[str], schema_path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a YAML study config, validate it and fill its defaults."""
    return validate_study_config(read_yaml(config_path) or {}, schema_path)


# Set-up keys that only the networks of some training tasks read (ganstudy.train.tasks: pix2pix's "paired",
# 3DGAN's "energy"), and which; and dataset keys that only some data sets read. A job's settings leave them
# out everywhere else: a key of this kind added to the schema changes no finished job's settings, so
# Snakemake reruns nothing. A set-up key belongs to the task, not to one network, so that a lab's own
# network of that task reads it too; a network's own architecture options are its network_options
# (tests/test_config.py checks these entries against the keys each registered task reads).
TASK_KEYS: dict[str, tuple[str, ...]] = {
    "l1_weight": ("paired",),
    "lr_decay_iterations": ("paired",),
    "jitter": ("paired",),
    "energy_loss_weights": ("energy",),
    "energy_loop": ("energy",),
}
DATASET_KEYS: dict[str, tuple[str, ...]] = {"direction": ("paired_folder",)}
# Evaluation keys that only the scores of some data sets read.
EVALUATION_KEYS: dict[str, tuple[str, ...]] = {
    "energy_bins": ("calorimeter",),
    "gan3d_energies": ("calorimeter",),
    "gan3d_half_width": ("calorimeter",),
}


def _read_by(section: dict[str, Any], owner: str | None, only: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    return {key: value for key, value in section.items() if key not in only or owner in only[key]}


# Set-up keys that change no run's result: the published result it is compared with (adding or
# correcting one reruns the reporting only), how many trials run (raising it trains the new trials only),
# and a sweep and its record (a set-up made by a sweep carries its values in its own keys).
_NOT_A_RUN = ("reference", "trials", "sweep", "swept")


def training_settings(setup: dict[str, Any], task: str) -> dict[str, Any]:
    """A set-up as its training and scoring jobs see it: without the keys that change no run's result
    (``_NOT_A_RUN``), without the keys of training tasks other than its network's ``task``, and without
    ``mode_options`` where its mode takes none (a run made before modes had options keeps its settings)."""
    kept = {key: value for key, value in setup.items() if key not in _NOT_A_RUN and (key != "mode_options" or value)}
    if isinstance(kept.get("grid"), dict):
        kept["grid"] = grid_record(kept["grid"])
    return _read_by(kept, task, TASK_KEYS)


def grid_record(grid: dict[str, Any]) -> dict[str, Any]:
    """The grid section as a run records it: a torus without the ring's keys (grid.topology, grid.ring_radius),
    so that a torus run made before rings existed keeps its settings and its checkpoints."""
    if grid.get("topology", "torus") != "torus":
        return grid
    return {key: value for key, value in grid.items() if key not in ("topology", "ring_radius")}


def dataset_settings(dataset: dict[str, Any]) -> dict[str, Any]:
    """The dataset section as the preparing job sees it: without the keys of other data sets, and without
    ``options`` where the data set takes none (a study prepared before data sets had options keeps its
    data and its runs)."""
    return {
        key: value
        for key, value in _read_by(dataset, dataset["name"], DATASET_KEYS).items()
        if key != "options" or value
    }


def classifier_settings(classifier: dict[str, Any]) -> dict[str, Any]:
    """The classifier section as its job sees it: a trained classifier's keys, or a given one's (weights,
    sha256, min_accuracy). Keys the job does not use change nothing (a study made before weights existed
    keeps its classifier and its runs)."""
    unused = ("weights", "sha256") if classifier["weights"] is None else ("epochs", "batch_size", "lr")
    return {key: value for key, value in classifier.items() if key not in unused}


# Evaluation keys that only some metrics read: left out unless one of them is scored, so that such a key
# added to the schema rescores no finished run of a study that does not use it.
METRIC_KEYS: dict[str, tuple[str, ...]] = {"dc_neighborhood": ("density", "coverage")}


def evaluation_settings(evaluation: dict[str, Any], dataset_name: str) -> dict[str, Any]:
    """The evaluation section as the scoring jobs see it: without the keys of other data sets' scores, of
    other extractors or of metrics it does not score."""
    scored = set(evaluation["metrics"])
    read = _read_by(_read_by(evaluation, dataset_name, EVALUATION_KEYS), evaluation["extractor"], EXTRACTOR_KEYS)
    return {key: value for key, value in read.items() if key not in METRIC_KEYS or scored & set(METRIC_KEYS[key])}
