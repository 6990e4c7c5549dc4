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


# The description's own look, inside the report: Snakemake's first page is a flex box that centres its
# content vertically; where the answer is taller than the window, plain centring would push its top out of
# reach, "safe" centring starts it at the top. The report's typography puts backticks around inline code,
# which the page's Markdown already marks as code.
_STYLE = """<style>
.items-center:has(#ganstudy-answer) { align-items: safe center; }
#ganstudy-answer code::before, #ganstudy-answer code::after { content: none; }
</style>"""
# Wider than the report's column for a description (the page's tables), beside its menu.
_WIDTH = "width: min(72rem, calc(100vw - 22rem))"


def _inline(figures: Sequence[Path]) -> str:
    """The figures side by side, inside the report: it is one self-contained file. Their base64 in lines of 76
    characters (docutils refuses longer than 10,000; a browser's base64 decoding skips the line breaks)."""
    if not figures:
        return ""
    width = f"calc({100 / len(figures):.4g}% - 0.5rem)"
    images = "".join(
        f'<img alt="{figure.stem}" style="max-width: {width}" '
        f'src="data:image/png;base64,\n{base64.encodebytes(figure.read_bytes()).decode("ascii")}">\n'
        for figure in figures
    )
    return f'<p style="display: flex; gap: 0.5rem; align-items: flex-start">\n{images}</p>\n'


def answer_description(page: str, inline: Sequence[Path]) -> str:
    """The report's description (reStructuredText, which Snakemake renders through Jinja, then docutils):
    ``page``, the summary's Markdown without its list of figures, as HTML, the ``inline`` figures right after
    its answer (the first paragraph under its title: the first screen holds both), then the links to the rest
    of the report."""
    # Python-Markdown starts a list only after a blank line (CommonMark, as GitHub shows the page, also
    # within a paragraph): the verdicts' lists would run into their sentence.
    page = re.sub(r"^(?!- )(.+)\n- ", r"\1\n\n- ", page, flags=re.MULTILINE)
    title, _, rest = page.partition("\n\n")
    answer, _, rest = rest.partition("\n\n")
    html = (
        markdown.markdown(f"{title}\n\n{answer}", extensions=["tables"])
        + _inline(inline)
        + markdown.markdown(rest, extensions=["tables"])
    )
    html = f'{_STYLE}\n<div id="ganstudy-answer" style="{_WIDTH}">\n{html}\n</div>'
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
