"""The hardware each trial trained on, and a warning where set-ups are compared across it unevenly.

Float results differ between CPU kinds and between MKL's kernel paths, and GAN training turns a last-bit
difference into another run within tens of iterations: a trial's float path picks its outcome as its seed
does. Whether two kinds give a set-up the same distribution is a question of its own (for the default
study's 2x2, 14 against 15 trials on two MKL paths could not tell them apart; an Intel Xeon's 8 trials are
not settled: docs/results.md). A lab whose trials land on the node kinds of a mixed cluster in unequal
shares per set-up would measure the node kinds along with its set-ups. scores.csv carries each trial's
``hardware`` (run.json's, ``provenance.float_path`` of its ranks); this module says what the tables and
the answer page say of it.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from itertools import combinations

import pandas as pd

NOT_RECORDED = "not recorded (trained before ganstudy recorded it)"


def hardware_shares(scores: pd.DataFrame, setups: list[str]) -> dict[str, Counter[str]]:
    """Per set-up, its trials per hardware label (each trial once, whatever its metrics)."""
    rows = scores[scores.setup.isin(setups)].drop_duplicates(["setup", "trial"])
    labels = rows.hardware.fillna(NOT_RECORDED) if "hardware" in rows else pd.Series(NOT_RECORDED, index=rows.index)
    return {setup: Counter(labels[rows.setup == setup]) for setup in setups if (rows.setup == setup).any()}


def _proportions(shares: Counter[str]) -> dict[str, Fraction]:
    total = sum(shares.values())
    return {label: Fraction(count, total) for label, count in shares.items()}


def unequal_pairs(shares: dict[str, Counter[str]]) -> list[tuple[str, str]]:
    """The pairs of set-ups whose trials spread over the hardware labels in other proportions."""
    return [(a, b) for a, b in combinations(shares, 2) if _proportions(shares[a]) != _proportions(shares[b])]


def hardware_notes(scores: pd.DataFrame, setups: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """The footnote lines on the hardware that ``setups``' trials trained on (scores.csv rows), a warning
    last where set-ups spread over several kinds in unequal shares; and those set-up pairs."""
    shares = hardware_shares(scores, setups)
    labels = list(dict.fromkeys(label for counts in shares.values() for label in counts))
    if len(labels) <= 1:
        return ([f"Trained on: {labels[0]}."] if labels else []), []
    letters = {label: chr(ord("A") + i) for i, label in enumerate(labels)}
    spread = "; ".join(
        f"{setup} " + ", ".join(f"{count} on {letters[label]}" for label, count in counts.items())
        for setup, counts in shares.items()
    )
    lines = [f"Hardware {letters[label]}: {label}." for label in labels]
    lines.append(f"Trials per hardware: {spread}.")
    pairs = unequal_pairs(shares)
    if pairs:
        named = ", ".join(f"{a} vs {b}" for a, b in pairs)
        lines.append(
            f"WARNING: set-ups trained on {len(labels)} kinds of hardware in unequal shares ({named}): each kind "
            "trains other bits, and whether it gives a set-up the same distribution of scores is not known "
            "(docs/results.md), so these comparisons may measure the hardware along with the set-ups. Pin the "
            "study to one node kind (constraint in the profile's site.yaml) or give every set-up the same shares, "
            "and rerun the trials that differ."
        )
    return lines, pairs
