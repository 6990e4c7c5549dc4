"""The site a study runs on: what a node is (cores, GPUs, memory) and what every job loads. Each profile
carries a site file (profiles/<name>/site.yaml) and names it in its ``config: [site=...]``, so the site
travels with the profile while ``--configfile`` stays the study's. A study's ``compute`` section may
still set a site key on purpose: its value wins, and the workflow says so when it builds the DAG.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ganstudy.config.schema import SCHEMAS_DIR
from ganstudy.config.validate import section_problems
from ganstudy.errors import GanstudyError
from ganstudy.plan.launchers import LAUNCHERS

# The keys a site describes; a study's compute section has the same keys, null meaning "the site's".
SITE_KEYS = ("node_cores", "node_gpus", "gpus_per_rank", "node_mem_mb", "modules")


def read_site(reference: str | None, base: str | os.PathLike[str]) -> dict[str, Any]:
    """The site file ``reference`` (relative to the working directory, or else to ``base``, the workflow's
    folder), validated against workflow/schemas/site.schema.yaml with its defaults filled in; no
    reference: this machine (mpiexec) with the schema's defaults (no GPU)."""
    if reference is None:
        site: dict[str, Any] = {"launcher": "mpiexec"}
        where = "site (none given: this machine, the defaults)"
    else:
        path = Path(reference)
        if not path.is_file() and not path.is_absolute() and (Path(base) / path).is_file():
            path = Path(base) / path
        if not path.is_file():
            raise GanstudyError(
                f"site file {reference} (config key site, set by the profile) is not a file: give a "
                "site description such as profiles/slurm/site.yaml (profiles/README.md)"
            )
        try:
            site = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as error:
            raise GanstudyError(f"site file {path} is not YAML: {error}") from None
        if not isinstance(site, dict):
            raise GanstudyError(f"site file {path} must map keys to values, got {type(site).__name__}")
        where = f"site file {path}"
    schema = yaml.safe_load((SCHEMAS_DIR / "site.schema.yaml").read_text())
    problems = section_problems(site, schema, where)
    if "launcher" not in site:
        # Instead of the schema's "'launcher' is a required property": what to write.
        problems = [problem for problem in problems if "'launcher'" not in problem]
        problems.append(
            f"{where} names no launcher: add how a training job starts its ranks, `launcher: srun` (Slurm), "
            "`launcher: jsrun` (LSF) or `launcher: mpiexec` (this machine); profiles/README.md"
        )
    elif isinstance(site["launcher"], str):
        try:
            LAUNCHERS.get(site["launcher"])
        except GanstudyError as error:
            problems.append(f"{where}: launcher: {error}")
    if problems:
        raise GanstudyError("; ".join(problems))
    return site


def resolve_node_cores(compute: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """node_cores null in both the study and the site: the cores of the machine that plans, and that
    machine's name (a cluster's login node may not be like its compute nodes); else (compute, None)."""
    if compute["node_cores"] is not None:
        return compute, None
    return {**compute, "node_cores": os.cpu_count() or 1}, socket.gethostname()


def scheduler_resources(
    site: Mapping[str, Any], resources: Mapping[str, str], environ: Mapping[str, str]
) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """What every cluster job is submitted with (account, partition and node constraint; LSF: project, queue
    and resource selection), as the
    resources the scheduler's Snakemake plugin reads: each from the profile's default-resources
    (``resources``, name -> value), else the site file, else the environment. Also the plan's notices: a
    line naming each value and where it came from, and a warning for each setting no source gives."""
    given, found, notices = {}, [], []
    for setting in LAUNCHERS.get(site["launcher"]).settings:
        sources = [
            # Snakemake passes the summit profile's empty project on quoted.
            (resources.get(setting.resource, "").strip("'\" "), f"{setting.resource} in the profile"),
            (site.get(setting.key) or "", f"{setting.key} in the site file"),
            *((environ.get(name, ""), name) for name in setting.variables),
        ]
        value, source = next(((value, source) for value, source in sources if value), ("", ""))
        if value:
            given[setting.resource] = value
            found.append(f"{setting.called} {value} ({source})")
        elif setting.missing is not None:
            notices.append(
                (
                    "warning",
                    f"site '{site['name']}': no {setting.called} for the scheduler ({setting.resource} in the "
                    f"profile's default-resources, {setting.key} in the site file, or {' / '.join(setting.variables)} "
                    f"in the environment): {setting.missing}",
                )
            )
    if found:
        notices.insert(0, ("info", f"site '{site['name']}': every cluster job is submitted with {', '.join(found)}"))
    return given, notices


def with_site(compute: dict[str, Any], site: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The study's compute section completed from the site: a key the study leaves null takes the site's
    value. Also one line per key the study sets to a value other than the site's (an override on purpose
    is fine; an old study file that still carries another site's hardware is worth a look)."""
    merged, overrides = dict(compute), []
    for key in SITE_KEYS:
        if compute.get(key) is None:
            merged[key] = site[key]
        elif compute[key] != site[key]:
            overrides.append(
                f"compute.{key}: the study sets {compute[key]!r} where the site '{site['name']}' says {site[key]!r}; "
                "the study's value is used (node hardware belongs in the site file, profiles/<name>/site.yaml: "
                "remove the key from the study unless the study needs it)"
            )
    return merged, overrides
