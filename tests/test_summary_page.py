"""The summary page (results/<study>/summary.md): the set-ups ranked in each metric's direction, the best
one's tests against each other taken from the pairs tables, convergence verdicts and figures, made from
the tables that `ganstudy stats` writes for synthetic scores."""

from __future__ import annotations

import base64
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from ganstudy.report.report_page import answer_description
from ganstudy.report.summary_page import headline, write_summary
from ganstudy.stats.convergence import COLUMNS
from ganstudy.stats.power import TrialsNeeded
from ganstudy.stats.settings import StatisticsSettings
from ganstudy.stats.summary import write_stats

SETUPS = ["a", "b", "c"]
VALUES = {
    # FID, lower is better: a clearly below b; c overlaps a.
    "fid": {
        "a": [10.0, 11.0, 12.0, 13.0, 10.2, 11.8],
        "b": [20.0, 21.0, 22.0, 19.0, 20.5, 21.5],
        "c": [10.5, 12.5, 11.5, 14.0, 10.1, 13.0],
    },
    # IS, higher is better: b clearly above a.
    "isc": {
        "a": [5.0, 6.0, 5.5, 6.5, 5.8, 6.2],
        "b": [8.0, 9.0, 8.5, 9.5, 8.8, 9.2],
        "c": [5.2, 6.2, 5.9, 6.1, 5.4, 6.6],
    },
}


def _study(tmp_path):
    rows = [
        {"study": "s", "setup": setup, "trial": trial, "metric": metric, "value": value, "train_seconds": 60.0}
        for metric, by_setup in VALUES.items()
        for setup, values in by_setup.items()
        for trial, value in enumerate(values)
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "scores.csv", index=False)
    trend = {
        column: 0.0
        for column in COLUMNS
        if column not in ("setup", "trials", "iterations", "score", "first", "converged")
    }
    convergence = [
        {"setup": s, "trials": 6, "iterations": 100, "score": "fid", "first": 50.0, **trend, "converged": "yes"}
        for s in SETUPS
    ]
    convergence[2].update(
        converged="no", window_from=50, projected_change=-0.2, projected_change_low=-0.3, projected_change_high=-0.1
    )
    pd.DataFrame(convergence, columns=COLUMNS).to_csv(tmp_path / "convergence.csv", index=False)
    write_stats(
        tmp_path / "scores.csv",
        SETUPS,
        list(VALUES),
        tmp_path / "tables",
        StatisticsSettings(min_trials=1),
        tmp_path / "convergence.csv",
    )
    figures = [str(tmp_path / "figures" / "box_fid.png"), str(tmp_path / "figures" / "score_curves.png")]
    return write_summary(tmp_path, "s", SETUPS, list(VALUES), figures, tmp_path / "summary.md")


def _rows(text: str, metric: str) -> list[list[str]]:
    section = text.split(f"## {metric.upper()} ")[1].split("\n## ")[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")][1:]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def _better_probability(best: list[float], other: list[float], higher: bool) -> float:
    best, other = np.array(best)[:, None], np.array(other)[None, :]
    wins = (best > other) if higher else (best < other)
    return float((wins.sum() + 0.5 * (best == other).sum()) / wins.size)


@pytest.mark.parametrize("metric, order", [("fid", ["a", "c", "b"]), ("isc", ["b", "c", "a"])])
def test_each_metric_ranks_its_set_ups_in_its_direction_with_the_tables_numbers(tmp_path, metric, order):
    text = _study(tmp_path)
    rows = _rows(text, metric)
    assert [row[1] for row in rows] == order and [row[0] for row in rows] == ["1", "2", "3"]
    summary = pd.read_csv(tmp_path / "tables" / f"summary_{metric}.csv").set_index("setup")
    pairs = pd.read_csv(tmp_path / "tables" / f"pairs_{metric}.csv")
    best = order[0]
    for row in rows:
        _rank, setup, trials, median, interval, mean, sd, superiority, p, effect, beaten, hours, front, converged = row
        assert (int(trials), mean, sd) == (6, f"{summary.loc[setup, 'mean']:.4g}", f"{summary.loc[setup, 'sd']:.4g}")
        assert median == f"{np.median(VALUES[metric][setup]):.4g}"
        # 6 trials: the median's distribution-free interval is the smallest and largest (P(all on one side) = 1/32).
        assert interval == f"{min(VALUES[metric][setup]):.4g} to {max(VALUES[metric][setup]):.4g}"
        winners = [
            pair.better
            for pair in pairs.itertuples()
            if pair.p_holm < 0.05 and setup in (pair.setup_a, pair.setup_b) and pair.better != setup
        ]
        assert beaten == ", ".join(winners)
        assert superiority == f"{summary.loc[setup, 'superiority']:.4g}"
        assert converged == ("no" if setup == "c" else "yes")
        # Every trial took 60 s on one rank of one core; equal costs: the best median alone is on the front.
        assert hours == f"{60 / 3600:.4g}" and front == ("yes" if setup == best else "")
        if setup == best:
            assert (p, effect) == ("–", "–")
            continue
        pair = pairs[
            ((pairs.setup_a == best) & (pairs.setup_b == setup)) | ((pairs.setup_a == setup) & (pairs.setup_b == best))
        ]
        assert p == f"{pair.p_holm.iloc[0]:.4g}"
        probability = _better_probability(VALUES[metric][best], VALUES[metric][setup], metric == "isc")
        # The magnitude word only where the test is significant.
        word = pair.effect.iloc[0]
        assert effect == f"{probability:.2f}" + (f" ({word})" if pair.p_holm.iloc[0] < 0.05 else "")
        assert (word == "–") == (pair.p_holm.iloc[0] >= 0.05)
    # The order is the rank tests': each set-up's mean probability of beating the others, recomputed here.
    others = {s: [o for o in SETUPS if o != s] for s in SETUPS}
    expected = {
        s: np.mean([_better_probability(VALUES[metric][s], VALUES[metric][o], metric == "isc") for o in others[s]])
        for s in SETUPS
    }
    assert order == sorted(SETUPS, key=lambda s: -expected[s])


def test_the_page_says_what_is_significant_what_did_not_converge_and_links_the_figures(tmp_path):
    text = _study(tmp_path)
    pairs = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv").set_index(["setup_a", "setup_b"])
    # The primary metric (the first) answers at the top, in one sentence.
    assert text.splitlines()[2].startswith(
        "**a** ranks first in FID (lower is better), and no set-up is significantly better; it is significantly "
        "better than b"
    )
    assert (
        "**a** ranks first in FID: no set-up is significantly better than it, and a trial of it scores better than "
        "one of another set-up with probability"
    ) in text
    # In IS b beats both others in every pair of trials: its section opens with that, not with what no set-up does.
    assert "**b** ranks first in ISC: it is significantly better than every other set-up, and a trial of it" in text
    # a beat b in every pair of trials: with six trials each, significant after Holm over the three pairs.
    assert pairs.loc[("a", "b"), "p_holm"] < 0.05
    line = (
        f"- **a** is better than b, significantly (Holm p = {pairs.loc[('a', 'b'), 'p_holm']:.4g} < 0.05; A12 = 1.00 ["
    )
    assert line in text and "large; shift -9.35 [" in text
    assert pairs.loc[("a", "c"), "p_holm"] >= 0.05
    assert re.search(
        r"^- a vs c: not significantly different \(Holm p = [\d.]+ ≥ 0\.05; A12 = 0\.\d\d( \[0\.\d\d, 0\.\d\d\])?; "
        r"shift -?[\d.]+ \[-?[\d.]+, -?[\d.]+\]\)\. ",
        text,
        re.MULTILINE,
    )
    # A12 = 0.62 and a shift of 0.5 over a spread of about 1.3, from 6 trials: the plan's range is open above.
    plan = TrialsNeeded.of(pairs.loc[("a", "c")])
    assert plan.high == np.inf and plan.low < plan.median
    assert "- a vs c: not significantly different" in text and f"Power 0.8 needs {plan.text()} trials" in text
    convergence = text.split("## Convergence\n")[1].split("\n## ")[0]
    assert convergence.strip().startswith(
        "- c: not converged: in-training FID still falling from iteration 50 on, -20% by the end"
    )
    assert "- a:" not in convergence
    assert "- [box fid](figures/box_fid.png)\n- [score curves](figures/score_curves.png)" in text
    assert (tmp_path / "summary.md").read_text() == text


def test_the_report_s_first_page_is_the_answer_with_the_primary_metric_s_figures_inline(tmp_path):
    from docutils.core import publish_parts
    from jinja2 import Environment
    from PIL import Image

    (tmp_path / "figures").mkdir()
    # Noise: a PNG as large as a real figure, whose base64 is longer than a line docutils accepts.
    noise = np.random.default_rng(0).integers(0, 256, (120, 120, 3), dtype=np.uint8)
    for name in ("box_fid", "cost_fid", "score_curves"):
        Image.fromarray(noise).save(tmp_path / "figures" / f"{name}.png")
    _study(tmp_path)
    answer = (tmp_path / "report" / "answer.rst").read_text()
    # Snakemake renders the description through Jinja, then docutils, with its own link targets appended.
    targets = "\n\n.. _Workflow: javascript:show_panel('workflow')\n.. _4. Statistics: x\n.. _5. Figures: y\n"
    rendered = Environment().from_string(answer + targets).render(snakemake=None, categories={}, files=[])
    parts = publish_parts(rendered, writer_name="html", settings_overrides={"report_level": 1})
    html = parts["html_body"]
    assert "system-message" not in html, html[-2000:]
    # The page down to its figures, its tables as HTML tables, and only the primary metric's figures inline.
    assert "<h1>s: the answer</h1>" in html and "<strong>a</strong> ranks first in FID" in html
    assert html.count("<table>") == len(VALUES) and "## Figures" not in answer
    # _study's figures: box_fid and score_curves (cost_fid lies in figures/, but the page does not list it).
    inline = base64.b64encode((tmp_path / "figures" / "box_fid.png").read_bytes()).decode()
    assert len(inline) > 10_000
    shown = re.findall(r'src="data:image/png;base64,([^"]*)"', html)
    assert [re.sub(r"\s", "", data) for data in shown] == [inline]
    assert "javascript:show_panel(&#x27;workflow&#x27;)" in html or "show_panel('workflow')" in html
    # Numbers, which the report shows as they are: 3 set-ups of 6 trials, 2 metrics.
    assert yaml.safe_load((tmp_path / "report" / "metadata.yaml").read_text()) == {
        "set-ups": 3,
        "runs scored": 18,
        "metrics": 2,
    }


def test_a_name_that_looks_like_jinja_stays_text_on_the_report_s_first_page():
    from jinja2 import Environment

    answer = answer_description("# {{ study }} and {% raw %}: the answer\n", [])
    assert "{{ study }} and {% raw %}: the answer" in Environment().from_string(answer).render()


def _page(tmp_path, values, metric="fid", settings=StatisticsSettings(), metrics=None):
    rows = [
        {"study": "s", "setup": setup, "trial": trial, "metric": m, "value": value, "train_seconds": 60.0}
        for m in (metrics or [metric])
        for setup, by_trial in values.items()
        for trial, value in enumerate(by_trial)
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "scores.csv", index=False)
    pd.DataFrame([{"setup": s, "converged": "yes"} for s in values], columns=COLUMNS).to_csv(
        tmp_path / "convergence.csv", index=False
    )
    write_stats(
        tmp_path / "scores.csv",
        list(values),
        metrics or [metric],
        tmp_path / "tables",
        settings,
        tmp_path / "convergence.csv",
    )
    return write_summary(tmp_path, "s", list(values), metrics or [metric], [], tmp_path / "summary.md", settings)


def test_the_verdict_follows_the_effect_not_the_mean(tmp_path):
    # Issue 66: a's mean is the best (one lucky trial) while b beats a in 90% of the pairs; the page said "b: worse".
    text = _page(tmp_path, {"a": [10.0] * 9 + [0.1], "b": [9.5] * 10})
    assert "a has the best" not in text and "b: worse" not in text
    assert "**b** has the best FID (lower is better): it is significantly better than every other set-up" in text
    pairs = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv")
    assert pairs.better[0] == "b" and pairs.a12[0] == pytest.approx(0.9)  # a scores higher (worse) in 90% of the pairs
    assert f"- **b** is better than a, significantly (Holm p = {pairs.p_holm[0]:.4g} < 0.05; A12 = 0.90 [" in text
    assert [row[1] for row in _rows(text, "fid")] == ["b", "a"]


def test_a_design_that_cannot_decide_says_so_and_counts_finite_trials(tmp_path):
    # 3 set-ups of 4 trials, every trial separated: the smallest Holm p is 3 x 2 / C(8, 4) = 0.086.
    values = {"a": [1.0, 2.0, 3.0, 4.0], "b": [11.0, 12.0, 13.0, 14.0, np.nan], "c": [21.0, 22.0, 23.0, 24.0]}
    text = _page(tmp_path, values, settings=StatisticsSettings(failures="exclude"))
    assert (
        "These trials cannot decide FID (lower is better): no outcome of them could give a Holm p below 0.08571 ≥ 0.05"
        in text
    )
    assert "FID trials per set-up: a 4, b 5 (1 failed: 1 NaN), c 4; **failed trials are left out**" in text
    assert (
        "- a vs b: these trials cannot decide: 4 against 4 trials, Holm-adjusted over the metric's pairs, give no p "
        "below 0.08571" in text
    )
    assert [row[1] for row in _rows(text, "fid")] == ["a", "b", "c"]


def test_a_one_trial_set_up_is_never_first_and_one_trial_each_decides_nothing(tmp_path):
    text = _page(tmp_path, {"lucky": [0.5], "a": [3.0, 3.5, 4.0], "b": [5.0, 5.5, 6.0]})
    rows = _rows(text, "fid")
    assert [(row[0], row[1]) for row in rows] == [("1", "a"), ("2", "b"), ("–", "lucky")]
    alone = _page(tmp_path, {"x": [1.0], "y": [2.0]})
    assert "No set-up has 2 FID trials to compare: **x** is listed first on 1 trial" in alone
    assert "large" not in alone.split("## FID")[1].split("|")[0]
    assert "- x vs y: these trials cannot decide: 1 against 1 trials" in alone


def test_the_declared_primary_metric_heads_the_page(tmp_path):
    values = {"a": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "b": [7.0, 8.0, 9.0, 10.0, 11.0, 12.0]}
    text = _page(tmp_path, values, settings=StatisticsSettings(primary_metric="isc"), metrics=["fid", "isc"])
    # Higher IS is better: b; lower FID: a.
    assert text.splitlines()[2].startswith("**b** has the best ISC (higher is better)")
    assert "ISC trials per set-up: a 6, b 6" in text


def test_the_headline_is_the_page_down_to_its_first_table(tmp_path):
    _study(tmp_path)
    top = headline(tmp_path / "summary.md")
    assert top.startswith(f"The study's answer: {tmp_path / 'summary.md'}\n\n# s: the answer\n")
    assert "**a** ranks first in FID" in top and "|" not in top
    assert headline(tmp_path / "nowhere.md") is None


def test_an_undecided_comparison_says_the_trials_and_hours_a_decision_needs(tmp_path):
    text = _page(tmp_path, {"a": [1.0, 2.0, 3.0, 4.0], "b": [2.5, 3.5, 4.5, 5.5]})
    pairs = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv")
    plan = TrialsNeeded.of(next(pairs.itertuples()))
    needed = int(plan.median)
    assert pairs.p_holm[0] >= 0.05 and 4 < needed <= 100 and plan.low <= needed <= plan.high
    # Each further trial costs 60 s on 1 rank, for both set-ups.
    assert (
        f"Power 0.8 needs {plan.text()} trials per set-up (simulated from the trials' own outcomes; the median "
        f"adds about {2 * (needed - 4) * 60 / 3600:.2g} core-hours at this study's trial times)."
    ) in text
    assert pd.read_csv(tmp_path / "tables" / "summary_fid.csv").core_hours.tolist() == [60 / 3600] * 2


def test_plan_trials_prints_the_design_and_what_each_undecided_comparison_needs(tmp_path, env):
    import subprocess

    import yaml

    from ganstudy.stats.design import trials_plan

    folder = tmp_path / "results" / "s"
    folder.mkdir(parents=True)
    _page(folder, {"a": [1.0, 2.0, 3.0, 4.0], "b": [2.5, 3.5, 4.5, 5.5], "c": [11.0, 12.0, 13.0, 14.0]})
    plan = trials_plan(folder / "tables", 0.05).set_index(["setup_a", "setup_b"])
    pairs = pd.read_csv(folder / "tables" / "pairs_fid.csv").set_index(["setup_a", "setup_b"])
    # 3 set-ups of 4 trials: nothing can be decided; a vs b needs the pairs table's trials, at 60 s a trial.
    assert set(plan.decided) == {"cannot"}
    needed = pairs.loc[("a", "b"), "trials_for_power"]
    assert plan.loc[("a", "b"), "trials_for_power"] == TrialsNeeded.of(pairs.loc[("a", "b")]).text()
    assert plan.loc[("a", "b"), "hours_more"] == pytest.approx(2 * (needed - 4) * 60 / 3600)
    assert set(plan.unit) == {"core-hours"}
    config = tmp_path / "study.yaml"
    config.write_text(
        yaml.safe_dump(
            {"study": "s", "results_dir": str(tmp_path / "results"), "trials": 4, "setups": {"a": {}, "b": {}, "c": {}}}
        )
    )
    done = subprocess.run(["ganstudy", "plan-trials", str(config)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert (
        "warning: no comparison can reach Holm p < 0.05 with these trials, whatever the scores: the smallest is 0.0857"
        in done.stdout
    )
    assert (
        f"| fid | a | b | 4 vs 4 | {pairs.loc[('a', 'b'), 'p_holm']:.4g} | cannot | "
        f"{plan.loc[('a', 'b'), 'trials_for_power']} |"
    ) in done.stdout
    assert f"Before adding trials: ganstudy scoring-noise {config} measures" in done.stdout
    # A sequential schedule against the fixed design of its most trials, simulated from the measured outcomes.
    scheduled = subprocess.run(
        ["ganstudy", "plan-trials", str(config), "--schedule", "4,4,12"], capture_output=True, text=True, env=env
    )
    assert scheduled.returncode == 0, scheduled.stderr
    assert "A sequential schedule on fid (looks at 4, 8, 12 trials per set-up" in scheduled.stdout
    rows = {line.split("|")[1].strip(): line for line in scheduled.stdout.splitlines() if line.startswith("| ")}
    assert set(rows) >= {"sequential", "fixed"} and "| 4, 8, 12 |" in rows["sequential"] and "| 12 |" in rows["fixed"]
    bad = subprocess.run(
        ["ganstudy", "plan-trials", str(config), "--schedule", "8,4"], capture_output=True, text=True, env=env
    )
    assert bad.returncode != 0 and "'8,4' is not a schedule: FIRST,STEP,MOST" in bad.stderr
    # Tables of an earlier ganstudy name the command that remakes them.
    pd.read_csv(folder / "tables" / "pairs_fid.csv").drop(columns="trials_for_power").to_csv(
        folder / "tables" / "pairs_fid.csv"
    )
    stale = subprocess.run(["ganstudy", "plan-trials", str(config)], capture_output=True, text=True, env=env)
    assert (
        stale.returncode != 0 and "made by an earlier ganstudy" in stale.stderr and "--forcerun stats" in stale.stderr
    )


def test_cost_per_trial_counts_each_rank_s_cores_or_gpus_and_draws_the_pareto_front(tmp_path, monkeypatch):
    from ganstudy.stats.summary import cost_column, pareto_front, summary_table

    # cheap: 1 rank x 2 cores x 60 s, FID about 5; mid: 4 ranks x 2 cores x 90 s, FID about 3 (better, dearer);
    # waste: 4 ranks x 2 cores x 120 s, FID about 6 (dearer than cheap and worse).
    costs = {"cheap": (1, 60.0), "mid": (4, 90.0), "waste": (4, 120.0)}
    values = {"cheap": [5.0, 5.2, 4.8], "mid": [3.0, 3.1, 2.9], "waste": [6.0, 6.2, 5.8]}
    rows = [
        {
            "setup": s,
            "trial": t,
            "metric": "fid",
            "value": v,
            "train_seconds": costs[s][1],
            "ranks": costs[s][0],
            "cores_per_rank": 2,
            "gpus_per_rank": 0,
        }
        for s, by_trial in values.items()
        for t, v in enumerate(by_trial)
    ]
    table = summary_table(pd.DataFrame(rows), "fid", list(values)).set_index("setup")
    assert table.core_hours.tolist() == pytest.approx([2 * 60 / 3600, 8 * 90 / 3600, 8 * 120 / 3600])
    assert table.gpu_hours.tolist() == [0, 0, 0] and cost_column(table.reset_index()) == ("core_hours", "core-hours")
    assert table.pareto.tolist() == [True, True, False]
    # On GPUs (one per rank), the cost is GPU-hours; cores still count in core_hours.
    gpu = summary_table(pd.DataFrame(rows).assign(gpus_per_rank=1), "fid", list(values))
    assert cost_column(gpu) == ("gpu_hours", "GPU-hours") and gpu.gpu_hours.tolist() == pytest.approx(
        [60 / 3600, 4 * 90 / 3600, 4 * 120 / 3600]
    )
    # The front by hand: a tie in cost keeps the better score only; an unknown cost is never on it;
    # higher-is-better flips.
    assert pareto_front(np.array([1.0, 1.0, 2.0, np.nan]), np.array([5.0, 4.0, 3.0, 1.0]), False) == [
        False,
        True,
        True,
        False,
    ]
    assert pareto_front(np.array([1.0, 2.0]), np.array([5.0, 4.0]), True) == [True, False]
    # The figure: every trial at its own cost, the medians, the front through cheap and mid.
    from ganstudy.report import figures as figure_module

    pd.DataFrame(rows).to_csv(tmp_path / "scores.csv", index=False)
    table.reset_index().to_csv(tmp_path / "summary_fid.csv", index=False)
    drawn, save = [], figure_module._save
    monkeypatch.setattr(figure_module, "_save", lambda figure, path: (drawn.append(figure), save(figure, path)))
    figure_module.cost_plot(
        tmp_path / "scores.csv", tmp_path / "summary_fid.csv", "fid", list(values), tmp_path / "cost.png"
    )
    ax = drawn[0].axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["cheap (front)", "mid (front)", "waste"]
    # Costs within a factor of 8: a linear axis, its ticks plain numbers (a log axis would label 2x10^-1 only).
    assert ax.get_xlabel() == "core-hours per trial" and ax.get_xscale() == "linear"
    step = ax.get_lines()[0]
    assert list(step.get_xdata()) == pytest.approx([2 * 60 / 3600, 8 * 90 / 3600]) and list(step.get_ydata()) == [
        5.0,
        3.0,
    ]
    assert (tmp_path / "cost.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Over more than a decade (waste at 40 times its cost), a log axis.
    wide = pd.DataFrame(rows)
    wide.loc[wide.setup == "waste", "train_seconds"] = 40 * 60.0 / 4
    wide.to_csv(tmp_path / "scores.csv", index=False)
    summary_table(wide, "fid", list(values)).to_csv(tmp_path / "summary_fid.csv", index=False)
    figure_module.cost_plot(
        tmp_path / "scores.csv", tmp_path / "summary_fid.csv", "fid", list(values), tmp_path / "wide.png"
    )
    assert drawn[-1].axes[0].get_xlabel() == "core-hours per trial (log scale)"
    assert drawn[-1].axes[0].get_xscale() == "log"
    # A metric without a finite score (a per-class FID where no generator labels its samples) still draws.
    empty = pd.DataFrame(rows).assign(value=np.nan)
    empty.to_csv(tmp_path / "scores.csv", index=False)
    summary_table(empty, "fid", list(values)).to_csv(tmp_path / "summary_fid.csv", index=False)
    figure_module.cost_plot(
        tmp_path / "scores.csv", tmp_path / "summary_fid.csv", "fid", list(values), tmp_path / "none.png"
    )
    assert drawn[-1].axes[0].texts[0].get_text() == "no trial with a finite FID and a measured cost"


def test_the_cost_line_claims_no_beaten_set_up_where_the_others_are_unmeasured():
    from ganstudy.report.summary_page import _front
    from ganstudy.stats.summary import summary_table

    # a and b both on the front; c has no finite score: it is not "beaten", only unmeasured.
    rows = [
        {"setup": s, "trial": t, "metric": "fid", "value": v, "train_seconds": seconds, "ranks": 1}
        for s, seconds, values in (("a", 60.0, [5.0, 5.2]), ("b", 120.0, [3.0, 3.2]), ("c", 60.0, [np.nan, np.nan]))
        for t, v in enumerate(values)
    ]
    table = summary_table(pd.DataFrame(rows), "fid", ["a", "b", "c"])
    line = _front(table, "fid", ("core_hours", "core-hours"), 4)
    assert (
        line.startswith("- Quality against cost (median against core-hours per trial, the Pareto front): a (")
        and "every other" not in line
    )
    # With a dearer, worse d measured, the claim holds and is made.
    rows += [
        {"setup": "d", "trial": t, "metric": "fid", "value": 6.0 + t, "train_seconds": 180.0, "ranks": 1}
        for t in range(2)
    ]
    line = _front(
        summary_table(pd.DataFrame(rows), "fid", ["a", "b", "c", "d"]), "fid", ("core_hours", "core-hours"), 4
    )
    assert line.endswith("; every other set-up costs at least as much as one of these for a median no better.")
