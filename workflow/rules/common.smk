# Config validation and the helpers every stage's rules share. No rules here.
import json
import math
import os
import re

from snakemake.exceptions import WorkflowError

from ganstudy.config import ConfigError, speedup_baselines, validate_study_config
from ganstudy.data.sources import CLASS_COUNTS, SOURCES
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.weights import check_inception_weights
from ganstudy.parallel.partition import shard_rows

try:
    validate_study_config(config, os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.yaml"))
except ConfigError as error:
    raise WorkflowError(str(error)) from None

STUDY_DIR = f"{config['results_dir']}/{config['study']}"
LOG_DIR = f"{STUDY_DIR}/logs"
SETUPS = list(config["setups"])
# (set-up, trial) of every training run: set-ups may run more or fewer trials than the study.
RUNS = [(s, t) for s in SETUPS for t in range(config["setups"][s]["trials"] or config["trials"])]
METRICS = config["evaluation"]["metrics"]
THREADS = config["compute"]["threads_per_job"]
SMOTE = config["dataset"]["smote"]["strategy"] != "none"
TABLE_FORMATS = ["csv", "md", "tex"]
# Inception features for FID/IS/KID/PRC: a missing or wrong weights file stops the DAG before any job.
INCEPTION = config["evaluation"]["extractor"] == "inception"
if INCEPTION:
    try:
        check_inception_weights(config["evaluation"]["inception_weights"], config["evaluation"]["inception_sha256"])
    except GanstudyError as error:
        raise WorkflowError(str(error)) from None


wildcard_constraints:
    setup="|".join(re.escape(name) for name in SETUPS),
    trial=r"\d+",
    metric="|".join(METRICS),


def as_json(section):
    """A config section as the one-argument JSON the ganstudy CLI takes (--settings)."""
    return json.dumps(section, sort_keys=True, separators=(",", ":"))


def setup_settings(wildcards):
    return as_json(config["setups"][wildcards.setup])


def tasks_of(name):
    """MPI ranks of a set-up's training jobs: its ranks, else one per grid cell or per class capped by
    compute.max_ranks (data_parallel: max_ranks); 1 for the one-rank modes."""
    setup = config["setups"][name]
    if setup["mode"] not in ("grid", "per_class", "data_parallel"):
        return 1
    if setup["ranks"]:
        return setup["ranks"]
    if setup["mode"] == "data_parallel":
        return config["compute"]["max_ranks"]
    if setup["mode"] == "per_class":
        units = dataset_classes(name)
    else:
        shape = setup["grid"]["shape"]
        units = setup["grid"]["max_cells"] if shape == "auto" else math.prod(int(n) for n in shape.split("x"))
    return max(1, min(units, config["compute"]["max_ranks"]))


def setup_tasks(wildcards):
    return tasks_of(wildcards.setup)


def dataset_classes(setup_name):
    """Classes of the study's data set, known before it is read for the standard sets."""
    name = config["dataset"]["name"]
    if name not in CLASS_COUNTS:
        raise WorkflowError(
            f"set-up '{setup_name}' trains per class on dataset '{name}', whose number of classes is known only "
            f"once it is read: set setups.{setup_name}.ranks"
        )
    return CLASS_COUNTS[name]


def known_tasks():
    """Ranks of every set-up whose rank count the config decides; a per-class set-up on a data set whose
    classes are known only once read is left out (its training job names the problem)."""
    known = {}
    for name in SETUPS:
        try:
            known[name] = tasks_of(name)
        except WorkflowError:
            pass
    return known


KNOWN_TASKS = known_tasks()
# Multi-rank set-up -> its one-rank run of the same work: the speed-up tables and plot compare them.
BASELINES = speedup_baselines(config["setups"], KNOWN_TASKS)


def check_data_parallel_batches():
    """A global batch that cannot be shared out over its ranks stops the DAG, not a queued job."""
    for name, setup in config["setups"].items():
        if setup["mode"] == "data_parallel":
            try:
                shard_rows(setup["batch_size"], KNOWN_TASKS[name], setup["data_parallel"]["accumulation_steps"])
            except GanstudyError as error:
                raise WorkflowError(f"set-up '{name}': {error}") from None


check_data_parallel_batches()
# Scores against grid size are worth a figure once the study has grids of two sizes.
GRID_SIZES = {setup["grid"]["shape"] for setup in config["setups"].values() if setup["mode"] == "grid"}


def ranks_per_node():
    """Ranks that fit on one node: one per GPU group, or per threads_per_job cores on a CPU cluster."""
    compute = config["compute"]
    if compute["node_gpus"]:
        return max(1, compute["node_gpus"] // compute["gpus_per_rank"])
    return max(1, compute["node_cores"] // THREADS)


def setup_nodes(wildcards):
    """Whole nodes a training job asks for (bsub -nnodes, sbatch -N)."""
    return math.ceil(setup_tasks(wildcards) / ranks_per_node())


def mpi_launch(wildcards, resources):
    """The launch prefix of a training job for the profile's launcher (resources.mpi): jsrun gets
    Summit's resource sets (1 rank, its cores and its GPUs each), srun and mpiexec a rank count."""
    if resources.mpi == "jsrun":
        compute = config["compute"]
        per_node = ranks_per_node()
        cores = compute["node_cores"] // per_node
        gpus = compute["gpus_per_rank"] if compute["node_gpus"] else 0
        return f"jsrun -n {resources.tasks} -r {per_node} -a 1 -c {cores} -g {gpus} -b packed:{cores}"
    return f"{resources.mpi} -n {resources.tasks}"


def setup_threads(wildcards):
    return setup_tasks(wildcards) * THREADS


def train_inputs(wildcards):
    """The prepared data, and for modes that score during training the classifier and real statistics."""
    inputs = {"train": f"{STUDY_DIR}/data/train.npz"}
    if config["setups"][wildcards.setup]["mode"] == "grid":
        inputs["classifier"] = f"{STUDY_DIR}/classifier/classifier.pt"
        inputs["reference"] = f"{STUDY_DIR}/classifier/reference_stats.npz"
    return inputs


def scoring_args(wildcards, input):
    if "classifier" not in input.keys():
        return ""
    return f"--classifier {input.classifier} --reference {input.reference}"


def evaluate_inputs(wildcards):
    inputs = {
        "generator": f"{STUDY_DIR}/runs/{wildcards.setup}/trial{wildcards.trial}/generator.pt",
        "record": f"{STUDY_DIR}/runs/{wildcards.setup}/trial{wildcards.trial}/run.json",
        "classifier": f"{STUDY_DIR}/classifier/classifier.pt",
        "reference": f"{STUDY_DIR}/classifier/reference_stats.npz",
    }
    if INCEPTION:
        inputs["quality"] = f"{STUDY_DIR}/classifier/reference_inception.npz"
    return inputs


def quality_args(wildcards, input):
    return f"--quality-reference {input.quality}" if "quality" in input.keys() else ""


def fetched_files():
    """The published files of a standard data set, in dataset.path; empty for other loaders."""
    name, path = config["dataset"]["name"], config["dataset"]["path"]
    if name not in SOURCES:
        return []
    if not path:
        raise WorkflowError(f"dataset '{name}' needs dataset.path: the folder that holds (or will hold) its files")
    return [os.path.join(path, file) for file in SOURCES[name].md5]


def dataset_files():
    """What prepare_dataset reads: fetched files, or the user's data file, so that a missing one
    stops the DAG before any job, naming the path."""
    path = config["dataset"]["path"]
    return fetched_files() or ([path] if path else [])
