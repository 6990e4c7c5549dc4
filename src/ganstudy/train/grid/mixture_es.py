"""The mixture's (1+1)-ES (seed 002): candidate weight vectors of a neighbourhood's generators, each
scored by the FID of its mixture's images on the same noise.

Every candidate gives component k a contiguous share of the noise rows (``proportional_counts``), and
the current and mutated weights differ by little, so their shares overlap almost entirely: each
component turns the hull of the candidates' shares into images once, and the classifier sees each
image once. Two candidates then cost about one mixture's sampling and features instead of two
(the classifier's cost per image does not fall with batching: 3.0-3.5 ms per 250 digits at batch
sizes 250 to 8,000, AMD EPYC, one thread), and each candidate's FID is that of its own images.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from ganstudy.evaluate.fid import FidScorer
from ganstudy.models.mixture import proportional_counts
from ganstudy.train.grid.population import Payload


@dataclass(frozen=True)
class MixtureStep:
    """One cell's candidates (the current weights first) of the mixture of ``generators`` on ``z``."""

    generators: list[Payload]
    z: torch.Tensor  # [samples, latent]
    candidates: list[np.ndarray]

    @cached_property
    def _bounds(self) -> list[np.ndarray]:
        return [np.cumsum([0, *proportional_counts(w, len(self.z))]) for w in self.candidates]

    @cached_property
    def spans(self) -> list[tuple[int, int]]:
        """Per component, the rows of ``z`` that some candidate gives it: the hull of their shares."""
        return [
            (int(min(b[k] for b in self._bounds)), int(max(b[k + 1] for b in self._bounds)))
            for k in range(len(self.generators))
        ]

    def rows(self) -> list[np.ndarray]:
        """Per candidate, its images' rows in the components' span images laid end to end."""
        offsets = np.cumsum([0, *(end - start for start, end in self.spans)])
        return [
            np.concatenate(
                [
                    np.arange(offsets[k] + b[k] - start, offsets[k] + b[k + 1] - start)
                    for k, (start, _) in enumerate(self.spans)
                ]
            )
            for b in self._bounds
        ]


def candidate_fids(scorer: FidScorer, step: MixtureStep, features: np.ndarray) -> list[float]:
    """Each candidate's FID, from the classifier's features of the components' span images: one pass of
    the classifier serves both candidates."""
    return [scorer.distance(features[rows]) for rows in step.rows()]
