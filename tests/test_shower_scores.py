"""3DGAN's physics scores of a shower generator: the sampling fraction per energy bin and the mean
profiles, against hand computations and closed forms, and a saved calo3d generator scored end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ganstudy.errors import GanstudyError
from ganstudy.evaluate.settings import EvaluationSettings
from ganstudy.data.kinds import IMAGES, SHOWERS
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
        int(((energy[:, 0] * 100 >= lo) & (energy[:, 0] * 100 < hi)).sum()) for lo, hi in zip(edges[:-1], edges[1:])]


def test_bins_with_fewer_than_2_showers_are_left_out_and_no_bin_at_all_is_named():
    real, energy = showers(6)
    energy[:] = [[0.2], [0.3], [0.4], [4.5], [0.25], [0.35]]  # 20-40 GeV, and one at 450
    _, details = shower_scores(real, real, energy, [0, 100, 500])
    assert [(b["low_gev"], b["showers"]) for b in details["energy_bins"]] == [(0, 5)]
    with pytest.raises(GanstudyError, match=r"no bin of evaluation.energy_bins \[600, 700\] \(GeV\) holds 2 test showers.*20.0 to 450.0 GeV"):
        shower_scores(real, real, energy, [600, 700])


def test_metrics_that_do_not_fit_the_data_are_named():
    assert SHOWERS.metric_problems(METRICS, "classifier") == []
    assert "['fid'] do not score calorimeter showers (they score images with classes or paired images)" in \
        SHOWERS.metric_problems(["fid", "sf_mean"], "classifier")[0]
    assert "['longitudinal'] do not score images with classes (they score calorimeter showers)" in \
        IMAGES.metric_problems(["fid", "longitudinal"], "classifier")[0]


def test_a_saved_calo3d_generator_is_scored_against_the_test_showers(tmp_path):
    from ganstudy.atomic import write_json
    from ganstudy.data.arrays import Split, save_split
    from ganstudy.evaluate.showers import evaluate_showers
    from ganstudy.models import NetworkSpec, build_pair
    from ganstudy.models.artifact import load_generator, save_generator
    from ganstudy.models.mixture import MixtureGenerator
    from ganstudy.seeding import derive_seed

    spec = NetworkSpec(SHAPE, 4, 2, condition_shape=(1,))
    torch.manual_seed(0)
    save_generator(tmp_path / "generator.pt", MixtureGenerator([build_pair("calo3d", spec)[0]], [1.0]), "calo3d", spec)
    write_json(tmp_path / "run.json", {"setup_name": "calo", "train_seconds": 2.0})
    real, energy = showers(12, seed=4)
    save_split(tmp_path / "test.npz", Split(real, np.zeros(12, np.int64), conditions=energy))
    settings = {"metrics": ["sf_mean", "longitudinal"], "batch_size": 5, "energy_bins": [0, 250, 500]}
    record = evaluate_showers(tmp_path / "generator.pt", tmp_path / "run.json", tmp_path / "test.npz", EvaluationSettings.of(settings), 3, 1, tmp_path / "s.json", 1)
    assert set(record["scores"]) == {"sf_mean", "longitudinal"} and record["showers"] == 12 and record["setup_name"] == "calo"
    # Independent: the generator called once on all rows, noise from the trial's seed, scores in numpy.
    generator = load_generator(tmp_path / "generator.pt")[0].components[0]
    z = torch.randn(12, 4, generator=torch.Generator().manual_seed(derive_seed(3, 1, "evaluate")))
    with torch.no_grad():
        fake = generator(z, torch.from_numpy(energy)).numpy().astype(np.float64)
    gev = energy[:, 0].astype(np.float64) * 100
    errors = []
    for low, high in ((0, 250), (250, 500)):
        inside = (gev >= low) & (gev < high)
        sf = lambda x: x[inside].reshape(inside.sum(), -1).sum(1) / 100 / gev[inside]  # noqa: E731
        errors.append(abs(sf(fake).mean() - sf(real).mean()) / sf(real).mean())
    assert record["scores"]["sf_mean"] == pytest.approx(np.mean(errors), rel=1e-5)
    z_fake, z_real = fake[:, 0].sum(axis=(1, 2)).mean(0), real[:, 0].astype(np.float64).sum(axis=(1, 2)).mean(0)
    assert record["scores"]["longitudinal"] == pytest.approx(np.abs(z_fake - z_real).sum() / z_real.sum(), rel=1e-5)
    assert len(record["profiles"]["longitudinal"]["fake"]) == 7
    with pytest.raises(GanstudyError, match=r"do not score calorimeter showers"):
        evaluate_showers(tmp_path / "generator.pt", tmp_path / "run.json", tmp_path / "test.npz", EvaluationSettings.of({**settings, "metrics": ["fid"]}), 3, 1,
                         tmp_path / "t.json", 1)
    save_split(tmp_path / "other.npz", Split(real[:, :, :4], np.zeros(12, np.int64), conditions=energy))
    with pytest.raises(GanstudyError, match=r"holds showers of shape \(1, 4, 5, 7\) .* makes \(1, 5, 5, 7\) showers"):
        evaluate_showers(tmp_path / "generator.pt", tmp_path / "run.json", tmp_path / "other.npz", EvaluationSettings.of(settings), 3, 1, tmp_path / "u.json", 1)
