"""The small files that say what decides each stage's outputs, and each job's command-line arguments.

A stage reads its spec file (results/<study>/specs/<name>.json; a training job its job file), and a job
its arguments file (results/<study>/arguments/<job>.args, read as ``@FILE``). A file rewritten because the
config changed is newer than the outputs it made, so Snakemake redoes them by modification time alone,
with or without its metadata (.snakemake/), and the order of keys in the config never matters. The
planner computes what each file must say and which no longer say it; only ``refresh`` and
``ArgumentsFiles.write_all``, which the workflow calls when it executes jobs, write.
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
from ganstudy.study.trials import Schedule
from ganstudy.train.job import older_paths_named


def as_json(section: Any) -> str:
    """A config section as canonical one-line JSON: what the ganstudy CLI takes (--settings), and what a
    spec file is compared as."""
    return json.dumps(section, sort_keys=True, separators=(",", ":"))


def spec_settings(spec: Mapping[str, Any], section: str) -> dict[str, Any]:
    """The settings a step reads from its stage's spec: the config section's, which the data, classifier and
    evaluation specs hold beside the study seed; the reference spec is itself the evaluation settings that
    the real images' statistics depend on (the layer)."""
    return spec[section] if section in spec else {key: value for key, value in spec.items() if key != "seed"}


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


def _there(path: Path) -> Any:
    """What a spec or job file that is there holds; None where it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _same(there: Any, wanted: Any) -> bool:
    """Whether a file holding ``there`` says what ``wanted`` (a file's content as JSON reads it back) says, a job
    file perhaps naming the study's files by the paths of an older release (ganstudy.train.job.older_paths_named)."""
    if isinstance(there, dict) and isinstance(wanted, dict):
        there = older_paths_named(there, wanted)
    return there == wanted


def out_of_date(path: Path, content: Any) -> bool:
    """Whether a spec or job file that is there says something else than ``content``."""
    there = _there(path)
    return there is not None and not _same(there, json.loads(as_json(content)))


def stale_files(files: Mapping[Path, Any]) -> list[Path]:
    """The files that are there and say something else than they must."""
    return [path for path, content in files.items() if out_of_date(path, content)]


def refresh(files: Mapping[Path, Any], made_before: bool, log: Callable[[str], None]) -> None:
    """Before any job of a real run: write each file that is missing or no longer says what it must (its
    stage is then redone). A spec file (under specs/) missing beside outputs made before spec files
    existed (``made_before``) is dated 1970, so that those outputs are kept, as they were before. A job
    file that says the same in an older form is rewritten in the current one and keeps its date."""
    for path, content in files.items():
        there, new, wanted = _there(path), not path.is_file(), json.loads(as_json(content))
        if (there is None and not new) or there == wanted:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if there is not None and _same(there, wanted):
            dated = path.stat()
            write_json(path, wanted)
            os.utime(path, ns=(dated.st_atime_ns, dated.st_mtime_ns))
            log(f"rewrote {path} naming the study's files from its folder: the same job, nothing to redo")
            continue
        write_json(path, wanted)
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
    # The spec files' contents, by path: what a file that names one (--spec) takes its settings from.
    specs: Mapping[Path, Any] = field(default_factory=dict)
    contents: dict[Path, str] = field(default_factory=dict)
    # The files of jobs whose settings are in a spec file too (data, classifier, scores) or whose run is judged
    # by its record (training): see write.
    kept: set[Path] = field(default_factory=set)
    # Files that are there and say something else (a dry-run lists their jobs; a real run rewrites them).
    stale: set[Path] = field(default_factory=set)
    # The study's folder as the config names it now: a file written when it lay elsewhere is the same job.
    root: str = ""
    # Whether the files there are read for ``stale``: not in a cluster job's own Snakemake, which starts
    # after the main one has written them.
    read: bool = True

    def path(self, job: str) -> Path:
        return self.folder / f"{job}.args"

    def record(self, job: str, arguments: Iterable[object], kept: bool = False) -> Path:
        """Set what ``job``'s file must say (``kept``: see write); its path."""
        path = self.path(job)
        self.contents[path] = "".join(f"{argument}\n" for argument in arguments)
        if kept:
            self.kept.add(path)
        if self.read and path.is_file() and not self._says_as_much(path):
            self.stale.add(path)
        return path

    def _says_as_much(self, path: Path) -> bool:
        """Whether the file there says what it must, or all of it in an older form (``_older_form``)."""
        there = path.read_text()
        return there == self.contents[path] or self._older_form(there, self.contents[path]) is not None

    def _older_form(self, there: str, current: str) -> str | None:
        """Why a file that says ``there`` is the job that ``current`` describes, in a form it is rewritten from
        without redoing the job; None where it is another job."""
        if moved_to_spec(there, current, self.specs):
            return "its settings are in its spec file now"
        if relocated(there, current, self.root):
            return f"it was written when the study's folder lay elsewhere, now at {self.root}"
        if schedule_as_text(there, current):
            return "its schedule is given as JSON now"
        return None

    def write_all(self, log: Callable[[str], None]) -> None:
        """Write every recorded file that is missing or says something else."""
        for path in self.contents:
            self.write(path, log)

    def write(self, path: Path, log: Callable[[str], None]) -> None:
        """Write a recorded file that is missing or says something else. A kept job's file written for the
        first time beside results made before arguments files existed is dated 1970, so that what the study
        holds is kept (a cheap job's is dated now: it is simply redone once)."""
        new = not path.is_file()
        if not new and path.read_text() == self.contents[path]:
            return
        if not new and (why := self._older_form(path.read_text(), self.contents[path])) is not None:
            # The same job: its outputs keep their standing, so the file keeps its date.
            dated = path.stat()
            write_text(path, self.contents[path])
            os.utime(path, ns=(dated.st_atime_ns, dated.st_mtime_ns))
            log(f"rewrote {path} in the current form: {why}, nothing to redo")
            return
        if not new:
            log(f"rewrote {path}: the config has changed the job's arguments")
        write_text(path, self.contents[path])
        self.stale.discard(path)
        if new and path in self.kept and self.made_before:
            os.utime(path, (0, 0))


def moved_to_spec(older: str, current: str, specs: Mapping[Path, Any]) -> bool:
    """Whether an arguments file of an older release (``older``: the stage's settings as ``--settings JSON``
    and the study seed as ``--seed N``) says what ``current`` says by naming the stage's spec file
    (``--spec PATH``) as it stands in ``specs``: every other argument the same, the settings and seed those
    of the spec. Such a file is rewritten without redoing its job."""
    old, new = older.splitlines(), current.splitlines()
    settings, seed, spec_path = _option(old, "--settings"), _option(old, "--seed"), _option(new, "--spec")
    spec = specs.get(Path(spec_path)) if spec_path is not None else None
    if settings is None or spec is None or _without(old, "--settings", "--seed") != _without(new, "--spec"):
        return False
    try:
        given = json.loads(settings)
    except ValueError:
        return False
    spec = json.loads(as_json(spec))  # as the file holds it (lists, not tuples)
    bare = {key: value for key, value in spec.items() if key != "seed"}
    return given in (bare, *bare.values()) and (seed is None or seed == str(spec.get("seed")))


def schedule_as_text(older: str, current: str) -> bool:
    """Whether a look's arguments file of an older release, which gave the study's schedule as
    FIRST,STEP,MOST, says what ``current`` says with the same schedule as JSON: every other argument the same."""
    old, new = older.splitlines(), current.splitlines()
    given, wanted = _option(old, "--schedule"), _option(new, "--schedule")
    if given is None or wanted is None or given == wanted or _without(old, "--schedule") != _without(new, "--schedule"):
        return False
    try:
        return Schedule.parse(given) == Schedule.parse(wanted)
    except ValueError:
        return False


def relocated(older: str, current: str, root: str) -> bool:
    """Whether an arguments file written when the study's folder lay elsewhere (``older``) says what
    ``current`` says with the folder at ``root``: each line that differs names a path under ``root`` in
    ``current`` and the same path under one other folder in ``older`` (moved, copied, reached through a
    link, or written as an absolute path)."""
    old, new = older.splitlines(), current.splitlines()
    if not root or len(old) != len(new):
        return False
    folders = set()
    for was, now in zip(old, new):
        if was == now:
            continue
        if now != root and not now.startswith(f"{root}/"):
            return False
        rest = now[len(root) :]
        if not was.endswith(rest) or len(was) == len(rest):
            return False
        folders.add(was[: len(was) - len(rest)])
    return len(folders) == 1


def _option(lines: list[str], option: str) -> str | None:
    """The value after ``option`` in an arguments file's lines, if it is there."""
    return lines[lines.index(option) + 1] if option in lines[:-1] else None


def _without(lines: list[str], *options: str) -> list[str]:
    """The lines with each of ``options`` and its value left out."""
    kept, skip = [], False
    for line in lines:
        if skip:
            skip = False
        elif line in options:
            skip = True
        else:
            kept.append(line)
    return kept


class PlannerFilesNotices(logging.Filter):
    """Snakemake's notices that the planner's own files have none of its metadata, dropped: the planner
    writes them before any job (``refresh``, ``ArgumentsFiles.write_all``), never their rules, and by design
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
