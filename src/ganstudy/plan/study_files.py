"""The small files that say what decides each stage's outputs, and each job's command-line arguments.

A stage reads its spec file (results/<study>/specs/<name>.json; a training job its job file), and a job
its arguments file (results/<study>/arguments/<job>.args, read as ``@FILE``). A file rewritten because the
config changed is newer than the outputs it made, so Snakemake redoes them by modification time alone,
with or without its metadata (.snakemake/), and the order of keys in the config never matters. The
planner computes what each file must say and which no longer say it; only ``refresh`` and
``ArgumentsFiles.write``, which the workflow calls when it executes jobs, write.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ganstudy.core.atomic import write_json, write_text
from ganstudy.study.folder import is_spec


def as_json(section: Any) -> str:
    """A config section as canonical one-line JSON: what the ganstudy CLI takes (--settings), and what a
    spec file is compared as."""
    return json.dumps(section, sort_keys=True, separators=(",", ":"))


def results_dir_problem(results_dir: str, study_dir: str) -> str | None:
    """What stops the study's files from being written, naming results_dir: a results folder that is a
    file, or a folder this user cannot write; None where they can be."""
    for folder in (results_dir, study_dir):
        if os.path.exists(folder) and not os.path.isdir(folder):
            return f"results_dir: {folder} is a file, not a folder: move it away or set results_dir to a folder"
    existing = study_dir
    while not os.path.exists(existing):
        existing = os.path.dirname(existing) or "."
    if not os.access(existing, os.W_OK | os.X_OK):
        return (
            f"results_dir: {os.path.abspath(existing)} is not writable for you: set results_dir to a folder you can "
            "write (a project space), or ask for write access"
        )
    return None


def out_of_date(path: Path, content: Any) -> bool:
    """Whether a spec or job file that is there says something else than ``content``."""
    try:
        return json.loads(path.read_text()) != json.loads(as_json(content))
    except (OSError, ValueError):
        return False


def stale_files(files: Mapping[Path, Any]) -> list[Path]:
    """The files that are there and say something else than they must."""
    return [path for path, content in files.items() if out_of_date(path, content)]


def refresh(files: Mapping[Path, Any], made_before: bool, log: Callable[[str], None]) -> None:
    """Before any job of a real run: write each file that is missing or no longer says what it must (its
    stage is then redone). A spec file (under specs/) missing beside outputs made before spec files
    existed (``made_before``) is dated 1970, so that those outputs are kept, as they were before."""
    for path, content in files.items():
        if path.is_file() and not out_of_date(path, content):
            continue
        new = not path.is_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, json.loads(as_json(content)))
        if new and is_spec(path) and made_before:
            os.utime(path, (0, 0))
        elif not new:
            log(f"rewrote {path}: the config has changed what it describes")


@dataclass
class ArgumentsFiles:
    """Each job's arguments, one per line, in ``folder``/<job>.args (<job> names its rule and, where the rule
    has several jobs, the values of their wildcards): a rule's shell line stays short however many runs a
    study has, and ``ganstudy <step> @FILE`` runs the job again by hand. ``made_before``: the study has
    results from before arguments files existed."""

    folder: Path
    made_before: bool
    contents: dict[Path, str] = field(default_factory=dict)
    # Files that are there and say something else (a dry-run lists their jobs; a real run rewrites them).
    stale: set[Path] = field(default_factory=set)

    def path(self, job: str) -> Path:
        return self.folder / f"{job}.args"

    def record(self, job: str, arguments: Iterable[object]) -> Path:
        """Set what ``job``'s file must say; its path."""
        path = self.path(job)
        self.contents[path] = "".join(f"{argument}\n" for argument in arguments)
        if path.is_file() and path.read_text() != self.contents[path]:
            self.stale.add(path)
        return path

    def write(self, path: Path, kept: bool, log: Callable[[str], None]) -> None:
        """Write a recorded file that is missing or says something else. ``kept``: for a job whose settings
        are in a spec file too (data, classifier, scores) or whose run is judged by its record (training),
        a file written for the first time beside results made before arguments files existed is dated
        1970, so that what the study holds is kept (a cheap job is simply redone once)."""
        new = not path.is_file()
        if not new and path.read_text() == self.contents[path]:
            return
        if not new:
            log(f"rewrote {path}: the config has changed the job's arguments")
        write_text(path, self.contents[path])
        self.stale.discard(path)
        if new and kept and self.made_before:
            os.utime(path, (0, 0))


class PlannerFilesNotices(logging.Filter):
    """Snakemake's notices that the planner's own files have none of its metadata, dropped: the planner
    writes them before any job (``refresh``, ``ArgumentsFiles.write``), never their rules, and by design
    decides alone whether they say what they must. A dry-run of a finished study would otherwise report
    every spec, job and arguments file as "missing provenance/metadata", and a report each file as
    "Missing metadata"; such a notice that also names another rule or file is kept.

    ``rules``: the rules that write these files where they are missing; ``writes``: whether a path is one."""

    _RULES = re.compile(r"^Rules with missing metadata: (.+)$", re.MULTILINE)
    _FILE = re.compile(r"^Missing metadata for file (.+?)\. Maybe metadata")

    def __init__(self, rules: Collection[str], writes: Callable[[str], bool]):
        super().__init__()
        self.rules, self.writes = frozenset(rules), writes

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if named := self._RULES.search(message):
            return not set(named[1].split()) <= self.rules
        if named := self._FILE.match(message):
            return not self.writes(named[1])
        return True
