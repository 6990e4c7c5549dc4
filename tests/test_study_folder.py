"""The study folder has one owner (ganstudy.study.folder): its paths are the layout the workflow, status, export
and the archive use, and no other module or rule spells a path under results/<study>/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import ganstudy
from conftest import REPO
from ganstudy.study.folder import StudyFolder, is_spec, of_setup

SOURCE = Path(ganstudy.__file__).parent
OWNER = SOURCE / "study" / "folder.py"
# The folders and files directly under a study's folder.
PARTS = (
    "runs",
    "scores",
    "tables",
    "figures",
    "logs",
    "checkpoints",
    "archive",
    "archived",
    "specs",
    "jobs",
    "arguments",
    "looks",
    "classifier",
    "data",
    "site",
    "report",
)
FILES = ("plan.json", "scores.csv", "convergence.csv", "timings.csv", "runs.csv", "summary.md", "decision.json")


def test_the_folder_names_the_layout_the_workflow_and_its_readers_use():
    folder = StudyFolder("results/s")
    assert folder.run_file("run.json", "grid2x2", 3) == "results/s/runs/grid2x2/trial3/run.json"
    # Without values, the rules' patterns: Snakemake fills the wildcards.
    assert folder.run_file("losses.csv") == "results/s/runs/{setup}/trial{trial}/losses.csv"
    assert folder.score(trial=0) == "results/s/scores/{setup}/trial0.json"
    assert folder.train_log("a", 1) == "results/s/logs/train/a/trial1.log"
    assert folder.table("pairs_{metric}", "md") == "results/s/tables/pairs_{metric}.md"
    assert folder.figure("box_fid") == "results/s/figures/box_fid.png"
    assert folder.split("train") == "results/s/data/train.npz" and folder.manifest() == "results/s/data/manifest.json"
    assert folder.decision() == "results/s/looks/decision.json" and folder.plan() == "results/s/plan.json"
    assert StudyFolder.at(Path("/x/results/s")).checkpoints("a", 0) == "/x/results/s/checkpoints/a/trial0"
    assert is_spec(folder.spec("data")) and not is_spec(folder.training_job("a"))
    assert of_setup(folder.run_file("losses.csv", "grid1x1", 0), "grid1x1")
    assert not of_setup(folder.run_file("losses.csv", "grid1x1", 0), "grid1")
    assert of_setup(folder.score("b", 2), "b")


# Paths that look like the study folder's and are not under it.
ELSEWHERE = {"logs/lsf": "the summit profile's LSF job logs, in the workflow's working directory"}


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """The string constants of a module that can be paths: not docstrings, help texts or messages (which
    name paths for a reader: what the code says, not what it opens)."""
    said = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    said |= {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg == "help"}
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in said
        and not re.search(r"\s", node.value)
        and node.value not in ELSEWHERE
    ]


def _joins(tree: ast.AST) -> list[tuple[int, str]]:
    """``path / "runs"``: a path joined with one of the study folder's own names."""
    return [
        (node.lineno, node.right.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Div)
        and isinstance(node.right, ast.Constant)
        and node.right.value in PARTS + FILES
    ]


def test_no_module_but_the_owner_spells_a_path_under_the_study_folder():
    inside = re.compile(rf"(^|/)({'|'.join(p for p in PARTS if p not in ('data', 'report'))})/")
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        if path == OWNER:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for line, text in _strings(tree):
            if inside.search(text) or text in FILES:
                found.append(f"{path.relative_to(SOURCE)}:{line}: {text!r}")
        found += [f"{path.relative_to(SOURCE)}:{line}: / {name!r}" for line, name in _joins(tree)]
    assert not found, "spelled outside ganstudy.study.folder:\n" + "\n".join(found)


def test_no_rule_spells_a_path_under_the_study_folder():
    """The rules take their outputs and logs from FOLDER (PLAN.folder), or from another rule's output."""
    spelled = re.compile(r"\{PLAN\.(study_dir|log_dir)\}|\"(?:[^\"#]*/)?(?:" + "|".join(FILES) + r")\"")
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if spelled.search(line.split("#")[0])
    ]
    assert not found, "spelled outside ganstudy.study.folder:\n" + "\n".join(found)
