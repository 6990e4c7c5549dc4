"""Every job of a study's plan as Snakemake's DAG holds it, in a folder of its own, with the files a real run
writes before any job (specs, training jobs, arguments files) written there, as JSON: what
test_step_arguments checks each job's arguments against. Several studies in one process (each Snakefile
parse is seconds):

    python tests/planned_jobs.py OUT.json SNAKEFILE STUDY.yaml FOLDER [STUDY.yaml FOLDER ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings, StorageSettings


def planned_jobs(snakefile: Path, study: Path, folder: Path) -> list[dict]:
    folder.mkdir(parents=True, exist_ok=True)
    with SnakemakeApi(OutputSettings(dryrun=True)) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            config_settings=ConfigSettings(configfiles=[study.resolve()]),
            storage_settings=StorageSettings(),
            snakefile=snakefile.resolve(),
            workdir=folder.resolve(),
        )
        workflow_api.dag(DAGSettings(forceall=True))
        workflow = workflow_api._workflow
        workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
        workflow._build_dag()
        # What a real run writes before any job (common.smk: start_study), here with no lock to take.
        workflow.globals["PLAN"].files.apply(print, print)
        return [
            {
                "rule": job.rule.name,
                "shell": job.shellcmd if job.is_shell else None,
                "input": {name: _paths(job.input[name]) for name in job.input.keys()},
                "inputs": list(job.input),
                "output": list(job.output),
            }
            for job in workflow.dag.jobs
        ]


def _paths(value) -> list[str]:
    return [str(path) for path in value] if isinstance(value, list) else [str(value)]


if __name__ == "__main__":
    out, snakefile, pairs = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    studies = {
        study: planned_jobs(snakefile, Path(study), Path(folder)) for study, folder in zip(pairs[::2], pairs[1::2])
    }
    out.write_text(json.dumps(studies))
