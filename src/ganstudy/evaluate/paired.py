"""Scores of an image-to-image generator against its targets (pix2pix on a test split): L1, PSNR and
SSIM, on images in [0, 1] (data range 1), each the mean over images; and FID, IS, KID, precision and
recall of its outputs against the targets with Inception features.

The outputs are pix2pix's test.py's (without --eval): batch norm on the inputs' own statistics and
dropout on, since dropout is the generator's only noise; the dropout masks come from a seeded stream,
so a rerun gives the same outputs. test.py translates one input at a time, which matches a generator
trained at batch size 1; a generator whose batch norm saw more rows at once (a data-parallel global
batch of 2 synchronised over 2 ranks) translates its inputs in groups of that many
(TrainingSettings.batch_norm_rows), so that every set-up is scored with the statistics it trained with.

SSIM is Wang et al. (2004) as scikit-image's ``structural_similarity(gaussian_weights=True,
sigma=1.5, use_sample_covariance=False, data_range=1)`` computes it: an 11x11 Gaussian window
(sigma 1.5, truncated at 3.5 sigma), K1 0.01, K2 0.03, the mean over the positions where the window
fits inside the image and over the channels.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.contracts import HeldOutJob
from ganstudy.data.arrays import load_split
from ganstudy.data.kinds import PAIRS
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.held_out import open_job
from ganstudy.evaluate.metrics import score_all
from ganstudy.evaluate.scores import scored_on, write_scores
from ganstudy.evaluate.scoring import PairScoring, column_of

SIGMA = 1.5
RADIUS = int(3.5 * SIGMA + 0.5)
K1, K2 = 0.01, 0.03


def _window(channels: int) -> torch.Tensor:
    offsets = torch.arange(-RADIUS, RADIUS + 1, dtype=torch.float64)
    line = torch.exp(-(offsets**2) / (2 * SIGMA**2))
    line /= line.sum()
    # One separable 2D window per channel (a depthwise convolution).
    return torch.outer(line, line).expand(channels, 1, -1, -1).contiguous()


def ssim(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per image SSIM of (N, C, H, W) images in [0, 1]; computed in float64."""
    size = 2 * RADIUS + 1
    if min(outputs.shape[-2:]) < size:
        raise GanstudyError(
            f"SSIM's {size}x{size} window does not fit images of {tuple(outputs.shape[-2:])}: use images of at least "
            f"{size}x{size}"
        )
    x, y = outputs.double(), targets.double()
    window = _window(x.shape[1])

    def local_mean(image: torch.Tensor) -> torch.Tensor:
        # No padding: only positions where the window fits, the region scikit-image averages over.
        return F.conv2d(image, window, groups=image.shape[1])

    mu_x, mu_y = local_mean(x), local_mean(y)
    var_x = local_mean(x * x) - mu_x**2
    var_y = local_mean(y * y) - mu_y**2
    cov = local_mean(x * y) - mu_x * mu_y
    c1, c2 = K1**2, K2**2
    index = ((2 * mu_x * mu_y + c1) * (2 * cov + c2)) / ((mu_x**2 + mu_y**2 + c1) * (var_x + var_y + c2))
    return index.mean(dim=(1, 2, 3))


def paired_scores(outputs: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """L1, PSNR (dB) and SSIM of outputs against targets, (N, C, H, W) in [-1, 1], means over images.
    An output equal to its target has infinite PSNR, which the mean then is too."""
    if outputs.shape != targets.shape:
        raise GanstudyError(f"outputs {tuple(outputs.shape)} and targets {tuple(targets.shape)} differ in shape")
    x, y = (outputs.double() + 1) / 2, (targets.double() + 1) / 2
    l1 = (x - y).abs().mean(dim=(1, 2, 3))
    mse = ((x - y) ** 2).mean(dim=(1, 2, 3))
    psnr = 10 * torch.log10(1.0 / mse)
    return {"l1": float(l1.mean()), "psnr": float(psnr.mean()), "ssim": float(ssim(x, y).mean())}


@torch.no_grad()
def translate(generator: nn.Module, inputs: torch.Tensor, seed: int, rows: int) -> torch.Tensor:
    """The generator's output for each input in training mode (pix2pix's test.py), ``rows`` inputs at a
    time (the last group may be smaller), with dropout masks from ``seed``; the caller's random state is
    left as it was."""
    generator.train()
    with torch.random.fork_rng(devices=[inputs.device.index or 0] if inputs.device.type == "cuda" else []):
        torch.manual_seed(seed)
        return torch.cat([generator(group) for group in inputs.split(rows)])


def mean_l1(outputs: torch.Tensor, targets: torch.Tensor) -> float:
    """L1 of (N, C, H, W) images in [-1, 1] measured in [0, 1], as paired_scores reports it."""
    return float((outputs.double() - targets.double()).abs().mean() / 2)


class PairScorer:
    """A paired generator's in-training score: the L1 of its outputs for the first ``count`` held-out pairs
    (the test split) against their targets, run as evaluate_pairs runs it. It scores a plain copy of the
    generator's weights, so that neither a data-parallel rank's synchronised batch norm (which would wait
    for the other ranks) nor the training generator's running statistics are touched."""

    def __init__(
        self,
        pairs_path: str | os.PathLike[str],
        count: int,
        seed: int,
        network: nn.Module,
        device: torch.device,
        setup: TrainingSettings,
        ranks: int,
    ) -> None:
        pairs = load_split(pairs_path)
        if pairs.conditions is None:
            raise GanstudyError(
                f"{pairs_path} holds no input images: the in-training score of a paired generator needs the "
                "test split of a paired data set"
            )
        self.inputs = torch.from_numpy(pairs.conditions[:count]).to(device)
        self.targets = torch.from_numpy(pairs.images[:count]).to(device)
        self.seed, self.network, self.rows = seed, network.to(device), setup.batch_norm_rows(ranks)

    def score(self, generator: nn.Module) -> float:
        self.network.load_state_dict(generator.state_dict())
        return mean_l1(translate(self.network, self.inputs, self.seed, self.rows), self.targets)


def evaluate_pairs(job: HeldOutJob) -> dict[str, Any]:
    """Scores of one paired generator on the job's split (its conditions are the inputs, its images the
    targets) by evaluation.metrics: l1, psnr and ssim, and the quality metrics against the targets'
    Inception features, which the study's data (one class of pairs) gives no classifier for."""
    opened = open_job(job, PAIRS)
    pairs, spec, settings, seed = opened.split, opened.spec, job.settings, opened.seed
    if pairs.conditions is None or tuple(pairs.conditions.shape[1:]) != spec.condition_shape:
        found = None if pairs.conditions is None else tuple(pairs.conditions.shape[1:])
        raise GanstudyError(
            f"{job.split_path} holds inputs of shape {found}, but the generator {job.generator_path} maps "
            f"inputs of shape {spec.condition_shape}: score it on a split of the data set it was trained on"
        )
    run = opened.run
    rows = TrainingSettings.of(run["settings"], f"{job.run_record_path}'s settings").batch_norm_rows(
        run.get("world_size", 1)
    )
    inputs, targets = torch.from_numpy(pairs.conditions), torch.from_numpy(pairs.images)
    scoring = PairScoring(
        settings, seed, inputs, translate(opened.generator.components[0], inputs, seed, rows), targets, job.device
    )
    scores = score_all(settings.metrics, scoring)
    extractor = scoring.extractor_used()
    return write_scores(
        job.out_path,
        settings,
        run,
        job.trial,
        seed,
        scores,
        notes=scoring.notes,
        pairs=len(targets),
        batch_norm_rows=rows,
        **scoring.facts,
        extractor=None if extractor is None else extractor.name,
        extractor_sha256=None if extractor is None else extractor.sha256,
        protocol=scoring.protocol(Path(job.split_path).stem),
        scored_on=scored_on(job.device),
    )


def _paired(scoring: PairScoring) -> dict[str, float]:
    return scoring.once("paired scores", lambda: paired_scores(scoring.outputs, scoring.targets))


l1 = column_of(_paired, "l1")
psnr = column_of(_paired, "psnr")
ssim_metric = column_of(_paired, "ssim")
