"""Feature extractors: the data set's classifier, or a pretrained network from a local weights file
(ganstudy/config/pretrained.py: Inception-v3, DINOv2, CLIP), all run by torch-fidelity (``fidelity_extractor.py``,
imported when features are extracted: a process that only names an extractor, a training rank, does
not pay torch-fidelity's import).

torch-fidelity keys cached statistics by extractor name only, so the name carries the weights'
hash: a retrained classifier is a different extractor and never meets stale statistics.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ganstudy.config.pretrained import PRETRAINED
from ganstudy.data.arrays import file_digest
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.weights import check_weights
from ganstudy.parallel.determinism import configure_determinism, configure_tf32
from ganstudy.parallel.world import no_cuda_problem


@dataclass(frozen=True)
class Extractor:
    """A feature extractor and its weights file: the data set's classifier (layers penultimate,
    logits) or a pretrained network (``kind`` a key of pretrained.PRETRAINED: inception with layers 2048
    and logits_unbiased, dinov2 or clip with one layer of their name)."""

    kind: str
    weights: Path
    # Hashed once when the extractor is made: a pretrained file is 95 MB to 1.1 GB, and the name and
    # every score record need the digest.
    sha256: str

    @property
    def name(self) -> str:
        return f"ganstudy-{self.kind}-{self.sha256[:16]}"

    def protocol(self, layers: list[str], image_size: tuple[int, int]) -> dict[str, object]:
        """How this extractor read the images, for the score file: a FID is comparable with another only
        under the same weights, layer, resize and precision."""
        if self.kind in PRETRAINED:
            read = f"{image_size[0]}x{image_size[1]} {PRETRAINED[self.kind].reads}"
        else:
            read = f"{image_size[0]}x{image_size[1]} uint8 as generated, no resize, scaled to [-1, 1]"
        return {"kind": self.kind, "sha256": self.sha256, "layers": sorted(layers), "input": read, "dtype": "float32"}

    def features(
        self, images: torch.Tensor, layers: list[str], batch_size: int, device: str = "cpu"
    ) -> dict[str, torch.Tensor]:
        """The requested layers' features of uint8 ``images``, extracted by torch-fidelity on ``device``
        (``cpu``, or ``cuda``: the job's GPU) and returned on the CPU."""
        from ganstudy.evaluate.fidelity_extractor import extract_features

        return extract_features(self.kind, self.name, self.weights, images, layers, batch_size, device == "cuda")


def scoring_device(name: str) -> str:
    """The device a scoring job extracts features on: ``cpu``, or ``cuda`` (the job's GPU), refused where
    torch finds none, naming what the scheduler gave the job. On the GPU the features are float32, as the
    scores' protocol says (torch would run cuDNN's convolutions in TF32), and the same bits on rerun."""
    if name != "cpu" and not torch.cuda.is_available():
        problem = no_cuda_problem(
            "a scoring job",
            "job",
            "it was told --device cuda (the plan gives a scoring job a GPU where evaluation.extractor is a network "
            "and the site has GPUs)",
        )
        raise GanstudyError(
            f"{problem} Check that the partition or queue has GPU nodes and that torch is a CUDA build, or set "
            "compute.device: cpu to score (and train) on the CPU"
        )
    if name == "cuda":
        configure_tf32(torch.device(name), False)
        configure_determinism(torch.device(name), True)
    return name


def classifier_extractor(path: str | os.PathLike[str]) -> Extractor:
    return Extractor("classifier", Path(path), file_digest(path))


def pretrained_extractor(kind: str, path: str | os.PathLike[str] | None, expected_sha256: str | None) -> Extractor:
    """Pretrained network ``kind`` (evaluation.extractor) from its weights file, checked."""
    return Extractor(kind, Path(path), check_weights(kind, path, expected_sha256))


def inception_extractor(path: str | os.PathLike[str] | None, expected_sha256: str | None) -> Extractor:
    return pretrained_extractor("inception", path, expected_sha256)
