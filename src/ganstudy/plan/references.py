"""The papers' results that set-ups carry (``setups.<name>.reference``), checked before any job: each names
a metric of the study, a training fact or cost, and gives the paper's number, its finding against another
set-up of the study, or both."""

from __future__ import annotations

from typing import Any

from ganstudy.stats.reference_keys import COST, EPOCH_REFERENCES


def _entry_problems(where: str, key: str, ref: dict[str, Any], setups: list[str], name: str) -> list[str]:
    number, finding, versus = ref.get("mean") is not None, ref.get("finding"), ref.get("versus")
    if (finding is None) != (versus is None):
        return [
            f"{where}: a finding needs both versus (the set-up it is against) and finding (lower, higher or "
            "no_difference); give both or neither"
        ]
    problems = []
    if not number and finding is None:
        problems.append(
            f"{where}: give the paper's number (mean) or its finding against another set-up (versus and finding)"
        )
    if key == COST and number:
        problems.append(f"{where}: cost takes a finding against another set-up (versus, finding, change), not a mean")
    if key in EPOCH_REFERENCES and finding is not None:
        problems.append(f"{where}: a training fact takes the paper's number (mean), not a finding")
    if versus is not None and (versus == name or versus not in setups):
        problems.append(f"{where}.versus: {versus!r} is not another set-up of this study ({', '.join(setups)})")
    change = ref.get("change")
    if change is not None and (finding is None or change[0] > change[1]):
        problems.append(f"{where}.change: a range [low, high] (low <= high) of a finding; got {change}")
    return problems


def reference_problems(setups: dict[str, dict[str, Any]], metrics: list[str]) -> list[str]:
    """What is wrong with the set-ups' references, each naming its key and the remedy; [] when nothing is."""
    names, problems = list(setups), []
    for name, setup in setups.items():
        for key, ref in setup["reference"].items():
            where = f"setups.{name}.reference.{key}"
            if key not in metrics and key not in EPOCH_REFERENCES and key != COST:
                problems.append(
                    f"{where}: not among evaluation.metrics {metrics}, the training facts "
                    f"{', '.join(EPOCH_REFERENCES)} nor {COST}; add the metric or remove the reference"
                )
                continue
            problems += _entry_problems(where, key, ref, names, name)
    return problems
