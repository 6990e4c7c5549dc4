"""The first page of the study's HTML report (``snakemake --report``, ``make report``): the answer.

Snakemake shows a workflow's description on the report's first page, beside the rule graph, or alone where
the report has metadata (``--report-metadata``). The summary step writes both beside summary.md:
``report/answer.rst``, the description (the page's Markdown as HTML, the primary metric's box and cost
figures inline, links to every figure and table of the report), and ``report/metadata.yaml``, the study's
numbers of set-ups, scored runs and metrics. The Snakefile takes the answer as its description once it
exists, so a report made before the study finished still has the workflow's own (workflow/report/workflow.rst).
"""

from __future__ import annotations

import base64
import os
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path

import markdown
import pandas as pd
import yaml

from ganstudy.core.atomic import write_text
from ganstudy.study.folder import StudyFolder

# The report's own link targets (Snakemake defines one per category and per result file's name).
_LINKS = "Every figure: `5. Figures`_; every table: `4. Statistics`_; the rule graph and each job: `Workflow`_."


def _inline(figure: Path) -> str:
    # The report is one self-contained file: a figure on its first page travels inside it. In lines of 76
    # characters (docutils refuses longer than 10,000; a browser's base64 decoding skips the line breaks).
    data = base64.encodebytes(figure.read_bytes()).decode("ascii")
    return f'<p><img alt="{figure.stem}" style="max-width: 100%" src="data:image/png;base64,\n{data}"></p>\n'


def answer_description(page: str, inline: Sequence[Path]) -> str:
    """The report's description (reStructuredText, which Snakemake renders through Jinja, then docutils):
    ``page``, the summary's Markdown without its list of figures, as HTML, then the ``inline`` figures and
    the links to the rest of the report."""
    # Python-Markdown starts a list only after a blank line (CommonMark, as GitHub shows the page, also
    # within a paragraph): the verdicts' lists would run into their sentence.
    page = re.sub(r"^(?!- )(.+)\n- ", r"\1\n\n- ", page, flags=re.MULTILINE)
    html = markdown.markdown(page, extensions=["tables"]) + "".join(_inline(figure) for figure in inline)
    # Wider than the report's column for a description (the page's tables), beside its menu; and no taller
    # than the window with the metadata below it: the report centres its first page vertically, so a taller
    # one would lose its top, the answer, out of reach.
    style = "width: min(72rem, calc(100vw - 22rem)); max-height: calc(100vh - 22rem); overflow: auto"
    html = f'<div style="{style}">\n{html}\n</div>'
    # raw: a set-up named like a Jinja expression stays text.
    return f"{{% raw %}}\n.. raw:: html\n\n{textwrap.indent(html, '   ')}\n{{% endraw %}}\n\n{_LINKS}\n"


def write_report_page(
    study_dir: str | os.PathLike[str],
    setups: Sequence[str],
    metrics: Sequence[str],
    primary: str,
    page: str,
    figures: Sequence[str],
) -> None:
    """Write report/answer.rst and report/metadata.yaml under ``study_dir`` from the summary's ``page``
    (without its figures); the primary metric's box and cost figures among ``figures`` go inline."""
    folder = StudyFolder.at(study_dir)
    wanted = {f"box_{primary}", f"cost_{primary}"}
    inline = [Path(figure) for figure in figures if Path(figure).stem in wanted and Path(figure).is_file()]
    write_text(folder.report_answer(), answer_description(page, inline))
    # Numbers only: Snakemake 9.27 shows a text value of report metadata as docutils' parts, not as the text.
    scored = pd.read_csv(folder.scores_table())[["setup", "trial"]].drop_duplicates()
    metadata = {"set-ups": len(setups), "runs scored": len(scored), "metrics": len(metrics)}
    write_text(folder.report_metadata(), yaml.safe_dump(metadata, sort_keys=False))
