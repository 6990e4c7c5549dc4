"""A study run on this machine against a reference run of the same study on another (issue 82).

    python ci/compare_reference.py results/digits_grid ../shared/reference-runs/digits_grid-amd-epyc-zen4

Both folders are a study's results as the workflow writes them (runs/<set-up>/trial<t>/generator.pt and
run.json, scores/<set-up>/trial<t>.json, classifier/classifier.pt and reference_stats.npz). For each set-up
they share, it prints:
- the two runs' own scores (each scored on its own machine by its own classifier), compared by the study's
  exact rank test: do the two machines give the same distribution?
- every generator of both runs cross-scored here by both runs' scorers (the study's evaluate step on its
  own noise, draws 0 to --draws averaged, as ``ganstudy scoring-noise`` draws them): with the scorer held
  fixed, a difference between the runs' generators is the training's; with the generators held fixed, a
  difference between the scorers is the scoring's;
- whether this machine gives the reference's score files to the bit (the same float path as the machine
  that made the reference).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import wilcoxon

from ganstudy.evaluate.rescoring import ScoringJob, scoring_draws
from ganstudy.evaluate.settings import EvaluationSettings
from ganstudy.stats.summary import markdown_table
from ganstudy.stats.tests import a12, rank_test

SIDES = ("here", "reference")


@dataclass(frozen=True)
class Trial:
    setup: str
    trial: int
    generator: Path
    study_seed: int
    score: dict  # its score file's record


def finished_trials(folder: Path) -> dict[tuple[str, int], Trial]:
    """The scored trials of a study folder, by (set-up, trial)."""
    trials = {}
    for score_path in sorted(folder.glob("scores/*/trial*.json")):
        setup, trial = score_path.parent.name, int(score_path.stem.removeprefix("trial"))
        run = folder / "runs" / setup / f"trial{trial}"
        if (run / "generator.pt").is_file() and (run / "run.json").is_file():
            study_seed = json.loads((run / "run.json").read_text())["study_seed"]
            trials[(setup, trial)] = Trial(
                setup, trial, run / "generator.pt", study_seed, json.loads(score_path.read_text())
            )
    return trials


def shared_setups(folders: dict[str, Path]) -> list[str]:
    """The set-ups that both runs scored trials of."""
    found = [{setup for setup, _ in finished_trials(folder)} for folder in folders.values()]
    return sorted(set.intersection(*found))


def cross_scores(folders: dict[str, Path], metric: str, draws: int, threads: int) -> pd.DataFrame:
    """Every scored generator of the set-ups both folders have, scored here by both folders' classifiers: one
    row per (generators' side, set-up, trial, scorer's side, draw)."""
    rows, setups = [], shared_setups(folders)
    for side, folder in folders.items():
        for (setup, trial), found in finished_trials(folder).items():
            if setup not in setups:
                continue
            settings = EvaluationSettings.of(found.score["settings"], f"{folder} scores/{setup}/trial{trial}.json")
            for scorer, scorer_folder in folders.items():
                job = ScoringJob(
                    found.generator,
                    replace(settings, metrics=[metric]),
                    found.study_seed,
                    trial,
                    scorer_folder / "classifier" / "classifier.pt",
                    scorer_folder / "classifier" / "reference_stats.npz",
                )
                for draw, scores in enumerate(scoring_draws(job, draws, threads=threads)):
                    rows.append(
                        {
                            "generators": side,
                            "setup": setup,
                            "trial": trial,
                            "scorer": scorer,
                            "draw": draw,
                            "value": scores[metric],
                        }
                    )
    return pd.DataFrame(rows)


def _comparison(here: np.ndarray, reference: np.ndarray) -> dict[str, object]:
    test = rank_test(here, reference)
    return {
        "trials": f"{len(here)} / {len(reference)}",
        "median_here": float(np.median(here)) if len(here) else float("nan"),
        "median_reference": float(np.median(reference)) if len(reference) else float("nan"),
        "p": test.p,
        "test": test.method,
        "a12_here_higher": a12(here, reference),
    }


def own_scores(folders: dict[str, Path], metric: str) -> pd.DataFrame:
    """Each set-up's scores as each run's own evaluate step wrote them, here against the reference."""
    found = {side: finished_trials(folder) for side, folder in folders.items()}
    rows = []
    for setup in shared_setups(folders):
        values = {
            side: np.array([t.score["scores"][metric] for (s, _), t in sorted(trials.items()) if s == setup])
            for side, trials in found.items()
        }
        rows.append({"setup": setup, **_comparison(values["here"], values["reference"])})
    return pd.DataFrame(rows)


def training_against_scoring(cross: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """From the cross-scores (each generator's mean over its draws): the runs' generators compared under
    each scorer (the training's difference), and the scorers compared on the same generators (the
    scoring's: Wilcoxon's signed-rank test of the paired scores)."""
    means = cross.groupby(["generators", "setup", "trial", "scorer"]).value.mean()
    training, scoring = [], []
    for setup in sorted(set(cross.setup)):
        for scorer in SIDES:
            here, reference = (means[side, setup].xs(scorer, level="scorer").to_numpy() for side in SIDES)
            training.append({"setup": setup, "scorer": scorer, **_comparison(here, reference)})
        for side in SIDES:
            paired = means[side, setup].unstack("scorer")
            difference = (paired["here"] - paired["reference"]).to_numpy()
            p = wilcoxon(difference).pvalue if np.any(difference != 0) else 1.0
            scoring.append(
                {
                    "setup": setup,
                    "generators": side,
                    "trials": len(difference),
                    "median_here_scorer": float(paired["here"].median()),
                    "median_reference_scorer": float(paired["reference"].median()),
                    "median_difference": float(np.median(difference)),
                    "p_signed_rank": float(p),
                }
            )
    return pd.DataFrame(training), pd.DataFrame(scoring)


def same_bits(cross: pd.DataFrame, folder: Path, metric: str) -> tuple[int, int]:
    """How many of the reference's score files this machine gives to the bit (its generators, its scorer,
    draw 0), of how many."""
    rescored = cross[(cross.generators == "reference") & (cross.scorer == "reference") & (cross.draw == 0)]
    trials = finished_trials(folder)
    equal = sum(row.value == trials[(row.setup, row.trial)].score["scores"][metric] for row in rescored.itertuples())
    return equal, len(rescored)


def report(folders: dict[str, Path], metric: str, draws: int, threads: int, digits: int = 4) -> str:
    cross = cross_scores(folders, metric, draws, threads)
    training, scoring = training_against_scoring(cross)
    equal, total = same_bits(cross, folders["reference"], metric)
    return "\n".join(
        [
            f"# {metric}: {folders['here']} (here) against {folders['reference']} (reference)\n",
            "Each run's own scores (its machine, its classifier). p: the study's two-sided rank test; a12_here_higher: "
            "the probability that a trial here scores higher than one of the reference.\n",
            markdown_table(own_scores(folders, metric), False, digits),
            f"Cross-scored on this machine, each generator's mean over draws 0 to {draws} of the evaluate step's "
            "noise. The training: both runs' generators under one scorer.\n",
            markdown_table(training, False, digits),
            "The scoring: the same generators under the two scorers (difference: here's minus the reference's; "
            "Wilcoxon's signed-rank test).\n",
            markdown_table(scoring, False, digits),
            f"This machine gives {equal} of the reference's {total} {metric} scores to the bit"
            + (
                ": the reference machine's float path."
                if equal == total
                else ": another float path than the one that wrote them (or another scorer)."
            ),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("here", type=Path, help="a study folder trained on this machine (results/<study>)")
    parser.add_argument("reference", type=Path, help="the same study's folder from the reference machine")
    parser.add_argument("--metric", default="fid")
    parser.add_argument("--draws", type=int, default=5, help="fresh sample sets per cross-score besides draw 0")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="also write the report to this Markdown file")
    args = parser.parse_args(argv)
    text = report({"here": args.here, "reference": args.reference}, args.metric, args.draws, args.threads)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
