"""Metrics, registered like every other part (entry-point group ``ganstudy.metrics``): ganstudy's own are
entry points of its pyproject.toml, a lab's are entry points of its package. A metric's entry-point name is
its column in scores.csv and the name of its tables, so metrics are not named as ``module:attribute``
(networks and data sets may be). Free of torch, so that the workflow refuses a metric that does not exist or
cannot score the study's data while it builds the DAG, before any job; ``compute`` is imported by the scoring
job only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from numbers import Real
from typing import Any

from ganstudy.config.pretrained import PRETRAINED
from ganstudy.contracts import MetricCompute
from ganstudy.data.kinds import DataKind, all_kinds
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.settings import EvaluationSettings
from ganstudy.registry import Registry, not_installed, resolve_part

DIRECTIONS = ("lower", "higher")


@dataclass(frozen=True)
class Metric:
    """A score of generators. ``compute`` (``module:attribute``) is called by the scoring job with the
    scoring of the generator's data kind (ganstudy.evaluate.scoring: ImageScoring, PairScoring,
    ShowerScoring) and returns the metric's columns, ``{column: number}``, usually ``{name: value}``; a
    metric may add columns (isc_std beside isc), or return none and leave a note saying why
    (``scoring.notes``)."""

    description: str
    better: str  # "lower" or "higher"
    kinds: frozenset[str]  # the data kinds (ganstudy.data.kinds) whose generators it scores
    compute: str
    # Computed on evaluation.extractor's features (ImageScoring/PairScoring.quality_features): for a kind
    # whose data train no classifier, that extractor must be a pretrained one (Inception, DINOv2, CLIP).
    features: bool = False
    # Reads the extractor's class probabilities (IS): refused with an extractor whose features are an
    # embedding without classes (DINOv2, CLIP).
    probabilities: bool = False
    # Reads the data set's classifier (ImageScoring.classifier_features / classifier_reference): data of
    # one class train none, so such a metric needs classifier.weights there.
    classifier: bool = False
    # Compares the classes of samples and data: refused for data of one class.
    classes: bool = False
    # Reads the real images themselves (ImageScoring.real_images(): the reference split's pixels), not
    # only their features: the workflow then gives the scoring job that split.
    real_images: bool = False
    # The evaluation keys it reads (its subsets, splits, neighbourhood): part of its protocol, said in the
    # tables' footnotes.
    settings: tuple[str, ...] = ()


def _check(value: object) -> str | None:
    if not isinstance(value, Metric):
        return f"is of type {type(value).__name__}, not Metric"
    if value.better not in DIRECTIONS:
        return f"says better is '{value.better}', not one of {', '.join(DIRECTIONS)}"
    if not value.kinds or ":" not in value.compute:
        return "names no data kind or no compute as module:attribute"
    if not isinstance(value.settings, tuple) or not all(isinstance(key, str) for key in value.settings):
        return f"gives settings {value.settings!r}, not a tuple of evaluation keys"
    return None


METRICS: Registry[Metric] = Registry(
    "metric",
    "ganstudy.metrics",
    _check,
    by_reference=False,
    why="a metric's name is its column in scores.csv and in the tables",
)


def get_metric(name: str) -> Metric:
    return METRICS.get(name)


def better(name: str) -> str:
    """Which way a metric's column is better ("?" for a column no metric is named after, e.g. isc_std)."""
    return METRICS.get(name).better if name in METRICS else "?"


def kind_metrics(kind: DataKind) -> list[str]:
    """The registered metrics that score generators of ``kind`` (each metric names its kinds). A metric
    that does not load is left out: a broken plugin the study does not use must not stop it (one it uses
    is named by metric_problems)."""
    names = []
    for name in METRICS:
        try:
            if kind.name in METRICS.get(name).kinds:
                names.append(name)
        except GanstudyError:
            continue
    return names


def metric_problems(kind: DataKind, metrics: Iterable[str], extractor: str) -> list[str]:
    """Why ``metrics`` (evaluation.metrics) with ``extractor`` (evaluation.extractor) cannot score
    generators of ``kind`` (empty: they can)."""
    problems, found = [], {}
    for name in metrics:
        try:
            found[name] = get_metric(name)
        except GanstudyError as error:
            problems.append(f"evaluation.metrics: {error}")
    unfound = (
        not_installed(metric.compute, f"metric '{name}' ({METRICS.origin(name)})") for name, metric in found.items()
    )
    problems += [f"evaluation.metrics: {problem}" for problem in unfound if problem]
    wrong = sorted(name for name, metric in found.items() if kind.name not in metric.kinds)
    if wrong:
        others = sorted(
            {
                other.description
                for other in all_kinds()
                if other is not kind and any(other.name in found[n].kinds for n in wrong)
            }
        )
        scored = f" (they score {' or '.join(others)})" if others else ""
        problems.append(
            f"evaluation.metrics {wrong} do not score {kind.description}{scored}: this study's data "
            f"are of kind '{kind.name}', whose metrics are {sorted(kind_metrics(kind))}; remove them"
        )
    needs = sorted(pretrained_metrics(kind, found))
    if needs and extractor not in PRETRAINED:
        problems.append(
            f"evaluation.metrics {needs} of {kind.description} are computed on a pretrained network's "
            f"features (data of kind '{kind.name}' train no classifier): set evaluation.extractor to inception "
            "with evaluation.inception_weights (or dinov2 or clip with evaluation.extractor_weights), or remove them"
        )
    if extractor in PRETRAINED and PRETRAINED[extractor].isc_layer is None:
        classless = sorted(name for name, metric in found.items() if metric.probabilities)
        if classless:
            problems.append(
                f"evaluation.metrics {classless} read class probabilities, and evaluation.extractor {extractor} "
                "gives an embedding without classes: score them with the classifier or inception, or remove them"
            )
    return problems


def pretrained_metrics(kind: DataKind, names: Iterable[str]) -> list[str]:
    """Of the metrics ``names`` that score ``kind``, those computed on a pretrained network's features: the
    feature metrics, for a kind whose data train no classifier."""
    if kind.held_out is None:
        return []
    found = [(name, METRICS.get(name)) for name in names]
    return [name for name, metric in found if metric.features and kind.name in metric.kinds]


def require_metrics(kind: DataKind, settings: EvaluationSettings) -> None:
    """Raise, naming every problem, when evaluation.metrics cannot score generators of ``kind``."""
    problems = metric_problems(kind, settings.metrics, settings.extractor)
    if problems:
        raise GanstudyError("; ".join(problems))


def compute_columns(name: str, scoring: Any) -> dict[str, float]:
    """The columns of metric ``name`` for one generator's ``scoring``, checked against the contract."""
    metric, origin = get_metric(name), METRICS.origin(name)
    compute = resolve_part(metric.compute, f"metric '{name}' ({origin})", MetricCompute)
    try:
        columns = compute(scoring)
    except GanstudyError as error:
        raise GanstudyError(f"metric '{name}' ({origin}): {error}") from None
    where = f"metric '{name}' ({origin}) compute"
    if not isinstance(columns, Mapping):
        raise GanstudyError(
            f"{where} returned {type(columns).__name__}, not a mapping of column name to number; fix it in its package"
        )
    checked = {}
    for column, value in columns.items():
        if not isinstance(column, str) or not isinstance(value, Real) or isinstance(value, bool):
            raise GanstudyError(
                f"{where} returned {column!r}: {value!r}; columns are names (str) with numbers; fix it in its package"
            )
        checked[column] = float(value)
    if not checked and name not in scoring.notes:
        raise GanstudyError(
            f"{where} returned no column and left no note in scoring.notes['{name}'] saying why; fix it in its package"
        )
    return checked


def score_all(names: list[str] | tuple[str, ...], scoring: Any) -> dict[str, float]:
    """Every named metric's columns; two metrics writing one column is an error, not an overwrite."""
    scores: dict[str, float] = {}
    for name in names:
        columns = compute_columns(name, scoring)
        clash = sorted(set(columns) & set(scores))
        if clash:
            raise GanstudyError(
                f"metric '{name}' ({METRICS.origin(name)}) writes column(s) {clash} that another of "
                f"evaluation.metrics {list(names)} wrote: rename its columns in its package"
            )
        scores |= columns
    return scores


QUALITY_KINDS = frozenset({"images", "pairs"})

FID = Metric(
    "Frechet distance of the samples' and the real images' features",
    "lower",
    QUALITY_KINDS,
    "ganstudy.evaluate.quality:fid",
    features=True,
)
ISC = Metric(
    "Inception-style score of the extractor's class probabilities (and its spread over splits, isc_std)",
    "higher",
    QUALITY_KINDS,
    "ganstudy.evaluate.quality:isc",
    features=True,
    probabilities=True,
    settings=("isc_splits",),
)
KID = Metric(
    "kernel distance (unbiased MMD^2, cubic polynomial kernel) over subsets (and its spread, kid_std)",
    "lower",
    QUALITY_KINDS,
    "ganstudy.evaluate.quality:kid",
    features=True,
    settings=("kid_subsets", "kid_subset_size"),
)
PRECISION = Metric(
    "share of samples inside the real images' k-nearest-neighbour manifold",
    "higher",
    QUALITY_KINDS,
    "ganstudy.evaluate.quality:precision",
    features=True,
    settings=("prc_neighborhood",),
)
RECALL = Metric(
    "share of real images inside the samples' k-nearest-neighbour manifold",
    "higher",
    QUALITY_KINDS,
    "ganstudy.evaluate.quality:recall",
    features=True,
    settings=("prc_neighborhood",),
)
DENSITY = Metric(
    "mean number of the real images' k-nearest-neighbour balls a sample lies in, over k (Naeem et al. 2020)",
    "higher",
    QUALITY_KINDS,
    "ganstudy.evaluate.quality:density",
    features=True,
    settings=("dc_neighborhood",),
)
COVERAGE = Metric(
    "share of the real images' k-nearest-neighbour balls that hold a sample (Naeem et al. 2020)",
    "higher",
    QUALITY_KINDS,
    "ganstudy.evaluate.quality:coverage",
    features=True,
    settings=("dc_neighborhood",),
)
CLASS_FID = Metric(
    "mean over classes of the FID of a class's samples against its real images (labelled generators)",
    "lower",
    frozenset({"images"}),
    "ganstudy.evaluate.scores:class_fid",
    classifier=True,
    classes=True,
)
LABEL_TVD = Metric(
    "total variation distance of the classifier's label histogram of the samples and the real one",
    "lower",
    frozenset({"images"}),
    "ganstudy.evaluate.scores:label_tvd_metric",
    classifier=True,
    classes=True,
)
L1 = Metric(
    "mean absolute difference of output and target in [0, 1]",
    "lower",
    frozenset({"pairs"}),
    "ganstudy.evaluate.paired:l1",
)
PSNR = Metric(
    "peak signal-to-noise ratio of output against target, dB",
    "higher",
    frozenset({"pairs"}),
    "ganstudy.evaluate.paired:psnr",
)
SSIM = Metric(
    "structural similarity of output and target (Wang et al. 2004)",
    "higher",
    frozenset({"pairs"}),
    "ganstudy.evaluate.paired:ssim_metric",
)
SF_MEAN = Metric(
    "mean over energy bins of the relative error of the mean sampling fraction",
    "lower",
    frozenset({"showers"}),
    "ganstudy.evaluate.showers:sf_mean",
    settings=("energy_bins",),
)
SF_WIDTH = Metric(
    "mean over energy bins of the relative error of the sampling fraction's spread",
    "lower",
    frozenset({"showers"}),
    "ganstudy.evaluate.showers:sf_width",
    settings=("energy_bins",),
)
LONGITUDINAL = Metric(
    "relative L1 distance of the mean energy profile along z",
    "lower",
    frozenset({"showers"}),
    "ganstudy.evaluate.showers:longitudinal",
)
TRANSVERSE_X = Metric(
    "relative L1 distance of the mean energy profile along x",
    "lower",
    frozenset({"showers"}),
    "ganstudy.evaluate.showers:transverse_x",
)
GAN3D = Metric(
    "3DGAN's optimisation metric: per primary-energy bin, the relative errors of the showers' mean first and "
    "second moments along x, y, z plus those of their mean per-cell energies, averaged over bins (and its two "
    "parts, gan3d_moments and gan3d_profiles)",
    "lower",
    frozenset({"showers"}),
    "ganstudy.evaluate.showers:gan3d",
    settings=("gan3d_energies", "gan3d_half_width"),
)
TRANSVERSE_Y = Metric(
    "relative L1 distance of the mean energy profile along y",
    "lower",
    frozenset({"showers"}),
    "ganstudy.evaluate.showers:transverse_y",
)
