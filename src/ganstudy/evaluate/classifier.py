"""train_classifier: fit the dataset's CNN on the training split and record its test accuracy."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ganstudy.atomic import write_json
from ganstudy.checkpoint import load_state, save_state
from ganstudy.data.arrays import Split, load_split, file_digest
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.settings import ClassifierSettings
from ganstudy.models.classifier import ImageClassifier
from ganstudy.parallel.world import set_cpu_threads
from ganstudy.provenance import provenance_record
from ganstudy.seeding import derive_seed
from ganstudy.typed import as_dict

FORMAT = "ganstudy-classifier/1"


@torch.no_grad()
def accuracy(model: ImageClassifier, split: Split, batch_size: int = 1000) -> float:
    model.eval()
    images, labels = torch.from_numpy(split.images), torch.from_numpy(split.labels)
    correct = sum(
        int((model(images[i : i + batch_size]).argmax(1) == labels[i : i + batch_size]).sum())
        for i in range(0, len(labels), batch_size)
    )
    return correct / len(labels)


def fit_classifier(train: Split, epochs: int, batch_size: int, lr: float, seed: int) -> ImageClassifier:
    num_classes = int(train.labels.max()) + 1
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = ImageClassifier(train.image_shape, num_classes)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    rng = torch.Generator().manual_seed(seed)
    images, labels = torch.from_numpy(train.images), torch.from_numpy(train.labels)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(labels), generator=rng)
        for start in range(0, len(labels), batch_size):
            idx = order[start : start + batch_size]
            loss = F.cross_entropy(model(images[idx]), labels[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    model.eval()
    return model


def save_classifier(path: str | os.PathLike[str], model: ImageClassifier) -> None:
    save_state(
        path,
        {
            "format": FORMAT,
            "image_shape": list(model.image_shape),
            "num_classes": model.num_classes,
            "state_dict": model.state_dict(),
        },
    )


def load_classifier(path: str | os.PathLike[str]) -> ImageClassifier:
    remedy = "delete it and rerun the train_classifier rule"
    state = load_state(path, remedy)
    if state.get("format") != FORMAT:
        raise GanstudyError(f"{path} is not a ganstudy classifier (format {state.get('format')!r}); {remedy}")
    model = ImageClassifier(tuple(state["image_shape"]), state["num_classes"])
    model.load_state_dict(state["state_dict"])
    model.eval()
    return model


def train_classifier(
    train_path: str | os.PathLike[str],
    test_path: str | os.PathLike[str],
    settings: ClassifierSettings,
    study_seed: int,
    model_path: str | os.PathLike[str],
    metrics_path: str | os.PathLike[str],
    threads: int,
) -> dict[str, Any]:
    set_cpu_threads(threads)
    train, test = load_split(train_path), load_split(test_path)
    seed = derive_seed(study_seed, "classifier")
    started = time.perf_counter()
    model = fit_classifier(train, settings.epochs, settings.batch_size, settings.lr, seed)
    seconds = time.perf_counter() - started
    test_accuracy = accuracy(model, test)
    if test_accuracy < settings.min_accuracy:
        raise GanstudyError(
            f"the classifier reached test accuracy {test_accuracy:.4f}, below classifier.min_accuracy="
            f"{settings.min_accuracy}; FID/IS from it would be meaningless: raise classifier.epochs or lr"
        )
    save_classifier(model_path, model)
    record = provenance_record(
        "train_classifier",
        as_dict(settings),
        study_seed=study_seed,
        seed=seed,
        train_accuracy=accuracy(model, train),
        test_accuracy=test_accuracy,
        train_seconds=seconds,
        weights_sha256=file_digest(model_path),
        model_file=Path(model_path).name,
    )
    write_json(metrics_path, record)
    return record
