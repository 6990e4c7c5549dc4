"""A page that says what the sequential design decided, and no more (issue 95, item 2): on a schedule the
pairs table's effect sizes are those of the look that judged the comparison, with intervals at the design's
level that leave out no effect exactly where the design decided (the comparison at its boundary, nominal p
0.045 at the last look of 8/2/10, and 300 simulated studies with and without ties); the page names design
p-values as such, speaks of an undecided comparison in the schedule's terms, and says what bigger budgets
buy where the trials a decision needs are open-ended."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ganstudy.report.summary_page import write_summary
from ganstudy.stats.convergence import COLUMNS
from ganstudy.stats.looks import judged_pairs, look_record, write_looks
from ganstudy.stats.sequential import schedule_power
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.stats.summary import _pair_row, write_stats
from ganstudy.study.trials import Schedule

SCHEDULE = Schedule(8, 2, 10)
SETTINGS = StatisticsSettings()
# Two set-ups whose 10 trials each give nominal p 0.04515 at the last look: below 0.05, not past the boundary.
AT_THE_BOUNDARY = {
    "a": [-1.071, -1.003, -0.64, 0.732, -1.171, -1.434, 0.64, 0.754, -0.959, 0.562],
    "b": [0.208, 0.801, -0.761, 1.333, 1.703, 1.137, 1.058, -3.272, 0.761, 0.475],
}


def tidy(values: dict[str, list[float]]) -> pd.DataFrame:
    rows = [
        {"study": "s", "setup": s, "trial": t, "metric": "fid", "value": v, "train_seconds": 60.0}
        for s, trials in values.items()
        for t, v in enumerate(trials)
    ]
    return pd.DataFrame(rows)


def last_look(values: dict[str, list[float]], schedule: Schedule = SCHEDULE) -> dict:
    """The study's looks as the workflow takes them: on to the next while the last asks for more."""
    for look in range(1, len(schedule.looks) + 1):
        record = look_record(tidy(values), list(values), "fid", schedule, look, SETTINGS, 2026)
        if not record["more"]:
            return record
    raise AssertionError("the last look asked for more")


def scheduled_page(tmp_path, values: dict[str, list[float]]) -> str:
    record = last_look(values)
    (tmp_path / "looks.json").write_text(json.dumps(record))
    tidy(values).to_csv(tmp_path / "scores.csv", index=False)
    pd.DataFrame([{"setup": s, "converged": "yes"} for s in values], columns=COLUMNS).to_csv(
        tmp_path / "convergence.csv", index=False
    )
    tables = tmp_path / "tables"
    write_looks(record, tables, SETTINGS.digits)
    design = {"fid": judged_pairs(record)}
    write_stats(tmp_path / "scores.csv", list(values), ["fid"], tables, SETTINGS, tmp_path / "convergence.csv", design)
    return write_summary(
        tmp_path, "s", list(values), ["fid"], [], tmp_path / "summary.md", SETTINGS, tmp_path / "looks.json"
    )


def test_at_the_boundary_the_page_s_intervals_words_and_p_values_agree(tmp_path):
    record = last_look(AT_THE_BOUNDARY)
    (decision,) = record["decisions"]
    assert record["look"] == 2 and decision["decided_at"] is None
    assert decision["nominal"][1] == pytest.approx(0.04515, abs=5e-6) and decision["p_design"] > 0.05
    text = scheduled_page(tmp_path, AT_THE_BOUNDARY)
    pair = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv").iloc[0]
    # Not decided: no interval leaves out the value of no effect, no magnitude word.
    assert pair.p_holm == pytest.approx(decision["p_design"]) and pair.effect == "–"
    assert pair.confidence == pytest.approx(1 - decision["boundary_p"]) and pair.confidence > 0.95
    assert np.isnan(pair.a12_low) or pair.a12_low <= 0.5 <= pair.a12_high
    assert np.isnan(pair.shift_low) or pair.shift_low <= 0 <= pair.shift_high
    assert np.isfinite(pair.shift_low), "the shift's interval at the design's level is shown"
    line = next(line for line in text.splitlines() if "not significantly different" in line)
    assert (
        f"not significantly different (design p = {pair.p_holm:.4g} ≥ 0.05; the design's {pair.confidence:.2%}" in line
    )
    # The plan in the schedule's terms: this schedule's chance at the effect seen, the fixed count named so.
    assert "This schedule (most 10) decides it with probability" in line
    assert "Power 0.8 needs a fixed design of" in line and "A schedule needs a most about that large" in line
    # Design p-values are named so in the ranking's column and in the opening text.
    assert "p vs first (design)" in text and "p vs first (Holm)" not in text
    assert "on FID, which the schedule tested, design p-values instead" in text


def test_the_schedule_s_power_is_the_share_of_its_own_studies_that_decide():
    a, b = np.array(AT_THE_BOUNDARY["a"]), np.array(AT_THE_BOUNDARY["b"])
    power = schedule_power(a, b, SCHEDULE, 0.05)
    # By hand: 400 studies resampled from the trials, each run through its looks (decided at either look).
    rng = np.random.default_rng(0)
    draws_a, draws_b = rng.choice(a, 400 * 10).reshape(400, 10), rng.choice(b, 400 * 10).reshape(400, 10)
    decided = 0
    for study in range(400):
        from ganstudy.stats.sequential import decide, pair_laws

        laws = pair_laws({"0": draws_a[study], "1": draws_b[study]}, SCHEDULE, 2, (0, study))
        decided += bool(decide(laws, 0.05))
    assert power == pytest.approx(decided / 400)
    assert 0.2 < power < 0.8


def test_intervals_at_the_design_s_level_leave_out_no_effect_exactly_where_it_decided():
    rng = np.random.default_rng(0)
    shown = {"a12": 0, "shift": 0}
    for study in range(300):
        a, b = rng.normal(0, 1, 10), rng.normal(rng.choice([0, 0.5, 1, 1.5]), 1, 10)
        if study % 3 == 0:  # tied scores
            a, b = np.round(a), np.round(b)
        values = {"a": list(a), "b": list(b)}
        judged = judged_pairs(last_look(values))[("a", "b")]
        n = judged.trials
        row = _pair_row("a", "b", {"a": a[:n], "b": b[:n]}, False, SETTINGS, judged.confidence, "the design")
        decided = judged.p < 0.05
        if np.isfinite(row["a12_low"]):
            shown["a12"] += 1
            assert (row["a12_low"] > 0.5 or row["a12_high"] < 0.5) == decided, (study, row)
        if np.isfinite(row["shift_low"]):
            shown["shift"] += 1
            assert (row["shift_low"] > 0 or row["shift_high"] < 0) == decided, (study, row)
    # Dropped only where Newcombe's or Moses's interval cannot agree (ties): 294 and 270 of 300 shown here.
    assert shown["a12"] >= 280 and shown["shift"] >= 250, shown


def test_an_open_ended_plan_says_what_bigger_budgets_buy_and_cost(tmp_path):
    # Alike set-ups: no decision, and power 0.8 out of reach; the page gives the power at 10, 20 and 40 trials.
    values = {"a": [float(t) for t in range(10)], "b": [t + 0.5 for t in range(10)]}
    text = scheduled_page(tmp_path, values)
    pair = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv").iloc[0]
    assert pair.budget == 10 and np.isinf(pair.trials_for_power_high)
    assert pair.power_1x <= pair.power_2x <= pair.power_4x + 0.05
    assert "What a bigger budget buys (trials.most; power of the fixed design, per set-up): " in text
    # 10 more trials of both set-ups at 60 s each: 20 x 60 / 3600 core-hours.
    spread = f"{pair.power_2x:.2f} (80% range {pair.power_2x_low:.2f} to {pair.power_2x_high:.2f})"
    assert f"{spread} at 20, 0.33 core-hours more" in text
