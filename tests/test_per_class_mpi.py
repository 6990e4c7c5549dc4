"""Per-class training under mpiexec: every class once, balanced ranks, the same bits on any rank
count, resume after SIGKILL on another rank count, and a clear error for too many ranks."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import SCHEMA, assert_same_generators, train_command
from ganstudy.config.validate import validate_study_config
from ganstudy.data.arrays import load_split
from ganstudy.models.artifact import load_generator, sample_labelled
from ganstudy.parallel.rank_work import assign_classes
from jobs import kill_job, start_job, wait_for

pytestmark = pytest.mark.mpi

TINY = {
    "mode": "per_class",
    "network": "dcgan",
    "iterations": 2,
    "latent_dim": 16,
    "batch_size": 32,
    "checkpoint_period": 0,
    "score_period": 0,
}


def settings(**keys) -> dict:
    return validate_study_config({"setups": {"p": {**TINY, **keys}}}, SCHEMA)["setups"]["p"]


def command(
    ranks: int, setup: dict, out: Path, digits_dir: Path, checkpoints: Path | None = None, **compute
) -> list[str]:
    return train_command(
        setup, digits_dir / "train.npz", out, seed=5, ranks=ranks, name="p", checkpoints=checkpoints, **compute
    )


def train(ranks: int, setup: dict, out: Path, digits_dir: Path, env: dict, checkpoints: Path | None = None):
    done = subprocess.run(
        command(ranks, setup, out, digits_dir, checkpoints), capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def classes_table(out: Path) -> list[dict[str, str]]:
    with (out / "classes.csv").open() as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def counts(digits_dir) -> dict[int, int]:
    labels, sizes = np.unique(load_split(digits_dir / "train.npz").labels, return_counts=True)
    return dict(zip(labels.tolist(), sizes.tolist()))


@pytest.fixture(scope="module")
def runs(digits_dir, env, tmp_path_factory) -> dict[int, Path]:
    folder = tmp_path_factory.mktemp("per_class")
    outs = {}
    for ranks in (1, 2, 3):
        outs[ranks] = folder / f"n{ranks}"
        train(ranks, settings(), outs[ranks], digits_dir, env)
    return outs


def test_every_class_is_trained_exactly_once_on_its_balanced_rank(runs, counts):
    for ranks, out in runs.items():
        table = classes_table(out)
        assert sorted(int(row["class"]) for row in table) == sorted(counts)
        expected = {label: rank for rank, block in enumerate(assign_classes(counts, ranks)) for label in block}
        assert {int(row["class"]): int(row["rank"]) for row in table} == expected
        assert {int(row["class"]): int(row["images"]) for row in table} == counts
        record = json.loads((out / "run.json").read_text())
        assert record["world_size"] == ranks
        assert sorted(label for block in record["class_assignment"] for label in block) == sorted(counts)
        # Two passes per class, each logged once.
        losses = list(csv.DictReader((out / "losses.csv").open()))
        assert sorted((int(r["class"]), int(r["iteration"])) for r in losses) == [
            (c, i) for c in sorted(counts) for i in (1, 2)
        ]


def test_the_generators_are_bit_identical_on_1_2_and_3_ranks(runs):
    assert_same_generators(runs[1], runs[2])
    assert_same_generators(runs[1], runs[3])


def test_the_bundle_samples_classes_in_proportion_to_the_training_prior(runs, counts):
    mixture, spec = load_generator(runs[2] / "generator.pt")
    total = sum(counts.values())
    assert mixture.weights == pytest.approx([counts[c] / total for c in sorted(counts)])
    samples = 1000
    images, labels = sample_labelled(mixture, spec.latent_dim, samples, seed=3, batch_size=128)
    assert images.shape == (samples, 1, 8, 8) and labels.shape == (samples,)
    histogram = np.bincount(labels.numpy(), minlength=10)
    # Exact proportions (largest remainder), far inside the sampling error sqrt(n p (1-p)) ~ 9.
    for label, count in counts.items():
        assert abs(histogram[label] - samples * count / total) <= 1


def test_more_ranks_than_classes_fails_and_says_so(digits_dir, env, tmp_path):
    done = subprocess.run(
        command(11, settings(), tmp_path, digits_dir), capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode != 0
    assert "11 MPI ranks for 10 classes would leave 1 rank(s) without a class; launch at most 10 ranks" in done.stderr
    assert not (tmp_path / "run.json").exists()


def test_a_killed_run_resumes_on_another_rank_count_bit_identical(digits_dir, env, tmp_path):
    setup = settings(iterations=6, checkpoint_period=1, checkpoints_kept=2)
    train(1, setup, tmp_path / "whole", digits_dir, env)
    checkpoints = tmp_path / "ckpt"
    job = start_job(command(2, setup, tmp_path / "resumed", digits_dir, checkpoints), env)
    wait_for(lambda: len(list(checkpoints.glob("class*/iter-*/COMPLETE"))) >= 3, job)
    kill_job(job)
    assert not (tmp_path / "resumed" / "run.json").exists()
    done = train(3, setup, tmp_path / "resumed", digits_dir, env, checkpoints)
    assert "resumed from the checkpoint of iteration" in done.stderr
    assert_same_generators(tmp_path / "whole", tmp_path / "resumed")
    assert os.listdir(checkpoints) == ["finished"]
