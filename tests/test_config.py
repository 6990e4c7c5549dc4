import copy

import pytest
import yaml

from conftest import REPO, SCHEMA
from ganstudy.config.validate import (
    TASK_KEYS,
    ConfigError,
    dataset_settings,
    evaluation_settings,
    load_study_config,
    validate_study_config,
)
from ganstudy.train.job import job_settings


def test_default_config_is_valid_and_defaults_are_filled(default_config):
    assert default_config["study"] == "digits_grid"
    assert default_config["dataset"]["name"] == "digits"
    assert [s["grid"]["shape"] for s in default_config["setups"].values()] == ["1x1", "2x2"]
    assert default_config["setups"]["grid2x2"]["grid"]["tournament_size"] == 2  # schema default (thesis)
    # Keys absent from config.yaml come from the schema's defaults.
    for setup in default_config["setups"].values():
        assert setup["betas"] == [0.5, 0.999]
        assert setup["loss"] == "bce"
        assert setup["latent_dim"] == 64
        assert setup["grid"]["replacement"] == "always"
    assert default_config["evaluation"]["isc_splits"] == 10
    # null: one per rank on a CPU site, a node's share of its cores on GPU nodes (tests/test_plan.py).
    assert default_config["compute"]["threads_per_job"] is None


def test_empty_config_gets_a_complete_study():
    config = validate_study_config({}, SCHEMA)
    assert set(config["setups"]) == {"lp_bce", "lp_mse"}
    assert config["setups"]["lp_mse"]["loss"] == "mse"
    assert config["setups"]["lp_mse"]["iterations"] == 200


def test_every_schema_key_has_description_and_default():
    schema = yaml.safe_load(SCHEMA.read_text())

    def walk(node, path):
        for name, sub in node.get("properties", {}).items():
            assert "description" in sub, f"{path}{name} has no description"
            # A key the schema requires (a reference's published mean and source) has nothing to default to.
            assert "default" in sub or name in node.get("required", []), f"{path}{name} has no default"
            walk(sub, f"{path}{name}.")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}*.")

    walk(schema, "")


def test_misspelt_top_level_key_is_named_with_a_suggestion(default_config):
    config = copy.deepcopy(default_config)
    config["trails"] = 3
    with pytest.raises(ConfigError) as error:
        validate_study_config(config, SCHEMA)
    assert "unknown key 'trails'" in str(error.value)
    assert "did you mean 'trials'" in str(error.value)


def test_misspelt_nested_key_is_named_with_its_path(default_config):
    config = copy.deepcopy(default_config)
    config["setups"]["grid2x2"]["iteratons"] = 5
    with pytest.raises(ConfigError, match=r"unknown key 'setups\.grid2x2\.iteratons' \(did you mean 'iterations'\?\)"):
        validate_study_config(config, SCHEMA)


def test_wrong_type_and_bad_enum_are_all_reported(default_config):
    config = copy.deepcopy(default_config)
    config["trials"] = "five"
    config["setups"]["grid1x1"]["loss"] = "wasserstein"
    with pytest.raises(ConfigError) as error:
        validate_study_config(config, SCHEMA)
    message = str(error.value)
    assert "'trials' must be of type integer or object, got 'five'" in message
    assert "'setups.grid1x1.loss' must be one of" in message and "'wasserstein'" in message


def test_bad_setup_name_is_rejected():
    with pytest.raises(ConfigError, match="setups"):
        validate_study_config({"setups": {"a b": {}}}, SCHEMA)


def test_missing_and_malformed_config_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_study_config(tmp_path / "nope.yaml", SCHEMA)
    bad = tmp_path / "bad.yaml"
    bad.write_text("study: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_study_config(bad, SCHEMA)


@pytest.mark.parametrize(
    "edit, problem",
    [
        ({"study": ".."}, "'study': '..' is not allowed here"),
        (
            {"setups": {"s": {"iterations": 2, "sweep": {"lr": [1.0e-4, "fast"]}}}},
            "'lr' must be of type number, got 'fast' (sweep of set-up s: lr='fast')",
        ),
    ],
)
def test_a_study_name_that_leaves_results_dir_or_a_swept_value_of_the_wrong_type_is_refused(edit, problem):
    # tests/test_living_study.py checks that such a study stops Snakemake before any job.
    with pytest.raises(ConfigError) as refused:
        validate_study_config(edit, SCHEMA)
    assert problem in str(refused.value)


def test_a_key_written_twice_in_one_mapping_is_refused_naming_both_lines_but_a_merge_key_is_not(tmp_path):
    twice = tmp_path / "twice.yaml"
    twice.write_text(
        "study: twice\nsetups:\n  a:\n    iterations: 2\n  b:\n    iterations: 3\n  a:\n    iterations: 4\n"
    )
    with pytest.raises(ConfigError, match=r"key 'a' appears twice in one mapping \(lines 3 and 7\)"):
        load_study_config(twice, SCHEMA)
    # A merge key is no duplicate: the keys beside it override the merged ones on purpose.
    merged = tmp_path / "merged.yaml"
    merged.write_text(
        "study: merged\nsetups:\n  a: &base\n    iterations: 2\n    lr: 0.001\n  b:\n    <<: *base\n    iterations: 3\n"
    )
    setups = load_study_config(merged, SCHEMA)["setups"]
    assert (setups["a"]["iterations"], setups["b"]["iterations"], setups["b"]["lr"]) == (2, 3, 0.001)


def test_studies_in_config_folder_are_valid():
    for path in sorted((REPO / "config").rglob("*.yaml")):
        load_study_config(path, SCHEMA)


class _ReadAttributes:
    """Typed settings that record which of their attributes are read."""

    def __init__(self, settings):
        self._settings, self.read = settings, set()

    def __getattr__(self, name):
        self.read.add(name)
        return getattr(self._settings, name)


def test_network_only_keys_reach_exactly_the_networks_whose_task_reads_them():
    from ganstudy.config.setup_settings import TrainingSettings
    from ganstudy.models import NETWORKS, get_network
    from ganstudy.train.tasks import TASKS

    config = validate_study_config({}, SCHEMA)
    for name in NETWORKS.names():
        setup = dict(config["setups"]["lp_bce"], network=name)
        section = job_settings(setup)
        not_a_run = {"reference", "trials", "sweep", "swept"}  # they change no run's result
        assert not not_a_run & set(section)
        task = get_network(name).task
        owned = {key for key, tasks in TASK_KEYS.items() if task in tasks}
        # And the mode's options while empty (the default study's modes take none).
        assert set(TASK_KEYS) - owned == set(setup) - set(section) - not_a_run - {"mode_options"}, name
        settings = _ReadAttributes(TrainingSettings.of(section))
        TASKS.get(task)(settings)
        assert settings.read & set(TASK_KEYS) == owned, name


def test_default_study_settings_carry_no_key_of_other_networks_or_data_sets(default_config):
    for setup in default_config["setups"].values():
        settings = job_settings(setup)
        assert "l1_weight" not in settings and "energy_loss_weights" not in settings
        # A torus without the ring's keys: its runs keep the records they had before rings existed.
        assert settings["grid"] == {k: v for k, v in setup["grid"].items() if k not in ("topology", "ring_radius")}
    assert "direction" not in dataset_settings(default_config["dataset"])
    assert "energy_bins" not in evaluation_settings(default_config["evaluation"], "digits")
    assert evaluation_settings(default_config["evaluation"], "calorimeter")["energy_bins"][-1] == 500
    paired = dict(default_config["dataset"], name="paired_folder", direction="BtoA")
    assert dataset_settings(paired)["direction"] == "BtoA"


def test_a_key_only_some_metrics_read_reaches_the_scoring_only_with_them():
    from ganstudy.config.validate import evaluation_settings

    config = validate_study_config({}, SCHEMA)
    assert "dc_neighborhood" not in evaluation_settings(config["evaluation"], "digits")
    scored = {**config["evaluation"], "metrics": ["fid", "coverage"]}
    assert evaluation_settings(scored, "digits")["dc_neighborhood"] == 5


def test_a_lab_s_own_network_of_a_task_gets_that_task_s_keys(site):
    # A paired network of a lab's own package: pix2pix's L1 weight, schedule and jitter are its task's.
    from conftest import install
    from ganstudy.config.setup_settings import TrainingSettings
    from ganstudy.train.tasks import TASKS

    source = "from ganstudy.models import Network\n\nUNET = Network(build='lab_paired:build', task='paired')\n"
    install(site, "lab-paired", "[ganstudy.networks]\nlab_unet = lab_paired:UNET\n", "lab_paired", source)
    setup = {"network": "lab_unet", "l1_weight": 50, "lr_decay_iterations": 1, "jitter": {"flip": True}}
    section = job_settings(validate_study_config({"setups": {"s": setup}}, SCHEMA)["setups"]["s"])
    assert (section["l1_weight"], section["lr_decay_iterations"], section["jitter"]) == (
        50,
        1,
        {"load_size": None, "flip": True},
    )
    assert "energy_loop" not in section and "energy_loss_weights" not in section
    task = TASKS.get("paired")(TrainingSettings.of(section))
    assert task.l1_weight == 50 and task.jitter is not None and task.lr_decay == 1
