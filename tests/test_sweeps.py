"""Sweeps (issue 47): a set-up declared with ``sweep:`` becomes one ordinary set-up per combination of values,
with stable names; a bad sweep is refused naming the key and the value."""

import itertools

import numpy as np
import pytest

from conftest import SCHEMA
from ganstudy.config.sweep_expansion import sweep_levels, swept_name, value_label
from ganstudy.config.validate import ConfigError, validate_study_config


def expanded(setups: dict) -> dict:
    return validate_study_config({"setups": setups}, SCHEMA)["setups"]


def test_a_sweep_makes_one_set_up_per_combination_with_its_values_and_a_record():
    setups = expanded(
        {
            "base": {"loss": "bce"},
            "g": {
                "mode": "grid",
                "iterations": 7,
                "sweep": {"lr": [1.0e-4, 2.0e-4], "grid.population_size": [1, 2, 3]},
            },
        }
    )
    made = [name for name in setups if name != "base"]
    assert list(setups)[0] == "base" and len(made) == 6
    for lr, population in itertools.product([1.0e-4, 2.0e-4], [1, 2, 3]):
        name = f"g__grid.population_size={population}__lr={lr!r}"
        setup = setups[name]
        assert setup["lr"] == lr and setup["grid"]["population_size"] == population
        # Everything else as declared, defaults filled, and no sweep left to expand.
        assert (
            setup["iterations"] == 7 and setup["grid"]["tournament_size"] == setups[made[0]]["grid"]["tournament_size"]
        )
        assert setup["sweep"] is None and setup["swept"] == {
            "from": "g",
            "values": {"lr": lr, "grid.population_size": population},
        }
    assert setups["base"]["swept"] is None


def test_zipped_values_pair_up_and_combine_with_the_others():
    setups = expanded(
        {"s": {"sweep": {"loss": ["bce", "mse"], "zip": {"lr": [1.0e-4, 3.0e-4], "batch_size": [32, 64]}}}}
    )
    pairs = {(s["loss"], s["lr"], s["batch_size"]) for s in setups.values()}
    assert pairs == {(loss, lr, batch) for loss in ("bce", "mse") for lr, batch in [(1.0e-4, 32), (3.0e-4, 64)]}


def test_names_are_stable_and_distinct():
    # Keys in alphabetical order whatever the order written; floats in their shortest exact form.
    assert (
        swept_name("s", {"lr": 0.0002, "batch_size": 64})
        == swept_name("s", {"batch_size": 64, "lr": 2e-4})
        == "s__batch_size=64__lr=0.0002"
    )
    assert value_label(0.1) != value_label(0.1000000001)
    assert [value_label(v) for v in (True, None, 3, "2x2", [1, 2])] == ["true", "null", "3", "2x2", "1-2"]
    # A value added to a sweep adds a set-up and renames none.
    before = expanded({"s": {"sweep": {"lr": [1.0e-4]}}})
    after = expanded({"s": {"sweep": {"lr": [1.0e-4, 5.0e-4]}}})
    assert set(before) < set(after)


def test_an_expanded_config_validates_again_unchanged():
    config = validate_study_config({"setups": {"s": {"sweep": {"lr": [1.0e-4, 2.0e-4]}}}}, SCHEMA)
    names = list(config["setups"])
    assert list(validate_study_config(config, SCHEMA)["setups"]) == names


@pytest.mark.parametrize(
    "sweep, problem",
    [
        ({"lr": []}, "'setups.s.sweep.lr': [] should be non-empty"),
        ({"lrr": [1.0]}, "'setups.s.sweep.lrr': set-up s has no key lrr"),
        ({"grid.shap": ["2x2"]}, "'setups.s.sweep.grid.shap': set-up s has no key grid.shap"),
        (
            {"lr": [1.0e-4, "fast"]},
            "setups.s__lr=fast: 'lr' must be of type number, got 'fast' (sweep of set-up s: lr='fast')",
        ),
        ({"trials": [1, 2]}, "'setups.s.sweep.trials': trials is not a training setting and cannot be swept"),
        ({"zip": {"lr": [1.0e-4], "batch_size": [32, 64]}}, "must be of one length, got lr: 1, batch_size: 2"),
        ({"lr": [1.0e-4], "zip": {"lr": [2.0e-4]}}, "lr is swept both on its own and under zip"),
        ({"lr": [1.0e-4, 1.0e-4]}, "gives these values twice (lr=0.0001)"),
        (
            {"loss": ["bce", "mse"]},
            "set-up s__loss=mse: the sweep of set-up s makes a set-up of a name that the study already has",
        ),
        ({"grid.shape": ["2 x2"]}, "a value makes a name with characters other than"),
    ],
)
def test_a_bad_sweep_is_refused_naming_the_key_and_the_value(sweep, problem):
    with pytest.raises(ConfigError) as raised:
        expanded({"s": {"mode": "grid", "sweep": sweep}, "s__loss=mse": {"loss": "mse"}})
    assert problem in str(raised.value), str(raised.value)


def test_a_name_clash_is_named_whichever_set_up_comes_first():
    with pytest.raises(
        ConfigError,
        match="set-up s__loss=mse: the sweep of set-up s makes a set-up of a name that the study already has",
    ):
        expanded({"s__loss=mse": {"loss": "mse"}, "s": {"sweep": {"loss": ["bce", "mse"]}}})


def test_a_hand_written_record_of_a_sweep_is_refused():
    with pytest.raises(ConfigError, match="'setups.s.swept' is written by ganstudy"):
        expanded({"s": {"swept": {"from": "t", "values": {"lr": 0.1}}}})


def test_validate_config_shows_the_set_ups_a_sweep_makes(tmp_path, env):
    import subprocess

    study = tmp_path / "study.yaml"
    study.write_text(
        "study: swept\nsetups:\n  s:\n    iterations: 2\n    sweep:\n      lr: [1.0e-4, 2.0e-4]\n      batch_size: "
        "[32]\n"
    )
    done = subprocess.run(["ganstudy", "validate-config", str(study)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "with set-ups s__batch_size=32__lr=0.0001, s__batch_size=32__lr=0.0002" in done.stdout
    assert "sweep of set-up s over batch_size, lr: 2 set-ups" in done.stdout
    study.write_text("study: swept\nsetups:\n  s:\n    sweep:\n      lr: [1e-4]\n")
    done = subprocess.run(["ganstudy", "validate-config", str(study)], capture_output=True, text=True, env=env)
    # YAML 1.1 reads 1e-4 (no point) as text: refused, naming the value.
    assert (
        done.returncode != 0 and "'lr' must be of type number, got '1e-4' (sweep of set-up s: lr='1e-4')" in done.stderr
    ), done.stderr
    assert "'1e-4' is text to YAML; a number is written with a point, e.g. 1.0e-4" in done.stderr


def synthetic_sweep():
    """Scores of a 2x3 sweep (batch_size x lr), 4 trials each, lr with a strong effect, and its levels."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(5)
    levels, rows = {}, []
    for batch, lr in itertools.product([32, 64], [1.0e-4, 2.0e-4, 5.0e-4]):
        values = {"batch_size": batch, "lr": lr}
        name = swept_name("s", values)
        levels[name] = values
        for trial in range(4):
            rows.append(
                {
                    "setup": name,
                    "trial": trial,
                    "metric": "fid",
                    "value": 10 * lr / 1e-4 + rng.normal(0, 1),
                    "train_seconds": 60.0,
                }
            )
    rows.append({"setup": name, "trial": 4, "metric": "fid", "value": float("nan")})  # a failed trial
    return pd.DataFrame(rows), levels


def test_main_effects_kruskal_and_interactions_agree_with_scipy():
    import numpy as np
    from scipy import stats

    from ganstudy.stats.sweeps import finite, interaction, key_tests, main_effects, sweep_runs

    scores, levels = synthetic_sweep()
    runs = sweep_runs(scores, "fid", levels)
    # The failed trial is a run (the worst FID) with no score to average.
    assert len(runs) == 25 and len(finite(runs)) == 24
    effects = main_effects(runs, levels)
    assert effects.failed.sum() == 2  # counted once under each of its two keys' values
    # Left out (statistics.failures: exclude), it is still counted, and the tests do without it.
    excluded = sweep_runs(scores, "fid", levels, "exclude")
    assert len(excluded) == 25 and main_effects(excluded, levels).failed.sum() == 2
    by_lr_finite = [scores[scores.setup.str.endswith(f"lr={lr!r}")].value.dropna() for lr in (1.0e-4, 2.0e-4, 5.0e-4)]
    assert key_tests({"fid": excluded}, levels).set_index("key").loc["lr", "p_value"] == pytest.approx(
        stats.kruskal(*by_lr_finite).pvalue
    )
    assert list(effects.value[effects.key == "lr"]) == ["0.0001", "0.0002", "0.0005"]
    # Each level against statsmodels: the cell-means model's OLS fit and the contrast averaging the level's cells.
    import statsmodels.formula.api as smf

    finite = scores[scores.value.notna()]
    fit = smf.ols("value ~ C(setup) - 1", data=finite).fit()
    for key, label, wanted in [
        ("lr", "0.0002", lambda s: s.endswith("lr=0.0002")),
        ("batch_size", "64", lambda s: "batch_size=64" in s),
    ]:
        names = [name for name in fit.params.index if wanted(name.removeprefix("C(setup)[").removesuffix("]"))]
        contrast = np.array([[1 / len(names) if name in names else 0.0 for name in fit.params.index]])
        reference = fit.t_test(contrast)
        row = effects[(effects.key == key) & (effects.value == label)].iloc[0]
        assert row.runs == finite.setup.map(wanted).sum() and row.cells == len(names)
        assert row["mean"] == pytest.approx(float(reference.effect[0]))
        assert (row.ci_low, row.ci_high) == pytest.approx(tuple(reference.conf_int(alpha=0.05)[0]))
    tests = key_tests({"fid": runs}, levels).set_index("key")
    # Kruskal-Wallis ranks the failed trial worst: scipy's on the scores with the NaN as an infinite FID.
    by_lr = [scores[scores.setup.str.endswith(f"lr={lr!r}")].value.fillna(np.inf) for lr in (1.0e-4, 2.0e-4, 5.0e-4)]
    assert tests.loc["lr", "p_value"] == pytest.approx(stats.kruskal(*by_lr).pvalue) and tests.loc["lr", "df"] == 2
    # Holm over two keys: the smaller p doubled, the larger at least that, each at most 1.
    small, large = sorted(tests.p_value)
    assert sorted(tests.p_holm) == pytest.approx([min(1, 2 * small), min(1, max(2 * small, large))])
    assert tests.loc["lr", "p_holm"] < 0.01
    table = interaction(runs, levels, "batch_size", "lr")
    cell = scores[(scores.setup == swept_name("s", {"batch_size": 32, "lr": 5.0e-4}))].value.dropna()
    assert (
        table.loc["32", "0.0005"] == pytest.approx(cell.mean())
        and table.shape == (2, 3)
        and not np.isnan(table.to_numpy()).any()
    )


def test_sweep_stats_writes_its_tables_and_figures(tmp_path, env):
    import json
    import subprocess

    from ganstudy.stats.summary import write_stats

    scores, levels = synthetic_sweep()
    scores.to_csv(tmp_path / "scores.csv", index=False)
    (tmp_path / "sweeps.json").write_text(json.dumps({"s": levels}))
    write_stats(tmp_path / "scores.csv", [*levels, "baseline"], ["fid"], tmp_path / "tables")
    done = subprocess.run(
        [
            "ganstudy",
            "sweep-stats",
            "--scores",
            str(tmp_path / "scores.csv"),
            "--sweeps",
            str(tmp_path / "sweeps.json"),
            "--metrics",
            "fid",
            "--out-dir",
            str(tmp_path / "tables"),
            "--figures",
            str(tmp_path / "figures"),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    for name in ("sweep_s_fid", "sweep_s_tests", "sweep_s_interactions"):
        assert all((tmp_path / "tables" / f"{name}.{ext}").is_file() for ext in ("csv", "md", "tex"))
    assert "lr" in (tmp_path / "tables" / "sweep_s_tests.md").read_text()
    assert (tmp_path / "figures" / "sweep_s_fid.png").stat().st_size > 10_000


def test_an_unbalanced_sweeps_levels_are_means_of_cell_means():
    import pandas as pd

    from ganstudy.stats.sweeps import interaction, main_effects, sweep_runs

    # Issue 66: with lr's cell at batch 64 holding three trials and the other one, the pooled mean of lr=1 is
    # 43.0 while each batch size's cell says 40 and 50.5 (mean of cell means 45.25).
    levels = {
        swept_name("s", {"batch_size": b, "lr": lr}): {"batch_size": b, "lr": lr} for b in (32, 64) for lr in (1, 2)
    }
    values = {(32, 1): [39.0, 41.0], (64, 1): [50.0, 51.0, 50.5, 50.5], (32, 2): [30.0, 32.0], (64, 2): [20.0, 22.0]}
    rows = [
        {"setup": swept_name("s", {"batch_size": b, "lr": lr}), "trial": i, "metric": "fid", "value": v}
        for (b, lr), vs in values.items()
        for i, v in enumerate(vs)
    ]
    runs = sweep_runs(pd.DataFrame(rows), "fid", levels)
    effects = main_effects(runs, levels).set_index(["key", "value"])
    assert effects.loc[("lr", "1"), "mean"] == pytest.approx(45.25) and effects.loc[("lr", "1"), "runs"] == 6
    assert interaction(runs, levels, "batch_size", "lr").loc["64", "1"] == pytest.approx(50.5)


def test_a_list_valued_key_sweeps_and_its_statistics_run():
    import pandas as pd

    from ganstudy.stats.sweeps import key_tests, key_values, main_effects, sweep_runs

    # Issue 66: betas: [[0.5, 0.999], [0.0, 0.9]] crashed key_values (a list is not hashable).
    levels = sweep_levels(expanded({"s": {"sweep": {"betas": [[0.5, 0.999], [0.0, 0.9]], "lr": [1.0e-4, 2.0e-4]}}}))[
        "s"
    ]
    assert key_values(levels, "betas") == ["0.5-0.999", "0.0-0.9"]
    rows = [
        {"setup": name, "trial": i, "metric": "fid", "value": 10.0 + i + 3 * (values["betas"][0] == 0.5)}
        for name, values in levels.items()
        for i in range(3)
    ]
    runs = sweep_runs(pd.DataFrame(rows), "fid", levels)
    effects = main_effects(runs, levels).set_index(["key", "value"])
    assert effects.loc[("betas", "0.5-0.999"), "mean"] - effects.loc[("betas", "0.0-0.9"), "mean"] == pytest.approx(3.0)
    assert set(key_tests({"fid": runs}, levels).key) == {"betas", "lr"}


def test_the_sweep_figure_takes_each_pairs_holm_p_from_the_studys_family(tmp_path):
    import pandas as pd

    from ganstudy.report.figures import _holm_matrix
    from ganstudy.stats.summary import write_stats
    from ganstudy.stats.tests import holm

    # Issue 66: the figure adjusted over the sweep's pairs (0.0122) where pairs_fid did over the study's (0.0366).
    scores, levels = synthetic_sweep()
    extra = pd.DataFrame(
        [{"setup": "baseline", "trial": i, "metric": "fid", "value": 5.0 + i, "train_seconds": 60.0} for i in range(4)]
    )
    pd.concat([scores, extra]).to_csv(tmp_path / "scores.csv", index=False)
    write_stats(tmp_path / "scores.csv", [*levels, "baseline"], ["fid"], tmp_path / "tables")
    pairs = pd.read_csv(tmp_path / "tables" / "pairs_fid.csv")
    inside = pairs[pairs.setup_a.isin(list(levels)) & pairs.setup_b.isin(list(levels))]
    matrix = _holm_matrix(inside, "s")
    row = inside.iloc[0]
    short = [name.removeprefix("s__").replace("__", ", ") for name in (row.setup_a, row.setup_b)]
    assert matrix.loc[short[0], short[1]] == row.p_holm
    assert row.p_holm == holm(pairs.p_value)[inside.index[0]] != holm(inside.p_value)[0]


def _crossed(effects, interaction_size, rng, trials=4):
    """Scores of a two-key sweep (a: 3 values, b: 2): the given main effects and an interaction that
    reverses b's effect at a's last value, added to skewed (log-normal) noise."""
    import pandas as pd

    levels = {swept_name("s", {"a": a, "b": b}): {"a": a, "b": b} for a in (1, 2, 3) for b in (1, 2)}
    rows = []
    for name, values in levels.items():
        centre = effects[0] * values["a"] + effects[1] * values["b"]
        centre += interaction_size * (1 if values["a"] == 3 else -0.5) * (1 if values["b"] == 2 else -1)
        for trial in range(trials):
            rows.append(
                {"setup": name, "trial": trial, "metric": "fid", "value": float(centre + np.exp(rng.normal(0, 0.5)))}
            )
    return pd.DataFrame(rows), levels


def test_the_aligned_rank_transform_matches_statsmodels_and_a_hand_alignment():
    import statsmodels.formula.api as smf
    from scipy.stats import rankdata
    from statsmodels.stats.anova import anova_lm

    from ganstudy.stats.aligned_ranks import aligned_ranks, interaction_test
    from ganstudy.stats.sweeps import sweep_runs

    scores, levels = _crossed((0.5, 0.3), 0.4, np.random.default_rng(1))
    # Unbalanced: one set-up lost a trial.
    scores = scores.drop(index=3)
    runs = sweep_runs(scores, "fid", levels)
    # The alignment by hand: residual from the set-up's mean, plus mean(a, b) - mean(a) - mean(b) + mean,
    # all on set-up means.
    cell = runs.groupby("setup").value.mean()
    at = {(a, b): cell[swept_name("s", {"a": int(a), "b": int(b)})] for a in "123" for b in "12"}
    grand = np.mean(list(at.values()))
    a_mean = {a: np.mean([at[(a, b)] for b in "12"]) for a in "123"}
    b_mean = {b: np.mean([at[(a, b)] for a in "123"]) for b in "12"}
    aligned = [
        row.value - cell[row.setup] + at[(row.a, row.b)] - a_mean[row.a] - b_mean[row.b] + grand
        for row in runs.itertuples()
    ]
    ranks = aligned_ranks(runs, "a", "b")
    assert ranks.tolist() == rankdata(aligned).tolist()
    # The F-test against statsmodels' type III ANOVA of the same ranks, sum-to-zero coding.
    fit = smf.ols("rank ~ C(a, Sum) * C(b, Sum)", data=runs.assign(rank=ranks)).fit()
    reference = anova_lm(fit, typ=3).loc["C(a, Sum):C(b, Sum)"]
    got = interaction_test(runs, ["a", "b"], "a", "b")
    assert got["df"] == reference.df == 2 and got["df_resid"] == len(runs) - 6
    assert got["F"] == pytest.approx(reference.F) and got["p_value"] == pytest.approx(reference["PR(>F)"])
    assert got["p_value"] < 0.01


def test_the_aligned_rank_transform_holds_alpha_and_finds_a_crossed_interaction():
    from ganstudy.stats.aligned_ranks import interaction_test
    from ganstudy.stats.sweeps import sweep_runs

    # Strong main effects that add up, skewed noise: an interaction flagged about alpha of the time. With
    # b's effect reversed at a's last value, nearly always.
    rng = np.random.default_rng(7)

    def flagged(size):
        tested = [
            interaction_test(sweep_runs(scores, "fid", levels), ["a", "b"], "a", "b")["p_value"] < 0.05
            for scores, levels in (_crossed((1.5, 1.5), size, rng) for _ in range(200))
        ]
        return np.mean(tested)

    assert flagged(0.0) <= 0.09 and flagged(1.0) >= 0.9


def test_interaction_tests_holm_over_the_pairs_of_keys_and_say_why_one_is_missing():
    from ganstudy.stats.sweeps import interaction_tests, sweep_runs

    scores, levels = synthetic_sweep()
    runs = sweep_runs(scores, "fid", levels)
    table = interaction_tests({"fid": runs}, levels)
    assert table[["first", "second"]].values.tolist() == [["batch_size", "lr"]] and table.p_holm[0] == table.p_value[0]
    # A pair of values without a finite score cannot be tested: the note says so.
    gap = runs[~((runs.batch_size == "32") & (runs.lr == "0.0005"))]
    assert "no set-up with a finite score" in interaction_tests({"fid": gap}, levels).note[0]
    # One trial per set-up leaves no variance within them.
    single = runs.groupby("setup").head(1)
    assert "two finite trials" in interaction_tests({"fid": single}, levels).note[0]
    # A sweep of one key has no pair: an empty table, its columns still there.
    one = {name: {"lr": values["lr"]} for name, values in levels.items() if values["batch_size"] == 32}
    alone = interaction_tests({"fid": sweep_runs(scores, "fid", one)}, one)
    assert alone.empty and list(alone.columns) == [
        "metric",
        "first",
        "second",
        "F",
        "df",
        "df_resid",
        "p_value",
        "p_holm",
        "note",
    ]
