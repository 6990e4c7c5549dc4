"""docs/first-hour.md as steps a test can run: its ``bash`` blocks are commands, each followed by a ``text``
block of what it prints (an excerpt: ``...`` stands for anything; every number, convergence verdict and
effect size may differ); a ``yaml`` block whose first line names a file (``# config/config.yaml``) is an
edit merged into that file. An HTML
comment before a block says how it runs: ``<!-- walk-through: beside the run above -->`` (repeatedly,
while the command before it runs) or ``<!-- walk-through: a fresh checkout -->`` (from here on, in a
new checkout).

``python tests/regenerate_docs.py`` walks the page on the default study itself and rewrites its excerpts from what
each command printed (with README.md's caption and docs/results.md's entry from the same run)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from conftest import REPO
from ganstudy.core.procfs import cpu_fields

DOC = REPO / "docs" / "first-hour.md"
_MACHINE = "<!-- walk-through: the machine -->"
_MARKER = re.compile(r"<!-- walk-through: (beside the run above|a fresh checkout) -->")
# Signed: a shrunken study's 95% interval over 2 trials may reach below zero where the real one does not.
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
# What a shrunken study may print otherwise than the real one: whether a set-up is on the cost front and
# its convergence verdict (a ranking table's last two cells), and an effect size's word.
_VERDICT = re.compile(r"\| (?:yes)? *\| (?:yes|no|degraded|–) \|$")
_EFFECT = re.compile(r"\((?:negligible|small|medium|large)\)|, (?:negligible|small|medium|large)\)")


@dataclass
class Step:
    kind: str  # "bash" or "yaml"
    text: str
    excerpt: str = ""
    beside: bool = False
    fresh: bool = False


@dataclass
class Done:
    step: Step
    output: str
    returncode: int
    folder: Path
    missing: list[str] = field(default_factory=list)
    seconds: float = 0.0  # how long the command ran


def steps(doc: Path = DOC) -> list[Step]:
    found, markers, lines = [], set(), doc.read_text().splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        marker = _MARKER.fullmatch(line.strip())
        if marker:
            markers.add(marker.group(1))
        elif line.startswith("```"):
            end = lines.index("```", index + 1)
            kind, body = line[3:].strip(), "\n".join(lines[index + 1 : end]) + "\n"
            if kind in ("bash", "yaml"):
                found.append(
                    Step(kind, body, beside="beside the run above" in markers, fresh="a fresh checkout" in markers)
                )
                markers = set()
            elif kind == "text" and found and found[-1].kind == "bash" and not found[-1].excerpt:
                found[-1].excerpt = body
            index = end
        index += 1
    return found


def config_edits(doc: Path = DOC) -> list[dict]:
    """The study edits the walk-through makes (its yaml blocks for config/config.yaml), in order."""
    return [
        yaml.safe_load(step.text)
        for step in steps(doc)
        if step.kind == "yaml" and _target(step) == "config/config.yaml"
    ]


def merged(base: dict, edit: dict) -> dict:
    out = dict(base)
    for key, value in edit.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def checkout(folder: Path, config: dict, cores: int | None = None) -> Path:
    """A checkout in ``folder`` that shares this one's code and environment: the workflow, the Makefile and
    the environment linked, the profiles copied (the walk-through edits a site file), ``config`` as
    config/config.yaml. ``cores``: what the local profile gives Snakemake, where not all of them."""
    folder.mkdir(parents=True)
    for name in ("Snakefile", "workflow", "Makefile", "pyproject.toml", "constraints.txt"):
        (folder / name).symlink_to(REPO / name)
    (folder / ".venv").symlink_to(sys.prefix)
    shutil.copytree(REPO / "profiles", folder / "profiles", symlinks=True)
    if cores is not None:
        local = folder / "profiles" / "local" / "config.v8+.yaml"
        assert local.read_text().count("cores: all\n") == 1, local.read_text()
        local.write_text(local.read_text().replace("cores: all\n", f"cores: {cores}\n"))
    for profile in ("local", "slurm", "slurm-gpu", "summit"):
        (folder / profile).symlink_to(Path("profiles") / profile)
    (folder / "config").mkdir()
    (folder / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    # make must find the environment up to date, or `make setup` would install into it from this folder.
    stale = subprocess.run(["make", "-q", "setup"], cwd=folder, capture_output=True, text=True)
    assert stale.returncode == 0, f"{sys.prefix} is older than pyproject.toml or constraints.txt: run make setup"
    return folder


def walk(
    first: Path, fresh: Path, config: dict, env: dict, timeout: int = 900, every: float = 1.0, cores: int | None = None
) -> list[Done]:
    """Every step in order: commands in ``first``, from a fresh-checkout marker on in ``fresh`` (made then,
    with the study as it stands); ``cores``: the local profile's (checkout)."""
    done: list[Done] = []
    folder = checkout(first, config, cores)
    todo = steps()
    for index, step in enumerate(todo):
        if step.fresh:
            folder = checkout(fresh, yaml.safe_load((folder / "config" / "config.yaml").read_text()), cores)
        if step.kind == "yaml":
            path = folder / _target(step)
            path.write_text(
                yaml.safe_dump(merged(yaml.safe_load(path.read_text()), yaml.safe_load(step.text)), sort_keys=False)
            )
            continue
        if step.beside:
            continue  # run with the step before it
        after = todo[index + 1] if index + 1 < len(todo) else None
        if after is not None and after.beside:
            done += _beside(step, after, folder, env, timeout, every)
        else:
            start = time.monotonic()
            ran = subprocess.run(
                ["bash", "-c", step.text], cwd=folder, capture_output=True, text=True, env=env, timeout=timeout
            )
            done.append(_checked(step, ran.stdout + ran.stderr, ran.returncode, folder, time.monotonic() - start))
    return done


def _beside(step: Step, watcher: Step, folder: Path, env: dict, timeout: int, every: float) -> list[Done]:
    """``step`` in the background and ``watcher`` every ``every`` seconds until it ends; the watcher's excerpt is
    checked against all it printed."""
    log = folder / ".walk-through.log"
    start = time.monotonic()
    with log.open("w") as out:
        running = subprocess.Popen(["bash", "-c", step.text], cwd=folder, stdout=out, stderr=subprocess.STDOUT, env=env)
        watched, deadline = [], time.monotonic() + timeout
        while True:
            ended = running.poll() is not None or time.monotonic() > deadline
            seen = subprocess.run(
                ["bash", "-c", watcher.text], cwd=folder, capture_output=True, text=True, env=env, timeout=60
            )
            # Before the run has planned, the watcher may say there is nothing to watch yet.
            if seen.returncode == 0:
                watched.append(seen.stdout + seen.stderr)
            if ended:
                break
            time.sleep(every)
        if running.poll() is None:
            running.kill()
        returncode = running.wait()
        seconds = time.monotonic() - start
    # The watcher's own verdict is its last look, after the run.
    last = "\n".join(watched) if seen.returncode == 0 else seen.stdout + seen.stderr
    return [
        _checked(step, log.read_text(), returncode, folder, seconds),
        _checked(watcher, last, seen.returncode, folder),
    ]


def _checked(step: Step, output: str, returncode: int, folder: Path, seconds: float = 0.0) -> Done:
    return Done(step, output, returncode, folder, missing_lines(step.excerpt, output), seconds)


def shape(line: str) -> str:
    """A line as excerpts are compared: numbers, effect words and a ranking row's last two cells aside."""
    line = _EFFECT.sub("(effect)", _VERDICT.sub("| front | verdict |", _NUMBER.sub("#", line.strip())))
    return " ".join(line.split())


def missing_lines(excerpt: str, output: str) -> list[str]:
    """The excerpt's lines that no line of ``output`` matches, numbers aside (``...``: anything)."""
    printed = {shape(line) for line in output.splitlines()}
    missing = []
    for line in excerpt.splitlines():
        shaped = shape(line)
        if shaped in ("", "..."):
            continue
        pattern = re.compile(".*".join(re.escape(piece) for piece in shaped.split("...")))
        if not any(pattern.fullmatch(candidate) for candidate in printed):
            missing.append(line)
    return missing


def _piece_pattern(piece: str, names: Collection[str]) -> str:
    """A regex for a piece of an excerpt line as printed: its numbers, effect words and a ranking row's last
    two cells may differ, and so may its runs of spaces (a table's columns align to what they hold); the
    set-ups' ``names`` may not (grid1x1 is no number)."""
    variable = {"number": _NUMBER, "effect": _EFFECT, "verdict": _VERDICT}
    tokens = (
        [f"(?P<name>{'|'.join(re.escape(name) for name in sorted(names, key=len, reverse=True))})"] if names else []
    )
    tokens += [f"(?P<{kind}>{regex.pattern})" for kind, regex in variable.items()] + [r"(?P<space>\s+)"]
    pattern, at = "", 0
    for found in re.finditer("|".join(tokens), piece):
        pattern += re.escape(piece[at : found.start()])
        if found.lastgroup == "name":
            pattern += re.escape(found.group())
        elif found.lastgroup == "space":
            pattern += r"\s+"
        else:
            pattern += f"(?:{variable[found.lastgroup].pattern})"
        at = found.end()
    return pattern + re.escape(piece[at:])


def regenerated_line(line: str, output: str, names: Collection[str]) -> str:
    """The excerpt ``line`` as ``output`` printed it (its numbers and words), its ``...`` kept where they
    stand for what is left out; the line itself where no printed line matches it (missing_lines names it).
    ``names``: the study's set-ups, which a line must name as printed."""
    if shape(line) in ("", "..."):
        return line
    pieces = line.strip().split("...")
    pattern = re.compile(".*?".join(f"({_piece_pattern(piece, names)})" for piece in pieces))
    found = [match for printed in output.splitlines() if (match := pattern.fullmatch(printed.strip()))]
    if not found:
        return line
    # Of the printed lines it may stand for (trial 0's row or trial 1's), the one with most of its words.
    words = set(line.split())
    best = max(found, key=lambda match: len(words & set(match.string.split())))
    return line[: len(line) - len(line.lstrip())] + "...".join(best.groups())


def regenerated(page: str, done: list[Done], names: Collection[str]) -> str:
    """``page`` with every excerpt rewritten from what its command printed (regenerated_line)."""
    for step in done:
        if step.step.excerpt:
            lines = [regenerated_line(line, step.output, names) for line in step.step.excerpt.splitlines()]
            block = f"```text\n{step.step.excerpt}```"
            assert page.count(block) == 1, f"the excerpt of {step.step.text.strip()!r} is not once in the page"
            page = page.replace(block, "```text\n" + "\n".join(lines) + "\n```")
    return page


def _target(step: Step) -> str:
    first = step.text.splitlines()[0]
    assert first.startswith("# "), f"a yaml block of the walk-through names its file on its first line: {first!r}"
    return first[2:].strip()


def machine() -> str:
    """This machine's CPU (its model name, family and model) and its cores, as the page names a run's machine."""
    info = cpu_fields()
    name, family, model = (info.get(key, "?") for key in ("model name", "cpu family", "model"))
    return f"{name} (family {family} model {model}), {os.cpu_count()} cores"


def with_machine(page: str, where: str, stamped: str) -> str:
    """``page`` with the paragraph after its machine marker saying where, when and at which commit its excerpts
    were printed (``where``), under the regeneration's ``stamped`` comment."""
    head, marker, tail = page.partition(_MACHINE + "\n")
    assert marker, f"docs/first-hour.md has no line {_MACHINE}"
    paragraph = (
        f"The excerpts are what the commands printed on {where} (`python tests/regenerate_docs.py` runs every "
        "command below in this order on the default study and writes what each printed into this page). On "
        "another CPU the numbers differ (float results differ between CPU models), never the layout. "
        "`tests/test_living_study.py` runs the same commands on a shrunken copy of the default study and checks "
        "the excerpts against what they print, every number allowed to differ."
    )
    rest = tail.split("\n\n", 1)[1] if "\n\n" in tail else ""
    return head + marker + stamped + "\n" + textwrap.fill(paragraph, width=110, break_on_hyphens=False) + "\n\n" + rest
