"""The checkout ganstudy runs from: its workflow (Snakefile, profiles, docs) lives beside the package
(``pip install -e .`` of a clone), and the version names the commit."""

from __future__ import annotations

from pathlib import Path

import ganstudy

ROOT = Path(ganstudy.__file__).resolve().parents[2]


def version_text() -> str:
    """``ganstudy <version> (git <commit>[, uncommitted changes])``, or without git where the checkout has none."""
    from ganstudy.provenance import git_state

    state = git_state(ROOT)
    if state["commit"] is None:
        return f"ganstudy {ganstudy.__version__} (no git checkout at {ROOT})"
    changes = ", uncommitted changes" if state["dirty"] else ""
    return f"ganstudy {ganstudy.__version__} (git {state['commit'][:12]}{changes})"
