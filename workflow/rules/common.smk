# Config validation and the helpers every stage's rules share. No rules here.
import json
import math
import os
import re
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

from ganstudy.config import (
    ConfigError, dataset_settings, evaluation_settings, speedup_baselines, validate_study_config,
)
from ganstudy.data.loaders import get_dataset
from ganstudy.data.sources import SOURCES
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.weights import check_inception_weights, fid_sample_warning
from ganstudy.parallel.partition import shard_rows
from ganstudy.parts import part_problems, study_kind
from ganstudy.resources import MIN_RANK_MB, node_memory_mb, rank_memory_mb, retry_minutes
from ganstudy.site import read_site, with_site
from ganstudy.status import write_plan
from ganstudy.stats.timing import EPOCH_REFERENCES
from ganstudy.train.job import job_description, write_job
from ganstudy.train.settings import TrainingSettings
from ganstudy.user_inputs import missing_user_inputs

try:
    validate_study_config(config, os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.yaml"))
except ConfigError as error:
    raise WorkflowError(str(error)) from None

# The site (ganstudy.site): what a node is, from the profile's site file; study keys override it on purpose.
try:
    SITE = read_site(config["site"], workflow.basedir)
except GanstudyError as error:
    raise WorkflowError(str(error)) from None
config["compute"], site_overrides = with_site(config["compute"], SITE)
logger.info(f"site '{SITE['name']}': {SITE['node_cores']} cores and {SITE['node_gpus']} GPUs per node")
for line in site_overrides:
    logger.warning(f"warning: {line}")

STUDY_DIR = f"{config['results_dir']}/{config['study']}"
LOG_DIR = f"{STUDY_DIR}/logs"
SETUPS = list(config["setups"])
# (set-up, trial) of every training run: set-ups may run more or fewer trials than the study.
RUNS = [(s, t) for s in SETUPS for t in range(config["setups"][s]["trials"] or config["trials"])]
METRICS = config["evaluation"]["metrics"]
THREADS = config["compute"]["threads_per_job"]
SMOTE = config["dataset"]["smote"]["strategy"] != "none"
TABLE_FORMATS = ["csv", "md", "tex"]
INCEPTION = config["evaluation"]["extractor"] == "inception"
# What the user must provide (their data, the Inception weights): a dry-run plans the whole study without
# them and lists them once; a real run stops here, before any job, until they are there.
DRY_RUN = workflow.output_settings.dryrun
MISSING = missing_user_inputs(config)
if MISSING:
    needs = "this study needs files that are not here yet:\n" + "\n".join(f"  - {line}" for line in MISSING)
    if not DRY_RUN:
        raise WorkflowError(needs)
    logger.warning(f"warning: {needs}\nThe plan below assumes them; a real run stops before any job until they are there.")
# A weights file that is there but is not the expected one stops the DAG, dry-run or not.
if INCEPTION and config["evaluation"]["inception_weights"] and os.path.isfile(config["evaluation"]["inception_weights"]):
    try:
        check_inception_weights(config["evaluation"]["inception_weights"], config["evaluation"]["inception_sha256"])
    except GanstudyError as error:
        raise WorkflowError(str(error)) from None
# A data set or network that no registry knows, a plugin that does not import, a network that cannot
# learn the data's kind or a metric that cannot score it stops the DAG naming its key.
problems = part_problems(config)
if problems:
    raise WorkflowError("\n".join(problems))
# What the data are (ganstudy.data.kinds): images with classes are scored with the data set's classifier;
# paired images (pix2pix) and calorimeter showers (3DGAN) have no classes, and their generators are
# scored on the test split.
KIND = study_kind(config)
# Inception FID on fewer samples than its 2,048 features is strongly biased: say so before any job runs
# (a paired study's sample count is its test split's, which its scores' notes judge).
FID_WARNING = (fid_sample_warning(config["evaluation"]["extractor"], config["evaluation"]["samples"])
               if KIND.held_out is None and "fid" in METRICS else None)
if FID_WARNING:
    logger.warning(f"warning: {FID_WARNING}")


wildcard_constraints:
    setup="|".join(re.escape(name) for name in SETUPS),
    trial=r"\d+",
    metric="|".join(METRICS),


def as_json(section):
    """A config section as the one-argument JSON the ganstudy CLI takes (--settings)."""
    return json.dumps(section, sort_keys=True, separators=(",", ":"))


# The evaluation section as the scoring jobs get it.
EVALUATION_SETTINGS = as_json(evaluation_settings(config["evaluation"], config["dataset"]["name"]))


def pairs_of(name):
    """Generator-discriminator pairs a set-up trains: one per grid cell or per class, else one."""
    setup = config["setups"][name]
    if setup["mode"] == "per_class":
        return dataset_classes(name)
    if setup["mode"] == "grid":
        shape = setup["grid"]["shape"]
        return setup["grid"]["max_cells"] if shape == "auto" else math.prod(int(n) for n in shape.split("x"))
    return 1


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
    return max(1, min(pairs_of(name), config["compute"]["max_ranks"]))


def setup_tasks(wildcards):
    return tasks_of(wildcards.setup)


def train_priority(wildcards):
    """Longest training jobs first, by pair-iterations per rank: when a study has more jobs than the
    cores or slots it runs on, starting the long ones first shortens it (the default study: 8 jobs on 2
    cores, 1x1 jobs half as long as 2x2 ones). Only the order of the numbers matters."""
    tasks = setup_tasks(wildcards)
    try:
        pairs = pairs_of(wildcards.setup)
    except WorkflowError:
        pairs = tasks  # a per-class set-up whose classes are known only once its data is read
    return config["setups"][wildcards.setup]["iterations"] * pairs / tasks


def dataset_classes(setup_name):
    """Classes of the study's data set, where its entry knows them before it is read."""
    name = config["dataset"]["name"]
    classes = get_dataset(name).classes
    if classes is None:
        raise WorkflowError(
            f"set-up '{setup_name}' trains per class on dataset '{name}', whose number of classes is known only "
            f"once it is read: set setups.{setup_name}.ranks"
        )
    return classes


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
                ranks = KNOWN_TASKS[name]
                global_batch = TrainingSettings.from_config(setup, f"set-up '{name}'").global_batch(ranks)
                shard_rows(global_batch, ranks, setup["data_parallel"]["accumulation_steps"])
            except GanstudyError as error:
                raise WorkflowError(f"set-up '{name}': {error}") from None


check_data_parallel_batches()


def references_of(wanted):
    """Set-up -> key -> the paper's number, for the reference keys that ``wanted`` accepts."""
    found = {name: {key: ref for key, ref in setup["reference"].items() if wanted(key)} for name, setup in config["setups"].items()}
    return {name: refs for name, refs in found.items() if refs}


# Set-up -> metric -> the paper's published result it reproduces (tables/reproduction.*).
REFERENCES = references_of(lambda key: key not in EPOCH_REFERENCES)
# Set-up -> training fact (epoch time, final losses) -> the paper's number (tables/epochs.*).
EPOCH_FACTS = references_of(lambda key: key in EPOCH_REFERENCES)
unknown = sorted({f"setups.{name}.reference.{metric}" for name, refs in REFERENCES.items() for metric in refs if metric not in METRICS})
if unknown:
    raise WorkflowError(f"{', '.join(unknown)}: not among evaluation.metrics {METRICS} nor the training facts "
                        f"{', '.join(EPOCH_REFERENCES)}; add the metric or remove the reference")
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


def rank_gpus():
    """GPUs of each training rank: gpus_per_rank on GPU nodes, none on a CPU cluster (node_gpus 0).
    They are asked for whatever compute.device says: device cpu on GPU nodes is a choice, not a mistake."""
    compute = config["compute"]
    return compute["gpus_per_rank"] if compute["node_gpus"] else 0


def mpi_launch(wildcards, resources):
    """The launch prefix of a training job for the profile's launcher (resources.mpi): jsrun gets
    Summit's resource sets (1 rank, its cores and its GPUs each), srun its GPUs per task (so that each
    rank is bound to its own) and cores, mpiexec a rank count."""
    if resources.mpi == "jsrun":
        per_node = ranks_per_node()
        cores = config["compute"]["node_cores"] // per_node
        return f"jsrun -n {resources.tasks} -r {per_node} -a 1 -c {cores} -g {rank_gpus()} -b packed:{cores}"
    launch = f"{resources.mpi} -n {resources.tasks}"
    # Inside a Snakemake Slurm job the allocation's SLURM_* defaults are cleared: srun is told everything.
    if resources.mpi == "srun" and rank_gpus():
        launch += f" --gpus-per-task={rank_gpus()}"
    if resources.mpi == "srun" and THREADS > 1:
        launch += f" --cpus-per-task={THREADS}"
    return launch


def train_gpus(wildcards):
    """GPUs a training job asks Slurm for in all (its ranks' GPUs; sbatch --gpus)."""
    return setup_tasks(wildcards) * rank_gpus()


def train_runtime(wildcards, attempt):
    """Wall-time minutes of a training job: a retry (the job was stopped at its limit and resumes from
    its checkpoint) asks for train_minutes times the attempt, up to compute.max_train_minutes."""
    compute = config["compute"]
    return retry_minutes(compute["train_minutes"], attempt, compute["max_train_minutes"])


def train_memory(wildcards, input):
    """Memory (MB) per node of a training job (sbatch --mem): the ranks that share a node, each holding
    the training split besides its libraries and networks (ganstudy.resources), or
    compute.mem_mb_per_rank each when set."""
    compute = config["compute"]
    per_rank = compute["mem_mb_per_rank"]
    if per_rank is None:
        device = "cpu" if compute["device"] == "cpu" or not rank_gpus() else "cuda"
        per_rank = rank_memory_mb(os.path.getsize(input.train), device)
    memory = node_memory_mb(min(setup_tasks(wildcards), ranks_per_node()), per_rank)
    if compute["node_mem_mb"] is not None and memory > compute["node_mem_mb"]:
        raise WorkflowError(f"set-up {wildcards.setup}: its ranks on one node need {memory} MB, more than a node's "
                            f"{compute['node_mem_mb']} MB (node_mem_mb, site '{SITE['name']}'): the job could never start; "
                            "lower compute.mem_mb_per_rank or the ranks per node (compute.threads_per_job)")
    return memory


def check_compute():
    """Wall-time and memory settings that cannot work stop the DAG, naming the keys."""
    compute = config["compute"]
    problems = []
    if compute["max_train_minutes"] < compute["train_minutes"]:
        problems.append(f"compute.max_train_minutes={compute['max_train_minutes']} is below compute.train_minutes="
                        f"{compute['train_minutes']}: a retry could not even ask for the first attempt's wall time")
    if compute["wall_warning_minutes"] >= compute["train_minutes"]:
        problems.append(f"compute.wall_warning_minutes={compute['wall_warning_minutes']} must be below compute.train_minutes="
                        f"{compute['train_minutes']}: the job would be told to stop as soon as it starts")
    if compute["mem_mb_per_rank"] is not None and compute["mem_mb_per_rank"] < MIN_RANK_MB:
        problems.append(f"compute.mem_mb_per_rank={compute['mem_mb_per_rank']} is below the {MIN_RANK_MB} MB a rank needs "
                        "for Python, torch and MPI alone: raise it, or remove the key to let ganstudy estimate it")
    if problems:
        raise WorkflowError("; ".join(problems))


check_compute()
# Slurm (--signal) and LSF (-wa/-wt) warn training jobs this long before their wall time: they checkpoint and stop.
WARNING_SECONDS = config["compute"]["wall_warning_minutes"] * 60


def setup_threads(wildcards):
    return setup_tasks(wildcards) * THREADS


def training_job_description(wildcards):
    """The set-up's job file (ganstudy.train.job): settings, seed, the trials' input files and the
    compute options. Typed here, so a description the jobs would refuse stops the DAG."""
    compute = config["compute"]
    options = {"device": compute["device"], "gpus_per_rank": compute["gpus_per_rank"], "node_gpus": compute["node_gpus"],
               "deterministic": compute["deterministic"], "threads": THREADS}
    try:
        return job_description(wildcards.setup, config["setups"][wildcards.setup], config["seed"], train_inputs(wildcards), options,
                               KIND.name)
    except GanstudyError as error:
        raise WorkflowError(str(error)) from None


def train_inputs(wildcards):
    """The prepared data, and for set-ups that score during training the classifier and real statistics
    (kinds scored on the test split: that split)."""
    inputs = {"train": f"{STUDY_DIR}/data/train.npz"}
    setup = config["setups"][wildcards.setup]
    if KIND.held_out is not None:
        if setup["score_period"]:
            inputs["held_out"] = f"{STUDY_DIR}/data/test.npz"
    elif setup["mode"] == "grid" or setup["score_period"]:
        inputs["classifier"] = f"{STUDY_DIR}/classifier/classifier.pt"
        inputs["reference"] = f"{STUDY_DIR}/classifier/reference_stats.npz"
    return inputs


def evaluate_inputs(wildcards):
    run = f"{STUDY_DIR}/runs/{wildcards.setup}/trial{wildcards.trial}"
    inputs = {"generator": f"{run}/generator.pt", "record": f"{run}/run.json"}
    if KIND.held_out is not None:
        inputs["held_out"] = f"{STUDY_DIR}/data/test.npz"
        if INCEPTION and KIND.inception_metrics(METRICS):
            inputs["weights"] = user_file(config["evaluation"]["inception_weights"])
        return inputs
    inputs["classifier"] = f"{STUDY_DIR}/classifier/classifier.pt"
    inputs["reference"] = f"{STUDY_DIR}/classifier/reference_stats.npz"
    if INCEPTION:
        inputs["quality"] = f"{STUDY_DIR}/classifier/reference_inception.npz"
    return inputs


def evaluate_args(wildcards, input):
    """What the evaluate command scores against: the test split, or the classifier's statistics (and
    Inception's when it is evaluation.extractor)."""
    if KIND.held_out is not None:
        return f"--kind {KIND.name} --held-out {input.held_out}"
    quality = f" --quality-reference {input.quality}" if "quality" in input.keys() else ""
    return f"--classifier {input.classifier} --reference {input.reference}{quality}"


def fetched_files():
    """The published files of a standard data set, in dataset.path; empty for other loaders."""
    name, path = config["dataset"]["name"], config["dataset"]["path"]
    if name not in SOURCES:
        return []
    if not path:
        raise WorkflowError(f"dataset '{name}' needs dataset.path: the folder that holds (or will hold) its files")
    return [os.path.join(path, file) for file in SOURCES[name].md5]


def user_file(path):
    """A file the user provides, as a rule's input: none while a dry-run plans without it (MISSING says so)."""
    return [path] if path and (os.path.exists(path) or not DRY_RUN) else []


def dataset_files():
    """What prepare_dataset reads: fetched files, or the user's data file or folder."""
    return fetched_files() or user_file(config["dataset"]["path"])
