# The adapter between Snakemake and the study's plan (ganstudy.plan.study_plan): the config validated, the
# plan built and its checks raised before any job, the plan's changes made when this run executes jobs, and
# the few functions that need Snakemake's own objects. The stages' rules read PLAN. No rules here.
import atexit
import contextlib
import json
import os
import re
import sys
from pathlib import Path

import yaml

from snakemake.cli import get_profile_dir
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

from ganstudy.cli.main import step_parsers
from ganstudy.cli.step_arguments import step_arguments
from ganstudy.config.schema import CONFIG_SCHEMA
from ganstudy.config.validate import ConfigError, read_yaml, validate_study_config
from ganstudy.core.atomic import read_json, write_text
from ganstudy.errors import GanstudyError
from ganstudy.plan.study_files import PlannerFilesNotices, as_json
from ganstudy.plan.held_study import HeldStudyNotices, held_notice
from ganstudy.plan.study_lock import live_holder, release as release_study_lock
from ganstudy.plan.invocation import Invocation, builds_jobs, forces_jobs
from ganstudy.plan.study_plan import TABLE_FORMATS, PlanRefused, StudyPlan, apply_plan
from ganstudy.plan.where_jobs_run import WhereJobsRun
from ganstudy.report.status import study_status, write_plan
from ganstudy.train.job import write_job

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
# cluster run would plan for this machine and train on the CPU. The site comes from the profile folder
# instead, and travels in --config to the cluster jobs' own Snakemake, which plans again (launch line included).
if config["site"] is None and workflow.is_main_process and (profile_site_file := profile_site()):
    config["site"] = profile_site_file
    workflow.config_settings.config_args = [*(workflow.config_settings.config_args or []), f"site={profile_site_file}"]
    logger.info(f"site={profile_site_file}: the profile's, which --config on the command line had replaced")
# Profiles used to name the launcher as the train rule's mpi resource; the Slurm plugin then takes every
# training job for an MPI job, and refuses to submit one of a single rank.
if "mpi" in workflow.resource_settings.overwrite_resources.get("train", {}):
    raise WorkflowError("the profile sets `set-resources: train: mpi:`: the launcher is now the site's key `launcher:` "
                        "(mpiexec, srun or jsrun) in its site file, profiles/<name>/site.yaml; move it there (profiles/README.md)")

DRY_RUN = workflow.output_settings.dryrun
EXECUTING = workflow.is_main_process and not DRY_RUN and builds_jobs(sys.argv[1:])
default_resources = workflow.resource_settings.default_resources
INVOCATION = Invocation(
    workflow_dir=workflow.basedir, config_files=tuple(workflow.configfiles), dry_run=DRY_RUN,
    main_process=workflow.is_main_process, executing=EXECUTING, environ=os.environ,
    default_resources=dict(arg.partition("=")[::2] for arg in (default_resources.args if default_resources else [])),
)


def log_notices(notices):
    for level, line in filter(lambda notice: notice[1], notices):
        logger.warning(f"warning: {line}") if level == "warning" else logger.info(line)


try:
    PLAN = StudyPlan(config, INVOCATION)
except PlanRefused as refusal:
    log_notices(refusal.notices)
    raise WorkflowError(str(refusal)) from None
# Every path under the study's folder (ganstudy.study.folder): the rules' outputs and logs.
FOLDER = PLAN.folder
# The study's compute section completed from the site (modules, memory, wall-time warning): what the rules read.
COMPUTE = PLAN.config["compute"]
log_notices(PLAN.notices)
# The rules of the files the plan writes itself: Snakemake would call each a job without metadata.
PLANNER_RULES = ("spec", "arguments", "training_job", "compute_options")
logger.addFilter(PlannerFilesNotices(PLANNER_RULES, PLAN.files.writes))


def held_study_notice():
    """What a dry-run says beside a live run of the study (ganstudy.plan.held_study)."""
    try:
        running = [f"{row.setup} trial {row.trial} ({row.iteration or 0}/{row.iterations})"
                   for row in study_status(PLAN.study_dir) if row.state == "running"]
    except GanstudyError:
        running = []
    configs = " ".join(map(str, workflow.configfiles)) or "<config>"
    return held_notice(live_holder(PLAN.study_dir), running, f"ganstudy status {configs}")


def start_study():
    """The one place a start changes the study, called once the rules have recorded their arguments. A run
    that executes jobs takes the study's lock (one run per study at a time, ganstudy.plan.study_lock; let go
    when the run ends, Snakefile, or this process exits) and makes the plan's changes before any job
    (apply_plan: the spec, job and arguments files the config changed, the finished runs that no longer match
    archived); a dry-run says what a real run would change. Returns the lock, or None."""
    if not EXECUTING:
        if not workflow.is_main_process:
            return None
        log_notices([("warning", PLAN.files.changed_warning()), ("warning", PLAN.files.stale_warning())])
        if DRY_RUN:
            # A site whose launcher has a scheduler's settings (srun, jsrun) submits the jobs of its rules that
            # are not local (localrule: True, or no command, as rule all); a dry-run's own executor runs
            # everything here, so the rules say it.
            local = [rule.name for rule in workflow.rules if rule.name in workflow._localrules or rule.norun]
            logs = (FOLDER.logs(), PLAN.launcher.logs)
            logger.addFilter(WhereJobsRun(local if PLAN.launcher.settings else None, PLANNER_RULES, logs))
            logger.addFilter(HeldStudyNotices(held_study_notice, forces_jobs(sys.argv[1:])))
        return None
    try:
        lock = apply_plan(PLAN, logger.info, logger.warning)
    except GanstudyError as error:
        raise WorkflowError(str(error)) from None
    atexit.register(release_study_lock, lock)
    return lock


if PLAN.schedule is not None and workflow.is_main_process:
    logger.info(
        f"trials: a schedule (looks at {', '.join(map(str, PLAN.schedule.looks))} trials per set-up): the jobs "
        "planned are those of the rounds taken so far; each look may add a round (rule look, a checkpoint)"
    )


wildcard_constraints:
    setup="|".join(re.escape(name) for name in PLAN.setups),
    trial=r"\d+",
    look=r"\d+",
    spec="data|classifier|reference|evaluation|sweeps",
    metric="|".join(PLAN.metrics),


@contextlib.contextmanager
def refusal():
    """The plan's refusal (a per-class set-up whose ranks need the data read) as Snakemake's error."""
    try:
        yield
    except GanstudyError as error:
        raise WorkflowError(str(error)) from None


def setup_ranks(wildcards):
    with refusal():
        return PLAN.layout.ranks(wildcards.setup)


def run_input(name, pattern):
    """Rule train's input ``name`` at ``pattern`` (a job's wildcards filled): none where its set-up does not
    read it; ancient where the run matches the config, so that its record decides whether it is redone, not
    the dates of files rewritten in a new form or with a site's options (PLAN.train_input)."""
    return lambda wildcards: PLAN.train_input(
        wildcards.setup, int(wildcards.trial), name, expand(pattern, **wildcards)[0], ancient
    )


def train_memory(wildcards, input):
    with refusal():
        return PLAN.layout.memory_mb(wildcards.setup, os.path.getsize(input.train))


def scoring_params():
    """A scoring job's launch prefix and device: no rerun triggers, they change with the site only."""
    return {"launch": Untracked(PLAN.scoring.launch_line()), "device": Untracked(PLAN.scoring.device)}


class Untracked:
    """A param that is no rerun trigger: Snakemake compares only params of builtin types, so a launch line
    that changes with the site reruns nothing."""

    def __init__(self, text):
        self.text = text

    def __str__(self):
        return self.text


def job_arguments(rule, job=None, /, kept=False, **values):
    """Set the arguments of ``job`` (by default the one job of ``rule``, a rules.X after the rule): ``values``
    by the names that the parser of the step its shell line runs gives them (ganstudy.cli.step_arguments), the
    rule's inputs and outputs. A real run writes the file before any job (start_study; ``kept``:
    ArgumentsFiles.write)."""
    command = re.search(r"ganstudy (\S+) @\{input\.arguments\}([^>]*)", rule.rule.shellcmd or "")
    if command is None:
        raise WorkflowError(f"job_arguments of rule {rule.rule.name} needs a shell line that runs `ganstudy STEP @{{input.arguments}}`")
    step, on_the_command_line = command[1], re.findall(r"--[\w-]+", command[2])
    if step not in step_parsers():
        raise WorkflowError(f"rule {rule.rule.name} runs ganstudy {step}, which is no step (the steps are {', '.join(step_parsers())})")
    with refusal():
        arguments = step_arguments(step, step_parsers()[step], values, on_the_command_line)
    PLAN.files.arguments.record(job or rule.rule.name, arguments, kept)


def arguments_inputs(job):
    """A job's arguments file (and in a dry-run, where it is stale, the edited config) as its inputs; a
    function, since the arguments are set after the rule."""
    return lambda wildcards: PLAN.files.arguments_inputs(job.format(**wildcards))


def tables(name, pattern, caption, category="4. Statistics", **wildcards):
    """A rule's named outputs of the tables ``pattern`` (under tables/, ``wildcards`` expanded) in every format:
    the report shows the Markdown ones, so each table is in it once; CSV and LaTeX lie beside them."""
    files = {ext: expand(FOLDER.table(pattern, ext), **wildcards) for ext in TABLE_FORMATS}
    shown = report(files["md"], caption=caption, category=category)
    return {name: shown, **{f"{name}_{ext}": paths for ext, paths in files.items() if ext != "md"}}


def print_headline():
    """After a run: where the study's answer is and its first lines, if the page is as new as the scores."""
    from ganstudy.report.summary_page import headline  # pandas: not at every start of Snakemake

    page, scores = Path(FOLDER.answer()), Path(FOLDER.scores_table())
    if page.is_file() and scores.is_file() and page.stat().st_mtime >= scores.stat().st_mtime:
        logger.info(headline(page))


def run_paths(pattern):
    """``pattern`` (a rule's output with wildcards setup and trial) as a function of runs to their paths."""
    return lambda runs: [pattern.format(setup=setup, trial=trial) for setup, trial in runs]


def look_runs(look):
    """The runs look ``look`` tests: each set-up's trials up to the look's count, a set-up that stopped taking
    rounds at an earlier look (the previous look's record says) up to its trials then."""
    if look == 1:
        return PLAN.look_runs(1)
    # A record of ganstudy before set-ups could stop names none.
    return PLAN.look_runs(look, read_json(checkpoints.look.get(look=look - 1).output[0]).get("setups"))


def looks_taken():
    """The runs the statistics take and the last look's record (None in a fixed design). On a schedule, the
    looks in order up to the first that asks no more round: each is a checkpoint, so a rule that asks waits
    for the looks, and Snakemake plans the next round once a look asks for it."""
    if PLAN.schedule is None:
        return PLAN.runs, None
    for look in range(1, len(PLAN.schedule.looks) + 1):
        record = checkpoints.look.get(look=look).output[0]
        if not read_json(record)["more"]:
            return look_runs(look), record
    raise WorkflowError(f"{record}: the schedule's last look asks for another round")


def taken(paths):
    """``paths`` (runs to files) of the runs the statistics take: a list in a fixed design; on a schedule an
    input function, over the looks."""
    if PLAN.schedule is None:
        return paths(PLAN.runs)
    return lambda wildcards: paths(looks_taken()[0])


def taken_arguments(paths, listed):
    """A step's arguments naming ``paths`` of the runs taken: the files in a fixed design; on a schedule
    ``@listed``, the file of them that rule decision writes (arguments are set before any look is taken)."""
    return paths(PLAN.runs) if PLAN.schedule is None else [f"@{listed}"]
