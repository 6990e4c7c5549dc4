# The adapter between Snakemake and the planner (ganstudy.plan): the config validated, the plan's checks
# raised before any job, the values and input functions the stages' rules read. No rules here.
import atexit
import datetime
import json
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import yaml

from snakemake.cli import get_profile_dir
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

from ganstudy.atomic import write_text
from ganstudy.config import (
    ConfigError, classifier_settings, dataset_settings, evaluation_settings, read_yaml, validate_study_config,
)
from ganstudy.data.sources import SOURCES
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.metrics import get_metric, pretrained_metrics
from ganstudy.evaluate.weights import check_weights, fid_sample_warning
from ganstudy.plan.changed_runs import archive_run, changed_runs
from ganstudy.plan.classes import class_problems
from ganstudy.plan.known_data import known_data
from ganstudy.plan.launchers import LAUNCHERS
from ganstudy.plan.layout import StudyLayout, speedup_baselines
from ganstudy.plan.parts import part_problems, study_kind
from ganstudy.plan.site import account_warning, read_site, resolve_node_cores, with_site
from ganstudy.plan.study_files import ArgumentsFiles, as_json, refresh, results_dir_problem, stale_files
from ganstudy.plan.study_lock import acquire as acquire_study_lock, release as release_study_lock
from ganstudy.plan.user_inputs import missing_user_inputs
from ganstudy.pretrained import PRETRAINED
from ganstudy.schema import CONFIG_SCHEMA
from ganstudy.stats.design import study_design
from ganstudy.stats.timing import EPOCH_REFERENCES
from ganstudy.status import write_plan
from ganstudy.sweeps import sweep_levels
from ganstudy.train.job import job_description, job_record, write_job

try:
    # Snakemake's own YAML reading keeps the last of two equal keys silently.
    for configfile in workflow.configfiles:
        read_yaml(configfile)
    validate_study_config(config, CONFIG_SCHEMA)
except ConfigError as error:
    raise WorkflowError(str(error)) from None

def profile_site():
    """The site= entry of the profile this Snakemake was started with (--profile, or SNAKEMAKE_PROFILE), if any."""
    profile = os.environ.get("SNAKEMAKE_PROFILE")
    for flag, value in zip(sys.argv, sys.argv[1:] + [""]):
        if flag == "--profile":
            profile = value
        elif flag.startswith("--profile="):
            profile = flag.split("=", 1)[1]
    found = get_profile_dir(profile) if profile else None
    if found is None:
        return None
    entries = (yaml.safe_load(Path(found[1]).read_text()) or {}).get("config") or []
    return next((entry.split("=", 1)[1] for entry in entries if isinstance(entry, str) and entry.startswith("site=")), None)


# --config on the command line replaces the profile's config list, and with it the profile's site: a GPU
# cluster run would plan for this machine and train on the CPU. Stop before any job instead.
if config["site"] is None and workflow.is_main_process and (lost_site := profile_site()):
    raise WorkflowError(f"the profile names its site (site={lost_site}) in its config list, which --config on the command line "
                        f"replaced: the study would plan for this machine, without GPUs. Add it to your --config, e.g. "
                        f"--config site={lost_site} <your keys>")
# The site (ganstudy.plan.site): what a node is, from the profile's site file; study keys override it on purpose.
try:
    SITE = read_site(config["site"], workflow.basedir)
except GanstudyError as error:
    raise WorkflowError(str(error)) from None
config["compute"], site_overrides = with_site(config["compute"], SITE)
config["compute"], measured_on = resolve_node_cores(config["compute"])
LAUNCHER = SITE["launcher"]
# The launcher's object (ganstudy.plan.launchers): its launch lines and its scheduler's resources.
SITE_LAUNCHER = LAUNCHERS.get(LAUNCHER)
# Profiles used to name the launcher as the train rule's mpi resource; the Slurm plugin then takes every
# training job for an MPI job, and refuses to submit one of a single rank.
if "mpi" in workflow.resource_settings.overwrite_resources.get("train", {}):
    raise WorkflowError("the profile sets `set-resources: train: mpi:`: the launcher is now the site's key `launcher:` "
                        "(mpiexec, srun or jsrun) in its site file, profiles/<name>/site.yaml; move it there (profiles/README.md)")
measured = f" (node_cores null: those of {measured_on}, where Snakemake runs)" if measured_on else ""
logger.info(f"site '{SITE['name']}': {config['compute']['node_cores']} cores{measured} and {SITE['node_gpus']} GPUs per node")
# Once, where the plan is made (every cluster job parses this file again).
if workflow.is_main_process:
    default_resources = workflow.resource_settings.default_resources
    given = dict(arg.partition("=")[::2] for arg in (default_resources.args if default_resources else []))
    notes = [account_warning(SITE, given, os.environ), *site_overrides]
    if measured_on and LAUNCHER != "mpiexec":
        notes.append(f"site '{SITE['name']}' leaves node_cores null: the plan took the cores of {measured_on}, where Snakemake "
                     "runs; if the compute nodes differ, set node_cores in the site file")
    for line in filter(None, notes):
        logger.warning(f"warning: {line}")

STUDY_DIR = f"{config['results_dir']}/{config['study']}"
LOG_DIR = f"{STUDY_DIR}/logs"


# A results folder that is a file, or that this user cannot write, stops the DAG before any job.
if problem := results_dir_problem(config["results_dir"], STUDY_DIR):
    raise WorkflowError(problem)
SETUPS = list(config["setups"])
# (set-up, trial) of every training run: set-ups may run more or fewer trials than the study.
RUNS = [(s, t) for s in SETUPS for t in range(config["setups"][s]["trials"] or config["trials"])]
# Each run's record and score, targets of the study's tables and figures: Snakemake redoes a missing file
# only for a job that needs it, so a run archived by a run that stopped before training it again, or one
# deleted by hand, would otherwise leave the tables made from the old run standing.
RUN_RESULTS = [path for setup, trial in RUNS for path in (f"{STUDY_DIR}/runs/{setup}/trial{trial}/run.json",
                                                         f"{STUDY_DIR}/scores/{setup}/trial{trial}.json")]
METRICS = config["evaluation"]["metrics"]
THREADS = config["compute"]["threads_per_job"]
SMOTE = config["dataset"]["smote"]["strategy"] != "none"
TABLE_FORMATS = ["csv", "md", "tex"]
# evaluation.extractor when it is a pretrained network (Inception, DINOv2, CLIP), with its weights file
# and that file's expected sha256; None for the data set's classifier.
PRETRAINED_MODEL = PRETRAINED.get(config["evaluation"]["extractor"])
PRETRAINED_WEIGHTS, PRETRAINED_SHA256 = PRETRAINED_MODEL.file(config["evaluation"]) if PRETRAINED_MODEL else (None, None)
# The real images' statistics in its features.
QUALITY_REFERENCE = f"{STUDY_DIR}/classifier/reference_{config['evaluation']['extractor']}.npz"
# What the user must provide (their data, the Inception weights): a dry-run plans the whole study without
# them and lists them once; a real run stops here, before any job, until they are there.
DRY_RUN = workflow.output_settings.dryrun
# Snakemake's options that build no job: they read the study and must change nothing in it.
NOT_EXECUTING = {"--report", "--lint", "--list", "-l", "--list-target-rules", "--lt", "--list-rules", "--list-changes", "--lc",
                 "--list-code-changes", "--list-input-changes", "--li", "--list-params-changes", "--lp", "--list-untracked", "--lu",
                 "--summary", "-S", "--detailed-summary", "-D", "--dag", "--rulegraph", "--filegraph", "--d3dag", "--unlock",
                 "--cleanup-metadata", "--cm", "--archive", "--delete-all-output", "--delete-temp-output", "--touch", "-t",
                 "--containerize", "--export-cwl", "--print-compilation", "--generate-unit-tests", "--conda-create-envs-only",
                 "--conda-cleanup-envs", "--cleanup-shadow", "--version", "-v", "--help", "-h"}
EXECUTING = workflow.is_main_process and not DRY_RUN and not {arg.split("=")[0] for arg in sys.argv} & NOT_EXECUTING
MISSING = missing_user_inputs(config)
if MISSING:
    needs = "this study needs files that are not here yet:\n" + "\n".join(f"  - {line}" for line in MISSING)
    if not DRY_RUN:
        raise WorkflowError(needs)
    logger.warning(f"warning: {needs}\nThe plan below assumes them; a real run stops before any job until they are there.")
# A weights file that is there but is not the expected one stops the DAG, dry-run or not.
if PRETRAINED_WEIGHTS and os.path.isfile(PRETRAINED_WEIGHTS):
    try:
        check_weights(config["evaluation"]["extractor"], PRETRAINED_WEIGHTS, PRETRAINED_SHA256)
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
# Whether a scored metric reads the real images themselves: its scoring jobs then get the reference split.
READS_REAL_IMAGES = any(get_metric(name).real_images for name in METRICS)
# FID on fewer samples than Inception's 2,048 features is strongly biased: say so before any job runs
# (a paired study's sample count is its test split's, which its scores' notes judge).
FID_WARNING = (fid_sample_warning(config["evaluation"]["extractor"], config["evaluation"]["samples"])
               if KIND.held_out is None and "fid" in METRICS else None)
if FID_WARNING:
    logger.warning(f"warning: {FID_WARNING}")
# What the trials can decide at all, before any job (ganstudy.stats.design).
DESIGN_INFO, DESIGN_WARNINGS = study_design(config)
for line in DESIGN_INFO:
    logger.info(line)
for line in DESIGN_WARNINGS:
    logger.warning(f"warning: {line}")


wildcard_constraints:
    setup="|".join(re.escape(name) for name in SETUPS),
    trial=r"\d+",
    spec="data|classifier|reference|evaluation|sweeps",
    metric="|".join(METRICS),


# The evaluation section as the scoring jobs get it.
EVALUATION_SETTINGS = as_json(evaluation_settings(config["evaluation"], config["dataset"]["name"]))


# The data's classes and the training split's size where known before any job (prepared, declared by the
# data set or counted at its path; None: once read). Data of one class train no classifier: what needs one
# is refused here (ganstudy.plan.classes) unless classifier.weights gives one, and the per-class ANOVA is
# left out.
KNOWN_DATA = known_data(STUDY_DIR, config["dataset"])
DATA_CLASSES = KNOWN_DATA.classes
problems = class_problems(config, KIND, DATA_CLASSES)
if problems:
    raise WorkflowError("\n".join(problems))
CLASSIFIER = KIND.held_out is None and (DATA_CLASSES != 1 or config["classifier"]["weights"] is not None)
CLASSIFIER_SETTINGS = classifier_settings(config["classifier"])
ANOVA = KIND.classes and DATA_CLASSES != 1
if KIND.classes and not ANOVA:
    logger.info("the data have one class: no classifier is trained and the per-class ANOVA is left out")


# How the training jobs lay out on the site's nodes (ganstudy.plan.layout): ranks, nodes, GPUs, memory.
LAYOUT = StudyLayout.from_config(config, DATA_CLASSES, SITE["name"])


def setup_ranks(wildcards):
    try:
        return LAYOUT.ranks(wildcards.setup)
    except GanstudyError as error:  # a per-class set-up on data whose classes are known only once read
        raise WorkflowError(str(error)) from None


def setup_nodes(wildcards):
    return LAYOUT.nodes(setup_ranks(wildcards))


def checkpoint_dir(wildcards):
    """Where a training run keeps its checkpoints: outside its declared outputs, so that Snakemake does
    not delete them with a failed job."""
    return f"{STUDY_DIR}/checkpoints/{wildcards.setup}/trial{wildcards.trial}"


def train_priority(wildcards):
    """Longest training jobs first, by pair-iterations per rank: when a study has more jobs than the
    cores or slots it runs on, starting the long ones first shortens it (the default study: 8 jobs on 2
    cores, 1x1 jobs half as long as 2x2 ones). Within a set-up, a run with checkpoints to resume from
    (or finished outputs to restore) goes before fresh ones, so that a study stopped and started again
    finishes the trials it began. Only the order of the numbers matters."""
    # A checkpoint counts once its COMPLETE marker is written, kept outputs once FINISHED is
    # (ganstudy.checkpoint's layout; not imported here, it imports torch).
    folder = Path(checkpoint_dir(wildcards))
    started = any(folder.glob("iter-*/COMPLETE")) or (folder / "finished" / "FINISHED").is_file()
    return config["setups"][wildcards.setup]["iterations"] * LAYOUT.pairs_per_rank(wildcards.setup) + (0.5 if started else 0)


problems = LAYOUT.problems(KNOWN_DATA.training_images)
if problems:
    raise WorkflowError("\n".join(problems))
KNOWN_RANKS = LAYOUT.known_ranks()
# Multi-rank set-up -> its one-rank run of the same work: the speed-up tables and plot compare them.
BASELINES = speedup_baselines(config["setups"], KNOWN_RANKS)


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


class Untracked:
    """A param that is no rerun trigger: Snakemake compares only params of builtin types, so a launch line
    that changes with the site reruns nothing."""

    def __init__(self, text):
        self.text = text

    def __str__(self):
        return self.text


def print_headline(study_dir):
    """After a run: where the study's answer is and its first lines, if the page is as new as the scores."""
    from ganstudy.report.summary_page import headline  # pandas: not at every start of Snakemake

    page, scores = Path(study_dir) / "summary.md", Path(study_dir) / "scores.csv"
    if page.is_file() and scores.is_file() and page.stat().st_mtime >= scores.stat().st_mtime:
        logger.info(headline(page))


def mpi_launch(wildcards, resources):
    """The launch prefix of a training job, from the site's launcher (ganstudy.plan.launchers). A job of one
    rank is launched alike (srun binds its GPU)."""
    return Untracked(SITE_LAUNCHER.line(LAYOUT.rank_layout(resources.tasks)))


def train_mpi(wildcards):
    """The mpi resource: the launcher for a job of several ranks, empty for one. Snakemake's Slurm plugin
    asks sbatch for --ntasks=tasks where mpi is set (a GPU job gets no --ntasks otherwise) and refuses an
    MPI job of one task; a job without it gets one task, all a one-rank job needs."""
    return LAUNCHER if setup_ranks(wildcards) > 1 else ""


def train_gpus(wildcards):
    """GPUs a training job asks Slurm for in all (its ranks' GPUs; sbatch --gpus)."""
    return setup_ranks(wildcards) * LAYOUT.gpus_per_rank


def train_runtime(wildcards, attempt):
    return LAYOUT.runtime_minutes(attempt)


def train_memory(wildcards, input):
    try:
        return LAYOUT.memory_mb(wildcards.setup, os.path.getsize(input.train))
    except GanstudyError as error:
        raise WorkflowError(str(error)) from None


# Slurm (--signal) and LSF (-wa/-wt) warn training jobs this long before their wall time: they checkpoint and stop.
WARNING_SECONDS = config["compute"]["wall_warning_minutes"] * 60
# Resources only the site's scheduler plugin reads (Slurm: the wall-time warning signal, no --ntasks-per-gpu).
TRAIN_RESOURCES = SITE_LAUNCHER.resources(WARNING_SECONDS)


def setup_threads(wildcards):
    return setup_ranks(wildcards) * THREADS


def train_inputs(setup_name):
    """The prepared data, and for set-ups that score during training the classifier and real statistics
    (data of one class without a classifier: Inception's; kinds scored on the test split: that split)."""
    inputs = {"train": f"{STUDY_DIR}/data/train.npz"}
    setup = config["setups"][setup_name]
    if KIND.held_out is not None:
        if setup["score_period"]:
            inputs["held_out"] = f"{STUDY_DIR}/data/test.npz"
    elif (setup["mode"] == "grid" or setup["score_period"]) and CLASSIFIER:
        inputs["classifier"] = f"{STUDY_DIR}/classifier/classifier.pt"
        inputs["reference"] = f"{STUDY_DIR}/classifier/reference_stats.npz"
    elif setup["mode"] == "grid" or setup["score_period"]:
        inputs["inception"] = config["evaluation"]["inception_weights"]
        inputs["reference"] = QUALITY_REFERENCE
    return inputs


def input_sources(inputs):
    """The config sections that make a training job's input files: recorded in its job, they tell a
    finished run made from other data or another classifier (ganstudy.plan.changed_runs)."""
    sources = {"dataset": dataset_settings(config["dataset"])}
    if "classifier" in inputs:
        sources["classifier"] = CLASSIFIER_SETTINGS
        sources["reference"] = {key: config["evaluation"][key] for key in ("fid_features", "reference_split")}
    elif "inception" in inputs:
        sources["reference"] = {key: config["evaluation"][key] for key in ("extractor", "inception_sha256", "reference_split")}
    return sources


def training_jobs():
    """Set-up -> its job file's description (ganstudy.train.job): settings, seed, the trials' input files,
    the data's kind and the sections that made the inputs. Typed here, so a description the jobs would
    refuse stops the DAG."""
    jobs = {}
    for name, setup in config["setups"].items():
        inputs = train_inputs(name)
        try:
            jobs[name] = job_description(name, setup, config["seed"], inputs, kind=KIND.name, sources=input_sources(inputs))
        except GanstudyError as error:
            raise WorkflowError(str(error)) from None
    return jobs


JOBS = training_jobs()
# Where and how the training ranks compute: in a file of its own (rule compute_options), which training reads
# but which is no rerun trigger, so that moving the study to another site rewrites it and retrains nothing.
COMPUTE_FILE = f"{STUDY_DIR}/site/compute.json"
COMPUTE_OPTIONS = {**{key: config["compute"][key] for key in ("device", "gpus_per_rank", "node_gpus", "deterministic", "tf32", "stack_layout")},
                   "threads": THREADS}
# What decides each stage's outputs (ganstudy.plan.study_files): the spec files the stages read.
SPECS = {
    "data": {"dataset": dataset_settings(config["dataset"]), "seed": config["seed"]},
    "classifier": {"classifier": CLASSIFIER_SETTINGS, "seed": config["seed"]},
    "reference": {"fid_features": config["evaluation"]["fid_features"]},
    "evaluation": {"evaluation": json.loads(EVALUATION_SETTINGS), "seed": config["seed"]},
}
# Each sweep's set-ups and their values (ganstudy.sweeps), by the set-up declared: what its statistics read.
SWEEPS = sweep_levels(config["setups"])
if SWEEPS:
    SPECS["sweeps"] = SWEEPS


def spec_file(name):
    return f"{STUDY_DIR}/specs/{name}.json"


# Every spec file, job file and the compute options' file, with what it must say.
STUDY_FILES = {Path(spec_file(name)): spec for name, spec in SPECS.items()}
STUDY_FILES |= {Path(f"{STUDY_DIR}/jobs/{name}.json"): description for name, description in JOBS.items()}
STUDY_FILES[Path(COMPUTE_FILE)] = COMPUTE_OPTIONS
# Whether the study has results already, read before this run writes anything.
MADE_BEFORE = Path(f"{STUDY_DIR}/data/manifest.json").is_file()
# (The compute options' file is left out: rewriting it redoes nothing.)
STALE = [path for path in stale_files(STUDY_FILES) if path != Path(COMPUTE_FILE)]
# A dry-run rewrites nothing, so it lists the stages of stale spec files and changed runs by giving them
# the study's config file as an input: the edit made it newer than what they made.
EDITED = [os.path.abspath(path) for path in workflow.configfiles if os.path.isfile(path)] if DRY_RUN else []


def spec_inputs(name):
    """A stage's spec file as its input (and in a dry-run the edited config, where the spec is stale)."""
    return [spec_file(name)] + (EDITED if Path(spec_file(name)) in STALE else [])


# Each job's arguments file, read by its command as @FILE: as with the spec files, a real run writes one
# that is missing or says something else before any job, and a dry-run gives its job the edited config.
ARGUMENT_FILES = ArgumentsFiles(Path(f"{STUDY_DIR}/arguments"), MADE_BEFORE)


def arguments_file(job):
    return str(ARGUMENT_FILES.path(job))


def job_arguments(job, *arguments, kept=False):
    """Set the arguments of ``job`` (after its rule, whose inputs and outputs they name); a real run writes
    the file now (``kept``: ArgumentsFiles.write)."""
    path = ARGUMENT_FILES.record(job, arguments)
    if EXECUTING:
        ARGUMENT_FILES.write(path, kept, logger.info)


def arguments_inputs(job):
    """A job's arguments file as its input ``arguments`` (and in a dry-run the edited config as ``edited``
    where the file is stale); a function, since the arguments are set after the rule."""
    def inputs(wildcards):
        path = ARGUMENT_FILES.path(job.format(**wildcards))
        return {"arguments": str(path), "edited": EDITED if path in ARGUMENT_FILES.stale else []}
    return inputs


# Finished runs whose run.json records another job than the config's (ganstudy.plan.changed_runs), by (set-up,
# trial). A run that executes jobs moves them into the study's archive here, before the DAG is built, so
# that Snakemake plans them as missing; a dry-run (and --report, --lint, ...) only says so. Read by the main
# process only: a job's own Snakemake (a cluster job step) starts after the move.
CHANGED = {(changed.setup, changed.trial): changed for changed in changed_runs(
    STUDY_DIR, {name: job_record(description) for name, description in JOBS.items()}, RUNS)} if workflow.is_main_process else {}
# One run per study at a time (ganstudy.plan.study_lock): taken once every check above has passed and before this
# Snakemake changes anything in the study (it rewrites the spec files the config has changed and archives
# changed runs), let go when the run ends (Snakefile) or this process exits. Dry-runs and the options
# above never take it.
STUDY_LOCK = None
if EXECUTING:
    try:
        STUDY_LOCK = acquire_study_lock(STUDY_DIR, logger.warning)
    except GanstudyError as error:
        raise WorkflowError(str(error)) from None
    atexit.register(release_study_lock, STUDY_LOCK)
    refresh(STUDY_FILES, MADE_BEFORE, logger.info)
if workflow.is_main_process and CHANGED:
    logger.warning(f"warning: {len(CHANGED)} finished run(s) no longer match the config; "
                   + ("they move" if EXECUTING else "a run moves them") + f" to {STUDY_DIR}/archive/ and train again:\n"
                   + "\n".join(f"  - {changed.line()}" for changed in CHANGED.values()))
if EXECUTING:
    planned_at = datetime.datetime.now(datetime.timezone.utc)
    for changed in CHANGED.values():
        for path in archive_run(STUDY_DIR, changed, planned_at):
            logger.info(f"archived: {path}")
if workflow.is_main_process and DRY_RUN and STALE:
    logger.warning("warning: the config has changed what " + ", ".join(map(str, STALE)) + " describe: a real run rewrites them "
                   "before any job and redoes those stages")


def train_rule_inputs(wildcards):
    """A training job's inputs. For a run that matches the config the data, the job file and the compute
    options are ancient: whether a finished run is redone is decided by the comparison of its record with
    the config (CHANGED, archived before the DAG is built), not by a file rewritten in a new form or with a
    site's options. A changed run's are not, and in a dry-run it also has the edited config as an input, so
    that the plan lists its training (a real run has archived it)."""
    changed = (wildcards.setup, int(wildcards.trial)) in CHANGED
    kept = (lambda path: path) if changed else ancient
    # The Inception weights reach the job through its reference statistics, whose rule reads and checks them.
    inputs = {name: kept(path) for name, path in train_inputs(wildcards.setup).items() if name != "inception"}
    return inputs | {"job": kept(f"{STUDY_DIR}/jobs/{wildcards.setup}.json"), "compute": ancient(COMPUTE_FILE),
                     "arguments": kept(arguments_file(f"train/{wildcards.setup}/trial{wildcards.trial}")),
                     "edited": EDITED if changed else []}


def evaluate_inputs(wildcards):
    run = f"{STUDY_DIR}/runs/{wildcards.setup}/trial{wildcards.trial}"
    inputs = {"generator": f"{run}/generator.pt", "record": f"{run}/run.json", "spec": spec_inputs("evaluation")}
    if KIND.held_out is not None:
        inputs["held_out"] = f"{STUDY_DIR}/data/test.npz"
        if PRETRAINED_MODEL and pretrained_metrics(KIND, METRICS):
            inputs["weights"] = user_file(PRETRAINED_WEIGHTS)
        return inputs
    if CLASSIFIER:
        inputs["classifier"] = f"{STUDY_DIR}/classifier/classifier.pt"
        inputs["reference"] = f"{STUDY_DIR}/classifier/reference_stats.npz"
    if PRETRAINED_MODEL:
        inputs["quality"] = QUALITY_REFERENCE
    # Only where a metric reads the real images: a new input would rescore every finished run.
    if READS_REAL_IMAGES:
        inputs["real"] = f"{STUDY_DIR}/data/{config['evaluation']['reference_split']}.npz"
    return inputs


def evaluate_against(inputs):
    """What the evaluate command scores against, from its job's ``inputs``: the test split, or the
    classifier's statistics (and those of evaluation.extractor when it is a pretrained network), and the
    reference split where a metric reads the real images."""
    if KIND.held_out is not None:
        return ["--kind", KIND.name, "--held-out", inputs["held_out"]]
    flags = {"classifier": "classifier", "reference": "reference", "quality": "quality-reference", "real": "real"}
    return [argument for key, flag in flags.items() if key in inputs for argument in (f"--{flag}", inputs[key])]


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
