"""train_classifier: fit the dataset's CNN on the training split and record its test accuracy."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ganstudy.config.typed import as_dict
from ganstudy.core.atomic import atomic_path, write_json
from ganstudy.core.checkpoint import load_state, save_state
from ganstudy.core.provenance import provenance_record
from ganstudy.core.seeding import derive_seed
from ganstudy.data.arrays import Split, file_digest, load_split
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.settings import ClassifierSettings
from ganstudy.evaluate.weights import checked_digest
from ganstudy.models.classifier import ImageClassifier
from ganstudy.parallel.world import set_cpu_threads

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
    if num_classes < 2:
        raise GanstudyError(
            "the training split has one class: a classifier would have nothing to separate and its "
            "FID/IS would be meaningless; set classifier.weights to a classifier trained on images of "
            "several classes, or score on Inception (evaluation.extractor: inception)"
        )
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


def load_classifier(
    path: str | os.PathLike[str], remedy: str = "delete it and rerun the train_classifier rule"
) -> ImageClassifier:
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
    if settings.weights is not None:
        return adopt_classifier(train, test, settings, study_seed, model_path, metrics_path)
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


def adopt_classifier(
    train: Split,
    test: Split,
    settings: ClassifierSettings,
    study_seed: int,
    model_path: str | os.PathLike[str],
    metrics_path: str | os.PathLike[str],
) -> dict[str, Any]:
    """The user's classifier (classifier.weights, a file train_classifier wrote for other data, e.g. the
    same images with their other classes) as the study's: data of one class train none, and studies that
    share one score in the same features. Its test accuracy is measured, and min_accuracy applied, only
    where its classes are the data's (the same number); its predicted class shares of the test split are
    recorded either way."""
    weights = Path(settings.weights)
    remedy = "set classifier.weights to a file that `ganstudy train-classifier` wrote"
    if not weights.is_file():
        raise GanstudyError(f"classifier.weights {str(weights)!r} is not a file; {remedy}")
    digest = checked_digest(weights, settings.sha256, "classifier.sha256", "copy the intended classifier again")
    model = load_classifier(weights, remedy)
    if tuple(model.image_shape) != train.image_shape:
        raise GanstudyError(
            f"classifier.weights {weights} reads images of shape {tuple(model.image_shape)}, the study's data are "
            f"{train.image_shape}: set dataset.image_size and channels to the classifier's or give one trained on "
            "images of this shape"
        )
    data_classes = int(max(train.labels.max(), test.labels.max())) + 1
    test_accuracy = accuracy(model, test) if model.num_classes == data_classes else None
    if test_accuracy is not None and test_accuracy < settings.min_accuracy:
        raise GanstudyError(
            f"classifier.weights {weights} reaches test accuracy {test_accuracy:.4f} on this study's data, below "
            f"classifier.min_accuracy={settings.min_accuracy}: FID/IS from it would be meaningless here"
        )
    with torch.no_grad():
        predicted = torch.cat(
            [model(torch.from_numpy(test.images[i : i + 1000])).argmax(1) for i in range(0, len(test.labels), 1000)]
        )
    shares = torch.bincount(predicted, minlength=model.num_classes).double() / len(predicted)
    with atomic_path(model_path) as tmp:
        shutil.copyfile(weights, tmp)
    record = provenance_record(
        "train_classifier",
        as_dict(settings),
        study_seed=study_seed,
        weights=str(weights.resolve()),
        num_classes=model.num_classes,
        test_accuracy=test_accuracy,
        test_predicted_shares=[round(float(share), 6) for share in shares],
        weights_sha256=digest,
        model_file=Path(model_path).name,
    )
    write_json(metrics_path, record)
    return record
