# Stage 4: one tidy score table and one timing table, then summaries, rank-sum tests and speed-ups.
# Only these and the report rules rerun when the statistics or table style change.


rule aggregate:
    input:
        unpack(arguments_inputs("aggregate")),
        scores=taken(SCORES),
        listed=rules.decision.output.scores if PLAN.schedule else [],
    output:
        report(FOLDER.scores_table(), caption="../report/scores.rst", category="4. Statistics"),
    log:
        FOLDER.log("aggregate"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy aggregate @{input.arguments} > {log} 2>&1"


job_arguments(
    rules.aggregate, study=config["study"], out=rules.aggregate.output,
    scores=taken_arguments(SCORES, rules.aggregate.input.listed),
)


rule convergence:
    input:
        unpack(arguments_inputs("convergence")),
        losses=taken(LOSSES),
        listed=rules.decision.output.losses if PLAN.schedule else [],
    output:
        table=report(FOLDER.convergence(), caption="../report/convergence.rst", category="4. Statistics"),
        figure=report(
            FOLDER.figure("score_curves"),
            caption="../report/score_curves.rst",
            category="5. Figures",
            labels={"figure": "score curves"},
        ),
    log:
        FOLDER.log("convergence"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy convergence @{input.arguments} > {log} 2>&1"


job_arguments(
    rules.convergence, losses=taken_arguments(LOSSES, rules.convergence.input.listed), setups=PLAN.setups,
    window=config["statistics"]["convergence_window"], tolerance=config["statistics"]["convergence_tolerance"],
    degradation=config["statistics"]["degradation_tolerance"],
    out=rules.convergence.output.table, figure=rules.convergence.output.figure,
)


rule stats:
    input:
        unpack(arguments_inputs("stats")),
        scores=rules.aggregate.output,
        convergence=rules.convergence.output.table,
        looks=rules.decision.output.record if PLAN.schedule else [],
    output:
        **tables("summary", "summary_{metric}", "../report/summary.rst", metric=PLAN.metrics),
        **tables("pvalues", "pvalues_{metric}", "../report/pvalues.rst", metric=PLAN.metrics),
        **tables("pairs", "pairs_{metric}", "../report/pairs.rst", metric=PLAN.metrics),
        **tables("kruskal", "kruskal", "../report/kruskal.rst"),
        **tables("results", "results", "../report/results.rst"),
        **(tables("looks", "looks", "../report/looks.rst") if PLAN.schedule else {}),
    log:
        FOLDER.log("stats"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy stats @{input.arguments} > {log} 2>&1"


job_arguments(
    rules.stats, scores=rules.stats.input.scores, convergence=rules.stats.input.convergence, setups=PLAN.setups,
    metrics=PLAN.metrics, settings=as_json(config["statistics"]), out_dir=os.path.dirname(rules.stats.output.summary[0]),
    looks=rules.stats.input.looks,
)


rule sweeps:
    input:
        unpack(arguments_inputs("sweeps")),
        scores=rules.aggregate.output,
        # The study's pairs: the sweep figure's Holm p-values are theirs (one family per metric).
        pairs=expand(FOLDER.table("pairs_{metric}", "csv"), metric=PLAN.metrics),
        sweeps=PLAN.files.spec_inputs("sweeps"),
    output:
        **tables("effects", "sweep_{sweep}_{metric}", "../report/sweep_effects.rst", sweep=PLAN.sweeps, metric=PLAN.metrics),
        **tables("tests", "sweep_{sweep}_tests", "../report/sweep_tests.rst", sweep=PLAN.sweeps),
        **tables("interactions", "sweep_{sweep}_interactions", "../report/sweep_interactions.rst", sweep=PLAN.sweeps),
        figures=report(
            expand(FOLDER.figure("sweep_{sweep}_{metric}"), sweep=PLAN.sweeps, metric=PLAN.metrics),
            caption="../report/sweep_plot.rst",
            category="5. Figures",
        ),
    log:
        FOLDER.log("sweeps"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy sweep-stats @{input.arguments} > {log} 2>&1"


if PLAN.sweeps:
    job_arguments(
        rules.sweeps, scores=rules.sweeps.input.scores, sweeps=PLAN.files.spec_file("sweeps"), metrics=PLAN.metrics,
        digits=config["statistics"]["digits"], failures=config["statistics"]["failures"],
        out_dir=os.path.dirname(rules.sweeps.output.effects[0]),
        figures=os.path.dirname(rules.sweeps.output.figures[0]),
    )


rule aggregate_timings:
    input:
        unpack(arguments_inputs("aggregate_timings")),
        runs=taken(lambda runs: [f"{folder}/{name}" for folder in RUN_FOLDERS(runs) for name in ("run.json", "profile.csv", "losses.csv")]),
        listed=rules.decision.output.runs if PLAN.schedule else [],
    output:
        timings=report(FOLDER.timings(), caption="../report/timings.rst", category="4. Statistics"),
        runs=report(FOLDER.runs_table(), caption="../report/runs.rst", category="4. Statistics"),
    log:
        FOLDER.log("aggregate_timings"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy aggregate-timings @{input.arguments} > {log} 2>&1"


job_arguments(
    rules.aggregate_timings, out=rules.aggregate_timings.output.timings, runs_out=rules.aggregate_timings.output.runs,
    runs=taken_arguments(RUN_FOLDERS, rules.aggregate_timings.input.listed),
)


rule timing:
    input:
        unpack(arguments_inputs("timing")),
        timings=rules.aggregate_timings.output.timings,
        runs=rules.aggregate_timings.output.runs,
    output:
        **tables("timing", "timing", "../report/timing.rst"),
        **tables("routines", "routines", "../report/routines.rst"),
        **tables("epochs", "epochs", "../report/epochs.rst"),
    log:
        FOLDER.log("timing"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy timing @{input.arguments} > {log} 2>&1"


# Each multi-rank set-up's one-rank run of the same work.
BASELINE_ARGUMENTS = [f"{setup}={baseline}" for setup, baseline in PLAN.baselines.items()]
job_arguments(
    rules.timing, timings=rules.timing.input.timings, runs=rules.timing.input.runs, setups=PLAN.setups,
    baselines=BASELINE_ARGUMENTS, references=as_json(PLAN.epoch_facts), digits=config["statistics"]["digits"],
    out_dir=os.path.dirname(rules.timing.output.timing[0]),
)


rule reproduction:
    input:
        unpack(arguments_inputs("reproduction")),
        scores=rules.aggregate.output,
    output:
        **tables("tables", "reproduction", "../report/reproduction.rst"),
        directions=report(
            FOLDER.table("reproduction_directions", "csv"), caption="../report/reproduction.rst", category="4. Statistics"
        ),
        claims=report(
            FOLDER.table("reproduction_claims", "csv"), caption="../report/reproduction.rst", category="4. Statistics"
        ),
    log:
        FOLDER.log("reproduction"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy reproduction @{input.arguments} > {log} 2>&1"


if PLAN.references:
    job_arguments(
        rules.reproduction, scores=rules.reproduction.input.scores, references=as_json(PLAN.references), setups=PLAN.setups,
        settings=as_json(config["statistics"]), out_dir=os.path.dirname(rules.reproduction.output.directions),
    )


rule tables:
    input:
        rules.stats.output,
        rules.timing.output,
        # Only data of several classes have classes to compare.
        rules.anova.output if PLAN.anova else [],
        # Only studies whose set-ups carry a paper's published result.
        rules.reproduction.output if PLAN.references else [],
        rules.sweeps.output.effects + rules.sweeps.output.tests if PLAN.sweeps else [],
        taken(RESULTS),
    localrule: True
