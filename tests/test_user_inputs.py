"""Every embedded study plans on a fresh clone, before the user's data or the Inception weights are
there: the dry-run lists once what is missing and how to get it, and a real run stops before any job."""

from __future__ import annotations

import subprocess

import pytest

from conftest import REPO

pytestmark = pytest.mark.workflow

STUDIES = sorted((REPO / "config" / "studies").glob("*.yaml"))
# What each study needs from its user (the others' data ship with a package or are fetched by the workflow).
# The x-ray studies score on Inception, as the thesis did.
NEEDS = {
    "calo3d_scaling": ["dataset.path data/calorimeter"],
    "covid_xray_28": ["dataset.path data/covid_xray", "evaluation.inception_weights data/weights-inception"],
    "covid_xray_64": ["dataset.path data/covid_xray", "evaluation.inception_weights data/weights-inception"],
    "pix2pix_facades": ["dataset.path data/facades", "evaluation.inception_weights data/weights-inception"],
}


def _snakemake(workdir, study, *args, env):
    command = ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile", str(study), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.parametrize("study", STUDIES, ids=lambda p: p.stem)
def test_every_study_plans_without_its_data_and_lists_what_to_provide(study, tmp_path, env):
    # An empty working directory: no data/, no weights, as on a fresh clone.
    done = _snakemake(tmp_path, study, "-n", "--forceall", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout + done.stderr
    listed = [line.strip()[2:] for line in said.splitlines() if line.startswith("  - ")]
    wanted = NEEDS.get(study.stem, [])
    assert len(listed) == len(wanted) and all(line.startswith(start) for line, start in zip(listed, wanted)), listed
    if wanted:
        assert said.count("this study needs files that are not here yet") == 1
        assert "rule prepare_dataset" in done.stdout and "rule train" in done.stdout
    assert not (tmp_path / "results").exists()


def test_a_real_run_without_the_data_stops_before_any_job(tmp_path, env):
    done = _snakemake(tmp_path, REPO / "config" / "studies" / "pix2pix_facades.yaml", "--cores", "1", env=env)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert (
        "this study needs files that are not here yet" in said and "ganstudy fetch --name facades --folder data" in said
    )
    assert "download https://github.com/toshas/torch-fidelity/releases" in said
    assert not (tmp_path / "results").exists()
