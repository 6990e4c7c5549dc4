"""Data kinds: what a study's data are (images with classes, paired images, calorimeter showers), and
so which training task feeds its networks, what scores its generators, which figures show them and
which inputs the workflow plans for its jobs. Which metrics score a kind is the metrics' business (each
names its kinds: ganstudy.evaluate.metrics), so that data, the first stage, imports no later one.

One object per kind, registered like every other part (entry-point group ``ganstudy.kinds``); a data
set names its kind (``DataSet.kind``), and adding a kind touches its object only. Free of torch, so
that the workflow reads kinds while it builds the DAG: the parts that need torch are named as
``module:attribute`` and imported by the job that runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganstudy.errors import GanstudyError
from ganstudy.registry import Registry, instance_of, not_installed, resolve_part


@dataclass(frozen=True)
class HeldOut:
    """Scoring on the test split, for kinds whose data train no classifier: ``scorer`` names the
    in-training score's class (ganstudy.contracts.HeldOutScorer), ``evaluate`` the final scoring
    (ganstudy.contracts.HeldOutEvaluation), both as ``module:attribute``; ``column`` is the in-training
    score's column in losses.csv, declared here (not by the torch class) so that the run's status and the
    convergence check find a plugin kind's curve without importing torch."""

    what: str  # what is scored on what, for messages
    stream: str  # the seed stream of the in-training score
    scorer: str
    evaluate: str
    column: str  # lower is better


@dataclass(frozen=True)
class KindFigure:
    """A study figure a kind adds, ``figures/<name>.png``: ``draw`` (``module:attribute``,
    ganstudy.contracts.KindFigureDraw) draws it from the score files of every set-up's first trial;
    ``caption`` says what it shows, in the report."""

    name: str
    draw: str
    caption: str


@dataclass(frozen=True)
class DataKind:
    name: str
    description: str  # for messages: "images with classes"
    task: str  # the training task (ganstudy.tasks) of the networks that learn this kind
    # module:attribute of the run's sample figure (ganstudy.contracts.SampleFigure).
    sample_figure: str
    # None: scored with the data set's classifier (FID on its features, against the real statistics).
    held_out: HeldOut | None = None
    # The data carry a condition row per image (pix2pix's input image, a shower's primary energy).
    conditions: bool = False
    # Per-class statistics apply (ANOVA of per-class scores): the data have several classes.
    classes: bool = True
    # Study figures beyond every study's (the workflow's rule kind_figure draws them).
    figures: tuple[KindFigure, ...] = ()

    def missing_parts(self) -> list[str]:
        """Its torch parts (the sample figure, the held-out scorer and scoring) whose module is not
        installed, found without importing them: named while the workflow plans, not by a job."""
        references = [
            self.sample_figure,
            *((self.held_out.scorer, self.held_out.evaluate) if self.held_out else ()),
            *(figure.draw for figure in self.figures),
        ]
        unfound = (
            not_installed(reference, f"data kind '{self.name}' ({KINDS.origin(self.name)})") for reference in references
        )
        return [problem for problem in unfound if problem]

    def figure(self, name: str) -> KindFigure:
        """The study figure ``name`` of this kind."""
        for figure in self.figures:
            if figure.name == name:
                return figure
        raise GanstudyError(
            f"data kind '{self.name}' has no figure '{name}'; its figures: "
            f"{', '.join(figure.name for figure in self.figures) or 'none'}"
        )

    def part(self, reference: str, contract: type) -> Any:
        """One of the kind's torch parts (a scorer, a figure), imported now and checked against its
        ``contract`` (ganstudy.contracts)."""
        return resolve_part(reference, f"data kind '{self.name}' ({KINDS.origin(self.name)})", contract)


IMAGES = DataKind(
    name="images",
    description="images with classes",
    task="noise",
    sample_figure="ganstudy.report.samples:noise_samples",
)
PAIRS = DataKind(
    name="pairs",
    description="paired images",
    task="paired",
    sample_figure="ganstudy.report.samples:paired_samples",
    held_out=HeldOut(
        "a paired generator on held-out pairs",
        "score-pairs",
        "ganstudy.evaluate.paired:PairScorer",
        "ganstudy.evaluate.paired:evaluate_pairs",
        "l1",
    ),
    conditions=True,
    classes=False,
)
SHOWERS = DataKind(
    name="showers",
    description="calorimeter showers",
    task="energy",
    sample_figure="ganstudy.report.samples:shower_samples",
    held_out=HeldOut(
        "a shower generator on held-out showers",
        "score-showers",
        "ganstudy.evaluate.showers:ShowerScorer",
        "ganstudy.evaluate.showers:evaluate_showers",
        "showers",
    ),
    conditions=True,
    classes=False,
    figures=(
        KindFigure(
            "showers",
            "ganstudy.report.figures:shower_profiles",
            (
                "3DGAN's validation plots for the first trial of every set-up: the mean energy per layer along z "
                "(longitudinal) and per cell along x and y (transverse) of the generated showers beside the real "
                "showers of the test split (log scale), and per primary-energy bin (evaluation.energy_bins) the mean "
                "sampling fraction, deposited over primary energy, with its standard deviation as error bars. The "
                "scores sf_mean, sf_width, longitudinal, transverse_x and transverse_y measure the gaps drawn here. "
                "Where the study scores gan3d, a fifth panel gives 3DGAN's own optimisation metric per energy bin of "
                "evaluation.gan3d_energies in its two parts: the mean relative error of the showers' first and "
                'second moments along x, y and z ("moments"), and that of their mean energy per cell ("profiles").'
            ),
        ),
    ),
)

KINDS: Registry[DataKind] = Registry("data kind", "ganstudy.kinds", instance_of(DataKind))


def get_kind(name: str) -> DataKind:
    return KINDS.get(name)


def all_kinds() -> list[DataKind]:
    return [KINDS.get(name) for name in KINDS]


def kind_for_task(task: str) -> DataKind:
    """The one kind whose networks ``task`` trains, for a job written by hand without its data's kind."""
    found = [kind for kind in all_kinds() if kind.task == task]
    if len(found) != 1:
        names = ", ".join(kind.name for kind in found) or "none"
        raise GanstudyError(f"data kinds of networks trained by task '{task}': {names}; name the job's kind")
    return found[0]
