"""A training run whose losses stop being finite is an outcome of its trial, not a failed job: it ends with every
output of the train rule, marked diverged in run.json, its scores are inf in every metric (worse than any finite
score in the rank tests), and status, convergence, aggregate and scoring read the mark. Per-class runs record the
same classes at any rank count."""

from __future__ import annotations

import math
import subprocess

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from conftest import SCHEMA, spec_file, train_command
from ganstudy.config.validate import validate_study_config
from ganstudy.core.atomic import read_json, write_json
from ganstudy.data.arrays import Split, load_split, save_split
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.scores import evaluate_generator
from ganstudy.evaluate.settings import EvaluationSettings
from ganstudy.models.artifact import load_generator, save_generator
from ganstudy.report.status import status_table, trial_status
from ganstudy.stats.aggregate import read_scores
from ganstudy.stats.convergence import convergence_notes, convergence_table
from ganstudy.train.progress import score_columns
from test_workflow import snakemake

# An Adam step of 1e36 overflows the perceptron's and DC-GAN's float32 activations in the first iteration.
UNSTABLE = {"lr": 1e36, "iterations": 3, "score_period": 0}
EVALUATION = {"samples": 100, "batch_size": 50, "isc_splits": 2, "metrics": ["fid", "isc"]}


def _setup(**keys) -> dict:
    return validate_study_config({"setups": {"s": keys}}, SCHEMA)["setups"]["s"]


def _evaluation() -> dict:
    return validate_study_config({"evaluation": EVALUATION}, SCHEMA)["evaluation"]


def _train(setup: dict, digits_dir, out, env, ranks: int | None = None, name: str = "s") -> subprocess.CompletedProcess:
    command = train_command(setup, digits_dir / "train.npz", out, seed=3, ranks=ranks, name=name)
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _evaluate(run, out, env) -> dict:
    """``ganstudy evaluate`` as the workflow calls it; a diverged run needs neither classifier nor reference."""
    command = [
        "ganstudy",
        "evaluate",
        "--generator",
        str(run / "generator.pt"),
        "--run-record",
        str(run / "run.json"),
        "--spec",
        spec_file(out.parent / "evaluation.json", "evaluation", _evaluation(), seed=3),
        "--trial",
        "0",
        "--out",
        str(out),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return read_json(out)


@pytest.fixture(scope="module")
def diverged_run(digits_dir, tmp_path_factory, env):
    """A single-pair run that diverges at its first iteration, with the log of its job."""
    run = tmp_path_factory.mktemp("diverged") / "runs" / "unstable" / "trial0"
    done = _train(_setup(**UNSTABLE), digits_dir, run, env, name="unstable")
    return run, done.stderr


def test_a_run_whose_losses_stop_being_finite_ends_as_an_outcome_with_every_output(diverged_run):
    run, log = diverged_run
    assert sorted(p.name for p in run.iterdir()) == [
        "generator.pt",
        "losses.csv",
        "profile.csv",
        "run.json",
        "samples.png",
    ]
    record = read_json(run / "run.json")
    assert record["outcome"] == "diverged" and record["setup_name"] == "unstable"
    assert record["diverged"] == {"pair": {"iteration": 1, "iterations": 3, "d_loss": math.inf, "g_loss": math.inf}}
    assert "lower the set-up's lr (now 1e+36)" in record["diverged_message"]
    # The provenance of a finished run is there too: a diverged trial is still a result of its machine.
    assert record["hardware"] and record["train_seconds"] > 0 and record["versions"]["torch"]
    losses = pd.read_csv(run / "losses.csv")
    assert list(losses.iteration) == [1] and np.isinf(losses.d_loss.iloc[-1]) and np.isinf(losses.g_loss.iloc[-1])
    assert set(pd.read_csv(run / "profile.csv").routine) == {"train"}
    with Image.open(run / "samples.png") as picture:
        assert picture.size[0] == 256 and len(np.unique(np.asarray(picture))) > 1  # the notice, not a blank
    assert "The trial diverged (pair after iteration 1 of 3): an outcome of the study, not a failed job" in log
    with pytest.raises(GanstudyError, match=r"generator.pt holds no generator: its training run diverged \(pair after"):
        load_generator(run / "generator.pt")


def test_a_diverged_run_scores_inf_in_every_metric_and_says_why(diverged_run, tmp_path, env):
    run, _ = diverged_run
    record = _evaluate(run, tmp_path / "scores.json", env)
    assert record["scores"] == {"fid": math.inf, "isc": math.inf} and record["outcome"] == "diverged"
    assert record["notes"] == {"diverged": "training diverged (pair after iteration 1 of 3)"}
    assert (
        record["setup_name"] == "unstable" and record["train_seconds"] == read_json(run / "run.json")["train_seconds"]
    )


def test_aggregate_keeps_a_diverged_trial_s_inf_where_the_scored_trials_have_the_column(tmp_path):
    def score_file(name: str, trial: int, scores: dict, **facts) -> str:
        path = tmp_path / f"{name}{trial}.json"
        write_json(path, {"setup_name": name, "trial": trial, "scores": scores, "train_seconds": 1.0, **facts})
        return str(path)

    # class_fid: a column the unlabelled generators of the study leave out; isc_std: one a metric adds.
    paths = [
        score_file("stable", 0, {"fid": 3.0, "isc": 2.0, "isc_std": 0.1}),
        score_file("unstable", 0, dict.fromkeys(["fid", "isc", "class_fid"], math.inf), outcome="diverged"),
    ]
    table = read_scores("s", paths)
    unstable = table[table.setup == "unstable"]
    assert sorted(unstable.metric) == ["fid", "isc"] and np.isinf(unstable.value).all()
    # A study whose every trial diverged keeps each of their columns.
    only = read_scores("s", paths[1:])
    assert sorted(only.metric) == ["class_fid", "fid", "isc"]


def test_status_lists_a_diverged_trial_as_an_outcome_with_where_it_stopped(diverged_run):
    run, _ = diverged_run
    study = run.parents[2]
    row = trial_status(study, "unstable", 0, 3, score_columns())
    assert row.state == "diverged" and row.iteration == 1
    assert row.note == "losses not finite: pair after iteration 1 of 3 (an outcome: its scores are inf, ranked worst)"
    assert status_table([row]).endswith("1 runs: 1 diverged")


def test_convergence_leaves_diverged_runs_out_of_the_curves_and_counts_them(tmp_path):
    iterations = np.arange(1, 41)
    paths = []
    for setup, trial, outcome in (("a", 0, "finished"), ("a", 1, "diverged"), ("b", 0, "diverged")):
        run = tmp_path / "runs" / setup / f"trial{trial}"
        run.mkdir(parents=True)
        fid = 5 + 20 * np.exp(-iterations / 4.0) if outcome == "finished" else np.full(40, 1e6)
        pd.DataFrame({"iteration": iterations, "d_loss": 1.0, "g_loss": 1.0, "fid": fid}).to_csv(
            run / "losses.csv", index=False
        )
        write_json(run / "run.json", {"outcome": outcome, "diverged": {"pair": {"iteration": 40, "iterations": 40}}})
        paths.append(str(run / "losses.csv"))
    table = convergence_table(paths, ["a", "b"], 0.05, 0.25).set_index("setup")
    # Set-up a is judged on its finished trial only: the diverged one's huge curve would have made it "no".
    assert table.loc["a", ["trials", "diverged", "converged"]].tolist() == [1, 1, "yes"]
    assert table.loc["b", ["trials", "diverged", "converged"]].tolist() == [0, 1, "–"]
    notes = convergence_notes(table.reset_index())
    assert notes == {"b": "not judged: all 1 of its runs diverged (losses not finite), so none has a curve"}


def test_a_generator_whose_samples_are_not_finite_scores_as_diverged(digits_dir, scoring, tmp_path, env):
    """A run that diverged without its losses showing it (a grid's chosen mixture, a plugin's mode): the scores of
    its quantised NaN pixels would be numbers; they are inf, with the reason."""
    classifier, reference = scoring
    run = tmp_path / "run"
    _train(_setup(iterations=1, score_period=0), digits_dir, run, env)
    generator, spec = load_generator(run / "generator.pt")
    with torch.no_grad():
        for parameter in generator.parameters():
            parameter.fill_(math.nan)
    save_generator(run / "generator.pt", generator, "perceptron4", spec)
    settings = EvaluationSettings.of(_evaluation(), "evaluation")
    record = evaluate_generator(
        run / "generator.pt", run / "run.json", classifier, reference, settings, 3, 0, tmp_path / "s.json", 1
    )
    assert record["scores"] == {"fid": math.inf, "isc": math.inf} and record["outcome"] == "diverged"
    assert record["notes"]["diverged"].endswith("sample values are not finite: its weights diverged in training")


@pytest.mark.mpi
def test_a_per_class_run_records_the_classes_that_diverged_the_same_at_any_rank_count(digits_dir, tmp_path, env):
    """One non-finite pixel in an image of classes 4 and 7: those two classes diverge at their first iteration,
    the others train to the end; the run is diverged, naming both, at 1 rank as at 3."""
    data = load_split(digits_dir / "train.npz")
    images = data.images.copy()
    for label in (4, 7):
        images[np.flatnonzero(data.labels == label)[0], 0, 3, 3] = np.nan
    save_split(tmp_path / "digits" / "train.npz", Split(images, data.labels))
    tiny = {"mode": "per_class", "network": "dcgan", "latent_dim": 16, "batch_size": 32, "checkpoint_period": 0}
    setup = _setup(**tiny, iterations=3, score_period=0)
    runs = {ranks: tmp_path / f"ranks{ranks}" for ranks in (1, 3)}
    for ranks, run in runs.items():
        _train(setup, tmp_path / "digits", run, env, ranks=ranks)
    one, three = (read_json(run / "run.json") for run in runs.values())
    assert one["outcome"] == three["outcome"] == "diverged" and one["world_size"] == 1 and three["world_size"] == 3
    assert one["diverged"] == three["diverged"]
    assert {name: facts["iteration"] for name, facts in one["diverged"].items()} == {"class4": 1, "class7": 1}
    assert one["diverged_message"].endswith("(and 1 more of the 10 classes)")
    losses = {ranks: pd.read_csv(run / "losses.csv") for ranks, run in runs.items()}
    assert losses[1].groupby("class").iteration.max().to_dict() == {c: 1 if c in (4, 7) else 3 for c in range(10)}
    columns = ["class", "iteration", "d_loss", "g_loss"]
    pd.testing.assert_frame_equal(losses[1][columns], losses[3][columns])


# Two trials each: the stable set-up's finite FIDs against the unstable one's diverged trials.
DIVERGING = {
    "study": "diverging",
    "trials": 2,
    "classifier": {"epochs": 3, "min_accuracy": 0.0},
    "setups": {"stable": {"loss": "bce", "iterations": 20}, "unstable": {"loss": "bce", "iterations": 20, "lr": 1e36}},
    "evaluation": EVALUATION,
}


@pytest.mark.workflow
def test_a_study_with_a_set_up_that_diverges_finishes_and_ranks_it_last(tmp_path, env):
    done = snakemake(tmp_path, DIVERGING, "--cores", "2", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    study = tmp_path / "results" / "diverging"
    scores = pd.read_csv(study / "scores.csv")
    unstable = scores[scores.setup == "unstable"]
    assert sorted(unstable.metric) == ["fid", "fid", "isc", "isc"] and np.isinf(unstable.value).all()
    assert np.isfinite(scores[scores.setup == "stable"].value).all()
    convergence = pd.read_csv(study / "convergence.csv").set_index("setup")
    assert convergence.loc["unstable", "diverged"] == 2 and convergence.loc["stable", "diverged"] == 0
    summary = pd.read_csv(study / "tables" / "summary_fid.csv").set_index("setup")
    assert "2 failed (2 inf), ranked worst" in summary.loc["unstable", "note"]
    page = (study / "summary.md").read_text()
    # 2 against 2 trials cannot decide at 0.05 (the smallest exact p is 1/3): the page ranks, and says so.
    assert "**stable** ranks first in FID" in page and "stable 2, unstable 2 (2 failed: 2 inf)" in page, page[:2000]
    status = subprocess.run(
        ["ganstudy", "status", str(study)], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path
    )
    assert "4 runs: 2 done, 2 diverged" in status.stdout, status.stdout + status.stderr
    # Nothing is left to do: a diverged trial is finished, not a job to retry.
    again = snakemake(tmp_path, DIVERGING, "-n", env=env)
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-2000:]


@pytest.mark.mpi
def test_a_data_parallel_run_that_diverges_ends_on_every_rank_alike(digits_dir, tmp_path, env):
    """Its losses are the ranks' mean: every rank sees them stop being finite at the same iteration and leaves
    the loop together, so no rank waits in a collective for one that left."""
    run = tmp_path / "run"
    _train(_setup(mode="data_parallel", batch_size=32, **UNSTABLE), digits_dir, run, env, ranks=2)
    record = read_json(run / "run.json")
    assert record["outcome"] == "diverged" and record["world_size"] == 2
    assert record["diverged"] == {"pair": {"iteration": 1, "iterations": 3, "d_loss": math.inf, "g_loss": math.inf}}
