"""Shared fixtures: the repository, the prepared digits data and a trained classifier."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ganstudy.config.validate import load_study_config

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
BIN = Path(sys.executable).parent

# Per-class, grid and data-parallel jobs on 2 ranks each, as small as a study gets (the Slurm tests' study).
TINY = {
    "study": "tiny",
    "trials": 1,
    "classifier": {"epochs": 3, "min_accuracy": 0.0},
    "setups": {
        "grid": {
            "mode": "grid",
            "iterations": 1,
            "hidden_units": 32,
            "grid": {"shape": "2x2", "fitness_sample_size": 50, "score_sample_size": 50},
        },
        "per_class": {"mode": "per_class", "network": "dcgan", "iterations": 1, "batch_size": 32, "latent_dim": 16},
        # torch.distributed must come up from the launcher's MPI world (jsrun, srun) like the others.
        "dp": {"mode": "data_parallel", "network": "dcgan", "iterations": 1, "batch_size": 32, "latent_dim": 16},
    },
    "evaluation": {"samples": 100, "batch_size": 50, "isc_splits": 2},
    "compute": {"max_ranks": 2},
}


def train_command(
    setup: dict,
    train: Path,
    out: Path,
    *,
    seed: int,
    trial: int = 0,
    ranks: int | None = None,
    name: str = "s",
    checkpoints: Path | None = None,
    classifier: Path | None = None,
    reference: Path | None = None,
    held_out: Path | None = None,
    **compute,
) -> list[str]:
    """``ganstudy train`` of a validated set-up as the workflow runs it: the set-up's job file (written
    beside ``out``) and the command, under ``mpiexec -n ranks`` when ranks are given."""
    from ganstudy.train.job import job_description, write_job

    files = {"classifier": classifier, "reference": reference, "held_out": held_out}
    inputs = {"train": str(train), **{key: str(path) for key, path in files.items() if path is not None}}
    job = out.parent / f"{out.name}.job.json"
    write_job(job, job_description(name, setup, seed, inputs, compute))
    command = ["ganstudy", "train", str(job), "--trial", str(trial), "--out-dir", str(out)]
    if checkpoints is not None:
        command += ["--checkpoint-dir", str(checkpoints)]
    return (["mpiexec", "-n", str(ranks)] if ranks else []) + command


def planned_jobs(out: str, rule: str = "train") -> list[dict[str, str]]:
    """The jobs of ``rule`` in a dry-run's output (``snakemake -n``; with ``-p`` their shell commands): each
    job's fields by name (wildcards, resources, Shell command, ...), read from its block of lines."""
    jobs = []
    for block in re.split(r"^\[[^\]]+\]$", out, flags=re.MULTILINE):
        fields = dict(line.strip().partition(": ")[::2] for line in block.splitlines() if ": " in line)
        if re.search(rf"^(local)?rule {rule}:$", block, re.MULTILINE):
            jobs.append(fields)
    return jobs


def shown_status(results: Path, study: str, env: dict[str, str]) -> str:
    """What ``ganstudy status <study> --results-dir <results>`` prints; it must succeed."""
    shown = subprocess.run(
        ["ganstudy", "status", study, "--results-dir", str(results)], capture_output=True, text=True, env=env
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def require_slurm(why: str) -> None:
    """CI sets GANSTUDY_REQUIRE_SLURM=1: then a missing Slurm fails the test instead of skipping it."""
    _require(why, "GANSTUDY_REQUIRE_SLURM")


def require_browser(why: str) -> None:
    """CI sets GANSTUDY_REQUIRE_BROWSER=1: then a missing Chromium fails the test instead of skipping it."""
    _require(why, "GANSTUDY_REQUIRE_BROWSER")


def _require(why: str, variable: str) -> None:
    if os.environ.get(variable) == "1":
        pytest.fail(why)
    pytest.skip(why)


def generator_state(out: Path):
    """A run's generator as it was saved: weights, mixture weights and class labels."""
    from ganstudy.models.artifact import load_generator

    mixture, _ = load_generator(out / "generator.pt")
    return mixture.state_dict(), mixture.weights, mixture.labels


def assert_same_generators(a: Path, b: Path) -> None:
    """The runs in folders ``a`` and ``b`` saved the same generator, bit for bit."""
    import torch

    state_a, weights_a, labels_a = generator_state(a)
    state_b, weights_b, labels_b = generator_state(b)
    assert weights_a == weights_b and labels_a == labels_b
    assert state_a.keys() == state_b.keys()
    for key in state_a:
        assert torch.equal(state_a[key], state_b[key]), key


def assert_trained_alike(a: dict, b: dict, share: float = 1e-3) -> None:
    """Two state dicts trained from the same start on the same rows, with float sums in another order
    (another rank count, device, sharding or batch-norm kernel), agree within rtol 1e-4 / atol 1e-5 in
    all but ``share`` of their elements. Adam divides each step by the gradient's own root mean square,
    so where a gradient is a sum that cancels to about zero, last-bit differences can flip its sign and
    move that element by up to the learning rate on one side only (seen on an AMD EPYC with AVX-512:
    2 of pix2pix's 32,768 weights of one layer, 3.5e-5 apart). A wrong shard, batch, crop or learning
    rate changes most elements instead."""
    import torch

    assert a.keys() == b.keys()
    far, total, where = 0, 0, []
    for key in a:
        if not a[key].is_floating_point():
            assert torch.equal(a[key], b[key]), key
            continue
        off = int((~torch.isclose(b[key], a[key], rtol=1e-4, atol=1e-5)).sum())
        far, total = far + off, total + a[key].numel()
        if off:
            where.append(f"{key}: {off} of {a[key].numel()}")
    assert far <= share * total, f"{far} of {total} elements differ beyond rtol 1e-4, atol 1e-5 ({'; '.join(where)})"


M32 = (1 << 32) - 1


# The dropout masks' hash (ganstudy.core.counter_random.hash32, scaled_mask) written independently.
def lowbias32(x: int) -> int:
    """Wellons' lowbias32 in Python's unbounded integers, with the multipliers as published."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def reference_mask(call: int, first_row: int, rows: int, per_row: int, keep: float):
    import torch

    threshold = round(keep * 2**32)
    row_keys = [lowbias32((first_row + r + (call & M32)) & M32) for r in range(rows)]
    element_keys = [lowbias32((e + (call >> 32)) & M32) for e in range(per_row)]
    return torch.tensor([[float(lowbias32(rk ^ ek) < threshold) for ek in element_keys] for rk in row_keys]) / keep


def install(site: Path, distribution: str, entry_points: str, module: str = "", source: str = "") -> None:
    """A package as pip leaves it in site-packages: its dist-info (metadata, entry points) and a module."""
    info = site / f"{distribution}-1.2.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text(entry_points)
    if module:
        (site / f"{module}.py").write_text(source)


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A site-packages folder on sys.path for this test, to install() plugin packages (or write plain
    modules) into. Its modules leave sys.modules afterwards: a later test in the same worker that writes a
    module of the same name must import its own, not this one."""
    folder = tmp_path / "site-packages"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for name, module in list(sys.modules.items()):
        if Path(getattr(module, "__file__", None) or "/").is_relative_to(folder):
            del sys.modules[name]


@pytest.fixture
def one_thread():
    """One torch thread, as a grid rank runs (compute.threads_per_job 1): with more threads, BLAS and the
    elementwise kernels split a stack's work at points that depend on its size."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory) -> Path:
    """The example plugin (examples/sngan-plugin) installed by pip from a copy of its folder (pip builds in
    the source tree), into a folder of its own: the jobs find it on PYTHONPATH, and the venv the other
    tests see stays as it was."""
    root = tmp_path_factory.mktemp("plugin")
    source = shutil.copytree(REPO / "examples" / "sngan-plugin", root / "source")
    site = root / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--target",
            str(site),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return site


@pytest.fixture(scope="session")
def plugin_env(env, plugin_site) -> dict:
    return with_pythonpath(env, plugin_site)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def env() -> dict[str, str]:
    """Environment for subprocesses: this interpreter's scripts (ganstudy, snakemake, mpiexec) first. A
    probe that dies by a signal shows each thread's Python stack in what the test prints."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONFAULTHANDLER": "1"}


def with_pythonpath(env: dict[str, str], folder: Path) -> dict[str, str]:
    """``env`` with ``folder`` first on PYTHONPATH, keeping what is there (a cluster's module system may
    put the project's packages on it)."""
    path = [str(folder), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(path)}


@pytest.fixture()
def default_config() -> dict:
    return load_study_config(REPO / "config" / "config.yaml", SCHEMA)


def spec_file(path: Path, section: str, settings: dict, seed: int | None = None) -> str:
    """A stage's spec file as the workflow writes it (results/<study>/specs/): a step's ``--spec``."""
    path.write_text(json.dumps({section: settings, **({} if seed is None else {"seed": seed})}))
    return str(path)


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ganstudy.data.prepare import prepare_dataset

    out = tmp_path_factory.mktemp("digits")
    prepare_dataset("digits", None, 0.2, 2026, out)
    return out


@pytest.fixture(scope="session")
def classifier_path(digits_dir: Path) -> Path:
    from ganstudy.evaluate.classifier import train_classifier
    from ganstudy.evaluate.settings import ClassifierSettings

    settings = ClassifierSettings(epochs=40, batch_size=64, lr=1e-3, min_accuracy=0.0)
    model = digits_dir / "classifier.pt"
    train_classifier(
        digits_dir / "train.npz", digits_dir / "test.npz", settings, 2026, model, digits_dir / "classifier.json", 1
    )
    return model


@pytest.fixture(scope="session")
def scoring(digits_dir: Path, classifier_path: Path) -> tuple[Path, Path]:
    """The classifier and the training split's reference statistics of its logits (in-training FIDs)."""
    from ganstudy.evaluate.extractor import classifier_extractor
    from ganstudy.evaluate.scores import reference_statistics

    reference = digits_dir / "reference_stats.npz"
    reference_statistics(digits_dir / "train.npz", classifier_extractor(classifier_path), "logits", 500, reference, 1)
    return classifier_path, reference


def with_user_data(study: Path, folder: Path) -> Path:
    """A copy of a study config whose data the user supplies (an image folder, a paired folder, shower
    files, the Inception weights), pointed at small stand-ins in ``folder``: given its data, a study must plan
    every job."""
    import numpy as np
    import yaml
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load(study.read_text())
    name = config["dataset"]["name"]
    if name == "image_folder":
        (folder / "xray" / "positive").mkdir(parents=True)
        for i in range(4):
            Image.fromarray(np.full((40, 50), 30 * i, np.uint8)).save(folder / "xray" / "positive" / f"{i}.png")
        config["dataset"]["path"] = str(folder / "xray")
    elif name == "calorimeter":
        import h5py

        (folder / "showers").mkdir()
        with h5py.File(folder / "showers" / "EleEscan_1_1.h5", "w") as handle:
            handle["ECAL"] = np.ones((4, 25, 25, 25), np.float32)
            handle["target"] = np.full((4, 2), 100.0)
        config["dataset"]["path"] = str(folder / "showers")
    elif name == "paired_folder":
        for split in ("train", "test"):
            (folder / "pairs" / split).mkdir(parents=True)
            Image.fromarray(np.zeros((16, 32, 3), np.uint8)).save(folder / "pairs" / split / "0.png")
        config["dataset"]["path"] = str(folder / "pairs")
    if config.get("evaluation", {}).get("inception_weights"):
        (folder / "weights.pth").write_bytes(b"stand-in")
        config["evaluation"].update(inception_weights=str(folder / "weights.pth"), inception_sha256=None)
    copy = folder / study.name
    copy.write_text(yaml.safe_dump(config))
    return copy


@pytest.fixture(scope="session")
def stand_in_inception(tmp_path_factory: pytest.TempPathFactory):
    """A weights file of torch-fidelity's Inception-v3 with random weights (the real file may not be
    downloaded here), and the network it holds: the scoring path is the same, the features are not FID's."""
    from ganstudy.evaluate.fidelity_extractor import random_inception_weights

    path = tmp_path_factory.mktemp("inception") / "weights-inception.pth"
    return path, random_inception_weights(path)


# Where the whole run's Slurm says how it stands, for the test workers (pytest-xdist) it starts.
SLURM_STATE = "GANSTUDY_TEST_SLURM"
# The longest modules first (minutes on 2 cores), so that the two workers of `make test` (pytest-xdist,
# --dist loadscope: a module's tests on one worker, its fixtures made once) finish together. The Slurm
# modules wait on the scheduler most of their time, beside the other worker's training.
LONGEST_FIRST = (
    "test_cross_node",
    "test_workflow",
    "test_cluster_profiles",
    "test_benchmarks",
    "test_grid_mpi",
    "test_living_study",
    "test_data_parallel_mpi",
    "test_stop_signal",
    "test_single_class",
    "test_per_class_mpi",
    "test_plugin_example",
    "test_tasks",
)


def pytest_configure(config: pytest.Config) -> None:
    """A single-node Slurm for the whole run wherever Slurm is installed (CI installs it), joined once by
    the process that starts the test workers, before them (they inherit SLURM_STATE).

    Besides the Slurm tests: Snakemake's Slurm plugin asks `scontrol show config` at every start, which
    hangs about 10 s when Slurm is installed but its controller is down. The session leaves at the end
    (pytest_unconfigure); the last session on this machine to leave stops the daemons (ci/slurm.py).
    """
    if hasattr(config, "workerinput"):
        return
    if shutil.which("slurmctld") is None:
        state = {"available": False, "why": "Slurm is not installed (CI installs it: python3 ci/slurm.py install)"}
    else:
        joined = subprocess.run(
            [sys.executable, str(REPO / "ci" / "slurm.py"), "join", str(os.getpid())],
            capture_output=True,
            text=True,
            timeout=180,
        )
        if joined.returncode != 0:
            state = {"available": False, "why": f"Slurm did not start: {joined.stderr.strip()[-1500:]}"}
        else:
            state = {"available": True}
    os.environ[SLURM_STATE] = json.dumps(state)


def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or SLURM_STATE not in os.environ:
        return
    if json.loads(os.environ.pop(SLURM_STATE))["available"]:
        subprocess.run(
            [sys.executable, str(REPO / "ci" / "slurm.py"), "leave", str(os.getpid())], check=True, timeout=60
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest modules first (LONGEST_FIRST), each module's tests together in their order."""
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.module.__name__ if item.module is not None else "", len(rank)))


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter) -> None:
    """Seconds per module (set-up, call and tear-down summed) and per test worker, after the slowest tests:
    CI's output is all a later change has to tell where a slower machine's minutes went and how to order
    LONGEST_FIRST."""
    modules: dict[str, float] = {}
    workers: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            # Warnings and collection reports have no test phase's duration.
            if getattr(report, "when", None) not in ("setup", "call", "teardown"):
                continue
            module = report.nodeid.split("::")[0]
            modules[module] = modules.get(module, 0.0) + report.duration
            node = getattr(report, "node", None)
            worker = node.gateway.id if node is not None else "main"
            workers[worker] = workers.get(worker, 0.0) + report.duration
    if not modules:
        return
    terminalreporter.write_sep("=", "seconds per module (the 15 longest) and per worker")
    for module, seconds in sorted(modules.items(), key=lambda item: -item[1])[:15]:
        terminalreporter.write_line(f"{seconds:8.1f}s {module}")
    terminalreporter.write_line("  ".join(f"{worker} {seconds:.0f}s" for worker, seconds in sorted(workers.items())))


@pytest.fixture(scope="session")
def slurm_daemons() -> dict:
    """How the run's Slurm stands (pytest_configure): {"available": True} or {"available": False, "why": ...}."""
    return json.loads(os.environ.get(SLURM_STATE, '{"available": false, "why": "pytest_configure did not run"}'))
