"""A single-node Slurm on this machine, for the real-Slurm test (Debian packages slurmctld, slurmd,
munge, slurm-client; see .ci/run). ci/slurm_nodes.py builds a two-node one beside it from the same parts.

    python ci/slurm.py install   # apt-get the packages (root)
    python ci/slurm.py start     # write slurm.conf, start munged, slurmctld, slurmd; print their PIDs as JSON
    python ci/slurm.py stop PID...
    python ci/slurm.py join ID   # a test session uses the cluster: start what is not running
    python ci/slurm.py leave ID  # it is done: the last session to leave stops what the sessions started

A test session (tests/conftest.py) joins and leaves under its PID, so that two sessions at once (`make
test` and a module run beside it) share the daemons and the first to end does not stop them under the
other. psutil is imported where needed: `install` runs with the system Python, before the virtual
environment exists.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

CONF = Path("/etc/slurm/slurm.conf")
GRES_CONF = Path("/etc/slurm/gres.conf")
# GPUs for the scheduler only: sbatch/srun GPU requests are granted and bound (SLURM_JOB_GPUS,
# SLURM_STEP_GPUS, CUDA_VISIBLE_DEVICES) on this CPU-only machine, so the GPU job geometry is tested for
# real. Slurm 22.05 drops GPUs without device files and refuses regular files, so each is a character
# device with /dev/null's numbers (1, 3): harmless whatever opens it.
GPUS = 4
FAKE_GPUS = Path("/run/ganstudy-gpus")
# iproute2: the network namespaces of the two-node Slurm (ci/slurm_nodes.py).
PACKAGES = ["slurmctld", "slurmd", "munge", "slurm-client", "iproute2"]
PARTITION = "debug"
# Not the default: a job lands there only when it is submitted with -p (the account and partition test).
OTHER_PARTITION = "gpu"
# The node's feature: a job constrained to it (sbatch -C, a site's constraint) runs here, any other waits.
FEATURE = "ganstudy-ci"


def install() -> None:
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "install", "-y", "-q", *PACKAGES], check=True, env=environment)


def config_text() -> str:
    import psutil

    host = socket.gethostname()
    memory = psutil.virtual_memory().total // 2**20
    node = f"NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={memory} Gres=gpu:{GPUS}"
    return f"""# Written by ci/slurm.py: one node, this machine, for the workflow's Slurm test.
ClusterName=ganstudy
SlurmctldHost={host}(127.0.0.1)
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmi2
ReturnToService=2
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
# A finished job stays in `scontrol show job` for the rest of the test session.
MinJobAge=3600
JobAcctGatherType=jobacct_gather/none
GresTypes=gpu
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
{node} Features={FEATURE} State=UNKNOWN
PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
PartitionName={OTHER_PARTITION} Nodes={host} Default=NO MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def _wait(check, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up within {seconds:.0f} s")
        time.sleep(0.2)


# Each daemon forks into the background and writes its PID file; the file names the process to stop.
PID_FILES = {
    "munged": Path("/run/munge/munged.pid"),
    "slurmctld": Path("/run/slurmctld.pid"),
    "slurmd": Path("/run/slurmd.pid"),
}


def _running(daemon: str) -> int | None:
    """PID of the running daemon, from its PID file; None when it is not running."""
    import psutil

    try:
        pid = int(PID_FILES[daemon].read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if psutil.pid_exists(pid) else None


def check_installed() -> None:
    missing = [tool for tool in ("munged", "slurmctld", "slurmd", "sinfo") if shutil.which(tool) is None]
    if missing:
        raise RuntimeError(
            f"Slurm is not installed (no {', '.join(missing)}): run `python ci/slurm.py install` as root"
        )


def make_fake_gpus(folder: Path, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        device = folder / f"nvidia{index}"
        if not device.exists():
            os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))


def remove_stale_mpi_segments() -> None:
    """Remove the shared-memory segments of MPICH job steps that no process maps any more.

    MPICH names a step's segment after its PMI name ("<job id>.<step id>" under Slurm) and leaves it
    behind when the step is SIGKILLed (the lost-node and kill tests). A cluster started again counts its
    job IDs from the start, and a later step with the same ID would open the old segment and fail in
    MPI_Init ("Out of memory"). A production node loses its /dev/shm with the node or to its epilog.
    """
    mapped = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            mapped.update(line.split()[-1] for line in maps.read_text().splitlines() if "/dev/shm/mpich_" in line)
        except OSError:  # the process ended while being read
            continue
    # A minute old at least: a step between creating its segment and mapping it in MPI_Init is younger.
    settled = time.time() - 60
    for segment in Path("/dev/shm").glob("mpich_*"):
        try:
            if str(segment) not in mapped and segment.stat().st_mtime < settled:
                segment.unlink()
        except FileNotFoundError:
            continue


def start_munged() -> dict[str, int]:
    """Start munged unless it runs (one munged serves every Slurm cluster of this machine); {"munged": PID}
    when this call started it."""
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    if _running("munged") is not None:
        return {}
    subprocess.run(["runuser", "-u", "munge", "--", "munged"], check=True)
    _wait(lambda: _running("munged") is not None, "munged")
    return {"munged": _running("munged")}


def start() -> dict[str, int]:
    """Start the daemons that are not running; the PIDs of those this call started."""
    check_installed()
    for folder in ("/var/lib/slurm/slurmctld", "/var/lib/slurm/slurmd", "/var/log/slurm"):
        Path(folder).mkdir(parents=True, exist_ok=True)
    CONF.write_text(config_text())
    make_fake_gpus(FAKE_GPUS, GPUS)
    GRES_CONF.write_text(
        f"# Written by ci/slurm.py: GPUs for the scheduler only.\nName=gpu File={FAKE_GPUS}/nvidia[0-{GPUS - 1}]\n"
    )
    remove_stale_mpi_segments()
    started = start_munged()
    commands = {"slurmctld": ["slurmctld"], "slurmd": ["slurmd"]}
    for daemon, command in commands.items():
        if _running(daemon) is None:
            subprocess.run(command, check=True)
            _wait(lambda daemon=daemon: _running(daemon) is not None, daemon)
            started[daemon] = _running(daemon)
    _wait(
        lambda: (
            subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True).stdout.strip()
            in ("idle", "mixed", "allocated")
        ),
        "the Slurm node",
        60,
    )
    return started


def stop(pids: list[int]) -> None:
    import psutil

    for pid in pids:
        try:
            psutil.Process(pid).terminate()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs([p for p in map(_existing, pids) if p], timeout=20)


# The sessions using the cluster (one file each, named by its ID) and the daemons they started.
SESSIONS = Path("/run/ganstudy-test-slurm")


def _sessions_lock():
    import fcntl

    SESSIONS.mkdir(parents=True, exist_ok=True)
    lock = open(SESSIONS / ".lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    return lock


def join(session: int) -> None:
    with _sessions_lock():
        record = SESSIONS / "started.json"
        started = json.loads(record.read_text()) if record.is_file() else []
        record.write_text(json.dumps(started + list(start().values())))
        (SESSIONS / str(session)).touch()


def leave(session: int) -> None:
    import psutil

    with _sessions_lock():
        (SESSIONS / str(session)).unlink(missing_ok=True)
        # A session that died without leaving (killed) holds nothing.
        others = [f for f in SESSIONS.iterdir() if f.name.isdigit() and psutil.pid_exists(int(f.name))]
        record = SESSIONS / "started.json"
        if not others and record.is_file():
            stop(json.loads(record.read_text()))
            record.unlink()


def _existing(pid: int):
    import psutil

    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "install":
        install()
    elif command == "start":
        print(json.dumps(start()))
    elif command == "stop":
        stop([int(pid) for pid in sys.argv[2:]])
    elif command in ("join", "leave") and len(sys.argv) == 3:
        (join if command == "join" else leave)(int(sys.argv[2]))
    else:
        sys.exit(__doc__)
