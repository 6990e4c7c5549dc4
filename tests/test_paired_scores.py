"""Paired scores (L1, PSNR, SSIM) against independent references: scipy's Gaussian filter for SSIM,
closed forms for constant images, and hand-computed L1 and PSNR."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.ndimage import gaussian_filter

from ganstudy.contracts import HeldOutJob
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.paired import paired_scores, ssim
from ganstudy.evaluate.settings import EvaluationSettings
from test_data_parallel_mpi import settings as dp_settings


def reference_ssim(x: np.ndarray, y: np.ndarray) -> float:
    """Wang et al.'s mean SSIM of one grey image pair in [0, 1], written as scikit-image computes it with
    gaussian_weights=True: scipy's Gaussian filter (sigma 1.5, truncate 3.5), borders of 5 cropped."""
    blur = lambda image: gaussian_filter(image, sigma=1.5, truncate=3.5, mode="reflect")  # noqa: E731
    mx, my = blur(x), blur(y)
    vx, vy, cxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
    c1, c2 = 0.01**2, 0.03**2
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return float(s[5:-5, 5:-5].mean())


def test_ssim_matches_an_independent_gaussian_filter_implementation() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (3, 24, 20))
    # A related image: a blurred, shifted, noisy copy, so SSIM lies well inside (0, 1).
    y = np.clip(0.7 * gaussian_filter(x, (0, 1, 1)) + 0.2 + rng.normal(0, 0.05, x.shape), 0, 1)
    got = ssim(torch.from_numpy(x)[:, None], torch.from_numpy(y)[:, None])
    want = [reference_ssim(a, b) for a, b in zip(x, y)]
    assert 0.05 < min(want) and max(want) < 0.95
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    # Colour images: the mean over channels.
    torch.testing.assert_close(
        ssim(torch.from_numpy(x)[None], torch.from_numpy(y)[None]), torch.tensor([np.mean(want)], dtype=torch.float64)
    )


def test_ssim_of_constant_images_is_its_luminance_term() -> None:
    a, b = 0.2, 0.7
    got = ssim(torch.full((1, 1, 16, 16), a, dtype=torch.float64), torch.full((1, 1, 16, 16), b, dtype=torch.float64))
    c1 = 0.01**2
    # No variance: the contrast-structure term is c2 / c2 = 1.
    assert float(got) == pytest.approx((2 * a * b + c1) / (a * a + b * b + c1), rel=1e-12)
    assert float(ssim(torch.full((1, 1, 16, 16), a), torch.full((1, 1, 16, 16), a))) == pytest.approx(1.0)


def test_l1_and_psnr_by_hand() -> None:
    # Targets all -1 (0 in [0, 1]); outputs 0 (0.5) on half the pixels, -1 on the other half.
    targets = -torch.ones(2, 1, 16, 16)
    outputs = targets.clone()
    outputs[:, :, :, :8] = 0.0
    scores = paired_scores(outputs, targets)
    assert scores["l1"] == pytest.approx(0.25)
    # MSE = 0.5 * 0.25 = 0.125 per image: PSNR = 10 log10(1 / 0.125).
    assert scores["psnr"] == pytest.approx(10 * math.log10(8))
    assert 0 < scores["ssim"] < 1


def test_bad_shapes_are_named() -> None:
    with pytest.raises(GanstudyError, match="differ in shape"):
        paired_scores(torch.zeros(1, 3, 16, 16), torch.zeros(1, 1, 16, 16))
    with pytest.raises(GanstudyError, match="11x11 window"):
        ssim(torch.zeros(1, 1, 8, 8), torch.zeros(1, 1, 8, 8))


def pix2pix_settings(**keys) -> dict:
    """A pix2pix set-up as run.json records it."""
    from ganstudy.train.job import job_settings

    return job_settings(dp_settings(network="pix2pix", latent_dim=1, hidden_units=8, l1_weight=100, **keys))


@pytest.fixture(scope="module")
def pix2pix_run(tmp_path_factory):
    """An untrained 64x64 pix2pix generator (the smallest with a dropout block) saved as a run, and a split
    of 6 pairs to score it on."""
    from ganstudy.core.atomic import write_json
    from ganstudy.data.arrays import Split, save_split
    from ganstudy.models import NetworkSpec, build_pair
    from ganstudy.models.artifact import save_generator
    from ganstudy.models.mixture import MixtureGenerator

    out = tmp_path_factory.mktemp("pix2pix")
    spec = NetworkSpec((3, 64, 64), 1, 8, condition_shape=(3, 64, 64))
    torch.manual_seed(0)
    generator, _ = build_pair("pix2pix", spec)
    save_generator(out / "generator.pt", MixtureGenerator([generator], [1.0]), "pix2pix", spec)
    write_json(
        out / "run.json", {"setup_name": "p2p", "train_seconds": 1.5, "settings": pix2pix_settings(batch_size=1)}
    )
    rng = np.random.default_rng(1)
    inputs = rng.uniform(-1, 1, (6, 3, 64, 64)).astype(np.float32)
    save_split(out / "test.npz", Split(np.flip(inputs, 3).copy(), np.zeros(6, np.int64), conditions=inputs))
    return out


SETTINGS = {
    "metrics": ["l1", "psnr", "ssim"],
    "extractor": "classifier",
    "batch_size": 4,
    "isc_splits": 1,
    "samples": 100,
}


def test_a_paired_generator_is_scored_on_its_outputs_for_the_test_inputs(pix2pix_run, tmp_path):
    from ganstudy.core.atomic import read_json
    from ganstudy.core.seeding import derive_seed
    from ganstudy.data.arrays import load_split
    from ganstudy.evaluate.paired import evaluate_pairs
    from ganstudy.models.artifact import load_generator

    record = evaluate_pairs(
        HeldOutJob(
            pix2pix_run / "generator.pt",
            pix2pix_run / "run.json",
            pix2pix_run / "test.npz",
            EvaluationSettings.of(SETTINGS),
            7,
            1,
            tmp_path / "s.json",
            1,
        )
    )
    assert read_json(tmp_path / "s.json")["scores"] == record["scores"] and set(record["scores"]) == {
        "l1",
        "psnr",
        "ssim",
    }
    assert record["pairs"] == 6 and record["setup_name"] == "p2p" and record["extractor"] is None
    assert record["protocol"] == {"generated": 6, "real": 6, "real_split": "test", "extractors": {}}
    # Independent: pix2pix's test.py by hand, one input at a time in training mode, dropout drawn from the seed.
    generator = load_generator(pix2pix_run / "generator.pt")[0].components[0].train()
    pairs = load_split(pix2pix_run / "test.npz")
    torch.manual_seed(derive_seed(7, 1, "evaluate"))
    with torch.no_grad():
        outputs = np.concatenate(
            [generator(torch.from_numpy(pairs.conditions[i : i + 1])).numpy() for i in range(6)]
        ).astype(np.float64)
    x, y = (outputs + 1) / 2, (pairs.images.astype(np.float64) + 1) / 2
    assert record["scores"]["l1"] == pytest.approx(np.abs(x - y).mean(), rel=1e-6)
    assert record["scores"]["psnr"] == pytest.approx(
        np.mean([10 * math.log10(1 / ((a - b) ** 2).mean()) for a, b in zip(x, y)]), rel=1e-6
    )
    # Dropout is the generator's noise: another trial's seed gives other outputs, the same trial the same.
    again = evaluate_pairs(
        HeldOutJob(
            pix2pix_run / "generator.pt",
            pix2pix_run / "run.json",
            pix2pix_run / "test.npz",
            EvaluationSettings.of(SETTINGS),
            7,
            1,
            tmp_path / "t.json",
            1,
        )
    )
    other = evaluate_pairs(
        HeldOutJob(
            pix2pix_run / "generator.pt",
            pix2pix_run / "run.json",
            pix2pix_run / "test.npz",
            EvaluationSettings.of(SETTINGS),
            7,
            2,
            tmp_path / "u.json",
            1,
        )
    )
    assert again["scores"] == record["scores"] and other["scores"]["l1"] != record["scores"]["l1"]
    assert record["batch_norm_rows"] == 1


@pytest.mark.parametrize(
    "keys, rows", [({"batch_size": 2}, 2), ({"batch_size": 8, "data_parallel": {"accumulation_steps": 2}}, 4)]
)
def test_a_generator_trained_on_batches_is_scored_on_groups_of_as_many_inputs(pix2pix_run, tmp_path, keys, rows):
    """Batch norm runs on the inputs' statistics when scored: as many inputs at once as it normalised
    together in training (a data-parallel global batch, or one micro-batch of every rank)."""
    from ganstudy.core.atomic import read_json, write_json
    from ganstudy.core.seeding import derive_seed
    from ganstudy.data.arrays import load_split
    from ganstudy.evaluate.paired import evaluate_pairs
    from ganstudy.models.artifact import load_generator

    run = {**read_json(pix2pix_run / "run.json"), "settings": pix2pix_settings(**keys)}
    write_json(tmp_path / "run.json", run)
    record = evaluate_pairs(
        HeldOutJob(
            pix2pix_run / "generator.pt",
            tmp_path / "run.json",
            pix2pix_run / "test.npz",
            EvaluationSettings.of(SETTINGS),
            7,
            1,
            tmp_path / "s.json",
            1,
        )
    )
    assert record["batch_norm_rows"] == rows
    generator = load_generator(pix2pix_run / "generator.pt")[0].components[0].train()
    conditions, targets = (
        torch.from_numpy(a)
        for a in (load_split(pix2pix_run / "test.npz").conditions, load_split(pix2pix_run / "test.npz").images)
    )
    torch.manual_seed(derive_seed(7, 1, "evaluate"))
    with torch.no_grad():
        # 6 pairs: groups of 2, 2, 2 or of 4 and the remaining 2.
        outputs = torch.cat([generator(conditions[i : i + rows]) for i in range(0, 6, rows)]).double()
    assert record["scores"]["l1"] == pytest.approx(float((outputs - targets.double()).abs().mean() / 2), rel=1e-6)
    one = read_json(pix2pix_run / "run.json")
    assert (
        one["settings"]["batch_size"] == 1
        and record["scores"]["l1"]
        != evaluate_pairs(
            HeldOutJob(
                pix2pix_run / "generator.pt",
                pix2pix_run / "run.json",
                pix2pix_run / "test.npz",
                EvaluationSettings.of(SETTINGS),
                7,
                1,
                tmp_path / "one.json",
                1,
            )
        )["scores"]["l1"]
    )


def test_fid_of_outputs_against_targets_uses_inception_features(pix2pix_run, stand_in_inception, tmp_path):
    from ganstudy.core.seeding import derive_seed
    from ganstudy.data.arrays import load_split, to_uint8
    from ganstudy.evaluate.paired import evaluate_pairs, translate
    from ganstudy.models.artifact import load_generator
    from test_evaluate import _independent_fid

    weights, model = stand_in_inception
    settings = {
        **SETTINGS,
        "metrics": ["fid", "ssim"],
        "extractor": "inception",
        "inception_weights": str(weights),
        "inception_sha256": None,
    }
    record = evaluate_pairs(
        HeldOutJob(
            pix2pix_run / "generator.pt",
            pix2pix_run / "run.json",
            pix2pix_run / "test.npz",
            EvaluationSettings.of(settings),
            7,
            1,
            tmp_path / "s.json",
            1,
        )
    )
    assert set(record["scores"]) == {"fid", "ssim"} and record["extractor"].startswith("ganstudy-inception-")
    assert "the reference statistics hold 6 real images" in record["notes"]["fid"]
    pairs = load_split(pix2pix_run / "test.npz")
    outputs = translate(
        load_generator(pix2pix_run / "generator.pt")[0].components[0],
        torch.from_numpy(pairs.conditions),
        derive_seed(7, 1, "evaluate"),
        1,
    )
    with torch.no_grad():
        made = model(torch.from_numpy(to_uint8(outputs.numpy())))[0].double().numpy()
        real = model(torch.from_numpy(to_uint8(pairs.images)))[0].double().numpy()
    assert record["scores"]["fid"] == pytest.approx(_independent_fid(made, real), rel=1e-3)


@pytest.mark.parametrize(
    "change, problem",
    [
        (
            {"metrics": ["l1", "class_fid"]},
            r"evaluation.metrics \['class_fid'\] do not score paired images \(they score images with classes\)",
        ),
        (
            {"metrics": ["fid"]},
            r"\['fid'\] of paired images are computed on a pretrained network's features \(data of kind 'pairs' "
            r"train no classifier\)",
        ),
    ],
)
def test_metrics_that_paired_data_cannot_give_are_refused(pix2pix_run, tmp_path, change, problem):
    from ganstudy.evaluate.paired import evaluate_pairs

    with pytest.raises(GanstudyError, match=problem):
        evaluate_pairs(
            HeldOutJob(
                pix2pix_run / "generator.pt",
                pix2pix_run / "run.json",
                pix2pix_run / "test.npz",
                EvaluationSettings.of({**SETTINGS, **change}),
                7,
                1,
                tmp_path / "s.json",
                1,
            )
        )
    assert not (tmp_path / "s.json").exists()


def test_pairs_of_another_shape_are_named(pix2pix_run, tmp_path):
    from ganstudy.data.arrays import Split, save_split
    from ganstudy.evaluate.paired import evaluate_pairs

    save_split(
        tmp_path / "small.npz",
        Split(np.zeros((2, 3, 8, 8), np.float32), np.zeros(2, np.int64), conditions=np.zeros((2, 3, 8, 8), np.float32)),
    )
    with pytest.raises(
        GanstudyError,
        match=r"holds inputs of shape \(3, 8, 8\), but the generator .* maps inputs of shape \(3, 64, 64\)",
    ):
        evaluate_pairs(
            HeldOutJob(
                pix2pix_run / "generator.pt",
                pix2pix_run / "run.json",
                tmp_path / "small.npz",
                EvaluationSettings.of(SETTINGS),
                7,
                1,
                tmp_path / "s.json",
                1,
            )
        )
