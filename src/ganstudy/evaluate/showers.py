"""Physics scores of an energy-conditioned shower generator (calo3d) against the real showers of the test
split, as 3DGAN's validation reads them (svalleco/3Dgan, keras/analysis):

- the sampling fraction, a shower's deposited energy over its primary energy (both in GeV), per bin of
  primary energy: ``sf_mean`` and ``sf_width`` are the mean over bins of the relative error of the
  generated showers' mean and standard deviation against the real ones';
- the mean shower profiles, the energy per layer along each axis summed over the other two (3DGAN's
  get_sums: z is longitudinal, x and y transverse): ``longitudinal``, ``transverse_x`` and
  ``transverse_y`` are the relative L1 distance sum|fake - real| / sum(real) of the mean profiles.

All are lower-is-better and 0 for a perfect generator. The generated shower of a test row has that row's
primary energy and noise from the trial's seed.

Beside them, ``gan3d`` is 3DGAN's own optimisation metric as its analysis utilities compute it
(keras/analysis/utils/GANutils.py: sortEnergy, get_sums, get_moments, metric, OptAnalysisShort; the
version of svalleco/3Dgan commit 204a25e), so that our numbers can be put beside theirs. Showers are
binned by primary energy, E - 5 < E_primary < E + 5 GeV around 100, 200, 300 and 400 GeV
(evaluation.gan3d_energies, gan3d_half_width). Per bin and axis (x, y transverse; z longitudinal) the
energy per cell index i = 0, 1, ... of a shower, summed over the other two axes, gives its first moment
mu = sum i S_i / E and its central second moment sum (i - mu)^2 S_i / E (E: the shower's total; a bin
holding a shower of no energy gets moments of 0, as 204a25e guards it). The moment error of a bin is
the mean over the two moments of the mean over the axes of |A - G| / A, A and G the real and generated
showers' mean moment; its profile error the mean over the axes of the mean over cells of |P - Q| / P,
P and Q the real and generated mean energy per cell. ``gan3d_moments`` and ``gan3d_profiles`` are their
means over the bins and ``gan3d`` their sum. (The later sc18 branch adds the moment error twice per
bin, a slip that 204a25e had removed.) A real mean of 0 (a layer no real shower reaches) makes the
original's quotient infinite; the metric is then left out with a note saying which bin and axis.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.contracts import HeldOutJob
from ganstudy.data.arrays import load_split
from ganstudy.data.calorimeter import DEPOSIT_SCALE, ENERGY_SCALE
from ganstudy.data.kinds import SHOWERS
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.held_out import open_job
from ganstudy.evaluate.metrics import score_all
from ganstudy.evaluate.scores import write_scores
from ganstudy.evaluate.scoring import ShowerScoring, column_of

# Axes of (N, X, Y, Z) cells summed for each profile.
AXES = {"transverse_x": (2, 3), "transverse_y": (1, 3), "longitudinal": (1, 2)}


def sampling_fraction(showers: np.ndarray, energy: np.ndarray) -> np.ndarray:
    """Deposited over primary energy, per shower, from the prepared units (depositions x100, energy /100)."""
    return (showers.reshape(len(showers), -1).sum(1, dtype=np.float64) / DEPOSIT_SCALE) / (
        energy.reshape(-1) * ENERGY_SCALE
    )


def mean_profiles(showers: np.ndarray) -> dict[str, np.ndarray]:
    """The mean over showers (N, 1, X, Y, Z) of the energy per layer along each axis, in GeV."""
    cells = showers[:, 0].astype(np.float64) / DEPOSIT_SCALE
    return {name: cells.sum(axis=axes).mean(0) for name, axes in AXES.items()}


def energy_bins(
    real_sf: np.ndarray, fake_sf: np.ndarray, energy_gev: np.ndarray, edges: list[float]
) -> list[dict[str, Any]]:
    """Per bin [edge_i, edge_i+1) of primary energy in GeV with at least 2 showers: counts, and the mean and
    standard deviation of the sampling fraction of the real and the generated showers."""
    rows = []
    for low, high in zip(edges[:-1], edges[1:]):
        inside = (energy_gev >= low) & (energy_gev < high)
        if inside.sum() < 2:
            continue
        real, fake = real_sf[inside], fake_sf[inside]
        rows.append(
            {
                "low_gev": low,
                "high_gev": high,
                "showers": int(inside.sum()),
                "real_mean": float(real.mean()),
                "fake_mean": float(fake.mean()),
                "real_width": float(real.std(ddof=1)),
                "fake_width": float(fake.std(ddof=1)),
            }
        )
    return rows


def relative_l1(fake: np.ndarray, real: np.ndarray) -> float:
    return float(np.abs(fake - real).sum() / np.abs(real).sum())


def shower_scores(
    real: np.ndarray, fake: np.ndarray, energy: np.ndarray, edges: list[float]
) -> tuple[dict[str, float], dict[str, Any]]:
    """The five scores, and what they were computed from (the bins and both mean profiles)."""
    real_sf, fake_sf = sampling_fraction(real, energy), sampling_fraction(fake, energy)
    bins = energy_bins(real_sf, fake_sf, energy.reshape(-1) * ENERGY_SCALE, edges)
    if not bins:
        raise GanstudyError(
            f"no bin of evaluation.energy_bins {edges} (GeV) holds 2 test showers: choose edges that span "
            f"the test split's energies, {energy.min() * ENERGY_SCALE:.1f} to {energy.max() * ENERGY_SCALE:.1f} GeV"
        )
    scores = {
        "sf_mean": float(np.mean([abs(b["fake_mean"] - b["real_mean"]) / b["real_mean"] for b in bins])),
        "sf_width": float(np.mean([abs(b["fake_width"] - b["real_width"]) / b["real_width"] for b in bins])),
    }
    real_profiles, fake_profiles = mean_profiles(real), mean_profiles(fake)
    scores |= {name: relative_l1(fake_profiles[name], real_profiles[name]) for name in AXES}
    details = {
        "energy_bins": bins,
        "profiles": {
            name: {"real": real_profiles[name].tolist(), "fake": fake_profiles[name].tolist()} for name in AXES
        },
    }
    return scores, details


GAN3D_AXES = {"x": (2, 3), "y": (1, 3), "z": (1, 2)}
GAN3D_MOMENTS = 2


def gan3d_moments(sums: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """get_moments: per shower, the first and central second moment of its per-cell energies ``sums``
    (N, cells) about the cell index; all 0 when a shower holds no energy (204a25e's guard)."""
    if (totals == 0).any():
        return np.zeros((len(sums), GAN3D_MOMENTS))
    index = np.arange(sums.shape[1], dtype=np.float64)
    mean = (sums * index).sum(1) / totals
    second = (sums * (index - mean[:, None]) ** 2).sum(1) / totals
    return np.stack([mean, second], 1)


def gan3d_metric(
    real: np.ndarray, fake: np.ndarray, energy_gev: np.ndarray, energies: tuple[float, ...], half_width: float
) -> tuple[dict[str, float], list[dict[str, Any]], str | None]:
    """3DGAN's optimisation metric of (N, 1, X, Y, Z) showers, row i of ``fake`` generated at the primary
    energy of row i of ``real``: ({gan3d, gan3d_moments, gan3d_profiles}, one row per bin holding
    showers, a note when the metric cannot be computed (then no scores))."""
    rows = []
    for centre in energies:
        inside = (energy_gev > centre - half_width) & (energy_gev < centre + half_width)
        if not inside.any():
            continue
        moments, profiles = [], []
        for axis, summed in GAN3D_AXES.items():
            real_sums = real[inside, 0].astype(np.float64).sum(axis=summed)
            fake_sums = fake[inside, 0].astype(np.float64).sum(axis=summed)
            real_moments = gan3d_moments(real_sums, real_sums.sum(1)).mean(0)
            fake_moments = gan3d_moments(fake_sums, fake_sums.sum(1)).mean(0)
            real_profile, fake_profile = real_sums.mean(0), fake_sums.mean(0)
            if (real_moments == 0).any() or (real_profile == 0).any():
                return (
                    {},
                    rows,
                    (
                        f"gan3d: the real showers of the {centre:g} GeV bin have a mean moment or a mean cell "
                        f"energy of 0 along {axis}, which 3DGAN's metric divides by (its value would be infinite)"
                    ),
                )
            moments.append(np.abs((real_moments - fake_moments) / real_moments))
            profiles.append(np.abs((real_profile - fake_profile) / real_profile).mean())
        rows.append(
            {
                "energy_gev": centre,
                "showers": int(inside.sum()),
                "moments": float(np.mean(moments, 0).mean()),
                "profiles": float(np.mean(profiles)),
            }
        )
    if not rows:
        return (
            {},
            rows,
            (
                f"gan3d: no test shower lies within {half_width:g} GeV of evaluation.gan3d_energies {list(energies)}; "
                f"the test split spans {energy_gev.min():.1f} to {energy_gev.max():.1f} GeV"
            ),
        )
    moment_error = float(np.mean([row["moments"] for row in rows]))
    profile_error = float(np.mean([row["profiles"] for row in rows]))
    return (
        {"gan3d": moment_error + profile_error, "gan3d_moments": moment_error, "gan3d_profiles": profile_error},
        rows,
        None,
    )


@torch.no_grad()
def generate_showers(
    generator: torch.nn.Module, latent_dim: int, energy: np.ndarray, seed: int, batch_size: int
) -> np.ndarray:
    """A shower for each primary energy (N, 1), from standard-normal noise of the given seed (drawn on the
    CPU, so the showers do not depend on the generator's device)."""
    device = next(generator.parameters()).device
    z = torch.randn(len(energy), latent_dim, generator=torch.Generator().manual_seed(seed)).to(device)
    conditions = torch.from_numpy(energy).to(device)
    return (
        torch.cat(
            [generator(z[i : i + batch_size], conditions[i : i + batch_size]) for i in range(0, len(z), batch_size)]
        )
        .cpu()
        .numpy()
    )


class ShowerScorer:
    """A shower generator's in-training score (column ``showers``): the mean of the five physics scores of
    its showers for the first ``count`` held-out events' energies against those events' showers, the
    sampling fraction taken in one bin spanning their energies. It scores a plain copy of the generator's
    weights in eval mode, as evaluate_showers does, so that neither a data-parallel rank's synchronised
    batch norm nor the training generator's running statistics are touched; it is only watched for
    convergence."""

    def __init__(
        self,
        showers_path: str | os.PathLike[str],
        count: int,
        seed: int,
        network: torch.nn.Module,
        device: torch.device,
        setup: TrainingSettings,
        ranks: int,
    ) -> None:
        held_out = load_split(showers_path)
        if held_out.conditions is None:
            raise GanstudyError(
                f"{showers_path} holds no primary energies: the in-training score of a shower generator needs "
                "the test split of a calorimeter data set"
            )
        self.real, self.energy = held_out.images[:count], held_out.conditions[:count]
        gev = self.energy * ENERGY_SCALE
        self.edges = [float(gev.min()), float(np.nextafter(gev.max(), np.inf))]
        self.seed, self.network, self.latent_dim = seed, network.to(device).eval(), setup.latent_dim

    def score(self, generator: torch.nn.Module) -> float:
        self.network.load_state_dict(generator.state_dict())
        fake = generate_showers(self.network, self.latent_dim, self.energy, self.seed, 128)
        return float(np.mean(list(shower_scores(self.real, fake, self.energy, self.edges)[0].values())))


def evaluate_showers(job: HeldOutJob) -> dict[str, Any]:
    """Scores of one energy generator on the job's split (its conditions are the primary energies) by
    evaluation.metrics."""
    opened = open_job(job, SHOWERS)
    split, spec, settings, seed = opened.split, opened.spec, job.settings, opened.seed
    if (
        split.conditions is None
        or tuple(split.images.shape[1:]) != tuple(spec.image_shape)
        or split.conditions.shape[1:] != (1,)
    ):
        raise GanstudyError(
            f"{job.split_path} holds showers of shape {tuple(split.images.shape[1:])} with conditions "
            f"{None if split.conditions is None else tuple(split.conditions.shape[1:])}, but the generator "
            f"{job.generator_path} makes {tuple(spec.image_shape)} showers of one primary energy each: score "
            "it on a split of the data set it was trained on"
        )
    fake = generate_showers(
        opened.generator.components[0], spec.latent_dim, split.conditions, seed, settings.batch_size
    )
    scoring = ShowerScoring(settings, seed, split.images, fake, split.conditions)
    scores = score_all(settings.metrics, scoring)
    return write_scores(
        job.out_path,
        settings,
        opened.run,
        job.trial,
        seed,
        scores,
        showers=len(fake),
        **_physics(scoring)[1],
        **scoring.facts,
        protocol=scoring.protocol(Path(job.split_path).stem),
    )


def _physics(scoring: ShowerScoring) -> tuple[dict[str, float], dict[str, Any]]:
    """The five scores and what they were computed from, once per scoring (the score file records the
    bins and profiles whichever of the five are asked for)."""
    if scoring.settings.energy_bins is None:
        raise GanstudyError(
            "evaluation.energy_bins is not set: the shower scores bin the primary energies; give the "
            "edges in GeV (the study config fills in 3DGAN's 0-500 GeV bins)"
        )
    edges = list(scoring.settings.energy_bins)
    return scoring.once("physics", lambda: shower_scores(scoring.real, scoring.fake, scoring.energy, edges))


def _physics_scores(scoring: ShowerScoring) -> dict[str, float]:
    return _physics(scoring)[0]


sf_mean = column_of(_physics_scores, "sf_mean")
sf_width = column_of(_physics_scores, "sf_width")
longitudinal = column_of(_physics_scores, "longitudinal")
transverse_x = column_of(_physics_scores, "transverse_x")
transverse_y = column_of(_physics_scores, "transverse_y")


def gan3d(scoring: ShowerScoring) -> dict[str, float]:
    """3DGAN's optimisation metric, with its per-bin rows in the score file's facts (gan3d_bins)."""
    settings = scoring.settings
    scores, rows, note = gan3d_metric(
        scoring.real,
        scoring.fake,
        scoring.energy.reshape(-1) * ENERGY_SCALE,
        settings.gan3d_energies,
        settings.gan3d_half_width,
    )
    scoring.facts["gan3d_bins"] = rows
    if note is not None:
        scoring.notes["gan3d"] = note
    return scores
