"""``ganstudy placement``: where every rank of a study's finished runs ran (host, place among its node's
ranks, the GPUs the scheduler gave it, the device it trained on) and what of that is wrong for a job
across nodes. It reads only the runs' run.json files, so it answers on a login node after a site check
(config/studies/site_check.yaml)."""

from __future__ import annotations

import glob
from collections import defaultdict
from pathlib import Path
from typing import Any

from ganstudy.core.atomic import read_json
from ganstudy.errors import GanstudyError
from ganstudy.parallel.world import gpu_indices
from ganstudy.study.folder import StudyFolder


def rank_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per rank of a run record: rank, host, node_rank, the GPUs it saw (CUDA_VISIBLE_DEVICES as
    the scheduler set it, "" when unset) and the devices it trained on."""
    return [
        {
            "rank": rank,
            "host": host,
            "node_rank": facts.get("node_rank"),
            "gpus": facts.get("scheduler", {}).get("CUDA_VISIBLE_DEVICES", ""),
            "devices": ", ".join(devices),
        }
        for rank, (host, facts, devices) in enumerate(zip(record["hosts"], record["ranks"], record["device_names"]))
    ]


def _gpu_in_use(row: dict[str, Any], gpus_per_rank: int) -> str | None:
    """The physical GPU a rank's generator trains on, as select_devices picks it from what it sees."""
    visible = [gpu for gpu in row["gpus"].split(",") if gpu]
    if not visible or row["node_rank"] is None or row["devices"] == "cpu":
        return None
    return visible[gpu_indices(row["node_rank"], gpus_per_rank, len(visible))[0]]


def placement_problems(record: dict[str, Any]) -> list[str]:
    """What is wrong with where a run's ranks ran: ranks of one host that MPI did not group as one node,
    ranks that trained on one GPU, ranks that trained on the CPU while the scheduler gave them GPUs."""
    rows = rank_rows(record)
    gpus_per_rank = record.get("gpus_per_rank", 1)
    problems = []
    by_host: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_host[row["host"]].append(row)
    for host, ranks in by_host.items():
        node_ranks = sorted(row["node_rank"] for row in ranks if row["node_rank"] is not None)
        if node_ranks and node_ranks != list(range(len(ranks))):
            problems.append(
                f"host {host}: ranks {[row['rank'] for row in ranks]} have node ranks {node_ranks}, not "
                f"0..{len(ranks) - 1}: MPI does not group them as one node, so they may pick the same GPU"
            )
        used: dict[str, list[int]] = defaultdict(list)
        for row in ranks:
            gpu = _gpu_in_use(row, gpus_per_rank)
            if gpu is not None:
                used[gpu].append(row["rank"])
        problems += [
            f"host {host}: ranks {shared} all train on GPU {gpu}" for gpu, shared in used.items() if len(shared) > 1
        ]
    problems += [
        f"rank {row['rank']} on {row['host']} trained on the CPU though the scheduler gave it GPU(s) {row['gpus']} "
        "(compute.device: cpu, or torch without CUDA)"
        for row in rows
        if row["gpus"] and row["devices"] == "cpu"
    ]
    return problems


def placement_report(study_dir: str | Path) -> tuple[str, int]:
    """A table of every finished run's ranks, each run's problems below it; (text, number of problems)."""
    folder = StudyFolder.at(study_dir)
    records = sorted(Path(path) for path in glob.glob(folder.run_file("run.json", "*", "*")))
    if not records:
        raise GanstudyError(
            f"no finished run under {folder.runs()}: run the study first (run.json marks a finished run)"
        )
    lines, count = [], 0
    for path in records:
        record = read_json(path)
        rows = rank_rows(record)
        hosts = sorted({row["host"] for row in rows})
        lines.append(
            f"{path.parent.relative_to(study_dir)}: {len(rows)} ranks on {len(hosts)} host(s) ({', '.join(hosts)})"
        )
        lines.append("  rank  host                  node rank  GPUs given  device")
        lines += [
            f"  {row['rank']:>4}  {row['host']:<20}  {row['node_rank'] if row['node_rank'] is not None else '?':>9}  "
            f"{row['gpus'] or '-':<10}  {row['devices']}"
            for row in rows
        ]
        problems = placement_problems(record)
        lines += [f"  problem: {problem}" for problem in problems]
        count += len(problems)
    return "\n".join(lines), count
