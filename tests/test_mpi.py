"""MPI process layout, run under mpiexec with several rank counts."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.mpi

PROBE = """
import json, socket
from ganstudy.parallel.world import mpi_world, mpi_library_version
world = mpi_world()
hosts = world.hosts()
if world.is_root:
    print(json.dumps({"size": world.size, "hosts": hosts, "mpi": mpi_library_version()}))
"""


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_world_reports_rank_count_and_every_host(ranks, env):
    done = subprocess.run(
        ["mpiexec", "-n", str(ranks), sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["size"] == ranks and len(report["hosts"]) == ranks
    assert "MPICH" in report["mpi"]


def test_training_under_mpiexec_gives_the_same_bits_as_a_plain_start(digits_dir, tmp_path, env):
    from conftest import SCHEMA, train_command
    from ganstudy.config.validate import validate_study_config
    from ganstudy.models.artifact import load_generator

    setup = validate_study_config({"setups": {"s": {"iterations": 2, "score_period": 0}}}, SCHEMA)["setups"]["s"]
    outputs = []
    for launcher in ([], ["mpiexec", "-n", "1"]):
        out = tmp_path / ("mpi" if launcher else "plain")
        command = [*launcher, *train_command(setup, digits_dir / "train.npz", out, seed=4, trial=2)]
        subprocess.run(command, check=True, capture_output=True, env=env, timeout=120)
        outputs.append(load_generator(out / "generator.pt")[0].state_dict())
    assert all((outputs[0][k] == outputs[1][k]).all() for k in outputs[0])
