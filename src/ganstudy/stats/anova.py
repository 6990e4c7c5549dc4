"""Seed 001's diagnostic: one-way ANOVA of pixel intensity between vs within classes, per channel.

The observation is an image's mean intensity in the channel (images, not pixels, are the
independent draws). A large F with a small p-value says images differ more between classes than
within them — the premise of training one GAN per class.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
from scipy.stats import f_oneway

from ganstudy.core.atomic import atomic_path, write_text
from ganstudy.data.arrays import Split, load_split
from ganstudy.errors import GanstudyError
from ganstudy.stats.summary import markdown_table

CHANNEL_NAMES = {1: ["grey"], 3: ["red", "green", "blue"]}


def pixel_anova(split: Split) -> pd.DataFrame:
    """One row per channel: F statistic, p-value and degrees of freedom."""
    classes = np.unique(split.labels)
    if len(classes) < 2:
        raise GanstudyError(f"the ANOVA compares classes, but the split has {len(classes)} class")
    channels = split.images.shape[1]
    names = CHANNEL_NAMES.get(channels, [str(c) for c in range(channels)])
    means = split.images.mean(axis=(2, 3), dtype=np.float64)
    rows = []
    for channel, name in enumerate(names):
        groups = [means[split.labels == label, channel] for label in classes]
        result = f_oneway(*groups)
        rows.append(
            {
                "channel": name,
                "F": float(result.statistic),
                "p_value": float(result.pvalue),
                "df_between": len(classes) - 1,
                "df_within": len(means) - len(classes),
                "images": len(means),
            }
        )
    return pd.DataFrame(rows)


COLUMNS = ["channel", "F", "p_value", "df_between", "df_within", "images"]


def write_anova(
    split_path: str | os.PathLike[str], csv_path: str | os.PathLike[str], md_path: str | os.PathLike[str]
) -> pd.DataFrame:
    """The ANOVA's tables; data of one class (known only once read, else the workflow leaves the ANOVA
    out) get a table without rows and a line saying why."""
    split = load_split(split_path)
    classes = len(np.unique(split.labels))
    table = pixel_anova(split) if classes > 1 else pd.DataFrame(columns=COLUMNS)
    with atomic_path(csv_path) as tmp:
        table.to_csv(tmp, index=False)
    title = "One-way ANOVA of per-image mean pixel intensity between vs within classes"
    body = (
        markdown_table(table)
        if classes > 1
        else f"Not computed: the training split has {classes} class, and the ANOVA compares classes.\n"
    )
    write_text(md_path, f"### {title}\n\n" + body)
    return table
