"""The plan of one study: from its validated config, its site and its folder, every run with its resources
and launch line, the files the plan writes itself and the finished runs it moves (``files``, a
PlannedFiles), and every check, in the order a user should read them. Building a plan reads the study folder
and writes nothing: the changes a run makes before its jobs are ``apply_plan``'s."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ganstudy.config.pretrained import pretrained_file
from ganstudy.config.sweep_expansion import sweep_levels
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.weights import check_weights, fid_sample_warning
from ganstudy.parallel.topology import parse_shape
from ganstudy.plan.classes import class_problems
from ganstudy.plan.inputs import StudyInputs
from ganstudy.plan.invocation import Invocation
from ganstudy.plan.known_data import known_data
from ganstudy.plan.launchers import LAUNCHERS
from ganstudy.plan.layout import StudyLayout, speedup_baselines
from ganstudy.plan.parts import part_problems, study_kind
from ganstudy.plan.planned_files import PlannedFiles
from ganstudy.plan.references import reference_problems
from ganstudy.plan.scoring_layout import ScoringLayout
from ganstudy.plan.site import read_site, resolve_node_cores, scheduler_resources, with_site
from ganstudy.plan.study_files import results_dir_problem
from ganstudy.plan.study_lock import acquire
from ganstudy.plan.user_inputs import missing_user_inputs
from ganstudy.stats.reference_keys import EPOCH_REFERENCES
from ganstudy.study.folder import StudyFolder
from ganstudy.study.trials import StudyTrials
from ganstudy.train.job import STUDY_FILES, compute_options, job_description

TABLE_FORMATS = ("csv", "md", "tex")


class PlanRefused(GanstudyError):
    """A study that cannot run as configured. ``notices``: what the plan had said before it stopped."""

    def __init__(self, message: str, notices: list[tuple[str, str]]):
        super().__init__(message)
        self.notices = notices


def _refuse_any(problems: list[str]) -> None:
    if problems:
        raise GanstudyError("\n".join(problems))


class StudyPlan:
    """A study's plan; ``notices`` are its ("info" | "warning", line)s. Raises PlanRefused, naming the key,
    where the study can never run (the first stage of checks that fails)."""

    def __init__(self, config: dict[str, Any], invocation: Invocation):
        self.invocation = invocation
        self.notices: list[tuple[str, str]] = []
        try:
            self._plan_site(config)
            self._plan_study()
            self._plan_data()
            self._plan_training()
            self._plan_files()
        except GanstudyError as error:
            raise PlanRefused(str(error), self.notices) from None

    def _plan_site(self, config: dict[str, Any]) -> None:
        """What a node is, from the site file; study keys override it on purpose."""
        invocation = self.invocation
        self.site = read_site(config["site"], invocation.workflow_dir)
        compute, overrides = with_site(config["compute"], self.site)
        compute, measured_on = resolve_node_cores(compute)
        self.config = {**config, "compute": compute}
        self.launcher = LAUNCHERS.get(self.site["launcher"])
        measured = f" (node_cores null: those of {measured_on}, where Snakemake runs)" if measured_on else ""
        cores, gpus = f"{compute['node_cores']} cores{measured}", f"{self.site['node_gpus']} GPUs"
        self.notices.append(("info", f"site '{self.site['name']}': {cores} and {gpus} per node"))
        # Every cluster job's, given to the executor explicitly: the Slurm plugin does not read SBATCH_*.
        self.scheduler_resources, scheduler_notices = scheduler_resources(
            self.site, invocation.default_resources, invocation.environ
        )
        if not invocation.main_process:  # once, where the plan is made
            return
        self.notices += [*scheduler_notices, *(("warning", line) for line in overrides)]
        if measured_on and self.site["launcher"] != "mpiexec":
            self.notices.append(
                (
                    "warning",
                    f"site '{self.site['name']}' leaves node_cores null: the plan took the cores of {measured_on}, "
                    "where Snakemake runs; if the compute nodes differ, set node_cores in the site file",
                )
            )

    def _plan_study(self) -> None:
        """The study's runs and what it needs from its user; its parts and what its trials can decide."""
        config = self.config
        self.folder = StudyFolder(f"{config['results_dir']}/{config['study']}")
        # The HTML report's first page: the answer, once the summary step has written it.
        self.report_files = {"answer": self.folder.report_answer(), "metadata": self.folder.report_metadata()}
        answer = Path(self.report_files["answer"])
        self.report_description = str(answer.resolve()) if answer.is_file() else "workflow/report/workflow.rst"
        if problem := results_dir_problem(config["results_dir"], self.study_dir):
            raise GanstudyError(problem)
        self.setups = list(config["setups"])
        # (set-up, trial) of every training run: set-ups may run more or fewer trials than the study; on a
        # schedule, every trial up to its most (the looks decide which run: stats.looks).
        self.trials = StudyTrials.of(config)
        self.schedule = self.trials.schedule
        self.runs = [(s, t) for s in self.setups for t in range(self.trials.per_setup[s])]
        self.metrics = config["evaluation"]["metrics"]
        self.smote = config["dataset"]["smote"]["strategy"] != "none"
        self._plan_user_inputs()
        # A data set or network no registry knows, a plugin that does not import, a network that cannot learn
        # the data's kind or a metric that cannot score it.
        _refuse_any(part_problems(config))
        self.kind = study_kind(config)
        evaluation = config["evaluation"]
        # FID on fewer samples than Inception's 2,048 features is strongly biased (a paired study's sample
        # count is its test split's, which its scores' notes judge).
        if self.kind.held_out is None and "fid" in self.metrics:
            if warning := fid_sample_warning(evaluation["extractor"], evaluation["samples"]):
                self.notices.append(("warning", warning))
        # Once, in a plan that is shown: a dry-run's or a run's main process.
        if self.invocation.main_process and (self.invocation.dry_run or self.invocation.executing):
            from ganstudy.stats.design import study_design  # scipy: not in a cluster job's own Snakemake

            info, warnings = study_design(config)
            self.notices += [("info", line) for line in info] + [("warning", line) for line in warnings]

    def _plan_user_inputs(self) -> None:
        """The user's files (data, Inception's weights): a dry-run plans without them and lists them once; a
        real run stops before any job until they are there. A weights file that is not the expected one
        stops both."""
        missing = missing_user_inputs(self.config)
        if missing:
            needs = "this study needs files that are not here yet:\n" + "\n".join(f"  - {line}" for line in missing)
            if not self.invocation.dry_run:
                raise GanstudyError(needs)
            self.notices.append(
                (
                    "warning",
                    f"{needs}\nThe plan below assumes them; a real run stops before any job until they are there.",
                )
            )
        evaluation = self.config["evaluation"]
        weights, sha256 = pretrained_file(evaluation)
        # Hashed once, where the plan is made: a cluster job's own Snakemake runs after that check.
        if weights and os.path.isfile(weights) and self.invocation.main_process:
            check_weights(evaluation["extractor"], weights, sha256)

    def _plan_data(self) -> None:
        """The data's classes and training split where known before any job (None: once read). Data of one
        class train no classifier: what needs one is refused unless classifier.weights gives one, and the
        per-class ANOVA is left out."""
        config = self.config
        self.known_data = known_data(self.study_dir, config["dataset"])
        _refuse_any(class_problems(config, self.kind, self.known_data.classes))
        self.classifier = self.kind.held_out is None and (
            self.known_data.classes != 1 or config["classifier"]["weights"] is not None
        )
        self.anova = self.kind.classes and self.known_data.classes != 1
        if self.kind.classes and not self.anova:
            self.notices.append(
                ("info", "the data have one class: no classifier is trained and the per-class ANOVA is left out")
            )
        self.inputs = StudyInputs(config, self.folder, self.kind, self.classifier, self.invocation.dry_run)
        self.inputs.fetched_files()  # a standard data set without its folder is refused here

    def _plan_training(self) -> None:
        """The training jobs' layout on the site's nodes, the papers' numbers the set-ups reproduce, and each
        set-up's job description (typed here, so that one the jobs would refuse stops the plan)."""
        config = self.config
        # A launcher without a scheduler's settings (mpiexec) starts every rank on this machine.
        one_machine = not self.launcher.settings
        self.layout = StudyLayout.from_config(config, self.known_data.classes, self.site["name"], one_machine)
        _refuse_any(self.layout.problems(self.known_data.training_images))
        # Torch threads, and cores, of each training rank and of every other job.
        self.threads = self.layout.threads
        # The scoring jobs: on a GPU where their extractor is a network and the site has GPUs.
        self.scoring = ScoringLayout(config, self.kind, self.threads, self.launcher)
        # Multi-rank set-up -> its one-rank run of the same work: the speed-up tables and plot compare them.
        self.baselines = speedup_baselines(config["setups"], self.layout.known_ranks())
        # Set-up -> metric -> the paper's published result (tables/reproduction.*), and set-up -> training fact
        # (epoch time, final losses) -> the paper's number (tables/epochs.*).
        self.references = self._references(lambda key: key not in EPOCH_REFERENCES)
        self.epoch_facts = self._references(lambda key: key in EPOCH_REFERENCES)
        _refuse_any(reference_problems(config["setups"], self.metrics))
        # Scores against grid size are worth a figure once the study has grids of two sizes.
        # A size is a number of cells (a 3x3 torus and a ring of 9 are one), or "auto" (sized by its ranks).
        self.grid_sizes = {
            setup["grid"]["shape"] if setup["grid"]["shape"] == "auto" else parse_shape(setup["grid"]["shape"]).size
            for setup in config["setups"].values()
            if setup["mode"] == "grid"
        }
        self.jobs = {}
        for name, setup in config["setups"].items():
            inputs = self.inputs.train(name)
            named = {key: self.folder.relative(path) if key in STUDY_FILES else path for key, path in inputs.items()}
            self.jobs[name] = job_description(
                name, setup, config["seed"], named, kind=self.kind.name, sources=self.inputs.sources(inputs)
            )
        # Slurm (--signal) and LSF (-wa/-wt) warn training jobs this long before their wall time.
        self.train_resources = {
            **self.launcher.resources(config["compute"]["wall_warning_minutes"] * 60),
            **self.scheduler_resources,
        }
        self._memory_notice(self.inputs.train(self.setups[0])["train"])

    def _memory_notice(self, split: str) -> None:
        """On a cluster, where a training job's memory is not known yet (mem_mb=<TBD> in a dry-run), what
        will decide it."""
        known = Path(split).is_file() or self.config["compute"]["mem_mb_per_rank"] is not None
        if self.launcher.settings and self.invocation.main_process and not known:
            self.notices.append(
                (
                    "info",
                    f"training jobs' memory (mem_mb, <TBD> in a plan) is set once rule prepare_dataset has written "
                    f"{split}: per node, each rank's libraries and networks plus twice that split, and a quarter "
                    "more (ganstudy.core.resources); compute.mem_mb_per_rank sets it in advance. Scoring jobs' memory "
                    "and wall time likewise grow with the images they score, read from the data's manifest",
                )
            )

    def _references(self, wanted: Callable[[str], bool]) -> dict[str, dict[str, Any]]:
        """Set-up -> key -> the paper's number, for the reference keys that ``wanted`` accepts."""
        found = {
            name: {key: ref for key, ref in setup["reference"].items() if wanted(key)}
            for name, setup in self.config["setups"].items()
        }
        return {name: refs for name, refs in found.items() if refs}

    def _plan_files(self) -> None:
        """The files the plan writes itself and the finished runs it moves (ganstudy.plan.planned_files)."""
        config = self.config
        # Each sweep's set-ups and their values, by the set-up declared: what its statistics read.
        self.sweeps = sweep_levels(config["setups"])
        # The compute options a training job reads from its own file (no rerun trigger: a new site retrains nothing).
        compute = compute_options(config["compute"], self.threads)
        self.files = PlannedFiles(self.folder, config, self.sweeps, self.jobs, compute, self.runs, self.invocation)

    @property
    def study_dir(self) -> str:
        """results_dir/study, as the workflow names it."""
        return self.folder.root

    def look_runs(self, look: int, before: Mapping[str, Mapping[str, Any]] | None = None) -> list[tuple[str, int]]:
        """The runs look ``look`` (1-based) of the schedule tests: each set-up's first trials up to the look's
        count, or, for a set-up that stopped taking rounds, up to its trials then (``before``: the previous
        look's record's ``setups``)."""
        assert self.schedule is not None
        count = self.schedule.looks[look - 1]
        stopped = {s: entry["trials"] for s, entry in (before or {}).items() if "stopped_at" in entry}
        return [(s, t) for s, t in self.runs if t < stopped.get(s, count)]

    def checkpoint_dir(self, setup: str, trial: int | str) -> str:
        """Where a training run keeps its checkpoints: outside its declared outputs, so that Snakemake does
        not delete them with a failed job."""
        return self.folder.checkpoints(setup, trial)

    def train_input(self, setup: str, trial: int, name: str, path: str, ancient: Callable[[str], Any]) -> Any:
        """Training job (``setup``, ``trial``)'s input ``name`` at ``path`` (the train rule's): [] where the set-up
        does not read it (StudyInputs.train: the classifier and real statistics only for a set-up that scores
        while it trains), ``ancient(path)`` where the run matches the config (whether a finished run is redone
        is decided by the comparison of its record with the config, ``changed``, not by a file rewritten in a
        new form), ``path`` for a changed run. A path other than the one its job file names is a bug, said so."""
        planned = self.inputs.train(setup) | {
            "job": self.folder.training_job(setup),
            "arguments": str(self.files.arguments.path(f"train/{setup}/trial{trial}")),
        }
        if name not in planned:
            return []
        if os.path.normpath(planned[name]) != os.path.normpath(path):
            raise GanstudyError(f"rule train's input {name} is {path}, but {setup}'s job reads {planned[name]}")
        return path if (setup, trial) in self.files.changed else ancient(path)

    def edited_run_inputs(self, setup: str, trial: int) -> list[str]:
        """In a dry-run, the edited config for a run that no longer matches it: the plan then lists its
        training (a real run has archived it)."""
        return self.files.edited if (setup, trial) in self.files.changed else []

    def train_priority(self, setup: str, trial: int | str) -> float:
        """Longest training jobs first, by pair-iterations per rank: with more jobs than cores or slots,
        starting the long ones first shortens the study. Within a set-up, a run with checkpoints to resume
        from (or finished outputs to restore) goes first, so that a study started again finishes the trials
        it began. Only the order matters."""
        # A checkpoint counts once its COMPLETE marker is written, kept outputs once FINISHED is
        # (ganstudy.core.checkpoint's layout; not imported here, it imports torch).
        folder = Path(self.checkpoint_dir(setup, trial))
        started = any(folder.glob("iter-*/COMPLETE")) or (folder / "finished" / "FINISHED").is_file()
        return self.config["setups"][setup]["iterations"] * self.layout.pairs_per_rank(setup) + (0.5 if started else 0)

    def scoring_resources(self, job: str) -> dict[str, Any]:
        """A scoring job's (evaluate, quality_statistics) GPU, cores, memory and wall time; the last two from
        the prepared data's manifest, read once the job's inputs exist (they are made after the data)."""

        def manifest(inputs: Iterable[str]) -> dict[str, Any]:
            # Snakemake shows <TBD> in a plan for a resource whose function misses one of the job's inputs.
            for path in inputs:
                if not os.path.exists(path):
                    raise FileNotFoundError(errno.ENOENT, "not made yet", path)
            # The plan read it already where the data were prepared before this run.
            return self.known_data.manifest or json.loads(Path(self.folder.manifest()).read_text())

        return {
            "gpu": self.scoring.gpus,
            "cpus_per_task": self.scoring.threads,
            "mem_mb": lambda wildcards, input: self.scoring.memory_mb(job, manifest(input)),
            "runtime": lambda wildcards, input: self.scoring.runtime_minutes(job, manifest(input)),
        }

    def launch_line(self, ranks: int) -> str:
        """A training job's launch prefix from the site's launcher; a job of one rank is launched alike
        (srun binds its GPU)."""
        return self.launcher.line(self.layout.rank_layout(ranks))


def apply_plan(plan: StudyPlan, info: Callable[[str], None], warn: Callable[[str], None]) -> Path:
    """Before any job of a run that executes jobs, once every rule has recorded its arguments: take the
    study's lock (one run per study at a time; the caller lets it go when the run ends), then make the plan's
    changes to its files and finished runs (PlannedFiles.apply). ``warn`` gets whole lines ("warning: ...").
    Returns the lock."""
    lock = acquire(plan.study_dir, warn)
    plan.files.apply(info, warn)
    return lock
