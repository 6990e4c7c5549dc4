"""A two-node Slurm on this machine, for the cross-node tests (ci/slurm.py's sibling; same packages).

Each compute node is a network namespace with its own address on a bridge and its own host name (a UTS
namespace), running its own slurmd with its own fake GPUs; one slurmctld (in this machine's namespace, on
the bridge's address and ports of its own, so that it lives beside ci/slurm.py's single-node cluster) and
the machine's munged serve both. The file system stays shared, like a cluster's project space. Clients
reach this cluster through SLURM_CONF=/etc/slurm-nodes/slurm.conf.

    python ci/slurm_nodes.py start          # print the daemons' PIDs as JSON
    python ci/slurm_nodes.py fail NODE      # the node fails as nodes do: link cut, every process SIGKILLed
    python ci/slurm_nodes.py revive NODE    # link back, slurmd started again (ReturnToService=2 lets it rejoin)
    python ci/slurm_nodes.py stop JSON      # stop the daemons of `start`'s JSON, remove namespaces and links

Only names and addresses of its own are touched: namespaces ganstudy-<node>, links gsbr0 and gsv<N>,
10.231.0.0/24. A node's processes see /etc/slurm-nodes as /etc/slurm and /run/ganstudy-nodes/hosts as
/etc/hosts (a mount namespace of its own), so that MPI and torch.distributed find each node by name; `ip netns
exec` is not used, as it mounts a /sys without the cgroup file system that slurmd needs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm import PARTITION, _wait, check_installed, make_fake_gpus, remove_stale_mpi_segments, start_munged  # noqa: E402

CONF_DIR = Path("/etc/slurm-nodes")
CONF = CONF_DIR / "slurm.conf"
RUN_DIR = Path("/run/ganstudy-nodes")
STATE_DIR = Path("/var/lib/slurm-nodes")
LOG_DIR = Path("/var/log/slurm-nodes")
HOSTS = RUN_DIR / "hosts"
NODES = {"gsnode1": "10.231.0.11", "gsnode2": "10.231.0.12"}
BRIDGE, BRIDGE_ADDRESS, PREFIX = "gsbr0", "10.231.0.1", 24
GPUS_PER_NODE = 2
# Ports of their own: ci/slurm.py's cluster holds Slurm's defaults (6817, 6818) on this machine.
CONTROLLER_PORT, NODE_PORT = 6917, 6918
# Job IDs of their own, apart from ci/slurm.py's cluster (which counts from 1). MPICH names a job step's
# shared-memory segment after its PMI name, "<job id>.<step id>", in /dev/shm, which both clusters share:
# the same ID in both, or a segment left by a step the lost-node test SIGKILLed, and MPI_Init fails with
# "Out of memory" (MPIDI_POSIX_comm_bootstrap).
FIRST_JOB_ID = 1_000_000
# A node that stops answering is DOWN after this: the lost-node test waits for it.
NODE_TIMEOUT_S = 20


def namespace(node: str) -> str:
    return f"ganstudy-{node}"


def host_link(node: str) -> str:
    return f"gsv{list(NODES).index(node) + 1}"


def environment() -> dict[str, str]:
    """The environment of a client of this cluster (sbatch, squeue, snakemake --profile slurm)."""
    return {**os.environ, "SLURM_CONF": str(CONF)}


def node_memory_mb() -> int:
    import psutil

    # Each node gets a share of the machine: the scheduler must not promise memory twice.
    return psutil.virtual_memory().total // 2**20 // (len(NODES) + 1)


def config_text() -> str:
    nodes = "\n".join(
        f"NodeName={node} NodeAddr={address} NodeHostname={node} CPUs={os.cpu_count()} RealMemory={node_memory_mb()} "
        f"Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN"
        for node, address in NODES.items()
    )
    return f"""# Written by ci/slurm_nodes.py: two nodes (network namespaces) on this machine, for the cross-node tests.
ClusterName=ganstudy-nodes
SlurmctldHost={socket.gethostname()}({BRIDGE_ADDRESS})
SlurmctldPort={CONTROLLER_PORT}
SlurmdPort={NODE_PORT}
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
# Memory is allocated per node, as on a production cluster, so that a job's --mem shows on each node.
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
MpiDefault=pmi2
FirstJobId={FIRST_JOB_ID}
ReturnToService=2
SlurmdTimeout={NODE_TIMEOUT_S}
# Finished jobs stay in scontrol for the tests' questions.
MinJobAge=3600
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
GresTypes=gpu
StateSaveLocation={STATE_DIR}/slurmctld
SlurmdSpoolDir={STATE_DIR}/%n
SlurmctldPidFile={RUN_DIR}/slurmctld.pid
SlurmdPidFile={RUN_DIR}/slurmd-%n.pid
SlurmctldLogFile={LOG_DIR}/slurmctld.log
SlurmdLogFile={LOG_DIR}/slurmd-%n.log
{nodes}
PartitionName={PARTITION} Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def gres_text() -> str:
    lines = [f"NodeName={node} Name=gpu File={RUN_DIR}/gpus/{node}/nvidia[0-{GPUS_PER_NODE - 1}]" for node in NODES]
    return (
        "# Written by ci/slurm_nodes.py: each node's GPUs, for the scheduler only (see ci/slurm.py).\n"
        + "\n".join(lines)
        + "\n"
    )


def hosts_text() -> str:
    return "127.0.0.1 localhost\n" + "".join(f"{address} {node}\n" for node, address in NODES.items())


def _ip(*arguments: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *arguments], check=check, capture_output=True, text=True)


def _pid_file_pid(path: Path) -> int | None:
    import psutil

    try:
        pid = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if psutil.pid_exists(pid) else None


def _namespace_exists(node: str) -> bool:
    return namespace(node) in _ip("netns", "list").stdout.split()


def _kill_namespace(node: str) -> None:
    """SIGKILL every process of the node's namespace, as a power cut would stop them: no handler runs."""
    if not _namespace_exists(node):
        return
    deadline = time.monotonic() + 20
    while pids := [int(pid) for pid in _ip("netns", "pids", namespace(node)).stdout.split()]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {pids} of node {node} survive SIGKILL")
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def _remove_network() -> None:
    """Remove the namespaces, links and hosts files of an earlier start (idempotent)."""
    for node in NODES:
        _kill_namespace(node)
        if _namespace_exists(node):
            _ip("netns", "del", namespace(node))
        _ip("link", "del", host_link(node), check=False)  # gone with its namespace, unless that failed half-way
    _ip("link", "del", BRIDGE, check=False)


def _make_network() -> None:
    _ip("link", "add", BRIDGE, "type", "bridge")
    _ip("addr", "add", f"{BRIDGE_ADDRESS}/{PREFIX}", "dev", BRIDGE)
    _ip("link", "set", BRIDGE, "up")
    for node, address in NODES.items():
        ns, link = namespace(node), host_link(node)
        _ip("netns", "add", ns)
        _ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", link, "master", BRIDGE, "up")
        _ip("-n", ns, "addr", "add", f"{address}/{PREFIX}", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")


def _start_slurmd(node: str) -> int:
    # The node's network and its own host name (which MPI, torch and run.json read as its host); in its
    # mount namespace, this cluster's configuration at Slurm's default path (as on a real node: the
    # Snakemake job step drops SLURM_CONF from its srun's environment) and its own /etc/hosts, where MPI
    # and torch.distributed find a peer's address by name as on a cluster with DNS.
    mounts = f"mount --bind {CONF_DIR} /etc/slurm && mount --bind {HOSTS} /etc/hosts"
    subprocess.run(
        [
            "nsenter",
            f"--net=/run/netns/{namespace(node)}",
            "unshare",
            "--uts",
            "--mount",
            "--propagation",
            "slave",
            "--",
            "sh",
            "-c",
            f"{mounts} && hostname {node} && exec slurmd -N {node}",
        ],
        check=True,
    )
    pid_file = RUN_DIR / f"slurmd-{node}.pid"
    _wait(lambda: _pid_file_pid(pid_file) is not None, f"slurmd of {node}")
    return _pid_file_pid(pid_file)


def node_states() -> dict[str, str]:
    listed = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, env=environment())
    return dict(line.split() for line in listed.stdout.splitlines() if line.strip())


def _wait_until_up(nodes: list[str], seconds: float = 90) -> None:
    _wait(
        lambda: all(node_states().get(node, "").rstrip("*") in ("idle", "mixed", "allocated") for node in nodes),
        f"Slurm nodes {', '.join(nodes)}",
        seconds,
    )


def start() -> dict:
    """Build the network, start munged (unless it runs), slurmctld and both slurmds; their PIDs."""
    check_installed()
    if os.geteuid() != 0:
        raise RuntimeError("the two-node Slurm needs root (network namespaces, slurmd)")
    # What an interrupted run left: its controller (by its PID file), its nodes and their network.
    stop({"slurmctld": _pid_file_pid(RUN_DIR / "slurmctld.pid")})
    for folder in (CONF_DIR, RUN_DIR, STATE_DIR / "slurmctld", LOG_DIR):
        folder.mkdir(parents=True, exist_ok=True)
    for node in NODES:
        (STATE_DIR / node).mkdir(parents=True, exist_ok=True)
        make_fake_gpus(RUN_DIR / "gpus" / node, GPUS_PER_NODE)
    CONF.write_text(config_text())
    (CONF_DIR / "gres.conf").write_text(gres_text())
    HOSTS.write_text(hosts_text())
    _make_network()
    remove_stale_mpi_segments()
    started = start_munged()
    try:
        # -c: no saved jobs or node states of an earlier run of the tests.
        subprocess.run(["slurmctld", "-c", "-f", str(CONF)], check=True, env=environment())
        _wait(lambda: _pid_file_pid(RUN_DIR / "slurmctld.pid") is not None, "slurmctld of the two-node cluster")
        started["slurmctld"] = _pid_file_pid(RUN_DIR / "slurmctld.pid")
        started["slurmd"] = {node: _start_slurmd(node) for node in NODES}
        _wait_until_up(list(NODES))
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        stop(started)
        logs = "\n".join(f"{log}: {_tail(log)}" for log in sorted(LOG_DIR.glob("*.log")))
        raise RuntimeError(f"{exc}\n{logs}") from None
    return started


def _tail(log: Path, lines: int = 5) -> str:
    return " | ".join(log.read_text(errors="replace").splitlines()[-lines:])


def fail(node: str) -> None:
    """Cut the node's link first, so that its peers get no reset from its dying sockets, then kill all of it."""
    _ip("link", "set", host_link(node), "down")
    _kill_namespace(node)


def revive(node: str) -> int:
    """The node's link up and its slurmd started again; the new slurmd's PID once Slurm has it back."""
    _ip("link", "set", host_link(node), "up")
    pid = _start_slurmd(node)
    _wait_until_up([node], NODE_TIMEOUT_S * 6)
    return pid


def stop(started: dict) -> None:
    """Stop the daemons `start` started (by PID), everything left in the nodes, and the network."""
    import psutil

    pids = [started.get("slurmctld"), *started.get("slurmd", {}).values(), started.get("munged")]
    # A revived node's slurmd has a PID of its own: its PID file names it.
    pids += [_pid_file_pid(RUN_DIR / f"slurmd-{node}.pid") for node in NODES]
    processes = []
    for pid in {pid for pid in pids if pid}:
        try:
            process = psutil.Process(pid)
            process.terminate()
            processes.append(process)
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(processes, timeout=20)
    _remove_network()


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "start":
        print(json.dumps(start()))
    elif command == "fail" and len(sys.argv) == 3:
        fail(sys.argv[2])
    elif command == "revive" and len(sys.argv) == 3:
        print(revive(sys.argv[2]))
    elif command == "stop" and len(sys.argv) == 3:
        stop(json.loads(sys.argv[2]))
    else:
        sys.exit(__doc__)
