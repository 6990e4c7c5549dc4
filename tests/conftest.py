"""Shared fixtures: the repository, the prepared digits data and a trained classifier."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ganstudy.config import load_study_config

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def env() -> dict[str, str]:
    """Environment for subprocesses: this interpreter's scripts (ganstudy, snakemake, mpiexec) first."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


@pytest.fixture()
def default_config() -> dict:
    return load_study_config(REPO / "config" / "config.yaml", SCHEMA)


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ganstudy.data.prepare import prepare_dataset

    out = tmp_path_factory.mktemp("digits")
    prepare_dataset("digits", None, 0.2, 2026, out)
    return out


@pytest.fixture(scope="session")
def classifier_path(digits_dir: Path) -> Path:
    from ganstudy.evaluate.classifier import train_classifier

    settings = {"epochs": 40, "batch_size": 64, "lr": 1e-3, "min_accuracy": 0.0}
    model = digits_dir / "classifier.pt"
    train_classifier(digits_dir / "train.npz", digits_dir / "test.npz", settings, 2026, model, digits_dir / "classifier.json", 1)
    return model
