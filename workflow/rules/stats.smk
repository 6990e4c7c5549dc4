# Stage 4: one tidy score table and one timing table, then summaries, rank-sum tests and speed-ups.
# Only these and the report rules rerun when the statistics or table style change.


rule aggregate:
    input:
        [f"{STUDY_DIR}/scores/{setup}/trial{trial}.json" for setup, trial in RUNS],
    output:
        report(f"{STUDY_DIR}/scores.csv", caption="../report/scores.rst", category="4. Statistics"),
    params:
        study=config["study"],
    log:
        f"{LOG_DIR}/aggregate.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy aggregate --study {params.study} --out {output} {input} > {log} 2>&1"


rule convergence:
    input:
        [f"{STUDY_DIR}/runs/{setup}/trial{trial}/losses.csv" for setup, trial in RUNS],
    output:
        table=report(f"{STUDY_DIR}/convergence.csv", caption="../report/convergence.rst", category="4. Statistics"),
        figure=report(
            f"{STUDY_DIR}/figures/score_curves.png",
            caption="../report/score_curves.rst",
            category="5. Figures",
            labels={"figure": "score curves"},
        ),
    params:
        setups=SETUPS,
        window=config["statistics"]["convergence_window"],
        tolerance=config["statistics"]["convergence_tolerance"],
        degradation=config["statistics"]["degradation_tolerance"],
    log:
        f"{LOG_DIR}/convergence.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy convergence --losses {input} --setups {params.setups} --window {params.window} --tolerance {params.tolerance}"
        " --degradation {params.degradation} --out {output.table} --figure {output.figure} > {log} 2>&1"


rule stats:
    input:
        scores=rules.aggregate.output,
        convergence=rules.convergence.output.table,
    output:
        summary=report(
            expand(f"{STUDY_DIR}/tables/summary_{{metric}}.{{ext}}", metric=METRICS, ext=TABLE_FORMATS),
            caption="../report/summary.rst",
            category="4. Statistics",
        ),
        pvalues=report(
            expand(f"{STUDY_DIR}/tables/pvalues_{{metric}}.{{ext}}", metric=METRICS, ext=TABLE_FORMATS),
            caption="../report/pvalues.rst",
            category="4. Statistics",
        ),
        pairs=report(
            expand(f"{STUDY_DIR}/tables/pairs_{{metric}}.{{ext}}", metric=METRICS, ext=TABLE_FORMATS),
            caption="../report/pairs.rst",
            category="4. Statistics",
        ),
        kruskal=report(
            expand(f"{STUDY_DIR}/tables/kruskal.{{ext}}", ext=TABLE_FORMATS),
            caption="../report/kruskal.rst",
            category="4. Statistics",
        ),
        results=report(
            expand(f"{STUDY_DIR}/tables/results.{{ext}}", ext=TABLE_FORMATS),
            caption="../report/results.rst",
            category="4. Statistics",
        ),
    params:
        setups=SETUPS,
        metrics=METRICS,
        min_trials=config["statistics"]["min_trials"],
        digits=config["statistics"]["digits"],
        out_dir=lambda wildcards, output: os.path.dirname(output.summary[0]),
    log:
        f"{LOG_DIR}/stats.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy stats --scores {input.scores} --convergence {input.convergence} --setups {params.setups}"
        " --metrics {params.metrics} --min-trials {params.min_trials} --digits {params.digits} --out-dir {params.out_dir} > {log} 2>&1"


rule sweeps:
    input:
        scores=rules.aggregate.output,
        sweeps=spec_inputs("sweeps"),
    output:
        effects=report(
            expand(f"{STUDY_DIR}/tables/sweep_{{sweep}}_{{metric}}.{{ext}}", sweep=SWEEPS, metric=METRICS, ext=TABLE_FORMATS),
            caption="../report/sweep_effects.rst",
            category="4. Statistics",
        ),
        tests=report(
            expand(f"{STUDY_DIR}/tables/sweep_{{sweep}}_tests.{{ext}}", sweep=SWEEPS, ext=TABLE_FORMATS),
            caption="../report/sweep_tests.rst",
            category="4. Statistics",
        ),
        figures=report(
            expand(f"{STUDY_DIR}/figures/sweep_{{sweep}}_{{metric}}.png", sweep=SWEEPS, metric=METRICS),
            caption="../report/sweep_plot.rst",
            category="5. Figures",
        ),
    params:
        metrics=METRICS,
        digits=config["statistics"]["digits"],
        tables=lambda wildcards, output: os.path.dirname(output.effects[0]),
        figures=lambda wildcards, output: os.path.dirname(output.figures[0]),
    log:
        f"{LOG_DIR}/sweeps.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy sweep-stats --scores {input.scores} --sweeps {input.sweeps[0]} --metrics {params.metrics} --digits {params.digits}"
        " --out-dir {params.tables} --figures {params.figures} > {log} 2>&1"


rule aggregate_timings:
    input:
        [
            f"{STUDY_DIR}/runs/{setup}/trial{trial}/{name}"
            for setup, trial in RUNS
            for name in ("run.json", "profile.csv", "losses.csv")
        ],
    output:
        timings=report(f"{STUDY_DIR}/timings.csv", caption="../report/timings.rst", category="4. Statistics"),
        runs=report(f"{STUDY_DIR}/runs.csv", caption="../report/runs.rst", category="4. Statistics"),
    params:
        runs=[f"{STUDY_DIR}/runs/{setup}/trial{trial}" for setup, trial in RUNS],
    log:
        f"{LOG_DIR}/aggregate_timings.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy aggregate-timings --out {output.timings} --runs-out {output.runs} {params.runs} > {log} 2>&1"


rule timing:
    input:
        timings=rules.aggregate_timings.output.timings,
        runs=rules.aggregate_timings.output.runs,
    output:
        timing=report(
            expand(f"{STUDY_DIR}/tables/timing.{{ext}}", ext=TABLE_FORMATS),
            caption="../report/timing.rst",
            category="4. Statistics",
        ),
        routines=report(
            expand(f"{STUDY_DIR}/tables/routines.{{ext}}", ext=TABLE_FORMATS),
            caption="../report/routines.rst",
            category="4. Statistics",
        ),
        epochs=report(
            expand(f"{STUDY_DIR}/tables/epochs.{{ext}}", ext=TABLE_FORMATS),
            caption="../report/epochs.rst",
            category="4. Statistics",
        ),
    params:
        setups=SETUPS,
        baselines=[f"{setup}={baseline}" for setup, baseline in BASELINES.items()],
        references=as_json(EPOCH_FACTS),
        digits=config["statistics"]["digits"],
        out_dir=lambda wildcards, output: os.path.dirname(output.timing[0]),
    log:
        f"{LOG_DIR}/timing.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy timing --timings {input.timings} --runs {input.runs} --setups {params.setups} --baselines {params.baselines}"
        " --references {params.references:q} --digits {params.digits} --out-dir {params.out_dir} > {log} 2>&1"


rule reproduction:
    input:
        rules.aggregate.output,
    output:
        tables=report(
            expand(f"{STUDY_DIR}/tables/reproduction.{{ext}}", ext=TABLE_FORMATS),
            caption="../report/reproduction.rst",
            category="4. Statistics",
        ),
        directions=report(
            f"{STUDY_DIR}/tables/reproduction_directions.csv", caption="../report/reproduction.rst", category="4. Statistics"
        ),
    params:
        setups=SETUPS,
        references=as_json(REFERENCES),
        digits=config["statistics"]["digits"],
        out_dir=lambda wildcards, output: os.path.dirname(output.directions),
    log:
        f"{LOG_DIR}/reproduction.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy reproduction --scores {input} --references {params.references:q} --setups {params.setups}"
        " --digits {params.digits} --out-dir {params.out_dir} > {log} 2>&1"


rule tables:
    input:
        rules.stats.output,
        rules.timing.output,
        # Only data of several classes have classes to compare.
        rules.anova.output if ANOVA else [],
        # Only studies whose set-ups carry a paper's published result.
        rules.reproduction.output if REFERENCES else [],
        rules.sweeps.output.effects + rules.sweeps.output.tests if SWEEPS else [],
        RUN_RESULTS,
    localrule: True
