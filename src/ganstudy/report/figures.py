"""figures: a box plot per metric (every trial drawn), scores against grid size, the set-ups' sample
grids side by side, the training curves, where the time went (per routine, and the speed-up over one
rank), the showers' profiles and sampling fraction, and a sweep's effects."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # compute nodes have no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from PIL import Image  # noqa: E402

from ganstudy.config.sweep_expansion import swept_keys  # noqa: E402
from ganstudy.core.atomic import atomic_path, read_json  # noqa: E402
from ganstudy.evaluate.metrics import better  # noqa: E402
from ganstudy.parallel.topology import parse_shape  # noqa: E402
from ganstudy.stats.convergence import WINDOW, setup_curves, verdict, window_trend  # noqa: E402
from ganstudy.stats.summary import cost_column, read_summary, trial_hours  # noqa: E402
from ganstudy.stats.sweeps import CONFIDENCE, interaction, main_effects, read_sweeps, sweep_runs  # noqa: E402
from ganstudy.stats.timing import OVERALL, routine_table, timing_table  # noqa: E402
from ganstudy.study.folder import of_setup  # noqa: E402


def _save(figure: plt.Figure, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120, bbox_inches="tight")
    plt.close(figure)


def _label(setup: str) -> str:
    """A set-up's name over several lines, one per part: a sweep's names (``lp__batch_size=25__lr=0.001``)
    are wider than a panel's title or an axis tick."""
    return setup.replace("__", "\n")


def box_plot(
    scores_path: str | os.PathLike[str], metric: str, setups: list[str], out_path: str | os.PathLike[str]
) -> None:
    """Each set-up's finite scores as a box with its trials over it; a set-up's failed trials (NaN or inf: no
    point to draw) are counted under its name, so a box of few points is not read as a whole set-up."""
    scores = pd.read_csv(scores_path)
    scores = scores[scores.metric == metric]
    every = [scores[scores.setup == s].value.to_numpy(float) for s in setups]
    groups = [values[np.isfinite(values)] for values in every]
    figure, axes = plt.subplots(figsize=(1.6 + 1.2 * len(setups), 3.6))
    axes.boxplot(groups, showfliers=False)
    labels = [
        _label(s) + (f"\n({len(v) - len(g)} of {len(v)} failed)" if len(v) > len(g) else "")
        for s, v, g in zip(setups, every, groups)
    ]
    axes.set_xticks(range(1, len(setups) + 1), labels, rotation=20)
    # Fixed jitter: the figure is the same bits on every regeneration.
    rng = np.random.default_rng(0)
    for position, values in enumerate(groups, start=1):
        axes.scatter(position + rng.uniform(-0.12, 0.12, len(values)), values, s=14, alpha=0.7, zorder=3)
    axes.set_ylabel(f"{metric.upper()} ({better(metric)} is better)")
    axes.set_title(f"{metric.upper()} over trials")
    axes.grid(axis="y", alpha=0.3)
    _save(figure, out_path)


def cost_plot(
    scores_path: str | os.PathLike[str],
    summary_path: str | os.PathLike[str],
    metric: str,
    setups: list[str],
    out_path: str | os.PathLike[str],
) -> None:
    """Quality against cost: every trial's score against its own cost (core-hours, or GPU-hours where every
    set-up trained on GPUs: stats.summary.cost_column), each set-up's median at its mean cost, and the
    Pareto front through the set-ups no other beats on both (summary_<metric>.csv's ``pareto``). The cost axis
    is logarithmic where the trials' costs span more than a factor of ten (a 1x1 grid beside a 4x4), linear
    inside one."""
    scores = pd.read_csv(scores_path)
    scores = scores[(scores.metric == metric) & scores.setup.isin(setups)]
    summary = read_summary(summary_path).set_index("setup").loc[setups]
    column, unit = cost_column(summary.reset_index())
    trial_cost = trial_hours(scores, column)
    figure, ax = plt.subplots(figsize=(6.0, 3.8))
    for setup in setups:
        mine = (scores.setup == setup).to_numpy()
        points = ax.scatter(trial_cost[mine], scores.value[mine], s=12, alpha=0.45)
        row = summary.loc[setup]
        if np.isfinite(row[column]) and np.isfinite(row["median"]):
            ax.scatter(
                [row[column]],
                [row["median"]],
                s=70,
                color=points.get_facecolor()[0],
                edgecolor="black",
                zorder=3,
                label=f"{_label(setup)}{' (front)' if row.pareto else ''}",
            )
    front = summary[summary.pareto.astype(bool)].sort_values(column)
    if len(front):
        ax.step(front[column], front["median"], where="post", color="black", linewidth=1, linestyle="--", zorder=2)
    drawn = trial_cost[np.isfinite(scores.value.to_numpy(float))]
    drawn = drawn[drawn > 0]
    if len(drawn) and drawn.max() > 10 * drawn.min():
        ax.set_xscale("log")
        ax.set_xlabel(f"{unit} per trial (log scale)")
    elif len(drawn):
        # Within one decade a log axis labels only its minor ticks, as "1.3x10^-1": a linear one reads plainly.
        ax.set_xlabel(f"{unit} per trial")
    else:
        # A metric no set-up has a finite score of (a per-class FID where no generator labels its samples).
        ax.text(
            0.5,
            0.5,
            f"no trial with a finite {metric.upper()} and a measured cost",
            ha="center",
            transform=ax.transAxes,
        )
        ax.set_xlabel(f"{unit} per trial")
    ax.set_ylabel(f"{metric.upper()} ({better(metric)} is better)")
    ax.set_title(f"{metric.upper()} against cost: trials, medians and the Pareto front")
    ax.grid(alpha=0.3, which="both")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    _save(figure, out_path)


def sample_montage(grid_paths: list[str], setups: list[str], out_path: str | os.PathLike[str]) -> None:
    figure, axes = plt.subplots(1, len(setups), figsize=(3.2 * len(setups), 3.6), squeeze=False)
    for ax, setup, path in zip(axes[0], setups, grid_paths):
        with Image.open(path) as picture:
            ax.imshow(np.asarray(picture), cmap="gray", interpolation="nearest")
        ax.set_title(_label(setup))
        ax.axis("off")
    _save(figure, out_path)


def training_curves(loss_paths: list[str], setups: list[str], out_path: str | os.PathLike[str]) -> None:
    """Discriminator and generator loss per iteration, the mean over a set-up's trials (and over classes
    for per-class runs), one line per set-up."""
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharex=True)
    for setup in setups:
        runs = [pd.read_csv(p) for p in loss_paths if of_setup(p, setup)]
        if not runs:
            continue
        mean = pd.concat(runs).groupby("iteration")[["d_loss", "g_loss"]].mean()
        for ax, column in zip(axes, ("d_loss", "g_loss")):
            ax.plot(mean.index, mean[column], label=f"{setup} ({len(runs)} trials)")
    for ax, title in zip(axes, ("discriminator loss", "generator loss")):
        ax.set_title(title)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    _save(figure, out_path)


def score_curves(
    loss_paths: list[str],
    setups: list[str],
    out_path: str | os.PathLike[str],
    window: float = WINDOW,
    tolerance: float | None = None,
    degradation: float | None = None,
) -> None:
    """In-training score per iteration: each set-up's geometric mean over trials (the check works on log
    scores) and the band from its best to its worst trial (pair modes' fixed-batch FID, the grid's best
    cell, a paired generator's held-out L1), and the convergence check's trend over the last ``window`` of
    the iterations (dashed: the mean of the trials' Theil-Sen lines). Given ``tolerance`` and
    ``degradation``, each legend entry ends with the check's verdict."""
    figure, ax = plt.subplots(figsize=(6.5, 3.8))
    columns = set()
    for setup, (column, frame) in setup_curves(loss_paths, setups).items():
        columns.add(column)
        mean = np.exp(np.log(frame).mean(axis=1))
        trend = window_trend(frame, window)
        details = [f"{frame.shape[1]} trials"] + (["best cell"] if column == "fid_best" else [])
        if tolerance is not None and degradation is not None:
            judged = verdict(trend, tolerance, degradation)
            details.append(f"converged: {'not judged' if judged == '–' else judged}")
        (line,) = ax.plot(
            mean.index, mean, marker="." if len(mean) < 40 else None, label=f"{setup} ({', '.join(details)})"
        )
        ax.fill_between(
            mean.index, frame.min(axis=1), frame.max(axis=1), color=line.get_color(), alpha=0.2, linewidth=0
        )
        if np.isfinite(trend["slope"]):
            x = np.array([trend["window_from"], mean.index.max()], float)
            ax.plot(x, np.exp(trend["intercept"] + trend["slope"] * x), "--", color="black", linewidth=1.2)
    ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"in-training {'L1 on held-out pairs' if columns == {'l1'} else 'FID'} (lower is better)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    _save(figure, out_path)


def grid_size_plot(
    scores_path: str | os.PathLike[str], metrics: list[str], setups: list[str], out_path: str | os.PathLike[str]
) -> None:
    """One panel per metric: each grid set-up's trials and mean ± sd at its number of cells (set-ups of
    the same size side by side)."""
    scores = pd.read_csv(scores_path)
    scores = scores[scores.grid.notna() & scores.setup.isin(setups)]
    grids = [s for s in setups if s in set(scores.setup)]
    shape = {s: scores[scores.setup == s].grid.iloc[0] for s in grids}
    cells = {s: parse_shape(shape[s]).size for s in grids}
    sizes = sorted(set(cells.values()))
    labels = {n: ", ".join(dict.fromkeys(shape[s] for s in grids if cells[s] == n)) for n in sizes}
    figure, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6), squeeze=False, layout="constrained")
    for ax, metric in zip(axes[0], metrics):
        for setup in grids:
            values = scores[(scores.setup == setup) & (scores.metric == metric)].value.to_numpy(float)
            values = values[np.isfinite(values)]
            same_size = [s for s in grids if cells[s] == cells[setup]]
            x = sizes.index(cells[setup]) + 0.15 * (same_size.index(setup) - (len(same_size) - 1) / 2)
            points = ax.scatter(np.full(len(values), x), values, s=12, alpha=0.5, label=setup)
            if len(values):
                ax.errorbar(
                    x,
                    values.mean(),
                    yerr=values.std(ddof=1) if len(values) > 1 else 0,
                    fmt="o",
                    color=points.get_facecolor()[0],
                    ecolor="black",
                    capsize=4,
                    zorder=3,
                )
        ax.set_xticks(range(len(sizes)), [f"{labels[n]}\n({n} cell{'s' if n > 1 else ''})" for n in sizes])
        ax.set_xlim(-0.5, len(sizes) - 0.5)
        ax.set_ylabel(f"{metric.upper()} ({better(metric)} is better)")
        ax.set_title(f"{metric.upper()} by grid size")
        ax.grid(axis="y", alpha=0.3)
    # Beside the panels: inside one it hides the trials at its corner.
    figure.legend(*axes[0][-1].get_legend_handles_labels(), loc="outside right upper", fontsize=8)
    _save(figure, out_path)


def routine_bars(timings_path: str | os.PathLike[str], setups: list[str], out_path: str | os.PathLike[str]) -> None:
    """Seconds per routine (slowest rank, mean over trials), stacked per set-up."""
    table = routine_table(pd.read_csv(timings_path), setups, {})
    table = table[table.routine != OVERALL]
    figure, axes = plt.subplots(figsize=(7, 0.9 + 0.45 * len(setups)))
    left = np.zeros(len(setups))
    for routine in dict.fromkeys(table.routine):
        seconds = np.array([table[(table.setup == s) & (table.routine == routine)].seconds.sum() for s in setups])
        axes.barh(setups, seconds, left=left, label=routine)
        left += seconds
    axes.invert_yaxis()
    axes.set_xlabel("seconds of training (slowest rank)")
    axes.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    axes.grid(axis="x", alpha=0.3)
    _save(figure, out_path)


def speedup_plot(
    timings_path: str | os.PathLike[str], setups: list[str], baselines: dict[str, str], out_path: str | os.PathLike[str]
) -> None:
    """Left: each set-up's speed-up over its one-rank baseline against its ranks, with the ideal line.
    Right: the speed-up of each routine (seed 000's profile table as bars)."""
    timings = pd.read_csv(timings_path)
    compared = [s for s in setups if s in baselines]
    speedups = timing_table(timings, compared, baselines)
    routines = routine_table(timings, compared, baselines)
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    top = max(2, int(speedups.ranks.max()))
    left.plot([1, top], [1, top], color="grey", linestyle="--", label="ideal")
    for row in speedups.itertuples():
        left.scatter(row.ranks, row.speedup, zorder=3)
        left.annotate(row.setup, (row.ranks, row.speedup), textcoords="offset points", xytext=(4, 4), fontsize=8)
    left.set_xlabel("MPI ranks")
    left.set_ylabel("speed-up over one rank")
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    names = list(dict.fromkeys(routines.routine))
    width = 0.8 / len(compared)
    for i, setup in enumerate(compared):
        part = routines[routines.setup == setup].set_index("routine").reindex(names)
        right.bar(np.arange(len(names)) + (i - (len(compared) - 1) / 2) * width, part.speedup, width, label=setup)
    right.axhline(1, color="grey", linewidth=0.8)
    right.set_xticks(range(len(names)), names, rotation=30)
    right.set_ylabel("speed-up of the routine")
    right.legend(fontsize=8)
    right.grid(axis="y", alpha=0.3)
    _save(figure, out_path)


def shower_profiles(score_paths: list[str], setups: list[str], out_path: str | os.PathLike[str]) -> None:
    """3DGAN's validation plots from the score records of each set-up's first trial: the mean
    longitudinal and transverse profiles of real and generated showers, the mean sampling fraction per
    energy bin with its width as error bars, and, where the study scores it, 3DGAN's optimisation metric
    (gan3d) per energy bin in its two parts."""
    records = {setup: read_json(path) for setup, path in zip(setups, score_paths)}
    gan3d = {setup: record["gan3d_bins"] for setup, record in records.items() if record.get("gan3d_bins")}
    figure, axes = plt.subplots(1, 5 if gan3d else 4, figsize=(20 if gan3d else 16, 3.6), gridspec_kw={"wspace": 0.35})
    first = next(iter(records.values()))
    for ax, name in zip(axes, ("longitudinal", "transverse_x", "transverse_y")):
        ax.plot(first["profiles"][name]["real"], color="black", linestyle="--", label="real (test split)")
        for setup, record in records.items():
            ax.plot(record["profiles"][name]["fake"], label=setup)
        ax.set_yscale("log")
        ax.set_xlabel(
            {"longitudinal": "layer along z", "transverse_x": "cell along x", "transverse_y": "cell along y"}[name]
        )
        ax.set_ylabel("mean energy (GeV)")
        ax.set_title(f"{name.replace('_', ' ')} profile")
    ax = axes[3]
    bins = first["energy_bins"]
    centres = np.array([(b["low_gev"] + b["high_gev"]) / 2 for b in bins])
    ax.errorbar(
        centres,
        [b["real_mean"] for b in bins],
        yerr=[b["real_width"] for b in bins],
        color="black",
        fmt="o--",
        capsize=3,
        label="real (test split)",
    )
    for offset, (setup, record) in enumerate(records.items(), start=1):
        mine = record["energy_bins"]
        ax.errorbar(
            centres + 4 * offset,
            [b["fake_mean"] for b in mine],
            yerr=[b["fake_width"] for b in mine],
            fmt="o",
            capsize=3,
            label=setup,
        )
    ax.set_xlabel("primary energy (GeV)")
    ax.set_ylabel("sampling fraction (deposited / primary)")
    ax.set_title("sampling fraction per energy bin")
    if gan3d:
        ax = axes[4]
        for setup, rows in gan3d.items():
            energies = [row["energy_gev"] for row in rows]
            (line,) = ax.plot(energies, [row["moments"] for row in rows], "o-", label=f"{setup}: moments")
            ax.plot(
                energies, [row["profiles"] for row in rows], "s--", color=line.get_color(), label=f"{setup}: profiles"
            )
        ax.set_xlabel("primary energy (GeV)")
        ax.set_ylabel("relative error (lower is better)")
        ax.set_title("3DGAN's metric per energy bin")
        ax.legend(fontsize=7)
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[3].legend(fontsize=8)
    _save(figure, out_path)


def sweep_plots(
    scores_path: str | os.PathLike[str],
    sweeps_path: str | os.PathLike[str],
    metrics: list[str],
    out_dir: str | os.PathLike[str],
    tables_dir: str | os.PathLike[str],
) -> list[str]:
    """figures/sweep_<set-up>_<metric>.png for each sweep and metric: each key's main effect (mean of cell
    means and interval against its values), each two keys' interaction (mean per pair of values) and the
    Holm-adjusted rank-sum p-values of the sweep's set-ups pairwise, as the study's pairs table in
    ``tables_dir`` gives them (one Holm family per metric)."""
    scores, written = pd.read_csv(scores_path), []
    for declared, levels in read_sweeps(sweeps_path).items():
        keys = swept_keys(levels)
        pairs = list(itertools.combinations(keys, 2))
        for metric in metrics:
            runs = sweep_runs(scores, metric, levels)
            effects = main_effects(runs, levels)
            # Effects and interactions above; the pairwise matrix, whose labels are long, below across the width.
            top = len(keys) + len(pairs)
            figure = plt.figure(figsize=(max(4.4 * top, 8.0), 9.0), layout="constrained")
            grid = figure.add_gridspec(2, top)
            axes = [figure.add_subplot(grid[0, k]) for k in range(top)]
            label = f"{metric.upper()} ({better(metric)} is better)"
            for axis, key in zip(axes, keys):
                rows = effects[effects.key == key]
                low, high = (rows["mean"] - rows.ci_low).to_numpy(), (rows.ci_high - rows["mean"]).to_numpy()
                axis.errorbar(range(len(rows)), rows["mean"], yerr=[low, high], fmt="o-", capsize=4)
                axis.set_xticks(range(len(rows)), rows.value, rotation=20)
                axis.set_xlabel(key)
                axis.set_ylabel(label)
                axis.set_title(f"{key}: mean of cell means, {CONFIDENCE:.0%} interval")
                axis.grid(alpha=0.3)
            for axis, (first, second) in zip(axes[len(keys) :], pairs):
                _heatmap(axis, interaction(runs, levels, first, second), f"mean {metric.upper()}", ".3g")
            tested = pd.read_csv(Path(tables_dir) / f"pairs_{metric}.csv")
            matrix = _holm_matrix(
                tested[tested.setup_a.isin(list(levels)) & tested.setup_b.isin(list(levels))], declared
            )
            _heatmap(
                figure.add_subplot(grid[1, :]),
                matrix,
                "set-ups pairwise: rank-sum p, Holm-adjusted over the study's pairs",
                ".2f",
                (0.0, 1.0),
            )
            figure.suptitle(f"Sweep of {declared}")
            out = Path(out_dir) / f"sweep_{declared}_{metric}.png"
            _save(figure, out)
            written.append(str(out))
    return written


def _holm_matrix(pairs: pd.DataFrame, declared: str) -> pd.DataFrame:
    """The Holm-adjusted p-value of each pair of a sweep's set-ups, both ways round, each named by its values."""
    short = lambda name: name.removeprefix(f"{declared}__").replace("__", ", ")  # noqa: E731
    names = list(dict.fromkeys(short(name) for name in [*pairs.setup_a, *pairs.setup_b]))
    matrix = pd.DataFrame(np.nan, index=names, columns=names)
    for row in pairs.itertuples():
        matrix.loc[short(row.setup_a), short(row.setup_b)] = matrix.loc[short(row.setup_b), short(row.setup_a)] = (
            row.p_holm
        )
    return matrix


def _heatmap(
    axis: plt.Axes, table: pd.DataFrame, title: str, number: str, limits: tuple[float, float] | None = None
) -> None:
    values = table.to_numpy(float)
    image = axis.imshow(values, cmap="viridis", aspect="auto", vmin=limits and limits[0], vmax=limits and limits[1])
    axis.set_xticks(range(len(table.columns)), table.columns, rotation=20, ha="right")
    axis.set_yticks(range(len(table.index)), table.index)
    axis.set_xlabel(table.columns.name or "")
    axis.set_ylabel(table.index.name or "")
    for (row, column), value in np.ndenumerate(values):
        if np.isfinite(value):
            # Dark text on the colour map's light end.
            axis.text(
                column,
                row,
                format(value, number),
                ha="center",
                va="center",
                color="k" if image.norm(value) > 0.6 else "w",
                fontsize=8,
            )
    axis.set_title(title)
    plt.colorbar(image, ax=axis)
