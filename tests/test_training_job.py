"""The training job file: what the workflow writes for each set-up and `ganstudy train` reads, the
short shell line it gives the train rule, and the messages for a job file that cannot be used."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from conftest import REPO, SCHEMA
from ganstudy.config.typed import as_dict
from ganstudy.config.validate import validate_study_config
from ganstudy.errors import GanstudyError
from ganstudy.train.job import job_description, job_settings, read_job, with_compute, write_job


def setup(**keys) -> dict:
    return validate_study_config({"setups": {"s": {"score_period": 0, **keys}}}, SCHEMA)["setups"]["s"]


def test_a_job_file_round_trips_the_set_up_inputs_and_compute(tmp_path):
    section = setup(network="pix2pix", mode="single", l1_weight=50.0)
    inputs = {"train": "data/train.npz", "held_out": "data/test.npz"}
    write_job(tmp_path / "job.json", job_description("p", section, 7, inputs, {"device": "cpu", "threads": 2}))
    job = read_job(tmp_path / "job.json")
    assert (job.setup, job.seed, job.settings.l1_weight, job.settings.energy_loop) == ("p", 7, 50.0, None)
    assert job.inputs.held_out == "data/test.npz" and job.inputs.classifier is None
    assert (job.compute.device, job.compute.threads, job.compute.gpus_per_rank) == ("cpu", 2, 1)
    # run.json records the set-up's keys as the study gave them: no other network's keys, no reference.
    assert job.settings_record() == json.loads(json.dumps(job_settings(section)))


def test_the_compute_options_come_from_their_own_file_and_no_run_record_holds_them(tmp_path):
    section = setup(iterations=2)
    write_job(
        tmp_path / "job.json",
        job_description(
            "s", section, 7, {"train": "t.npz"}, {"device": "cpu"}, sources={"dataset": {"name": "digits"}}
        ),
    )
    (tmp_path / "compute.json").write_text(
        json.dumps({"device": "auto", "node_gpus": 4, "gpus_per_rank": 2, "threads": 3})
    )
    job = with_compute(read_job(tmp_path / "job.json"), tmp_path / "compute.json")
    assert (job.compute.device, job.compute.node_gpus, job.compute.gpus_per_rank, job.compute.threads) == (
        "auto",
        4,
        2,
        3,
    )
    # A run is the same run on any site: its record has the settings, seed, inputs, kind and sources only.
    record = job.record()
    assert set(record) == {"setup", "seed", "settings", "inputs", "kind", "sources"} and record["sources"] == {
        "dataset": {"name": "digits"}
    }
    assert "trials" not in record["settings"]
    with pytest.raises(
        GanstudyError, match="compute options file .*missing.json does not exist: the workflow writes it"
    ):
        with_compute(job, tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text(json.dumps({"gpus": 1}))
    with pytest.raises(GanstudyError, match=r"compute options file .*bad.json: unknown key\(s\) gpus"):
        with_compute(job, tmp_path / "bad.json")


@pytest.mark.parametrize(
    "content, problem",
    [
        (None, "does not exist: the workflow writes it"),
        ("{not json", "is unreadable"),
        ("[1, 2]", "holds no JSON object"),
    ],
)
def test_a_job_file_that_cannot_be_read_says_what_to_do(tmp_path, content, problem):
    path = tmp_path / "job.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(GanstudyError, match=problem):
        read_job(path)


def test_a_hand_edited_job_with_a_misspelt_key_stops_before_training_naming_it(tmp_path, digits_dir, env):
    description = job_description("s", setup(iterations=1), 1, {"train": str(digits_dir / "train.npz")}, {})
    description["settings"]["grid"]["fitnes_mode"] = "best"
    write_job(tmp_path / "job.json", description)
    done = subprocess.run(
        ["ganstudy", "train", str(tmp_path / "job.json"), "--trial", "0", "--out-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"training job file {tmp_path / 'job.json'}.settings.grid: unknown key(s) fitnes_mode" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_description_the_job_would_refuse_is_never_written():
    with pytest.raises(GanstudyError, match=r"training job of set-up 's'.inputs: missing key\(s\) train"):
        job_description("s", setup(), 1, {"classifier": "c.pt"}, {})


def test_the_train_rule_s_shell_line_is_short_and_its_help_fits_a_screen(env, tmp_path):
    # The study in the test's folder: the checkout's results/ may hold the user's.
    results = tmp_path / "results"
    done = subprocess.run(
        ["snakemake", "-n", "-p", "--forceall", "--config", f"results_dir={results}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if re.search(r"ganstudy train ", line)]
    # Measured with the study's folder at results/, as a user's is.
    shown = [line.removeprefix("Shell command: ").replace(str(results), "results") for line in lines]
    assert lines and all(len(line) < 300 for line in shown), max(shown, key=len)
    assert all(
        re.search(rf"ganstudy train @{results}/digits_grid/arguments/train/grid\dx\d/trial\d\.args > ", line)
        for line in lines
    )
    help_text = subprocess.run(["ganstudy", "train", "--help"], capture_output=True, text=True, env=env).stdout
    assert len(help_text.splitlines()) <= 24


def test_the_job_file_records_every_value_the_job_reads(tmp_path):
    section = setup(mode="grid", iterations=3, grid={"shape": "1x1"})
    write_job(tmp_path / "job.json", job_description("g", section, 2, {"train": "t.npz"}, {"node_gpus": 6}))
    job = read_job(tmp_path / "job.json")
    written = json.loads((tmp_path / "job.json").read_text())
    assert as_dict(job.settings)["grid"] == {**written["settings"]["grid"], "topology": "torus", "ring_radius": 1}
    assert job.settings.grid.shape == "1x1" and job.settings.grid.topology == "torus"
    assert written["compute"] == {"node_gpus": 6} and job.compute.node_gpus == 6
    # A torus is written as before rings existed (a finished run keeps its record); a ring with its keys.
    assert "topology" not in written["settings"]["grid"] and "ring_radius" not in written["settings"]["grid"]
    ring = setup(mode="grid", iterations=3, grid={"shape": "1x5", "topology": "ring", "ring_radius": 2})
    write_job(tmp_path / "ring.json", job_description("r", ring, 2, {"train": "t.npz"}))
    written = json.loads((tmp_path / "ring.json").read_text())["settings"]["grid"]
    assert written["topology"] == "ring" and written["ring_radius"] == 2
    assert as_dict(read_job(tmp_path / "ring.json").settings)["grid"] == written
