"""stats: per metric, a summary table per set-up (thesis table 4.4), the p-value matrix (table 4.5), every
pair with Holm-adjusted p-values, what its trials could decide, A12 and the shift with their intervals, and a
Kruskal-Wallis test across all set-ups; as CSV, Markdown and LaTeX (booktabs). Problems (no runs, too few
trials, NaN scores, a constant
metric, scores measured under different protocols) are written into the tables, not raised; the Markdown
and LaTeX tables say the protocol of their scores in a footnote."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ganstudy.core.atomic import atomic_path, write_text
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.metrics import better
from ganstudy.stats.convergence import convergence_notes
from ganstudy.stats.hardware import hardware_notes
from ganstudy.stats.power import (
    BUDGETS,
    MOST_TRIALS,
    PILOT_COPIES,
    RANGE,
    SIMULATIONS,
    TARGET_POWER,
    power_at_budgets,
    power_columns,
    trials_for_power,
)
from ganstudy.stats.protocol import protocol_notes
from ganstudy.stats.sequential import schedule_power
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.stats.tests import (
    a12,
    a12_interval,
    a12_magnitude,
    agrees_with_test,
    holm,
    kruskal_wallis,
    median_interval,
    outcomes,
    rank_test,
    shift_interval,
    smallest_p,
)
from ganstudy.study.trials import Schedule

SUMMARY_COLUMNS = [
    "setup",
    "trials",
    "failed",
    "nan",
    "inf",
    "failure_rate",
    "median",
    "median_low",
    "median_high",
    "iqr",
    "mean",
    "sd",
    "min",
    "max",
    "superiority",
    "mean_train_minutes",
    "core_hours",
    "gpu_hours",
    "pareto",
    "note",
]
# What bigger budgets buy (stats.power.power_at_budgets) and, on a schedule, its chance at the effect seen.
BUDGET_COLUMNS = ["budget", *(column for times in BUDGETS for column in power_columns(times)), "schedule_power"]
PAIR_COLUMNS = [
    "setup_a",
    "setup_b",
    "n_a",
    "n_b",
    "test",
    "p_value",
    "p_holm",
    "smallest_p_holm",
    "a12",
    "a12_low",
    "a12_high",
    "shift",
    "shift_low",
    "shift_high",
    "confidence",
    "effect",
    "better",
    "trials_for_power",
    "trials_for_power_low",
    "trials_for_power_high",
    *BUDGET_COLUMNS,
    "note",
]
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Judged:
    """A comparison of trials on a schedule as its design judged it (ganstudy.stats.looks): the design p scaled to
    alpha, the look it was decided at (None: not decided), the trials per set-up of that look (or of the last),
    and the confidence at which its intervals agree with the decision (one minus the nominal p that parts
    crossing from not crossing there). ``trials`` is None while it is open with looks to come."""

    p: float
    schedule: Schedule
    look: int | None = None
    trials: int | None = None
    confidence: float = CONFIDENCE

    def note(self) -> str:
        """Where the pairs table's row was measured."""
        if self.trials is None:
            return ""
        when = f"decided at look {self.look}" if self.look is not None else "not decided by the last look"
        return (
            f"{when}: its test, effect sizes and intervals at {self.trials} trials per set-up, the intervals at "
            f"the design's {self.confidence:.2%}"
        )


@dataclass(frozen=True)
class Trials:
    """A set-up's trials of one metric: ``outcomes`` as the rank tests compare them (tests.outcomes), its finite
    scores, its failed trials by kind (``nan``: no score; ``inf``: diverged) and its rows of scores.csv."""

    outcomes: np.ndarray
    finite: np.ndarray
    nan: int
    inf: int
    rows: pd.DataFrame

    @property
    def failed(self) -> int:
        return self.nan + self.inf

    def failures_text(self, failures: str) -> str:
        """The failed trials in words, e.g. "2 failed (1 NaN, 1 inf), ranked worst"; "" without any."""
        if not self.failed:
            return ""
        kinds = ", ".join(f"{n} {kind}" for n, kind in ((self.nan, "NaN"), (self.inf, "inf")) if n)
        how = "ranked worst" if failures == "worst" else "left out (statistics.failures = exclude)"
        return f"{self.failed} failed ({kinds}), {how}"


def trials(scores: pd.DataFrame, metric: str, setup: str, failures: str = "worst") -> Trials:
    """A set-up's ``Trials`` of a metric under ``failures`` (statistics.failures)."""
    rows = scores[(scores.metric == metric) & (scores.setup == setup)]
    values = rows.value.to_numpy(float)
    return Trials(
        outcomes(values, better(metric) == "higher", failures),
        values[np.isfinite(values)],
        int(np.isnan(values).sum()),
        int(np.isinf(values).sum()),
        rows,
    )


def _problems(setup: Trials, min_trials: int, failures: str) -> list[str]:
    notes = []
    compared = len(setup.outcomes)
    if len(setup.rows) == 0:
        notes.append("no runs")
    elif compared < min_trials:
        notes.append(f"underpowered: {compared} < {min_trials} trials")
    if setup.failed:
        notes.append(setup.failures_text(failures))
    if compared > 1 and len(np.unique(setup.outcomes)) == 1:
        notes.append("constant")
    return notes


def superiority(values: dict[str, np.ndarray], setup: str, higher: bool) -> float:
    """The mean over the other set-ups with scores of the probability that a trial of ``setup`` scores
    better than one of the other (A12 turned to the metric's direction, ties half): the rank tests' own
    order, which one collapsed or one lucky trial cannot turn as it turns a mean."""
    others = [other for other, v in values.items() if other != setup and len(v)]
    if not len(values[setup]) or not others:
        return float("nan")
    return float(np.mean([a12(values[setup], values[o]) if higher else a12(values[o], values[setup]) for o in others]))


def summary_table(
    scores: pd.DataFrame,
    metric: str,
    setups: list[str],
    settings: StatisticsSettings = StatisticsSettings(),
    notes: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Per set-up: its trials, how many failed and their share, the median of its outcomes (failed trials
    ranked worst, under statistics.failures = worst) with its distribution-free 95% interval and the IQR,
    mean, sd, min and max of its finite scores, the mean probability of beating the other set-ups, mean
    training time and cost, and a note for problems (``notes`` adds one per set-up, e.g. that its training
    had not converged)."""
    notes = notes or {}
    higher = better(metric) == "higher"
    by_setup = {setup: trials(scores, metric, setup, settings.failures) for setup in setups}
    compared = {setup: one.outcomes for setup, one in by_setup.items()}
    rows = []
    for setup, one in by_setup.items():
        finite, part, some = one.finite, one.rows, len(one.outcomes) > 0
        low, high = median_interval(one.outcomes, CONFIDENCE)
        rows.append(
            {
                "setup": setup,
                "trials": len(part),
                "failed": one.failed,
                "nan": one.nan,
                "inf": one.inf,
                "failure_rate": one.failed / len(part) if len(part) else np.nan,
                "median": np.median(one.outcomes) if some else np.nan,
                "median_low": low,
                "median_high": high,
                "iqr": _iqr(one.outcomes) if some else np.nan,
                "mean": finite.mean() if len(finite) else np.nan,
                "sd": finite.std(ddof=1) if len(finite) > 1 else np.nan,
                "min": finite.min() if len(finite) else np.nan,
                "max": finite.max() if len(finite) else np.nan,
                "superiority": superiority(compared, setup, higher),
                "mean_train_minutes": part.train_seconds.mean() / 60 if len(part) else np.nan,
                # A trial's cost: its training time times what its ranks held.
                "core_hours": float(trial_hours(part, "core_hours").mean()) if len(part) else np.nan,
                "gpu_hours": float(trial_hours(part, "gpu_hours").mean()) if len(part) else np.nan,
                "note": "; ".join(
                    _problems(one, settings.min_trials, settings.failures) + ([notes[setup]] if setup in notes else [])
                ),
            }
        )
    table = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    table["pareto"] = pareto_front(
        table[cost_column(table)[0]].to_numpy(float), table["median"].to_numpy(float), higher
    )
    return table


def _iqr(values: np.ndarray) -> float:
    """The interquartile range: interpolated between finite scores; with failed trials (infinite outcomes)
    the quartiles are trials' own values, so the range is infinite where one quartile failed and NaN where
    both did."""
    method = "linear" if np.isfinite(values).all() else "inverted_cdf"
    upper, lower = np.percentile(values, [75, 25], method=method)
    with np.errstate(invalid="ignore"):
        return float(upper - lower)


def _current(path: Path, columns: list[str]) -> pd.DataFrame:
    """A table as read; one that an earlier ganstudy made (without the cost or power columns) names the
    command that remakes it, which retrains nothing."""
    table = pd.read_csv(path)
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise GanstudyError(
            f"{path} was made by an earlier ganstudy (no {', '.join(missing)}): remake the tables with "
            f"`snakemake --forcerun stats --configfile <the study config>` (nothing retrains)"
        )
    return table


def read_summary(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A summary_<metric>.csv, checked to be of this ganstudy."""
    return _current(Path(path), SUMMARY_COLUMNS)


def read_tables(tables: Path, metric: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """summary_<metric>.csv and pairs_<metric>.csv of ``tables``, each checked to be of this ganstudy."""
    return read_summary(tables / f"summary_{metric}.csv"), _current(tables / f"pairs_{metric}.csv", PAIR_COLUMNS)


def trial_hours(scores: pd.DataFrame, column: str) -> pd.Series:
    """Each row's training cost in ``column``'s unit ("core_hours" or "gpu_hours"): training seconds x ranks x
    what each rank held, in hours. scores.csv of ganstudy before 2026-12 lacks the held columns: one core per
    rank, no GPU."""
    held, default = {"core_hours": ("cores_per_rank", 1), "gpu_hours": ("gpus_per_rank", 0)}[column]
    return scores.train_seconds * scores.get("ranks", 1) * scores.get(held, default) / 3600


def cost_column(summary: pd.DataFrame) -> tuple[str, str]:
    """The column and unit of a study's cost per trial: GPU-hours where every set-up trained on GPUs, else
    core-hours (a GPU rank holds cores too; GPU-hours would make a CPU set-up look free)."""
    gpus = summary.gpu_hours.dropna()
    return ("gpu_hours", "GPU-hours") if len(gpus) and bool((gpus > 0).all()) else ("core_hours", "core-hours")


def pareto_front(cost: np.ndarray, quality: np.ndarray, higher: bool) -> list[bool]:
    """Per set-up: True when no other costs at most as much and scores at least as well, one of them strictly
    (the front of quality against cost); False where its cost or quality is unknown."""
    score = quality if higher else -quality
    known = np.isfinite(cost) & np.isfinite(score)
    front = []
    for i in range(len(cost)):
        dominated = any(
            known[j] and cost[j] <= cost[i] and score[j] >= score[i] and (cost[j] < cost[i] or score[j] > score[i])
            for j in range(len(cost))
            if j != i
        )
        front.append(bool(known[i] and not dominated))
    return front


def _judged(design: Mapping[tuple[str, str], Judged] | None, a: str, b: str) -> Judged | None:
    """The design's judgement of the pair of ``a`` and ``b``, whichever order the set-ups were listed in."""
    design = design or {}
    return design.get((a, b)) or design.get((b, a))


def pairwise_table(
    scores: pd.DataFrame,
    metric: str,
    setups: list[str],
    settings: StatisticsSettings = StatisticsSettings(),
    design: dict[tuple[str, str], Judged] | None = None,
) -> pd.DataFrame:
    """Every pair: the two-sided rank-sum test of its outcomes (failed trials ranked worst or left out, as
    ``settings.failures`` says; ``settings.test``: exact or asymptotic, recorded), Holm-adjusted over the
    metric's pairs, the smallest Holm p its trials could give at all, A12 of a over b with Newcombe's interval
    (left out where it disagrees with the test) and its magnitude (only where Holm's p is significant), the
    Hodges-Lehmann shift of a over b with its rank-based interval, which set-up the effect favours in the
    metric's direction, and, where Holm's p is not significant, the trials per set-up with which the study's
    test would decide with power 0.8 (stats.power: the median and 80% range over the trials' bootstrap copies).
    ``design``: a sequential study's judgement of each pair (stats.looks.design_pvalues): its design p takes
    Holm's place, and the test and effect sizes are those of the look that judged it, with intervals at the
    design's level that leave out no effect exactly where the design decided."""
    values = {s: trials(scores, metric, s, settings.failures).outcomes for s in setups}
    higher = better(metric) == "higher"
    rows = []
    for i, a in enumerate(setups):
        for b in setups[i + 1 :]:
            judged = _judged(design, a, b)
            if judged is None or judged.trials is None:
                rows.append(_pair_row(a, b, values, higher, settings))
                continue
            seen = scores[scores.trial < judged.trials]
            at_look = {s: trials(seen, metric, s, settings.failures).outcomes for s in (a, b)}
            row = _pair_row(a, b, at_look, higher, settings, judged.confidence, "the design")
            row["note"] = "; ".join(part for part in (judged.note(), row["note"]) if part)
            rows.append(row)
    table = pd.DataFrame(rows, columns=[*PAIR_COLUMNS, "smallest_p"])
    # One Holm family per metric: every table and figure takes a pair's adjusted p from here.
    table["p_holm"] = holm(table.p_value.to_numpy(float)) if len(table) else []
    if design is not None:
        table["p_holm"] = [_judged(design, a, b).p for a, b in zip(table.setup_a, table.setup_b)]
    table["smallest_p_holm"] = holm(table.pop("smallest_p").to_numpy(float)) if len(table) else []
    undecided = ~(table.p_holm < settings.alpha)
    # A magnitude word beside a difference the test cannot tell from chance says more than the test.
    table.loc[undecided, "effect"] = "–"
    _plans(table, table.index[undecided], values, settings, design)
    return table[PAIR_COLUMNS]


def _plans(
    table: pd.DataFrame,
    undecided: pd.Index,
    values: dict[str, np.ndarray],
    settings: StatisticsSettings,
    design: dict[tuple[str, str], Judged] | None,
) -> None:
    """Into ``table``'s undecided rows: what a decision would take, and what bigger budgets buy (the study's
    trials per set-up, a schedule's most, and multiples of it); on a schedule, its chance at the effect seen."""
    for index in undecided:
        a, b = table.setup_a[index], table.setup_b[index]
        x, y = values[a], values[b]
        plan = trials_for_power(x, y, settings.test, settings.alpha, len(table))
        table.loc[index, ["trials_for_power", "trials_for_power_low", "trials_for_power_high"]] = (
            plan.median,
            plan.low,
            plan.high,
        )
        judged = (design or {}).get((a, b))
        budget = judged.schedule.most if judged else max(len(x), len(y))
        table.loc[index, "budget"] = budget
        powers = power_at_budgets(x, y, settings.test, settings.alpha, len(table), budget)
        for times, spread in zip(BUDGETS, powers):
            table.loc[index, list(power_columns(times))] = spread
        if judged is not None:
            # Holm's first step, as the plans: the comparison's share of alpha were every one open.
            table.loc[index, "schedule_power"] = schedule_power(
                x, y, judged.schedule, settings.alpha / len(table), settings.stopping()
            )


def _pair_row(
    a: str,
    b: str,
    values: dict[str, np.ndarray],
    higher: bool,
    settings: StatisticsSettings,
    confidence: float = CONFIDENCE,
    design: str = "",
) -> dict[str, object]:
    """One pair's test, effect sizes with their ``confidence`` intervals, the set-up favoured, and its notes
    (before Holm). ``design`` names a design whose decision is the test's p below 1 - ``confidence``: then the
    shift's interval too is shown only where it agrees with it."""
    x, y = values[a], values[b]
    effect = a12(x, y)
    favoured = "–" if np.isnan(effect) or effect == 0.5 else (a if (effect > 0.5) == higher else b)
    test = rank_test(x, y, settings.test)
    short = [s for s in (a, b) if len(values[s]) < settings.min_trials]
    note = [test.note] if test.note else []
    note += [f"underpowered: {', '.join(short)} < {settings.min_trials} trials"] if short else []
    judge = design or "the test"
    low, high = a12_interval(x, y, confidence)
    if np.isfinite(low) and not agrees_with_test(low, high, test.p, confidence):
        low, high = np.nan, np.nan
        note.append(f"no A12 interval: Newcombe's disagrees with {judge} at {1 - confidence:.2g} here")
    shift = shift_interval(x, y, confidence)
    if design and np.isfinite(shift[1]) and (shift[1] > 0 or shift[2] < 0) != (test.p < 1 - confidence):
        shift = (shift[0], np.nan, np.nan)
        note.append(f"no shift interval: Moses's disagrees with {judge} at {1 - confidence:.2g} here (ties)")
    return {
        "setup_a": a,
        "setup_b": b,
        "n_a": len(x),
        "n_b": len(y),
        "test": test.method,
        "p_value": test.p,
        "smallest_p": smallest_p(len(x), len(y), settings.test),
        "a12": effect,
        "a12_low": low,
        "a12_high": high,
        **dict(zip(("shift", "shift_low", "shift_high"), shift)),
        "confidence": confidence,
        "effect": a12_magnitude(effect),
        "better": favoured,
        "note": "; ".join(note),
    }


def kruskal_table(scores: pd.DataFrame, metrics: list[str], setups: list[str], failures: str = "worst") -> pd.DataFrame:
    rows = []
    for metric in metrics:
        groups = [trials(scores, metric, s, failures).outcomes for s in setups]
        h, df, p = kruskal_wallis(groups)
        rows.append({"metric": metric, "groups": sum(1 for g in groups if len(g)), "H": h, "df": df, "p_value": p})
    return pd.DataFrame(rows, columns=["metric", "groups", "H", "df", "p_value"])


def results_table(scores: pd.DataFrame, metrics: list[str], setups: list[str], digits: int = 4) -> pd.DataFrame:
    """Seed 001's layout: one row per set-up, "mean ± sd" of each metric over the finite trials, and how many
    trials failed (they have no score to average)."""
    rows = []
    for setup in setups:
        row = {"setup": setup}
        for metric in metrics:
            one = trials(scores, metric, setup)
            values = one.finite
            sd = _fmt(values.std(ddof=1), digits) if len(values) > 1 else "–"
            failed = f" ({one.failed} of {len(one.rows)} failed)" if one.failed else ""
            row[f"{metric} ({better(metric)} is better)"] = (
                f"{_fmt(values.mean(), digits)} ± {sd}{failed}" if len(values) else f"–{failed}"
            )
        rows.append(row)
    return pd.DataFrame(rows)


def mean_order_notes(summaries: dict[str, pd.DataFrame]) -> list[str]:
    """Per metric whose means order the set-ups otherwise than the rank tests do (superiority): both orders,
    best first, so that a reader of the mean ± sd table does not take its order for the tests'."""
    lines = []
    for metric, summary in summaries.items():
        known = summary[np.isfinite(summary["mean"].to_numpy(float))]
        by_mean = list(known.sort_values("mean", ascending=better(metric) != "higher", kind="stable").setup)
        by_rank = list(summary.sort_values("superiority", ascending=False, kind="stable").setup)
        if by_mean != [s for s in by_rank if s in set(by_mean)]:
            lines.append(
                f"{metric}: the means order the set-ups {', '.join(by_mean)}; the rank tests' order (failed trials "
                f"counted) is {', '.join(by_rank)} (summary_{metric}.md)."
            )
    return lines


def pvalue_matrix(pairs: pd.DataFrame, setups: list[str]) -> pd.DataFrame:
    """Upper triangle of the pairs' unadjusted p-values, rows and columns in set-up order (the thesis's layout)."""
    matrix = pd.DataFrame(np.nan, index=setups[:-1], columns=setups[1:])
    for row in pairs.itertuples():
        matrix.loc[row.setup_a, row.setup_b] = row.p_value
    matrix.index.name = "setup"
    return matrix


def _fmt(value: object, digits: int = 4) -> str:
    if isinstance(value, (float, np.floating)):
        return "–" if pd.isna(value) else f"{value:.{digits}g}"
    return str(value)


def markdown_table(frame: pd.DataFrame, index: bool = False, digits: int = 4) -> str:
    data = frame.reset_index() if index else frame
    header = "| " + " | ".join(str(c) for c in data.columns) + " |"
    rule = "|" + "|".join("---" for _ in data.columns) + "|"
    body = ["| " + " | ".join(_fmt(v, digits) for v in row) + " |" for row in data.itertuples(index=False)]
    return "\n".join([header, rule, *body]) + "\n"


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "–": "--",
    "±": r"$\pm$",
}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def latex_table(
    frame: pd.DataFrame, caption: str, index: bool = False, digits: int = 4, footnote: list[str] = ()
) -> str:
    """A booktabs table (needs \\usepackage{booktabs}); numbers right-aligned, text left-aligned; ``footnote``
    lines in small type under it."""
    data = frame.reset_index() if index else frame
    align = "".join("r" if pd.api.types.is_numeric_dtype(data[c]) else "l" for c in data.columns)
    lines = [
        r"\begin{table}[ht]",
        r"\centering",
        rf"\caption{{{_latex_escape(caption)}}}",
        rf"\begin{{tabular}}{{{align}}}",
        r"\toprule",
        " & ".join(_latex_escape(str(c)) for c in data.columns) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(_latex_escape(_fmt(v, digits)) for v in row) + r" \\" for row in data.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}"]
    lines += [rf"\par\smallskip{{\footnotesize {_latex_escape(line)}}}" for line in footnote]
    lines += [r"\end{table}"]
    return "\n".join(lines) + "\n"


def write_table(
    out: Path, name: str, frame: pd.DataFrame, title: str, index: bool, digits: int, footnote: list[str] = ()
) -> list[Path]:
    """``name``.csv, .md and .tex; the ``footnote`` lines (the scores' protocol) under the Markdown and LaTeX tables."""
    csv_path, md_path, tex_path = (out / f"{name}.{ext}" for ext in ("csv", "md", "tex"))
    with atomic_path(csv_path) as tmp:
        frame.to_csv(tmp, index=index)
    write_text(
        md_path, f"### {title}\n\n" + markdown_table(frame, index, digits) + "".join(f"\n{line}\n" for line in footnote)
    )
    write_text(tex_path, latex_table(frame, title, index, digits, footnote))
    return [csv_path, md_path, tex_path]


def _protocol_marks(notes: dict[str, str], by_setup: dict[str, str]) -> dict[str, str]:
    """The set-ups' notes with, where the scores were measured under several protocols, each one's protocol."""
    return {
        setup: "; ".join(
            note for note in (notes.get(setup), f"protocol {by_setup[setup]}" if setup in by_setup else None) if note
        )
        for setup in set(notes) | set(by_setup)
    }


def _mark_pairs(pairs: pd.DataFrame, by_setup: dict[str, str], uneven: list[tuple[str, str]]) -> pd.DataFrame:
    """Pairs whose set-ups' scores were measured under different protocols, or whose set-ups trained on kinds
    of hardware in unequal shares (``uneven``), say so in their note."""
    for row in pairs.itertuples():
        a, b = by_setup.get(row.setup_a), by_setup.get(row.setup_b)
        marks = [f"protocols differ ({a} vs {b}): not comparable"] if a and b and a != b else []
        if {(row.setup_a, row.setup_b), (row.setup_b, row.setup_a)} & set(uneven):
            marks.append("trained on other hardware in unequal shares (see the warning)")
        if marks:
            pairs.loc[row.Index, "note"] = "; ".join(filter(None, [row.note, *marks]))
    return pairs


def summary_note(failures: str) -> str:
    """What the summary table's columns mean: the trials, the failures, the median's interval, superiority."""
    counted = (
        "a failed trial (NaN: no score; inf: diverged) counts as worse than every finite score in the median, its "
        "interval, the IQR, superiority and the tests (statistics.failures = worst)"
        if failures == "worst"
        else "failed trials (NaN: no score; inf: diverged) are left out of every statistic and test "
        "(statistics.failures = exclude), so a set-up that fails often can look better than it is"
    )
    return (
        f"trials: every trial; failed (of which nan: no score, inf: diverged), failure_rate: {counted}. median_low, "
        f"median_high: the median's distribution-free {CONFIDENCE:.0%} interval (order statistics; empty below 6 "
        "trials), which covers the median at least 95% of the time whatever the scores' shape. mean, sd, min, max: "
        "over the finite scores. superiority: the mean over the other set-ups of the probability that a trial of "
        "this one scores better than one of the other (ties half), the rank tests' order."
    )


def pairs_note(test: str, alpha: float) -> str:
    """What the pairs table's columns mean: the test, the adjustment, the intervals."""
    method = {
        "auto": "exact where the pooled trials have at most 100,000 splits, else asymptotic",
        "exact": "exact",
        "asymptotic": "asymptotic (the thesis's tie-corrected normal approximation)",
    }[test]
    return (
        f"Tests: two-sided Mann-Whitney, {method} (statistics.test = {test}; the test column says which). p_holm: "
        "Holm-adjusted over the metric's pairs. smallest_p_holm: the smallest Holm p these trials could give at all "
        f"(every trial of one set-up better than every one of the other); at or above {alpha} no outcome of these "
        f"trials is significant. A12 of a over b with Newcombe's (2006) {CONFIDENCE:.0%} score interval, empty where "
        "it disagrees with the test (it leaves out 0.5 exactly where p < 0.05, so it never calls a difference the "
        "test cannot); effect: Vargha and Delaney's magnitude, only where p_holm is significant; shift: the "
        "Hodges-Lehmann shift a - b (median of the pairwise differences, inf where failed trials decide it) with "
        f"its {CONFIDENCE:.0%} rank-based (Moses) interval, empty where the trials are too few for one. "
        f"trials_for_power (_low, _high): the trials per set-up with which this test, at {alpha} times the number of "
        f"pairs, decides the effect its way in {TARGET_POWER:.0%} of {SIMULATIONS:,} studies drawn from each set-up's "
        f"own outcomes: the median (and the {RANGE:.0%} range) over {PILOT_COPIES} bootstrap copies of these trials, "
        f"so the range carries the uncertainty of what they measured; inf = more than {MOST_TRIALS}, empty where "
        "the comparison was decided, a set-up has fewer than 2 trials or all outcomes are alike. confidence: the "
        "intervals' level. budget: the trials per set-up the study ran (a schedule's most); power_1x, power_2x, "
        "power_4x (_low, _high): the power of the same test at budget, twice and four times it (median and range "
        "over the same copies), where undecided. schedule_power: trials on a schedule, the probability that the "
        "schedule decides the comparison at the effect its trials show (studies drawn from each set-up's outcomes "
        "through the looks' own test, at alpha over the number of pairs)."
    )


def write_stats(
    scores_path: str | os.PathLike[str],
    setups: list[str],
    metrics: list[str],
    out_dir: str | os.PathLike[str],
    settings: StatisticsSettings = StatisticsSettings(),
    convergence_path: str | os.PathLike[str] | None = None,
    design: dict[str, dict[tuple[str, str], Judged]] | None = None,
) -> list[Path]:
    """Per metric: summary_, pvalues_ and pairs_<metric>.{csv,md,tex}; across metrics: results (mean ± sd) and
    kruskal.{csv,md,tex}. Set-ups that had not converged, had degraded or could not be judged (``convergence_path``)
    are flagged in the summaries. ``design``: per metric tested on a schedule, its pairs' design p."""
    notes = convergence_notes(pd.read_csv(convergence_path)) if convergence_path else {}
    scores = pd.read_csv(scores_path)
    out, digits = Path(out_dir), settings.digits
    written = []
    footnotes, summaries = {}, {}
    for metric in metrics:
        tables, footnotes[metric], summaries[metric] = _metric_tables(
            out, scores, metric, setups, settings, notes, (design or {}).get(metric)
        )
        written += tables
    shared: dict[str, list[str]] = {}
    for metric in metrics:
        for line in footnotes[metric]:
            shared.setdefault(line, []).append(metric)
    every = [f"{', '.join(names)}: {line}" for line, names in shared.items()]
    written += write_table(
        out,
        "results",
        results_table(scores, metrics, setups, digits),
        "Mean ± standard deviation over the finite scores per set-up",
        False,
        digits,
        [*mean_order_notes(summaries), *every],
    )
    written += write_table(
        out,
        "kruskal",
        kruskal_table(scores, metrics, setups, settings.failures),
        "Kruskal-Wallis test across all set-ups (tie-corrected)",
        False,
        digits,
        every,
    )
    return written


def _metric_tables(
    out: Path,
    scores: pd.DataFrame,
    metric: str,
    setups: list[str],
    settings: StatisticsSettings,
    notes: dict[str, str],
    design: dict[tuple[str, str], Judged] | None = None,
) -> tuple[list[Path], list[str], pd.DataFrame]:
    """One metric's summary_, pvalues_ and pairs_<metric> tables, the footnotes its scores need, and its summary."""
    digits = settings.digits
    direction = f"{better(metric)} is better"
    footnotes, by_setup = protocol_notes(scores, metric, setups)
    if by_setup:
        print(footnotes[-1], file=sys.stderr)
    hardware, uneven = hardware_notes(scores, setups)
    footnotes += hardware
    summary = summary_table(scores, metric, setups, settings, _protocol_marks(notes, by_setup))
    written = write_table(
        out,
        f"summary_{metric}",
        summary,
        f"{metric.upper()} per set-up ({direction})",
        False,
        digits,
        [summary_note(settings.failures), *footnotes],
    )
    pairs = _mark_pairs(pairwise_table(scores, metric, setups, settings, design), by_setup, uneven)
    method = pairs_note(settings.test, settings.alpha)
    if design is not None:
        method += (
            " Trials on a schedule: p_holm here is the sequential design's p scaled to alpha (tables/looks.md), "
            "below alpha exactly where a look decided the comparison; n_a, n_b, p_value (nominal), A12 and shift are "
            "those of the look that decided it (or of the last), their intervals at the design's level there "
            "(confidence: one minus the nominal p below which that look crosses), so that they leave out no effect "
            "exactly where the design decided."
        )
    written += write_table(
        out,
        f"pvalues_{metric}",
        pvalue_matrix(pairs, setups),
        f"{metric.upper()}: two-sided rank-sum p-values (Mann-Whitney U), unadjusted",
        True,
        digits,
        [method, *footnotes],
    )
    written += write_table(
        out,
        f"pairs_{metric}",
        pairs,
        f"{metric.upper()}: pairwise rank-sum p-values, "
        f"{'the sequential design p in p_holm' if design is not None else 'Holm-adjusted'}, A12 of a over b and the "
        f"shift a - b ({direction})",
        False,
        digits,
        [method, *footnotes],
    )
    return written, footnotes, summary
