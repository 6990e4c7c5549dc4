"""Device choice that cannot silently fall back to the CPU in a GPU job, and compute.deterministic."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest
import torch

from conftest import SCHEMA, train_command
from ganstudy.config.validate import validate_study_config
from ganstudy.errors import GanstudyError
from ganstudy.parallel.determinism import configure_determinism, configure_tf32
from ganstudy.parallel.process_group import check_one_gpu_per_rank
from ganstudy.parallel.world import mpi_world, select_devices
from ganstudy.train.job import job_description, read_job, write_job

CPU = (torch.device("cpu"), torch.device("cpu"))
SCHEDULER = (
    "SLURM_JOB_ID",
    "LSB_JOBID",
    "CUDA_VISIBLE_DEVICES",
    "SLURM_STEP_GPUS",
    "SLURM_JOB_GPUS",
    "JSM_NAMESPACE_LOCAL_RANK",
)


@pytest.fixture()
def no_cuda(monkeypatch):
    """A node where torch finds no GPU, outside any scheduler job until a test says otherwise."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for name in SCHEDULER:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture()
def slurm_without_gpus(no_cuda):
    no_cuda.setenv("SLURM_JOB_ID", "4242")
    no_cuda.setenv("SLURM_STEP_ID", "0")
    no_cuda.setenv("SLURM_STEP_GPUS", "0,1")
    no_cuda.setenv("SLURM_NODELIST", "gpu[01-02]")
    # Not in the fixed list: found because its name says it is about the step's resources.
    no_cuda.setenv("SLURM_TRES_PER_TASK", "gres/gpu:1")
    return no_cuda


def test_auto_in_a_slurm_gpu_job_without_cuda_names_rank_host_and_what_the_scheduler_gave(slurm_without_gpus):
    with pytest.raises(GanstudyError) as caught:
        select_devices(mpi_world(), "auto", 1, node_gpus=2)
    message = str(caught.value)
    assert f"rank 0 of 1 on host {socket.gethostname()}" in message
    assert "compute.device is 'auto' and the site's node_gpus is 2 in Slurm job 4242" in message
    for shown in (
        "CUDA_VISIBLE_DEVICES unset",
        "SLURM_JOB_ID=4242",
        "SLURM_STEP_ID=0",
        "SLURM_STEP_GPUS=0,1",
        "SLURM_NODELIST=gpu[01-02]",
        "SLURM_TRES_PER_TASK=gres/gpu:1",
        "SLURM_GPUS_ON_NODE unset",
        "LSB_JOBID unset",
        "JSM_NAMESPACE_LOCAL_RANK unset",
        "OMPI_COMM_WORLD_LOCAL_RANK",
    ):
        assert shown in message, shown
    assert "Ask the scheduler for GPUs" in message and "partition" in message
    assert "compute.device: cpu" in message and "a site with node_gpus: 0" in message


def test_auto_in_an_lsf_gpu_job_without_cuda_names_the_jsrun_variables(no_cuda):
    no_cuda.setenv("LSB_JOBID", "777")
    no_cuda.setenv("JSM_NAMESPACE_LOCAL_RANK", "3")
    no_cuda.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(
        GanstudyError,
        match=r"the site's node_gpus is 6 in LSF job 777.*CUDA_VISIBLE_DEVICES=,.*JSM_NAMESPACE_LOCAL_RANK=3",
    ):
        select_devices(mpi_world(), "auto", 1, node_gpus=6)


def test_auto_falls_back_to_the_cpu_where_no_gpu_was_promised(no_cuda):
    # A laptop: no scheduler job, whatever compute.node_gpus says.
    assert select_devices(mpi_world(), "auto", 1, node_gpus=6) == CPU
    # A CPU cluster: a scheduler job with compute.node_gpus 0.
    no_cuda.setenv("SLURM_JOB_ID", "4242")
    assert select_devices(mpi_world(), "auto", 1, node_gpus=0) == CPU


def test_cpu_is_always_the_cpu_even_in_a_gpu_job(slurm_without_gpus):
    assert select_devices(mpi_world(), "cpu", 2, node_gpus=6) == CPU


def test_cuda_without_cuda_is_an_error_with_the_same_diagnosis(slurm_without_gpus):
    with pytest.raises(GanstudyError) as caught:
        select_devices(mpi_world(), "cuda", 1, node_gpus=0)
    message = str(caught.value)
    assert (
        f"rank 0 of 1 on host {socket.gethostname()}: compute.device is 'cuda', but torch finds no CUDA device"
        in message
    )
    assert "SLURM_STEP_GPUS=0,1" in message and "CUDA_VISIBLE_DEVICES unset" in message
    assert "compute.device: cpu" in message


def test_the_train_command_in_a_gpu_job_without_a_gpu_stops_with_the_diagnosis(digits_dir, tmp_path, env):
    setup = validate_study_config({"setups": {"s": {"iterations": 1}}}, SCHEMA)["setups"]["s"]
    # An empty CUDA_VISIBLE_DEVICES hides every GPU, so this holds on a GPU node too.
    job = {name: value for name, value in env.items() if name not in SCHEDULER}
    job.update(SLURM_JOB_ID="4242", SLURM_STEP_GPUS="0,1", CUDA_VISIBLE_DEVICES="")
    command = train_command(setup, digits_dir / "train.npz", tmp_path / "run", seed=1, node_gpus=2)
    done = subprocess.run(command, capture_output=True, text=True, env=job, timeout=300)
    assert done.returncode != 0
    assert "ganstudy train: error: rank 0 of 1 on host" in done.stderr
    assert "the site's node_gpus is 2 in Slurm job 4242" in done.stderr
    assert "CUDA_VISIBLE_DEVICES=," in done.stderr and "SLURM_STEP_GPUS=0,1" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()


def test_a_job_s_compute_options_default_to_no_gpu_promise_and_deterministic_kernels(tmp_path):
    setup = validate_study_config({"setups": {"s": {}}}, SCHEMA)["setups"]["s"]
    write_job(tmp_path / "plain.json", job_description("s", setup, 1, {"train": "t.npz"}, {}))
    compute = read_job(tmp_path / "plain.json").compute
    assert compute.node_gpus == 0 and compute.deterministic is True and compute.device == "auto"
    assert compute.tf32 is False
    write_job(
        tmp_path / "set.json",
        job_description("s", setup, 1, {"train": "t.npz"}, {"node_gpus": 4, "deterministic": False, "tf32": True}),
    )
    compute = read_job(tmp_path / "set.json").compute
    assert compute.node_gpus == 4 and compute.deterministic is False and compute.tf32 is True


@pytest.fixture()
def torch_flags(monkeypatch):
    """Restores torch's global determinism switches after the test."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield monkeypatch
    torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved[2], saved[3]
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


def _flags():
    return (
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )


def test_deterministic_cuda_switches_every_kernel_choice_and_cublas_before_its_first_call(torch_flags):
    # Setting the switches needs no GPU: they are read when the kernels run.
    configure_determinism(torch.device("cuda", 0), True)
    assert _flags() == (True, True, False)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    configure_determinism(torch.device("cuda", 0), False)
    assert _flags() == (False, False, True)


def test_a_deterministic_cublas_setting_of_the_user_is_kept(torch_flags):
    torch_flags.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    configure_determinism(torch.device("cuda", 1), True)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    torch_flags.setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0")
    configure_determinism(torch.device("cuda", 1), True)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_tf32_is_switched_for_products_and_convolutions_together(torch_flags):
    configure_tf32(torch.device("cuda", 0), True)
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (True, True)
    # torch's defaults differ (products float32, convolutions TF32): false means float32 for both.
    configure_tf32(torch.device("cuda", 0), False)
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, False)


def test_the_cpu_leaves_torch_s_switches_alone(torch_flags):
    before = _flags(), torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    configure_determinism(torch.device("cpu"), True)
    configure_determinism(torch.device("cpu"), False)
    configure_tf32(torch.device("cpu"), not torch.backends.cudnn.allow_tf32)
    assert (_flags(), torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ


def test_two_ranks_on_one_gpu_are_refused_before_nccl_with_the_ranks_and_the_remedy():
    # Seen on a 1-GPU H100 node: 2 data-parallel ranks both took cuda:0 and nccl stopped in the first
    # synchronised batch norm with "Duplicate GPU detected". One GPU per rank on each host is fine.
    check_one_gpu_per_rank([("a", 0), ("a", 1), ("b", 0), ("b", 1)])
    with pytest.raises(GanstudyError) as error:
        check_one_gpu_per_rank([("a", 0), ("a", 1), ("b", 0), ("b", 0)])
    message = str(error.value)
    assert "ranks 2 and 3 both train on cuda:0 of host b (2 ranks there, 1 GPU(s) among them)" in message
    assert "--gpus-per-task=1" in message and "compute.device: cpu" in message
