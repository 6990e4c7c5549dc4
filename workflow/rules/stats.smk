# Stage 4: one tidy score table, then summaries and rank-sum tests. Only these and the report
# rules rerun when the statistics or table style change.


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


rule stats:
    input:
        rules.aggregate.output,
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
        timing=report(
            expand(f"{STUDY_DIR}/tables/timing.{{ext}}", ext=TABLE_FORMATS),
            caption="../report/timing.rst",
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
        "ganstudy stats --scores {input} --setups {params.setups} --metrics {params.metrics}"
        " --min-trials {params.min_trials} --digits {params.digits} --out-dir {params.out_dir} > {log} 2>&1"


rule tables:
    input:
        rules.stats.output,
        rules.anova.output,
    localrule: True
