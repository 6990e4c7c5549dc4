"""The study's answer on one page (results/<study>/summary.md), made from the tables it summarises.

It opens on the answer for ``statistics.primary_metric`` in one sentence. Then per metric: the set-ups
ranked by the rank tests' own order (tables/summary_<metric>.csv's superiority: the mean probability that
a trial beats one of another set-up; then the median), each with its finite trials, median, mean, sd and
95% interval; the Holm-adjusted rank-sum p-value, A12 and shift of the first set-up against each other one
(tables/pairs_<metric>.csv), each verdict naming the better set-up by the effect's direction and saying
where the trials could not decide at all; each set-up's convergence verdict (convergence.csv), the papers'
numbers where a set-up carries a ``reference`` (tables/reproduction.csv), and the protocol the scores were
measured under. Then the set-ups whose training had not converged, and links to the figures. Nothing is
computed here that the tables do not hold, so the page cannot disagree with them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ganstudy.core.atomic import read_json, write_text
from ganstudy.evaluate.metrics import better
from ganstudy.report.report_page import write_report_page
from ganstudy.stats.convergence import convergence_notes
from ganstudy.stats.hardware import hardware_notes
from ganstudy.stats.looks import looks_summary, looks_table
from ganstudy.stats.power import BUDGETS, MOST_TRIALS, RANGE, TrialsNeeded, power_columns
from ganstudy.stats.protocol import protocol_notes
from ganstudy.stats.reproduction import CLAIM_NOTE
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.stats.summary import BUDGET_COLUMNS, CONFIDENCE, _fmt, cost_column, markdown_table, read_tables
from ganstudy.study.folder import StudyFolder

# Fewer finite trials than this have no spread: such a set-up is ranked after those that have one.
RANKED_TRIALS = 2


@dataclass(frozen=True)
class Words:
    """How the page names a metric's p-values and what more trials take: Holm's over a fixed design's trials;
    the group-sequential design's on the metric a schedule tested (ganstudy.stats.looks), whose trials the
    schedule's most caps."""

    p: str = "Holm p"
    more: str = "add trials"
    column: str = "Holm"

    @property
    def scheduled(self) -> bool:
        return self is DESIGN


HOLM = Words()
DESIGN = Words("design p", "raise the schedule's most, trials.most", "design")

# The pairs table's columns that the page takes as they are: the intervals' level and what budgets buy.
PLAN_COLUMNS = ["confidence", *BUDGET_COLUMNS]
TEST_COLUMNS = [
    "p_holm",
    "smallest_p_holm",
    "a12_first",
    "a12_first_low",
    "a12_first_high",
    "shift_first",
    "shift_first_low",
    "shift_first_high",
    "effect",
    "better",
    "trials_for_power",
    "trials_for_power_low",
    "trials_for_power_high",
    *PLAN_COLUMNS,
    "pair_note",
]


def _pair(pairs: pd.DataFrame, a: str, b: str) -> pd.Series | None:
    found = pairs[((pairs.setup_a == a) & (pairs.setup_b == b)) | ((pairs.setup_a == b) & (pairs.setup_b == a))]
    return found.iloc[0] if len(found) else None


def _towards(pair: pd.Series, first: str, higher: bool) -> dict[str, float]:
    """The pair's A12 (and interval) as the probability that a trial of ``first`` scores better than one of
    the other, and its shift as first - other."""
    forward = pair.setup_a == first
    a12 = (pair.a12, pair.a12_low, pair.a12_high) if forward else (1 - pair.a12, 1 - pair.a12_high, 1 - pair.a12_low)
    if not higher:
        a12 = (1 - a12[0], 1 - a12[2], 1 - a12[1])
    shift = (
        (pair["shift"], pair.shift_low, pair.shift_high)
        if forward
        else (-pair["shift"], -pair.shift_high, -pair.shift_low)
    )
    return dict(zip(TEST_COLUMNS[2:8], (*a12, *shift)))


def significant_wins(pairs: pd.DataFrame, alpha: float) -> list[tuple[str, str]]:
    """Every (winner, loser) whose pair's Holm p is below ``alpha``, the winner named by the effect's direction."""
    wins = []
    for pair in pairs[pairs.p_holm < alpha].itertuples():
        if pair.better in (pair.setup_a, pair.setup_b):
            wins.append((pair.better, pair.setup_b if pair.better == pair.setup_a else pair.setup_a))
    return wins


def compared_trials(summary: pd.DataFrame, failures: str) -> pd.Series:
    """Each set-up's trials that its tests compare: every trial, or under ``exclude`` the finite ones."""
    return summary.trials - (summary.failed if failures == "exclude" else 0)


def ranking(
    summary: pd.DataFrame, pairs: pd.DataFrame, metric: str, settings: StatisticsSettings = StatisticsSettings()
) -> pd.DataFrame:
    """The set-ups first to last: those with at least RANKED_TRIALS compared trials before the others; within
    them, the set-ups that no other beats significantly (Holm p < statistics.alpha) before those beaten, so
    that the first named never loses a test; each group by superiority (higher first), then by median in the
    metric's direction; no trial last. Beside each, the first one's test against it from the pairs table, and
    ``beaten_by``."""
    higher = better(metric) == "higher"
    losers: dict[str, list[str]] = {}
    for winner, loser in significant_wins(pairs, settings.alpha):
        losers.setdefault(loser, []).append(winner)
    summary = summary.assign(compared=compared_trials(summary, settings.failures))
    keyed = summary.assign(
        _few=summary.compared < RANKED_TRIALS,
        _none=summary.compared == 0,
        _beaten=summary.setup.isin(losers),
        _sup=-summary.superiority.fillna(-1),
        _median=summary["median"] * (-1 if higher else 1),
    )
    ordered = keyed.sort_values(["_none", "_few", "_beaten", "_sup", "_median"], kind="stable", na_position="last")
    ordered = ordered.drop(columns=["_few", "_none", "_beaten", "_sup", "_median"]).reset_index(drop=True)
    ordered["beaten_by"] = [", ".join(losers.get(setup, [])) for setup in ordered.setup]
    first = ordered.setup.iloc[0] if len(ordered) and ordered.compared.iloc[0] > 0 else None
    tests = []
    for setup in ordered.setup:
        pair = _pair(pairs, first, setup) if first is not None and setup != first else None
        if pair is None:
            tests.append({"effect": "–", "better": "–", "pair_note": ""})
            continue
        tests.append(
            {
                "p_holm": pair.p_holm,
                "smallest_p_holm": pair.smallest_p_holm,
                **_towards(pair, first, higher),
                "effect": pair.effect,
                "better": pair.better,
                "trials_for_power": pair.trials_for_power,
                "trials_for_power_low": pair.trials_for_power_low,
                "trials_for_power_high": pair.trials_for_power_high,
                **{column: pair[column] for column in PLAN_COLUMNS},
                "pair_note": "" if pd.isna(pair.note) else pair.note,
            }
        )
    return pd.concat([ordered, pd.DataFrame(tests, columns=TEST_COLUMNS)], axis=1)


def _interval(low: float, high: float, digits: int) -> str:
    return f"{_fmt(low, digits)} to {_fmt(high, digits)}" if not (np.isnan(low) or np.isnan(high)) else "–"


def _trials_text(row: pd.Series | tuple) -> str:
    """A set-up's trials with its failures beside them, e.g. "10 (4 failed: 3 NaN, 1 inf)"."""
    if not row.failed:
        return str(row.trials)
    kinds = ", ".join(f"{n} {kind}" for n, kind in ((row.nan, "NaN"), (row.inf, "inf")) if n)
    return f"{row.trials} ({row.failed} failed: {kinds})"


def ranking_table(ranked: pd.DataFrame, converged: dict[str, str], digits: int, words: Words = HOLM) -> pd.DataFrame:
    """The ranking as the page shows it, its p-values named as ``words`` says."""
    column, unit = cost_column(ranked)
    rows = []
    for place, row in enumerate(ranked.itertuples(), start=1):
        magnitude = f" ({row.effect})" if row.effect != "–" else ""
        rows.append(
            {
                "rank": place if row.compared >= RANKED_TRIALS else "–",
                "set-up": row.setup,
                "trials": _trials_text(row),
                "median": row.median,
                "median's 95% interval": _interval(row.median_low, row.median_high, digits),
                "mean": row.mean,
                "sd": row.sd,
                "P(beats others)": row.superiority,
                f"p vs first ({words.column})": row.p_holm,
                "A12 vs first": f"{row.a12_first:.2f}{magnitude}" if np.isfinite(row.a12_first) else "–",
                "beaten by": row.beaten_by or "",
                f"{unit} per trial": getattr(row, column),
                "on the cost front": "yes" if row.pareto else "",
                "converged": converged.get(row.setup, "–"),
            }
        )
    return pd.DataFrame(rows)


def _effect(row: pd.Series | tuple, digits: int) -> str:
    """A12 with its interval where the pairs table gives one, the magnitude where the test is significant,
    and the shift with its interval; intervals at a level other than 95% (a schedule's) say theirs."""
    level = "" if row.confidence == CONFIDENCE else f"the design's {row.confidence:.2%} intervals: "
    text = f"{level}A12 = {row.a12_first:.2f}"
    if np.isfinite(row.a12_first_low):
        text += f" [{row.a12_first_low:.2f}, {row.a12_first_high:.2f}]"
    text += (f", {row.effect}" if row.effect != "–" else "") + f"; shift {_fmt(row.shift_first, digits)}"
    return text + (
        f" [{_fmt(row.shift_first_low, digits)}, {_fmt(row.shift_first_high, digits)}]"
        if not np.isnan(row.shift_first_low)
        else ""
    )


def _more_cost(trials: float, row: pd.Series | tuple, first: pd.Series, cost: tuple[str, str]) -> float:
    """What ``trials`` per set-up of both set-ups cost beyond the trials run (``cost``: column and unit)."""
    column, _ = cost
    return max(0, trials - first.compared) * getattr(first, column) + max(0, trials - row.compared) * getattr(
        row, column
    )


def _plan(row: pd.Series | tuple, first: pd.Series, digits: int, cost: tuple[str, str], words: Words = HOLM) -> str:
    """What deciding the comparison would take: the trials per set-up for power 0.8 (the median and 80% range
    over bootstrap copies of the trials), and the cost of the median (``cost``: the summary's column and
    unit) beyond the trials run; on a schedule, first the probability that it decides at the effect seen;
    where the range is open, the power that bigger budgets buy and what each costs."""
    plan = TrialsNeeded.of(row)
    if np.isnan(plan.median):
        return ""
    unit = cost[1]
    lead = ""
    if words.scheduled and np.isfinite(row.schedule_power):
        lead = (
            f" This schedule (most {row.budget:.0f}) decides it with probability {row.schedule_power:.2f} at the "
            "effect these trials show (studies drawn from their outcomes through the looks' own test)."
        )
    design = "a fixed design of " if words.scheduled else ""
    if np.isinf(plan.median):
        needs = (
            f" Power 0.8 needs {design}more than {MOST_TRIALS} trials per set-up in most worlds these trials allow "
            f"({plan.text()})."
        )
    else:
        more = _more_cost(plan.median, row, first, cost)
        spend = (
            f"; the median adds about {_fmt(more, 2)} {unit} at this study's trial times"
            if np.isfinite(more) and more > 0
            else ""
        )
        needs = (
            f" Power 0.8 needs {design}{plan.text()} trials per set-up (simulated from the trials' own "
            f"outcomes{spend})."
        )
        if words.scheduled:
            needs += (
                " A schedule needs a most about that large (its looks cost about a point of power: "
                "docs/sequential-design.md)."
            )
    return lead + needs + (_budgets(row, first, cost, words) if np.isinf(plan.high) else "")


def _budgets(row: pd.Series | tuple, first: pd.Series, cost: tuple[str, str], words: Words) -> str:
    """What bigger budgets buy, where the trials for power 0.8 are open-ended: the power (median and 80% range
    over the copies) at the study's trials per set-up (a schedule's most) and multiples, and what each adds."""
    if not np.isfinite(row.budget):
        return ""
    parts = []
    for times in BUDGETS:
        trials = row.budget * times
        median, low, high = (getattr(row, column) for column in power_columns(times))
        more = _more_cost(trials, row, first, cost)
        spend = f", {_fmt(more, 2)} {cost[1]} more" if np.isfinite(more) and more > 0 else ""
        parts.append(f"{median:.2f} ({RANGE:.0%} range {low:.2f} to {high:.2f}) at {trials:.0f}{spend}")
    setting = "trials.most" if words.scheduled else "trials"
    return f" What a bigger budget buys ({setting}; power of the fixed design, per set-up): " + "; ".join(parts) + "."


def comparison(
    row: pd.Series | tuple, first: pd.Series, alpha: float, digits: int, cost: tuple[str, str], words: Words = HOLM
) -> str:
    """One line: the ``first`` set-up against ``row``'s, in the terms of the test and of the effect's direction;
    where it is not decided, the trials a decision needs and their cost (``cost``: summary.cost_column)."""
    other, first_row = row.setup, first
    first, trials = first_row.setup, f"{first_row.compared} against {row.compared} trials"
    if not np.isfinite(row.p_holm):
        return f"- {first} vs {other}: no test ({row.pair_note or 'too few trials'})."
    effect, p = _effect(row, digits), _fmt(row.p_holm, digits)
    if row.p_holm < alpha:
        winner, loser = (first, other) if row.better == first else (other, first)
        return f"- **{winner}** is better than {loser}, significantly ({words.p} = {p} < {alpha}; {effect})."
    if row.smallest_p_holm >= alpha:
        return (
            f"- {first} vs {other}: these trials cannot decide: {trials}, Holm-adjusted over the metric's pairs, give "
            f"no p below {_fmt(row.smallest_p_holm, digits)} ≥ {alpha} "
            f"({effect}).{_plan(row, first_row, digits, cost, words)}"
        )
    why = f"; {row.pair_note}" if row.pair_note else ""
    return (
        f"- {first} vs {other}: not significantly different ({words.p} = {p} ≥ {alpha}; {effect}{why})."
        f"{_plan(row, first_row, digits, cost, words)}"
    )


def _wins_text(wins: list[tuple[str, str]]) -> str:
    return ", ".join(f"{winner} over {loser}" for winner, loser in wins)


def verdict(
    ranked: pd.DataFrame, pairs: pd.DataFrame, metric: str, alpha: float, digits: int, words: Words = HOLM
) -> str:
    """The ranking in words: the first set-up, each other one's test against it, and the significant wins
    between the others."""
    if ranked.empty or ranked.compared.iloc[0] == 0:
        return f"No set-up has a {metric.upper()} trial to compare yet."
    first = ranked.iloc[0]
    if len(ranked) == 1:
        lines = [f"**{first.setup}** is the study's only set-up: its {metric.upper()} has no other to compare with."]
    elif first.compared < RANKED_TRIALS:
        lines = [
            f"No set-up has {RANKED_TRIALS} {metric.upper()} trials to compare: **{first.setup}** is listed first on "
            f"{first.compared} trial, which says nothing of its spread."
        ]
    elif first.beaten_by:
        lines = [
            f"Every set-up loses a significant test, so none is best: **{first.setup}** is listed first (a trial of "
            f"it scores better than one of another set-up with probability {first.superiority:.2f} on average)."
        ]
    else:
        beats = {loser for winner, loser in significant_wins(pairs, alpha) if winner == first.setup}
        standing = (
            "it is significantly better than every other set-up"
            if beats >= set(ranked.setup.iloc[1:])
            else "no set-up is significantly better than it"
        )
        lines = [
            f"**{first.setup}** ranks first in {metric.upper()}: {standing}, and a trial of it scores better than "
            f"one of another set-up with probability {first.superiority:.2f} on average."
        ]
    cost = cost_column(ranked)
    lines += [comparison(row, first, alpha, digits, cost, words) for row in ranked.iloc[1:].itertuples()]
    others = [win for win in significant_wins(pairs, alpha) if first.setup not in win]
    if others:
        lines.append(f"- Significant between the others ({words.p} < {alpha}): {_wins_text(others)}.")
    lines += [_front(ranked, metric, cost, digits)]
    return "\n".join(lines)


def _front(ranked: pd.DataFrame, metric: str, cost: tuple[str, str], digits: int) -> str:
    """Quality against cost in one line: the set-ups that no other beats on both (the Pareto front of the
    median against the cost per trial), cheapest first."""
    column, unit = cost
    front = ranked[ranked.pareto.astype(bool)].sort_values(column)
    if front.empty:
        return f"- Cost: no set-up has both a measured {unit} per trial and a finite {metric.upper()}."
    points = ", ".join(
        f"{row.setup} ({_fmt(getattr(row, column), 2)} {unit}, median {_fmt(row.median, digits)})"
        for row in front.itertuples()
    )
    # Only set-ups with a cost and a median can be beaten; the others are off the front unmeasured.
    measured = int((np.isfinite(ranked[column].to_numpy(float)) & np.isfinite(ranked["median"].to_numpy(float))).sum())
    beaten = (
        "; every other set-up costs at least as much as one of these for a median no better"
        if len(front) < measured
        else ""
    )
    return f"- Quality against cost (median against {unit} per trial, the Pareto front): {points}{beaten}."


def answer(
    ranked: pd.DataFrame, pairs: pd.DataFrame, metric: str, alpha: float, digits: int, words: Words = HOLM
) -> str:
    """The primary metric's answer in one sentence, which the pairwise tests support: the set-up named first
    is one that no other beats significantly; where the significant wins name no single best (a cycle, or the
    highest average rank beaten), it says so and names the wins."""
    name = f"{metric.upper()} ({better(metric)} is better)"
    if ranked.empty or ranked.compared.iloc[0] == 0:
        return f"No set-up has a {name} trial to compare yet."
    first, others = ranked.iloc[0], ranked.iloc[1:]
    if others.empty:
        return f"One set-up, **{first.setup}**: nothing to compare in {name}."
    wins = significant_wins(pairs, alpha)
    tested = others[np.isfinite(others.p_holm.to_numpy(float))]
    beats = [loser for winner, loser in wins if winner == first.setup]
    if first.beaten_by:
        return (
            f"No single best in {name}: every set-up loses a significant test ({words.p} < {alpha}): "
            f"{_wins_text(wins)}."
        )
    top = ranked.sort_values("superiority", ascending=False, kind="stable").iloc[0]
    lead = ""
    if top.setup != first.setup and top.beaten_by:
        lead = (
            f" {top.setup} ranks highest on average (P(beats others) {top.superiority:.2f}) but loses to "
            f"{top.beaten_by} significantly."
        )
    if first.compared >= RANKED_TRIALS and len(beats) == len(others):
        return (
            f"**{first.setup}** has the best {name}: it is significantly better than every other set-up "
            f"(largest {words.p} = {_fmt(tested.p_holm.max(), digits)} < {alpha}).{lead}"
        )
    if beats:
        rest = [s for s in others.setup if s not in set(beats)]
        return (
            f"**{first.setup}** ranks first in {name}, and no set-up is significantly better; it is significantly "
            f"better than {', '.join(beats)} ({words.p} < {alpha}), not than {', '.join(rest)}.{lead}"
        )
    if wins:
        return (
            f"**{first.setup}** ranks first in {name}, not significantly; the significant wins ({words.p} < {alpha}): "
            f"{_wins_text(wins)}.{lead}"
        )
    if len(tested) and (tested.smallest_p_holm >= alpha).all():
        return (
            f"These trials cannot decide {name}: no outcome of them could give a {words.p} below "
            f"{_fmt(tested.smallest_p_holm.min(), digits)} ≥ {alpha}; **{first.setup}** ranks first, not significantly "
            f"({words.more}: `ganstudy validate-config` says how many)."
        )
    smallest = _fmt(pairs.p_holm.min(), digits) if len(pairs) else "–"
    return (
        f"No set-up is significantly better than another in {name}; **{first.setup}** ranks first "
        f"(smallest {words.p} = {smallest} ≥ {alpha})."
    )


def _papers(reproduction: pd.DataFrame | None, metric: str, digits: int) -> str:
    if reproduction is None:
        return ""
    rows = reproduction[reproduction.metric == metric]
    if rows.empty:
        return ""
    shown = rows[["setup", "source", "paper_mean", "paper_sd", "ours_mean", "ours_sd", "p_welch", "note"]]
    return f"The papers' numbers beside ours (tables/reproduction.md):\n\n{markdown_table(shown, False, digits)}\n"


def _percent(value: float) -> str:
    return f"{value:+.1%}" if np.isfinite(value) else "–"


def _finding(row, digits: int) -> str:
    """One paper's finding and ours, in a line of the page."""
    paper = row.paper_finding
    if np.isfinite(row.paper_change_low):
        paper += f" ({_percent(row.paper_change_low)} to {_percent(row.paper_change_high)})"
    shift = f"shift {_fmt(row.ours_shift, digits)}"
    if np.isfinite(row.ours_shift_low):
        shift += f", 95% interval {_fmt(row.ours_shift_low, digits)} to {_fmt(row.ours_shift_high, digits)}"
    agree = {"yes": "agrees", "no": "**disagrees**"}.get(row.agree, "cannot be judged")
    return (
        f"- {row.setup} against {row.versus}, {row.quantity}: the paper finds {paper}; ours {row.ours_finding} "
        f"(medians {_percent(row.ours_change)}, {shift}; p = {_fmt(row.ours_p, digits)}): {agree}."
    )


def _findings(path: Path, digits: int, alpha: float) -> str:
    """The papers' findings beside ours (tables/reproduction_claims.csv), where a set-up's reference states one."""
    claims = pd.read_csv(path) if path.is_file() else pd.DataFrame()
    if claims.empty:
        return ""
    return (
        "## The papers' findings\n\n"
        f"Each pair's two-sided rank test, unadjusted, at {alpha} (tables/reproduction.md):\n\n"
        + "\n".join(_finding(row, digits) for row in claims.itertuples())
        + f"\n\n{CLAIM_NOTE}\n"
    )


def answer_page(
    study_dir: str | os.PathLike[str],
    study: str,
    setups: list[str],
    metrics: list[str],
    settings: StatisticsSettings = StatisticsSettings(),
    looks: dict | None = None,
) -> str:
    """The page's Markdown up to its list of figures (the report's first page shows it with figures of its own).
    ``looks``: trials on a schedule, the last look's record (stats.looks)."""
    folder = StudyFolder.at(study_dir)
    tables = Path(folder.tables())
    scores = pd.read_csv(folder.scores_table())
    convergence = pd.read_csv(folder.convergence())
    converged = dict(zip(convergence.setup, convergence.converged))
    reproduction_file = Path(folder.table("reproduction"))
    reproduction = pd.read_csv(reproduction_file) if reproduction_file.is_file() else None
    digits, alpha, primary = settings.digits, settings.alpha, settings.primary(metrics)
    tables_of = {metric: read_tables(tables, metric) for metric in metrics}
    ranked = {metric: ranking(*tables_of[metric], metric, settings) for metric in metrics}
    first_table = ranked[primary].set_index("setup")
    counted = _counted(settings.failures)
    parts = [
        f"# {study}: the answer\n",
        answer(ranked[primary], tables_of[primary][1], primary, alpha, digits, _words(primary, looks)) + "\n",
        f"{len(setups)} set-ups ({', '.join(setups)}); {primary.upper()} trials per set-up: "
        f"{', '.join(f'{s} {_trials_text(first_table.loc[s])}' for s in setups if s in first_table.index)}"
        f"; {counted}. Made from the tables in tables/ and convergence.csv. A set-up that another beats "
        "significantly is ranked after those that none beats; then set-ups are ranked by the probability that a "
        "trial of one scores better than one of another (the rank tests' order), then by median; p-values are "
        "two-sided Mann-Whitney tests (exact or asymptotic: `tables/pairs_<metric>.md` names each), Holm-adjusted "
        f"over each metric's pairs{_design_words(looks)}, significant below {alpha}; A12 is the probability that a "
        "trial of the first set-up scores better than one of the other (its 95% interval where it agrees with the "
        "test; a magnitude word only where the test is significant), and the shift is first minus other, with its "
        "95% interval.\n",
    ]
    parts.append(_looks_part(looks, digits))
    hardware, uneven = hardware_notes(scores, setups)
    if uneven:
        parts.append("**" + hardware[-1] + "**\n\n" + " ".join(hardware[:-1]) + "\n")
    else:
        parts.append(" ".join(hardware) + "\n")
    for metric in metrics:
        footnote = protocol_notes(scores, metric, setups)[0]
        parts += [
            f"## {metric.upper()} ({better(metric)} is better)\n",
            verdict(ranked[metric], tables_of[metric][1], metric, alpha, digits, _words(metric, looks)) + "\n",
            markdown_table(ranking_table(ranked[metric], converged, digits, _words(metric, looks)), False, digits),
            *(f"{line}\n" for line in footnote),
            _papers(reproduction, metric, digits),
        ]
    parts.append(_findings(Path(folder.table("reproduction_claims")), digits, alpha))
    notes = convergence_notes(convergence)
    parts.append("## Convergence\n")
    parts.append(
        "\n".join(f"- {setup}: {note}" for setup, note in notes.items()) + "\n"
        if notes
        else "Every set-up's in-training score had stopped improving by the study's criterion (convergence.csv).\n"
    )
    return "\n".join(part for part in parts if part)


def _counted(failures: str) -> str:
    """How the page's tests count a failed trial (statistics.failures)."""
    if failures == "worst":
        return "a failed trial (NaN: no score; inf: diverged) counts as worse than every finite score"
    return (
        "**failed trials are left out** (statistics.failures = exclude): a set-up that fails often can look better "
        "than it is"
    )


def _design_words(looks: dict | None) -> str:
    """Where the page's p-values of a metric are a schedule's design p, the opening text says so."""
    if looks is None:
        return ""
    return (
        f" (on {looks['metric'].upper()}, which the schedule tested, design p-values instead, with effect sizes at "
        "the look that decided each comparison and intervals at the design's level: below)"
    )


def _words(metric: str, looks: dict | None) -> Words:
    """The metric's p-values: the design's on the metric a schedule tested, Holm's elsewhere."""
    return DESIGN if looks is not None and looks["metric"] == metric else HOLM


def _looks_part(looks: dict | None, digits: int) -> str:
    """Trials on a schedule: the design, the looks taken and each comparison's decision, as a list (the end of
    a run prints the page down to its first table: the answer's own)."""
    if looks is None:
        return ""
    lines = [looks_summary(looks) + "\n"]
    for row in looks_table(looks).itertuples():
        when = f"decided at look {row.decided_at}" if row.decided_at != "–" else "not decided"
        nominal, level, design = (_fmt(value, digits) for value in (row.p_nominal, row.level, row.p_design))
        lines.append(
            f"- {row.setup_a} vs {row.setup_b}: {when}, {row.trials} trials per set-up (nominal p {nominal}, "
            f"tested at {level}; design p {design})."
        )
    return "\n".join(lines) + "\n"


def _with_figures(page: str, study_dir: str | os.PathLike[str], figures: list[str]) -> str:
    links = "".join(
        f"- [{Path(figure).stem.replace('_', ' ')}]({Path(figure).relative_to(study_dir)})\n" for figure in figures
    )
    return "\n".join(part for part in (page, "## Figures\n", links) if part)


def write_summary(
    study_dir: str | os.PathLike[str],
    study: str,
    setups: list[str],
    metrics: list[str],
    figures: list[str],
    out: str | os.PathLike[str],
    settings: StatisticsSettings = StatisticsSettings(),
    looks_path: str | os.PathLike[str] | None = None,
) -> str:
    """Write the page to ``out``, and the report's first page beside it (ganstudy.report.report_page);
    ``looks_path``: trials on a schedule, the last look's record."""
    looks = read_json(looks_path) if looks_path else None
    page = answer_page(study_dir, study, setups, metrics, settings, looks)
    text = _with_figures(page, study_dir, figures)
    write_text(out, text)
    write_report_page(study_dir, setups, metrics, settings.primary(metrics), page, figures)
    return text


def headline(path: str | os.PathLike[str]) -> str | None:
    """What the end of a run prints: the page's path and its lines up to its first table; None without a page."""
    path = Path(path)
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    top = lines[: next((i for i, line in enumerate(lines) if line.startswith("|")), len(lines))]
    return f"The study's answer: {path}\n\n" + "\n".join(top).rstrip()
