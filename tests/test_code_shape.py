"""The source stays readable in small pieces: no function in src/ over 60 lines (a longer one is split
along its steps, as the grid's rank run and the training job are)."""

from __future__ import annotations

import ast
from pathlib import Path

import ganstudy

SOURCE = Path(ganstudy.__file__).parent
LONGEST = 60


def long_functions(source: Path, longest: int = LONGEST) -> list[str]:
    found = []
    for path in sorted(source.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.end_lineno - node.lineno + 1 > longest
            ):
                found.append(
                    f"{path.relative_to(source)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
                )
    return found


def test_no_function_in_src_is_over_60_lines():
    assert long_functions(SOURCE) == []


def test_the_length_check_counts_a_function_s_lines(tmp_path):
    (tmp_path / "m.py").write_text("def short():\n    return 1\n\n\ndef long():\n" + "    x = 1\n" * 60)
    assert long_functions(tmp_path) == ["m.py:5 long (61 lines)"]
