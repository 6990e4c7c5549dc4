"""3DGAN's physics scores of a shower generator: the sampling fraction per energy bin and the mean
profiles, against hand computations and closed forms, and a saved calo3d generator scored end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ganstudy.contracts import HeldOutJob
from ganstudy.data.kinds import IMAGES, SHOWERS
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.metrics import metric_problems
from ganstudy.evaluate.settings import EvaluationSettings
from ganstudy.evaluate.showers import mean_profiles, sampling_fraction, shower_scores

SHAPE = (1, 5, 5, 7)
METRICS = ["sf_mean", "sf_width", "longitudinal", "transverse_x", "transverse_y"]


def showers(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Prepared units: depositions x100, energies / 100 (0.1-5, i.e. 10-500 GeV)."""
    rng = np.random.default_rng(seed)
    energy = rng.uniform(0.1, 5, (count, 1)).astype(np.float32)
    return (rng.exponential(1.0, (count, *SHAPE)) * energy[:, :, None, None, None]).astype(np.float32), energy


def test_sampling_fraction_and_profiles_by_hand():
    cells = np.zeros((2, 1, 2, 3, 4), np.float32)
    cells[0, 0, 1, 2, 3] = 100.0  # 1 GeV in cell (x1, y2, z3)
    cells[1, 0, 0, 0, 0], cells[1, 0, 1, 0, 2] = 300.0, 100.0  # 3 GeV in (0,0,0), 1 GeV in (1,0,2)
    energy = np.array([[0.5], [2.0]], np.float32)  # 50 and 200 GeV
    np.testing.assert_allclose(sampling_fraction(cells, energy), [1 / 50, 4 / 200])
    profiles = mean_profiles(cells)
    np.testing.assert_allclose(profiles["transverse_x"], [1.5, 1.0])
    np.testing.assert_allclose(profiles["transverse_y"], [2.0, 0, 0.5])
    np.testing.assert_allclose(profiles["longitudinal"], [1.5, 0, 0.5, 0.5])


def test_a_perfect_generator_scores_0_and_one_depositing_twice_the_energy_scores_1():
    real, energy = showers(40)
    edges = [0, 100, 250, 500]
    perfect, _ = shower_scores(real, real.copy(), energy, edges)
    assert perfect == {name: 0.0 for name in METRICS}
    doubled, details = shower_scores(real, 2 * real, energy, edges)
    # Twice the depositions: every bin's mean and width of the sampling fraction double, every profile too.
    assert doubled == pytest.approx({name: 1.0 for name in METRICS}, rel=1e-9)
    assert [b["showers"] for b in details["energy_bins"]] == [
        int(((energy[:, 0] * 100 >= lo) & (energy[:, 0] * 100 < hi)).sum()) for lo, hi in zip(edges[:-1], edges[1:])
    ]


def test_bins_with_fewer_than_2_showers_are_left_out_and_no_bin_at_all_is_named():
    real, energy = showers(6)
    energy[:] = [[0.2], [0.3], [0.4], [4.5], [0.25], [0.35]]  # 20-40 GeV, and one at 450
    _, details = shower_scores(real, real, energy, [0, 100, 500])
    assert [(b["low_gev"], b["showers"]) for b in details["energy_bins"]] == [(0, 5)]
    with pytest.raises(
        GanstudyError,
        match=r"no bin of evaluation.energy_bins \[600, 700\] \(GeV\) holds 2 test showers.*20.0 to 450.0 GeV",
    ):
        shower_scores(real, real, energy, [600, 700])


def test_metrics_that_do_not_fit_the_data_are_named():
    assert metric_problems(SHOWERS, METRICS, "classifier") == []
    assert (
        "['fid'] do not score calorimeter showers (they score images with classes or paired images)"
        in metric_problems(SHOWERS, ["fid", "sf_mean"], "classifier")[0]
    )
    assert (
        "['longitudinal'] do not score images with classes (they score calorimeter showers)"
        in metric_problems(IMAGES, ["fid", "longitudinal"], "classifier")[0]
    )


def saved_calo3d_run(folder) -> None:
    """A fresh calo3d generator (seed 0) saved as a run in ``folder`` (generator.pt, run.json)."""
    from ganstudy.core.atomic import write_json
    from ganstudy.models import NetworkSpec, build_pair
    from ganstudy.models.artifact import save_generator
    from ganstudy.models.mixture import MixtureGenerator

    spec = NetworkSpec(SHAPE, 4, 2, condition_shape=(1,))
    torch.manual_seed(0)
    save_generator(folder / "generator.pt", MixtureGenerator([build_pair("calo3d", spec)[0]], [1.0]), "calo3d", spec)
    write_json(folder / "run.json", {"setup_name": "calo", "train_seconds": 2.0})


def test_a_saved_calo3d_generator_is_scored_against_the_test_showers(tmp_path):
    from ganstudy.core.seeding import derive_seed
    from ganstudy.data.arrays import Split, save_split
    from ganstudy.evaluate.showers import evaluate_showers
    from ganstudy.models.artifact import load_generator

    saved_calo3d_run(tmp_path)
    real, energy = showers(12, seed=4)
    save_split(tmp_path / "test.npz", Split(real, np.zeros(12, np.int64), conditions=energy))
    settings = {"metrics": ["sf_mean", "longitudinal"], "batch_size": 5, "energy_bins": [0, 250, 500]}
    record = evaluate_showers(
        HeldOutJob(
            tmp_path / "generator.pt",
            tmp_path / "run.json",
            tmp_path / "test.npz",
            EvaluationSettings.of(settings),
            3,
            1,
            tmp_path / "s.json",
            1,
        )
    )
    assert (
        set(record["scores"]) == {"sf_mean", "longitudinal"}
        and record["showers"] == 12
        and record["setup_name"] == "calo"
    )
    assert record["protocol"] == {"generated": 12, "real": 12, "real_split": "test", "extractors": {}}
    # Independent: the generator called once on all rows, noise from the trial's seed, scores in numpy.
    generator = load_generator(tmp_path / "generator.pt")[0].components[0]
    z = torch.randn(12, 4, generator=torch.Generator().manual_seed(derive_seed(3, 1, "evaluate")))
    with torch.no_grad():
        fake = generator(z, torch.from_numpy(energy)).numpy().astype(np.float64)
    gev = energy[:, 0].astype(np.float64) * 100
    errors = []
    for low, high in ((0, 250), (250, 500)):
        inside = (gev >= low) & (gev < high)
        sf = lambda x, inside=inside: x[inside].reshape(inside.sum(), -1).sum(1) / 100 / gev[inside]  # noqa: E731
        errors.append(abs(sf(fake).mean() - sf(real).mean()) / sf(real).mean())
    assert record["scores"]["sf_mean"] == pytest.approx(np.mean(errors), rel=1e-5)
    z_fake, z_real = fake[:, 0].sum(axis=(1, 2)).mean(0), real[:, 0].astype(np.float64).sum(axis=(1, 2)).mean(0)
    assert record["scores"]["longitudinal"] == pytest.approx(np.abs(z_fake - z_real).sum() / z_real.sum(), rel=1e-5)
    assert len(record["profiles"]["longitudinal"]["fake"]) == 7
    with pytest.raises(GanstudyError, match=r"do not score calorimeter showers"):
        evaluate_showers(
            HeldOutJob(
                tmp_path / "generator.pt",
                tmp_path / "run.json",
                tmp_path / "test.npz",
                EvaluationSettings.of({**settings, "metrics": ["fid"]}),
                3,
                1,
                tmp_path / "t.json",
                1,
            )
        )
    save_split(tmp_path / "other.npz", Split(real[:, :, :4], np.zeros(12, np.int64), conditions=energy))
    with pytest.raises(GanstudyError, match=r"holds showers of shape \(1, 4, 5, 7\) .* makes \(1, 5, 5, 7\) showers"):
        evaluate_showers(
            HeldOutJob(
                tmp_path / "generator.pt",
                tmp_path / "run.json",
                tmp_path / "other.npz",
                EvaluationSettings.of(settings),
                3,
                1,
                tmp_path / "u.json",
                1,
            )
        )


def hand_showers() -> tuple[np.ndarray, np.ndarray]:
    """Two real and two generated 2x2x2 showers of one bin, the case worked by hand below."""
    r1, r2, g1, g2 = np.ones((2, 2, 2)), np.zeros((2, 2, 2)), np.zeros((2, 2, 2)), np.full((2, 2, 2), 2.0)
    r2[:, :, 0] = 2  # all its energy in the first layer along z
    g1[0] = 1  # all its energy in the first cell along x
    return np.stack([r1, r2])[:, None], np.stack([g1, g2])[:, None]


def test_gan3d_metric_by_hand():
    """Per shower [mu, central second moment] along (x, y, z): R1 (.5, .25) on every axis, R2 (0, 0) along z;
    G1 (0, 0) along x, G2 (.5, .25) everywhere. Mean moments real x (.5, .25), y (.5, .25), z (.25, .125),
    generated x (.25, .125), y (.5, .25), z (.5, .25): relative errors x .5, y 0, z 1 for both moments, so
    the moment error is (.5 + 0 + 1) / 3 = .5. Mean profiles real x [4, 4], y [4, 4], z [6, 2], generated
    x [6, 4], y [5, 5], z [5, 5]: mean relative errors .25, .25 and (1/6 + 3/2) / 2 = 5/6, so the profile
    error is 4/9, and gan3d 1/2 + 4/9 = 17/18."""
    from ganstudy.evaluate.showers import gan3d_metric

    real, fake = hand_showers()
    scores, rows, note = gan3d_metric(real, fake, np.array([100.0, 102.0]), (100, 200), 5)
    assert note is None and rows == [
        {"energy_gev": 100, "showers": 2, "moments": 0.5, "profiles": pytest.approx(4 / 9)}
    ]
    assert scores == {"gan3d": pytest.approx(17 / 18), "gan3d_moments": 0.5, "gan3d_profiles": pytest.approx(4 / 9)}
    # A bin is the open interval (E - 5, E + 5): a shower at 95 GeV falls in none, and a metric with no bin says so.
    scores, rows, note = gan3d_metric(real, fake, np.array([95.0, 105.0]), (100,), 5)
    assert scores == {} and rows == [] and "no test shower lies within 5 GeV of evaluation.gan3d_energies [100]" in note
    # A layer no real shower reaches is a division by 0 in 3DGAN's quotient: left out, with the bin and axis named.
    real[:, :, 1] = 0
    scores, _, note = gan3d_metric(real, fake, np.array([100.0, 102.0]), (100,), 5)
    assert scores == {} and "100 GeV bin" in note and "along x" in note


def test_gan3d_moments_guard_showers_without_energy_as_3dgan_does():
    from ganstudy.evaluate.showers import gan3d_moments

    sums = np.array([[1.0, 3.0], [2.0, 2.0]])
    np.testing.assert_allclose(gan3d_moments(sums, sums.sum(1)), [[0.75, 0.1875], [0.5, 0.25]])
    assert not gan3d_moments(np.array([[1.0, 3.0], [0.0, 0.0]]), np.array([4.0, 0.0])).any()


def test_gan3d_is_scored_per_bin_beside_our_physics(tmp_path):
    from ganstudy.data.arrays import Split, save_split
    from ganstudy.evaluate.showers import evaluate_showers, gan3d_metric

    saved_calo3d_run(tmp_path)
    real, energy = showers(40, seed=4)
    energy[:20] = 1.0 + np.linspace(-0.04, 0.04, 20, dtype=np.float32)[:, None]  # 96-104 GeV
    save_split(tmp_path / "test.npz", Split(real, np.zeros(40, np.int64), conditions=energy))
    settings = EvaluationSettings.of(
        {
            "metrics": ["gan3d", "sf_mean"],
            "batch_size": 8,
            "energy_bins": [0, 250, 500],
            "gan3d_energies": [100, 300],
            "gan3d_half_width": 5,
        }
    )
    record = evaluate_showers(
        HeldOutJob(
            tmp_path / "generator.pt",
            tmp_path / "run.json",
            tmp_path / "test.npz",
            settings,
            3,
            1,
            tmp_path / "s.json",
            1,
        )
    )
    assert set(record["scores"]) == {"gan3d", "gan3d_moments", "gan3d_profiles", "sf_mean"}
    bins = record["gan3d_bins"]
    assert bins[0]["energy_gev"] == 100 and bins[0]["showers"] == 20
    assert record["scores"]["gan3d_moments"] == pytest.approx(np.mean([b["moments"] for b in bins]))
    assert record["scores"]["gan3d"] == pytest.approx(
        record["scores"]["gan3d_moments"] + record["scores"]["gan3d_profiles"]
    )
    assert record["scores"]["gan3d"] > 0
    # A perfect generator scores 0.
    assert gan3d_metric(real, real, energy[:, 0] * 100.0, (100,), 5)[0]["gan3d"] == 0
