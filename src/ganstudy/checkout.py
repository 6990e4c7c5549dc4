"""The checkout ganstudy runs from: its workflow (Snakefile, schemas, profiles) lives beside the package
(``pip install -e .`` of a clone), so a command run from any directory finds the schemas there, and the
version names the commit."""

from __future__ import annotations

from pathlib import Path

import ganstudy
from ganstudy.errors import GanstudyError

ROOT = Path(ganstudy.__file__).resolve().parents[2]


def schemas_dir() -> Path:
    """workflow/schemas of the checkout the package was installed from."""
    folder = ROOT / "workflow" / "schemas"
    if not (folder / "config.schema.yaml").is_file():
        raise GanstudyError(f"the workflow's schemas are not beside the ganstudy package (looked in {folder}): install "
                            "ganstudy from its clone with `pip install -e .` (make setup does), or pass the schema's path")
    return folder


def version_text() -> str:
    """``ganstudy <version> (git <commit>[, uncommitted changes])``, or without git where the checkout has none."""
    from ganstudy.provenance import git_state

    state = git_state(str(ROOT))
    if state["commit"] is None:
        return f"ganstudy {ganstudy.__version__} (no git checkout at {ROOT})"
    changes = ", uncommitted changes" if state["dirty"] else ""
    return f"ganstudy {ganstudy.__version__} (git {state['commit'][:12]}{changes})"
