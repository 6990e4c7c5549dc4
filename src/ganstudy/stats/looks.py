"""The looks of a study whose ``trials`` is a schedule (``{first, step, most}``): after each round of
training, the primary metric's comparisons are tested on the trials of every look so far by the
group-sequential Holm procedure (ganstudy.stats.sequential), and the study takes another round only while a
comparison is open and the schedule has a look left.

Look k sees trials 0 .. n_k - 1 of each set-up (n_k = the schedule's k-th count), so its record is a function
of those trials' scores (and the study's seed, which draws the relabellings where they are too many to
count) alone: a look computed again (an edited level, a rescored trial) gives the same decisions at every
earlier look. The record says, per comparison, the nominal p at each look, the look it was decided at, the
level it was tested at and the p valid for the design; ``judged_pairs`` turns the last into the number
the pairs tables and the page compare with alpha, in place of Holm's adjustment of a fixed design's p.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ganstudy.core.atomic import write_text
from ganstudy.evaluate.metrics import better
from ganstudy.stats.sequential import RELABELLINGS, Decision, RankLaw, counted, obrien_fleming, take_looks
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.stats.summary import CONFIDENCE, Judged, write_table
from ganstudy.stats.tests import aligned_outcomes, rank_test
from ganstudy.study.trials import Schedule

LOOK_COLUMNS = ["setup_a", "setup_b", "decided_at", "trials", "p_nominal", "level", "p_design", "p_design_holm"]


def trial_outcomes(
    scores: pd.DataFrame, setups: list[str], metric: str, count: int, failures: str
) -> dict[str, np.ndarray]:
    """Each set-up's outcomes of ``metric`` over its first ``count`` trials, in trial order (failed trials as
    ``failures`` says; NaN where a trial is left out or has no row)."""
    higher = better(metric) == "higher"
    found = {}
    for setup in setups:
        rows = scores[(scores.metric == metric) & (scores.setup == setup) & (scores.trial < count)]
        aligned = np.full(count, np.nan)
        aligned[rows.trial.to_numpy(int)] = aligned_outcomes(rows.value.to_numpy(float), higher, failures)
        found[setup] = aligned
    return found


def look_record(
    scores: pd.DataFrame,
    setups: list[str],
    metric: str,
    schedule: Schedule,
    look: int,
    settings: StatisticsSettings,
    seed: int,
) -> dict:
    """Look ``look`` (1-based) of ``schedule`` on ``scores`` (the tidy table of at least its trials): every pair's
    nominal two-sided rank-sum p at each of its looks so far (failures as ``settings.failures`` says), the
    group-sequential Holm decisions on the relabellings of these trials within rounds (drawn from ``seed``
    where too many to count), the set-ups that stopped taking rounds (``stats.sequential.take_looks``), the
    alpha spent, and whether another round is needed."""
    outcomes = trial_outcomes(scores, setups, metric, schedule.looks[look - 1], settings.failures)
    built: dict[tuple[tuple[str, str], int], RankLaw] = {}

    def law_at(pair: tuple[str, str], looks: int) -> RankLaw:
        if (pair, looks) not in built:
            built[pair, looks] = RankLaw.of(outcomes[pair[0]], outcomes[pair[1]], schedule, looks, seed)
        return built[pair, looks]

    higher = better(metric) == "higher"
    taken = take_looks(setups, law_at, schedule, look, settings.alpha, settings.stopping(), higher)
    counts = schedule.looks[: taken.taken]
    ended = {s: taken.stopped[s].look if s in taken.stopped else taken.taken for s in setups}
    return {
        "metric": metric,
        "schedule": {"first": schedule.first, "step": schedule.step, "most": schedule.most},
        "looks": list(schedule.looks),
        "look": taken.taken,
        "trials": counts[-1],
        "alpha": settings.alpha,
        "alpha_spent": [float(x) for x in obrien_fleming(schedule.fractions()[: taken.taken], settings.alpha)],
        "relabellings": "every" if counted(schedule) else RELABELLINGS + 1,
        "seed": seed,
        "more": taken.more,
        "setups": {
            s: {
                "trials": schedule.looks[ended[s] - 1],
                **({"stopped_at": taken.stopped[s].look, "why": taken.stopped[s].why} if s in taken.stopped else {}),
            }
            for s in setups
        },
        "decisions": [
            {
                "setup_a": d.pair[0],
                "setup_b": d.pair[1],
                "nominal": [
                    _number(rank_test(outcomes[d.pair[0]][:n], outcomes[d.pair[1]][:n], settings.test).p)
                    for n in counts[: taken.looks[d.pair]]
                ],
                "decided_at": None if d.look is None else d.look + 1,
                "level": d.level,
                "p_design": _number(d.p_design),
                **_judged(d, law_at(d.pair, taken.looks[d.pair]), counts, settings.test),
            }
            for d in taken.decisions
        ],
    }


def _judged(decision: Decision, law: RankLaw, counts: tuple[int, ...], test: str) -> dict:
    """Where the design judged a comparison that has ended: the trials per set-up of the look it was decided at
    (or the last), and the nominal p below which it crosses there (``RankLaw.boundary_p``): the pairs tables
    take effect sizes at that look with intervals at one minus it. Nothing while it is open."""
    if np.isnan(decision.p_design):
        return {}
    at = law.looks - 1 if decision.look is None else decision.look
    return {"judged_trials": counts[at], "boundary_p": law.boundary_p(decision.level, at, test)}


def _number(value: float) -> float | None:
    """A p for JSON: None where there is none (NaN)."""
    return None if np.isnan(value) else float(value)


def write_look(
    scores: pd.DataFrame,
    setups: list[str],
    metric: str,
    schedule: Schedule,
    look: int,
    settings: StatisticsSettings,
    seed: int,
    out: str | os.PathLike[str],
) -> dict:
    """``look_record`` written as JSON to ``out``, and a line for the log."""
    record = look_record(scores, setups, metric, schedule, look, settings, seed)
    write_text(Path(out), json.dumps(record, indent=1) + "\n")
    decided = sum(d["decided_at"] is not None for d in record["decisions"])
    print(
        f"look {look} at {record['trials']} trials per set-up: {decided} of {len(record['decisions'])} comparisons "
        f"of {metric} decided; {'another round follows' if record['more'] else 'the study ends here'}"
    )
    return record


def judged_pairs(record: dict) -> dict[tuple[str, str], Judged]:
    """Each pair as the design judged it: its design p scaled to the family's alpha (p_design times alpha over
    the level it was tested at, at most 1), below alpha exactly where the group-sequential Holm procedure
    decided it, as Holm's adjusted p is in a fixed design; the look and trials that judged it and the
    confidence of intervals that agree with the decision."""
    return {
        (d["setup_a"], d["setup_b"]): Judged(
            _scaled(d, record["alpha"]),
            Schedule(**record["schedule"]),
            d["decided_at"],
            d.get("judged_trials"),
            1 - d["boundary_p"] if "boundary_p" in d else CONFIDENCE,
        )
        for d in record["decisions"]
    }


def _scaled(decision: dict, alpha: float) -> float:
    p = decision["p_design"]
    return float("nan") if p is None else min(1.0, p * alpha / decision["level"])


def looks_table(record: dict) -> pd.DataFrame:
    """One row per comparison: the look it was decided at ("–": never), the trials per set-up there (or at the
    last look), its nominal p there, the level it was tested at, its design p and that p scaled to alpha."""
    scaled = {pair: judged.p for pair, judged in judged_pairs(record).items()}
    rows = []
    for d in record["decisions"]:
        # Undecided: its last look, the study's or the one before a set-up of it stopped.
        at = d["decided_at"] or len(d["nominal"])
        rows.append(
            {
                "setup_a": d["setup_a"],
                "setup_b": d["setup_b"],
                "decided_at": d["decided_at"] or "–",
                "trials": record["looks"][at - 1],
                "p_nominal": d["nominal"][at - 1],
                "level": d["level"],
                "p_design": d["p_design"],
                "p_design_holm": scaled[(d["setup_a"], d["setup_b"])],
            }
        )
    return pd.DataFrame(rows, columns=LOOK_COLUMNS)


def looks_summary(record: dict) -> str:
    """The design and what its looks did, in two sentences."""
    looks = record["looks"]
    taken = record["look"]
    decided = [d for d in record["decisions"] if d["decided_at"] is not None]
    if not record["decisions"]:
        why = "one set-up has no comparison to decide"
    elif len(decided) == len(record["decisions"]):
        why = "every comparison was decided"
    elif taken == len(looks):
        still = len(record["decisions"]) - len(decided)
        why = f"the schedule's last look ({looks[-1]} trials) was reached with {still} open"
    else:
        why = "no comparison was open between set-ups still taking rounds"
    return (
        f"Trials on a schedule: looks at {', '.join(map(str, looks))} trials per set-up, {record['metric'].upper()}'s "
        f"comparisons tested by a group-sequential Holm procedure (Lan-DeMets O'Brien-Fleming spending of alpha "
        f"{record['alpha']}, rank-sum boundaries from {_relabellings(record)} of the study's own trials within "
        f"rounds, ties and failures as they are). {taken} look(s) taken, the study "
        f"stopped at {record['trials']} trials per set-up because {why}{_stopped_text(record)}; alpha spent by "
        f"then: {record['alpha_spent'][-1]:.3g}. {record['metric'].upper()}'s p-values on this page are the design's "
        "(stagewise-ordered over the looks, scaled to alpha as Holm's are), valid for a study that stops as this "
        "one did."
    )


def _stopped_text(record: dict) -> str:
    """The set-ups that stopped taking rounds before the study ended: at which look, why, with how many trials."""
    stopped = {name: entry for name, entry in record.get("setups", {}).items() if "stopped_at" in entry}
    if not stopped:
        return ""
    return "; " + "; ".join(
        f"{name} stopped taking rounds after look {entry['stopped_at']} ({entry['why']}) at {entry['trials']} trials"
        for name, entry in stopped.items()
    )


def _relabellings(record: dict) -> str:
    drawn = record.get("relabellings", "every")
    return "every relabelling" if drawn == "every" else f"{drawn:,} relabellings (seed {record['seed']})"


def write_looks(record: dict, out_dir: str | os.PathLike[str], digits: int) -> list[Path]:
    """tables/looks.{csv,md,tex} from the study's last look's record."""
    return write_table(
        Path(out_dir),
        "looks",
        looks_table(record),
        f"{record['metric'].upper()}: the sequential design's decisions",
        False,
        digits,
        [
            looks_summary(record),
            "decided_at: the look (1-based) at which the comparison's nominal p fell below its boundary; trials: per "
            "set-up at that look (or at the last); p_nominal: the rank-sum p there; level: the share of alpha it was "
            "tested at (alpha over the comparisons open, Holm); p_design: the null probability of a result at "
            "least as extreme under the design (stagewise order); p_design_holm: p_design times alpha over level.",
        ],
    )


def write_taken(
    last_look: str | os.PathLike[str], output: Mapping[str, str], lists: dict[str, list[str]], log: str
) -> None:
    """The study's last look copied to ``output["record"]``, and each list of ``lists`` to the output of its
    name, one path per line: the runs taken, as the statistics' arguments files name them (``@file``)."""
    write_text(Path(output["record"]), Path(last_look).read_text())
    for name, paths in lists.items():
        write_text(Path(output[name]), "".join(f"{entry}\n" for entry in paths))
    write_text(Path(log), f"{last_look}: {len(lists['scores'])} runs taken\n")
