"""The protocol of a score: how it was measured, as the score file's ``protocol`` records it
(ganstudy.evaluate.scoring), said in one line per metric for scores.csv and the tables' footnotes.

A FID moves with the extractor's weights and layer, the resize of the images, the precision and the numbers
of generated and real images, and a paper's FID is often not reproducible for want of them (Parmar et al.,
"On Aliased Resizing and Surprising Subtleties in GAN Evaluation"; Chong and Forsyth, "Effectively Unbiased
FID and Inception Score and Where to Find Them"). So a table says the protocol of its scores, and warns
where the scores it compares were not all measured alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ganstudy.evaluate.metrics import METRICS, Metric

NOT_RECORDED = "not recorded (scored before ganstudy recorded protocols: rerun the evaluate jobs to record it)"
EXTRACTOR_NAMES = {"inception": "Inception-v3", "classifier": "the data set's classifier"}


def _metric_of(column: str) -> Metric | None:
    """The metric that writes ``column``: the metric of that name, or the one whose name starts it (isc_std)."""
    if column in METRICS:
        return METRICS.get(column)
    owners = [name for name in METRICS if column.startswith(f"{name}_")]
    return METRICS.get(max(owners, key=len)) if owners else None


def protocol_text(record: Mapping[str, Any], column: str) -> str:
    """How the score file ``record`` measured ``column``: the extractors it read, their weights, layers, input
    and precision, the metric's own settings, the sample counts, and torch-fidelity's version."""
    protocol = record.get("protocol")
    if not protocol:
        return NOT_RECORDED
    metric = _metric_of(column)
    roles = (
        None
        if metric is None
        else {role for role, used in (("quality", metric.features), ("classifier", metric.classifier)) if used}
    )
    parts = []
    for role, extractor in sorted(protocol["extractors"].items()):
        if roles is None or role in roles:
            parts.append(
                f"{EXTRACTOR_NAMES.get(extractor['kind'], extractor['kind'])} (sha256 {extractor['sha256'][:12]}) "
                f"layer {'/'.join(extractor['layers'])}, {extractor['input']}, {extractor['dtype']}"
            )
    settings = record.get("settings", {})
    for key in metric.settings if metric is not None else ():
        parts.append(f"{key} {settings.get(key)}")
    real = "" if protocol["real"] is None else f" vs {protocol['real']} real ({protocol['real_split']} split)"
    parts.append(f"{protocol['generated']} generated{real}")
    fidelity = record.get("versions", {}).get("torch-fidelity")
    if fidelity and any(roles is None or role in roles for role in protocol["extractors"]):
        parts.append(f"torch-fidelity {fidelity}")
    return "; ".join(parts)


def protocol_notes(scores: pd.DataFrame, metric: str, setups: list[str]) -> tuple[list[str], dict[str, str]]:
    """The footnote lines for ``metric``'s scores of ``setups`` (scores.csv rows), and, where they were not
    all measured alike, a warning as the last line and each set-up's protocol letter by set-up."""
    rows = scores[(scores.metric == metric) & scores.setup.isin(setups)]
    texts = list(dict.fromkeys(rows.protocol.fillna(NOT_RECORDED))) if "protocol" in rows else [NOT_RECORDED]
    if len(texts) <= 1:
        return ([f"Protocol: {texts[0]}."] if texts else []), {}
    letters = {text: chr(ord("A") + i) for i, text in enumerate(texts)}
    by_setup = {
        setup: ", ".join(sorted({letters[t] for t in part.protocol.fillna(NOT_RECORDED)}))
        for setup, part in rows.groupby("setup", sort=False)
    }
    lines = [f"Protocol {letters[text]}: {text}." for text in texts]
    lines.append(
        f"WARNING: these {metric} scores were measured under {len(texts)} protocols (set-ups: "
        + "; ".join(f"{setup} {letter}" for setup, letter in by_setup.items())
        + "): scores of different protocols are not comparable; rerun the evaluate jobs of the set-ups that differ."
    )
    return lines, by_setup
