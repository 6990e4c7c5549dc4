import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

from conftest import REPO, SCHEMA, train_command
from ganstudy.config.setup_settings import TrainingSettings
from ganstudy.config.validate import validate_study_config
from ganstudy.core.procfs import FLOAT_FLAGS
from ganstudy.core.provenance import float_path
from ganstudy.data.arrays import Split, load_split
from ganstudy.errors import GanstudyError
from ganstudy.models.artifact import load_generator, sample_generator
from ganstudy.parallel.world import mpi_world
from ganstudy.registry import source_sha256
from ganstudy.train.job import job_description, job_settings, read_job, write_job
from ganstudy.train.modes import TrainingContext, get_mode
from ganstudy.train.run import run_training


def _setup(**overrides):
    # No in-training FID unless a test asks: these runs have no classifier.
    return validate_study_config({"setups": {"s": {"score_period": 0, **overrides}}}, SCHEMA)["setups"]["s"]


def _train(setup, data, seed, trial):
    context = TrainingContext(
        TrainingSettings.of(job_settings(setup)), data, seed, trial, mpi_world(), torch.device("cpu")
    )
    return get_mode(setup["mode"])(context)


def _state(result):
    return {k: v.clone() for k, v in result.generator.state_dict().items()}


def test_single_mode_is_bit_reproducible_and_trial_dependent(digits_dir):
    data = load_split(digits_dir / "train.npz")
    setup = _setup(iterations=2)
    first, again, other = (_train(setup, data, 2026, t) for t in (0, 0, 1))
    for key, value in _state(first).items():
        assert torch.equal(value, _state(again)[key])
    assert not all(torch.equal(v, _state(other)[k]) for k, v in _state(first).items())
    assert [h["iteration"] for h in first.history] == [1, 2]
    assert first.history == [{**h, "seconds": first.history[i]["seconds"]} for i, h in enumerate(again.history)]


def test_batch_larger_than_the_data_is_a_clear_error(digits_dir):
    data = load_split(digits_dir / "train.npz")
    small = Split(data.images[:50], data.labels[:50])
    with pytest.raises(GanstudyError, match="batch_size 100 is larger than the 50 training images"):
        _train(_setup(iterations=1), small, 1, 0)


def _fid_of(generator, latent_dim, classifier_path, reference):
    from scipy import linalg

    from ganstudy.data.arrays import to_uint8
    from ganstudy.evaluate.classifier import load_classifier

    samples = torch.from_numpy(to_uint8(sample_generator(generator, latent_dim, 1000, 5, 500).numpy()))
    with torch.no_grad():
        logits = load_classifier(classifier_path).features(samples.float() / 127.5 - 1)[1].double().numpy()
    mu, sigma = logits.mean(0), np.cov(logits, rowvar=False)
    covmean = linalg.sqrtm(sigma @ reference[1]).real
    return float(((mu - reference[0]) ** 2).sum() + np.trace(sigma + reference[1] - 2 * covmean))


def test_training_lowers_fid_against_the_untrained_generator(digits_dir, classifier_path):
    from ganstudy.evaluate.classifier import load_classifier

    data = load_split(digits_dir / "train.npz")
    with torch.no_grad():
        real = load_classifier(classifier_path).features(torch.from_numpy(data.images))[1].double().numpy()
    reference = (real.mean(0), np.cov(real, rowvar=False))
    untrained = _train(_setup(iterations=1, lr=1e-12), data, 3, 0)
    trained = _train(_setup(iterations=40), data, 3, 0)
    before = _fid_of(untrained.generator, 64, classifier_path, reference)
    after = _fid_of(trained.generator, 64, classifier_path, reference)
    assert after < 0.5 * before, (before, after)


def test_training_job_writes_its_outputs_and_provenance(digits_dir, tmp_path, monkeypatch):
    setup = _setup(iterations=3, loss="mse")
    job = tmp_path.parent / f"{tmp_path.name}.job.json"
    write_job(
        job,
        job_description(
            "lp_mse",
            setup,
            2026,
            {"train": str(digits_dir / "train.npz")},
            {"threads": 1},
            sources={"dataset": {"name": "digits"}},
        ),
    )
    # The job runs in a lab's own repository (snakemake -d there): the record names ganstudy's commit.
    lab = tmp_path.parent / f"{tmp_path.name}.lab"
    lab.mkdir()
    for command in (
        ["init", "-q"],
        ["-c", "user.name=lab", "-c", "user.email=lab@example.org", "commit", "-q", "--allow-empty", "-m", "lab"],
    ):
        subprocess.run(["git", *command], cwd=lab, check=True)
    monkeypatch.chdir(lab)
    run_training(read_job(job), 1, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "generator.pt",
        "losses.csv",
        "profile.csv",
        "run.json",
        "samples.png",
    ]
    losses = np.genfromtxt(tmp_path / "losses.csv", delimiter=",", names=True)
    assert list(losses["iteration"]) == [1, 2, 3] and np.all(np.isfinite(losses["d_loss"]))
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["settings"] == job_settings(setup) and record["setup_name"] == "lp_mse" and record["trial"] == 1
    assert record["world_size"] == 1 and len(record["hosts"]) == 1
    assert "MPICH" in record["mpi_library"] or "MPI" in record["mpi_library"]
    assert set(record["seeds"]) == {"init", "batches", "noise", "dropout", "score", "sample-grid"}
    assert record["versions"]["torch"] and record["train_seconds"] > 0
    # The CPU as lscpu names it, and the float instruction sets it has (runs on other ones give other bits).
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True, env={**os.environ, "LC_ALL": "C"})
    model = next(line.split(":", 1)[1].strip() for line in lscpu.stdout.splitlines() if line.startswith("Model name"))
    flags = next(line.split(":", 1)[1].split() for line in lscpu.stdout.splitlines() if line.startswith("Flags"))
    assert record["cpu"]["model"] == model
    # The float path it trained on, per rank and for the run (issue 82): the CPU, ATen's kernels, MKL's branch.
    assert record["hardware"] == record["ranks"][0]["float_path"] == float_path(["cpu"])
    assert model in record["hardware"] and torch.backends.cpu.get_cpu_capability() in record["hardware"]
    assert record["cpu"]["float_flags"] == [flag for flag in FLOAT_FLAGS if flag in flags]
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert record["git"]["commit"] == commit
    # Where each part came from: ganstudy's own, with the hash of the source that trained it.
    assert record["parts"]["network"]["reference"] == "ganstudy.models.builtin:PERCEPTRON4"
    assert record["parts"]["kind"]["reference"] == "ganstudy.data.kinds:IMAGES"
    assert record["parts"]["dataset"]["reference"] == "ganstudy.data.loaders:DIGITS"
    assert {part["distribution"] for part in record["parts"].values()} == {"ganstudy"}
    assert {part["source_sha256"] for part in record["parts"].values()} == {source_sha256("ganstudy")}
    # What decides the GPU kernels, recorded on the CPU too: there the rank's device is "cpu", torch's CUDA
    # version is that of its build (None for a CPU-only wheel) and no NVIDIA driver answers.
    assert record["device_names"] == [["cpu"]] and record["deterministic"] is True
    assert record["cuda"]["torch_cuda"] == torch.version.cuda and set(record["cuda"]) == {
        "torch_cuda",
        "cudnn",
        "nvidia_driver",
    }
    if shutil.which("nvidia-smi") is None:
        assert record["cuda"]["nvidia_driver"] is None
    generator, spec = load_generator(tmp_path / "generator.pt")
    assert spec.image_shape == (1, 8, 8)
    assert sample_generator(generator, spec.latent_dim, 3, 0, 2).shape == (3, 1, 8, 8)


def test_corrupt_generator_file_names_the_file_and_the_remedy(tmp_path):
    bad = tmp_path / "generator.pt"
    bad.write_bytes(b"\x00garbage")
    with pytest.raises(GanstudyError, match=rf"{bad} is corrupt .*rerun its training job"):
        load_generator(bad)


def test_single_mode_refuses_several_ranks(digits_dir, tmp_path, env):
    command = train_command(_setup(iterations=1), digits_dir / "train.npz", tmp_path / "run", seed=1, ranks=2)
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0
    assert "training mode 'single' runs on 1 MPI rank, but the job has 2" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()


def test_the_in_training_fid_is_the_fixed_batch_s_fid_and_changes_no_training_bit(
    digits_dir, classifier_path, tmp_path
):
    from ganstudy.core.seeding import pair_seeds
    from ganstudy.evaluate.extractor import classifier_extractor
    from ganstudy.evaluate.fid import FidScorer
    from ganstudy.evaluate.scores import reference_statistics

    reference = tmp_path / "reference.npz"
    reference_statistics(digits_dir / "train.npz", classifier_extractor(classifier_path), "logits", 500, reference, 1)
    data = load_split(digits_dir / "train.npz")
    silent = _train(_setup(iterations=5, batch_size=100), data, 7, 0)
    setup = _setup(iterations=5, batch_size=100, score_period=2, score_samples=300)
    context = TrainingContext(
        TrainingSettings.of(job_settings(setup)),
        data,
        7,
        0,
        mpi_world(),
        torch.device("cpu"),
        classifier_path=classifier_path,
        reference_path=reference,
    )
    scored = get_mode("single")(context)
    assert all(torch.equal(a, b) for a, b in zip(_state(silent).values(), _state(scored).values()))
    fids = [row["fid"] for row in scored.history]
    # Every 2 iterations and at the last; nothing in between.
    assert [f is not None and np.isfinite(f) for f in fids] == [False, True, False, True, True]
    # The last one, recomputed independently from the trained generator and the same fixed noise.
    noise = torch.randn(300, setup["latent_dim"], generator=torch.Generator().manual_seed(pair_seeds(7, 0)["score"]))
    generator = scored.generator.components[0].eval()
    with torch.no_grad():
        expected = FidScorer(classifier_path, reference, torch.device("cpu")).fid(generator(noise))
    assert fids[-1] == pytest.approx(expected, rel=1e-6)
    assert any(row["routine"] == "score" for row in scored.profile)


@pytest.mark.parametrize(
    "keys, advice",
    [
        ({"mode": "single"}, r"look for non-finite values in the training data$"),
        (
            {"mode": "data_parallel", "data_parallel": {"amp": "bf16"}},
            r"or train without data_parallel.amp: .*docs/guide.md",
        ),
    ],
)
def test_losses_that_stop_being_finite_stop_the_run_naming_the_iteration_and_what_to_check(digits_dir, keys, advice):
    data = load_split(digits_dir / "train.npz")
    images = data.images.copy()
    images[7, 0, 3, 3] = np.nan  # one pixel: every pass draws every row, so the first iteration's losses are NaN
    with pytest.raises(
        GanstudyError,
        match=r"pair: the losses are not finite after iteration 1 of 5 \(d_loss nan, g_loss nan\), "
        r"so the weights are lost to NaN or inf: lower the set-up's lr \(now 0.0002\)",
    ) as raised:
        _train(_setup(iterations=5, **keys), Split(images, data.labels), 1, 0)
    assert re.search(advice, str(raised.value)), raised.value
