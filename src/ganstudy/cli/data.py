"""Stage 1's steps (and the classifier's): prepare, train-classifier, reference-stats, smote-samples, anova."""

from __future__ import annotations

import argparse
import json

from ganstudy.cli.options import (
    Commands,
    device_option,
    spec_option,
    threads_option,
)
from ganstudy.errors import GanstudyError


def _prepare(args: argparse.Namespace) -> None:
    from ganstudy.data.prepare import prepare_dataset
    from ganstudy.data.settings import DatasetSettings

    spec = args.spec
    s = DatasetSettings.of(spec.settings, spec.path)
    manifest = prepare_dataset(
        s.name, s.path, s.test_fraction, spec.seed, args.out_dir, s.load_options(), s.smote, spec.settings
    )
    print(json.dumps(manifest["class_counts"]))


def _prepare_command(commands: Commands) -> None:
    sub = commands.step("prepare", _prepare, "load a data set, normalise it and split it into train/test")
    spec_option(sub, "dataset")
    sub.add_argument("--out-dir", required=True)


def _train_classifier(args: argparse.Namespace) -> None:
    from ganstudy.evaluate.classifier import train_classifier
    from ganstudy.evaluate.settings import ClassifierSettings

    spec = args.spec
    settings = ClassifierSettings.of(spec.settings, spec.path)
    record = train_classifier(args.train, args.test, settings, spec.seed, args.model, args.metrics, args.threads)
    if record["test_accuracy"] is None:
        shares = ", ".join(f"{share:.3f}" for share in record["test_predicted_shares"])
        print(
            f"classifier {record['weights']}: its classes are not the data's; test images per class it assigns: "
            f"{shares}"
        )
    else:
        print(f"classifier test accuracy {record['test_accuracy']:.4f}")


def _train_classifier_command(commands: Commands) -> None:
    sub = commands.step("train-classifier", _train_classifier, "train the dataset's CNN classifier (FID/IS features)")
    spec_option(sub, "classifier")
    sub.add_argument("--train", required=True)
    sub.add_argument("--test", required=True)
    sub.add_argument("--model", required=True, help="output: classifier weights")
    sub.add_argument("--metrics", required=True, help="output: accuracy and provenance JSON")
    threads_option(sub)


def _reference_stats(args: argparse.Namespace) -> None:
    from ganstudy.evaluate.extractor import classifier_extractor, scoring_device
    from ganstudy.evaluate.scores import reference_statistics
    from ganstudy.evaluate.scoring import quality_extractor
    from ganstudy.evaluate.settings import EvaluationSettings

    settings = EvaluationSettings.of(args.spec.settings, args.spec.path)
    device = scoring_device(args.device)
    if args.extractor == "classifier":
        if not args.classifier:
            raise GanstudyError("reference-stats --extractor classifier needs --classifier: the data set's classifier")
        extractor, layer = classifier_extractor(args.classifier), settings.fid_features
    else:
        extractor, layer, _ = quality_extractor(settings, args.classifier)
    reference_statistics(args.split, extractor, layer, settings.batch_size, args.out, args.threads, device)


def _reference_stats_command(commands: Commands) -> None:
    sub = commands.step("reference-stats", _reference_stats, "FID statistics of the real images")
    spec_option(sub, "evaluation", seeded=False)
    sub.add_argument("--split", required=True)
    sub.add_argument(
        "--classifier", help="the data set's classifier (needed unless --extractor quality is a pretrained network)"
    )
    sub.add_argument(
        "--extractor",
        choices=["classifier", "quality"],
        default="classifier",
        help="classifier: the classifier's statistics (per-class scores, in-training FID); quality: those of "
        "evaluation.extractor (FID, IS, KID, precision, recall)",
    )
    sub.add_argument("--out", required=True)
    threads_option(sub)
    device_option(sub)


def _smote_samples(args: argparse.Namespace) -> None:
    from ganstudy.report.images import real_vs_smote

    real_vs_smote(args.train, args.out)


def _smote_samples_command(commands: Commands) -> None:
    sub = commands.step("smote-samples", _smote_samples, "grid of real vs SMOTE training images, a row pair per class")
    sub.add_argument("--train", required=True, help="prepared training split")
    sub.add_argument("--out", required=True)


def _anova(args: argparse.Namespace) -> None:
    from ganstudy.stats.anova import write_anova

    print(write_anova(args.split, args.csv, args.markdown).to_string(index=False))


def _anova_command(commands: Commands) -> None:
    sub = commands.step("anova", _anova, "ANOVA of pixel intensity between vs within classes, per channel")
    sub.add_argument("--split", required=True, help="prepared split")
    sub.add_argument("--csv", required=True)
    sub.add_argument("--markdown", required=True)


def register(commands: Commands) -> None:
    """Steps of the data set: prepared splits, the classifier and the real images' statistics."""
    _prepare_command(commands)
    _train_classifier_command(commands)
    _reference_stats_command(commands)
    _smote_samples_command(commands)
    _anova_command(commands)
