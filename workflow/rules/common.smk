# Config validation and the helpers every stage's rules share. No rules here.
import json
import os
import re

from snakemake.exceptions import WorkflowError

from ganstudy.config import ConfigError, validate_study_config

try:
    validate_study_config(config, os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.yaml"))
except ConfigError as error:
    raise WorkflowError(str(error)) from None

STUDY_DIR = f"{config['results_dir']}/{config['study']}"
LOG_DIR = f"{STUDY_DIR}/logs"
SETUPS = list(config["setups"])
TRIALS = list(range(config["trials"]))
METRICS = config["evaluation"]["metrics"]
THREADS = config["compute"]["threads_per_job"]


wildcard_constraints:
    setup="|".join(re.escape(name) for name in SETUPS),
    trial=r"\d+",
    metric="|".join(METRICS),


def as_json(section):
    """A config section as the one-argument JSON the ganstudy CLI takes (--settings)."""
    return json.dumps(section, sort_keys=True, separators=(",", ":"))


def setup_settings(wildcards):
    return as_json(config["setups"][wildcards.setup])


def dataset_files():
    """The user's data file, so that a missing one stops the DAG before any job, naming the path."""
    path = config["dataset"]["path"]
    return [path] if path else []
