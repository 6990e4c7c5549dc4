"""What a study needs from its user before it can run: the data set's files where the workflow cannot
fetch them, the Inception weights where FID is on Inception features, and a classifier the study names. Free of torch: the workflow
lists them while it plans, so that a dry-run shows the whole study and what to provide."""

from __future__ import annotations

import os
from typing import Any

from ganstudy.data.loaders import get_dataset
from ganstudy.data.sources import SOURCES
from ganstudy.evaluate.weights import INCEPTION_URL


def missing_user_inputs(config: dict[str, Any]) -> list[str]:
    """One line per missing file or folder: the key that names it, and what to put there and how to get it."""
    missing = []
    name, path = config["dataset"]["name"], config["dataset"]["path"]
    # Standard data sets are fetched by the workflow's fetch_dataset rule.
    if name not in SOURCES and path and not os.path.exists(path):
        provide = get_dataset(name).provide or f"the files data set '{name}' reads"
        missing.append(f"dataset.path {path} (data set '{name}'): {provide}")
    evaluation = config["evaluation"]
    weights = evaluation["inception_weights"]
    if evaluation["extractor"] == "inception" and not (weights and os.path.isfile(weights)):
        checksum = f" (sha256 starting {evaluation['inception_sha256']})" if evaluation["inception_sha256"] else ""
        missing.append(f"evaluation.inception_weights {weights}: torch-fidelity's Inception weights{checksum}; on a machine "
                       f"with internet download {INCEPTION_URL} and copy it there (nothing is downloaded at run time)")
    classifier = config["classifier"]["weights"]
    if classifier and not os.path.isfile(classifier):
        missing.append(f"classifier.weights {classifier}: the classifier to score with, a classifier.pt that `ganstudy "
                       "train-classifier` wrote (e.g. another study's results/<study>/classifier/classifier.pt)")
    return missing
