"""Typed settings: the dataclasses carry exactly the schema's keys with its defaults, round-trip through
JSON, and a key they do not know (or a missing one) is named."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import pytest
import yaml

from ganstudy.config.pretrained import EXTRACTOR_KEYS
from ganstudy.config.setup_settings import GridSettings, TrainingSettings
from ganstudy.config.typed import _dataclass_in, as_dict, build
from ganstudy.config.validate import (
    DATASET_KEYS,
    EVALUATION_KEYS,
    METRIC_KEYS,
    TASK_KEYS,
    ConfigError,
    dataset_settings,
    evaluation_settings,
    validate_study_config,
)
from ganstudy.data.settings import DatasetSettings, SmoteSettings
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.settings import ClassifierSettings, EvaluationSettings
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.train.job import job_settings

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"


def setup_schema() -> dict:
    setups = yaml.safe_load(SCHEMA.read_text())["properties"]["setups"]
    return setups.get("additionalProperties") or next(iter(setups["patternProperties"].values()))


def compare(cls: type, properties: dict, where: str, only: dict = TASK_KEYS) -> None:
    fields = {field.name: field for field in dataclasses.fields(cls)}
    # A set-up's published result and its sweep are the study's, not its training's.
    assert set(fields) == set(properties) - {"reference", "sweep", "swept"}, where
    hints = typing.get_type_hints(cls)
    for name, field in fields.items():
        nested = _dataclass_in(hints[name])
        if nested:
            compare(nested, properties[name]["properties"], f"{where}.{name}")
            continue
        if field.default is dataclasses.MISSING:
            continue
        # A key only some networks (data sets) read is None for the others; the schema's default is theirs.
        expected = None if name in only else properties[name].get("default")
        assert as_dict_value(field.default) == expected, f"{where}.{name}"


def as_dict_value(value):
    return list(value) if isinstance(value, tuple) else value


def test_the_settings_dataclasses_are_the_schemas_set_up_keys_with_its_defaults():
    compare(TrainingSettings, setup_schema()["properties"], "setups.<name>")


@pytest.mark.parametrize("network", ["perceptron4", "pix2pix", "calo3d"])
def test_every_validated_set_up_builds_and_round_trips_through_json(network):
    config = validate_study_config({"setups": {"s": {"network": network, "mode": "single"}}}, SCHEMA)
    section = job_settings(config["setups"]["s"])
    settings = TrainingSettings.of(section)
    assert isinstance(settings.grid, GridSettings) and settings.betas == (0.5, 0.999)
    assert (settings.energy_loop is not None) == (network == "calo3d") and (settings.l1_weight is not None) == (
        network == "pix2pix"
    )
    again = TrainingSettings.of(json.loads(json.dumps(as_dict(settings))))
    assert again == settings and hash(again) == hash(settings)


def test_an_unknown_or_missing_key_is_named_with_where_it_was_read():
    config = validate_study_config({"setups": {"s": {}}}, SCHEMA)
    section = job_settings(config["setups"]["s"])
    with pytest.raises(GanstudyError, match=r"job\.json\.grid: unknown key\(s\) shap; known: shape"):
        TrainingSettings.of({**section, "grid": {**section["grid"], "shap": "2x2"}}, "job.json")
    without = {key: value for key, value in section.items() if key != "lr"}
    with pytest.raises(GanstudyError, match=r"job\.json: missing key\(s\) lr"):
        build(TrainingSettings, without, "job.json")


def test_the_preparing_and_scoring_stages_settings_are_the_schema_s_sections_with_its_defaults():
    properties = yaml.safe_load(SCHEMA.read_text())["properties"]
    compare(DatasetSettings, properties["dataset"]["properties"], "dataset", DATASET_KEYS)
    compare(EvaluationSettings, properties["evaluation"]["properties"], "evaluation", EVALUATION_KEYS)
    compare(ClassifierSettings, properties["classifier"]["properties"], "classifier", {})
    compare(StatisticsSettings, properties["statistics"]["properties"], "statistics", {})
    config = validate_study_config({}, SCHEMA)
    for dataset in ("digits", "calorimeter"):
        section = evaluation_settings(config["evaluation"], dataset)
        settings = EvaluationSettings.of(json.loads(json.dumps(section)))
        # Keys of other data sets are None; keys of metrics not scored take their defaults.
        defaults = {key: getattr(EvaluationSettings(), key) for key in METRIC_KEYS}
        assert as_dict(settings) == {
            **section,
            **{key: section.get(key) for key in EVALUATION_KEYS},
            **{key: None for key in EXTRACTOR_KEYS},
            **defaults,
        }
    # The DINOv2/CLIP file's keys only for those extractors: the others' scoring jobs keep their settings.
    dinov2 = {**config["evaluation"], "extractor": "dinov2", "extractor_weights": "/w/dinov2_vitl14_pretrain.pth"}
    assert evaluation_settings(dinov2, "digits")["extractor_weights"] == "/w/dinov2_vitl14_pretrain.pth"
    assert not set(EXTRACTOR_KEYS) & set(evaluation_settings({**dinov2, "extractor": "inception"}, "digits"))
    assert EvaluationSettings.of(evaluation_settings(config["evaluation"], "calorimeter")).energy_bins[-1] == 500
    assert ClassifierSettings.of(config["classifier"]) == ClassifierSettings()
    paired = DatasetSettings.of(dataset_settings({**config["dataset"], "name": "paired_folder", "direction": "BtoA"}))
    assert paired.load_options().direction == "BtoA" and paired.smote == SmoteSettings()
    assert DatasetSettings.of(dataset_settings(config["dataset"])).load_options().direction == "AtoB"
    with pytest.raises(GanstudyError, match=r"--settings: unknown key\(s\) metric; known: samples"):
        EvaluationSettings.of({"metric": ["fid"]}, "--settings")


def test_global_batch_rate_and_batch_norm_rows_follow_the_scaling_and_batch_norm_options():
    from ganstudy.config.setup_settings import TrainingSettings

    config = validate_study_config({"setups": {"p": {"mode": "data_parallel", "batch_size": 8, "lr": 0.001}}}, SCHEMA)
    strong = TrainingSettings.of(job_settings(config["setups"]["p"]))
    assert (strong.global_batch(4), strong.rank_lr(4), strong.batch_norm_rows(4)) == (8, 0.001, 8)
    weak = dataclasses.replace(
        strong, data_parallel=dataclasses.replace(strong.data_parallel, scaling="weak", accumulation_steps=2)
    )
    assert (weak.global_batch(4), weak.rank_lr(4), weak.batch_norm_rows(4)) == (32, 0.004, 16)
    per_rank = dataclasses.replace(weak, data_parallel=dataclasses.replace(weak.data_parallel, batch_norm="per_rank"))
    assert per_rank.batch_norm_rows(4) == 4  # one rank's micro-batch of 8 / 2
    # Other modes train one batch_size at lr whatever the options say.
    single = dataclasses.replace(weak, mode="single")
    assert (single.global_batch(4), single.rank_lr(4)) == (8, 0.001)


def test_zero_stages_and_offload():
    from ganstudy.config.setup_settings import DataParallelSettings

    # zero: true is stage 1, as the key meant before stages 2 and 3.
    assert [DataParallelSettings(zero=z).zero_stage for z in (False, True, 0, 2, 3)] == [0, 1, 0, 2, 3]
    assert DataParallelSettings(zero=3, offload="cpu").offload == "cpu"
    for stage in (False, True, 1):
        with pytest.raises(GanstudyError, match=r"data_parallel.offload cpu .* set data_parallel.zero to 2 or 3"):
            DataParallelSettings(zero=stage, offload="cpu")
    with pytest.raises(ConfigError, match="zero"):
        validate_study_config({"setups": {"p": {"mode": "data_parallel", "data_parallel": {"zero": 4}}}}, SCHEMA)
