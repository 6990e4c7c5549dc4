# Stage 5: figures for the paper and the HTML report (snakemake --report report.html).


rule box_plot:
    input:
        rules.aggregate.output,
    output:
        report(
            f"{STUDY_DIR}/figures/box_{{metric}}.png",
            caption="../report/box_plot.rst",
            category="5. Figures",
            labels={"metric": "{metric}"},
        ),
    params:
        setups=SETUPS,
    log:
        f"{LOG_DIR}/box_plot_{{metric}}.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy box-plot --scores {input} --metric {wildcards.metric} --setups {params.setups}"
        " --out {output} > {log} 2>&1"


rule grid_size_plot:
    input:
        rules.aggregate.output,
    output:
        report(
            f"{STUDY_DIR}/figures/grid_sizes.png",
            caption="../report/grid_size_plot.rst",
            category="5. Figures",
            labels={"figure": "scores by grid size"},
        ),
    params:
        setups=SETUPS,
        metrics=METRICS,
    log:
        f"{LOG_DIR}/grid_size_plot.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy grid-plot --scores {input} --metrics {params.metrics} --setups {params.setups} --out {output} > {log} 2>&1"


rule routine_plot:
    input:
        rules.aggregate_timings.output.timings,
    output:
        report(
            f"{STUDY_DIR}/figures/routines.png",
            caption="../report/routine_plot.rst",
            category="5. Figures",
            labels={"figure": "seconds per routine"},
        ),
    params:
        setups=SETUPS,
    log:
        f"{LOG_DIR}/routine_plot.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy routine-plot --timings {input} --setups {params.setups} --out {output} > {log} 2>&1"


rule speedup_plot:
    input:
        rules.aggregate_timings.output.timings,
    output:
        report(
            f"{STUDY_DIR}/figures/speedup.png",
            caption="../report/speedup_plot.rst",
            category="5. Figures",
            labels={"figure": "speed-up"},
        ),
    params:
        setups=SETUPS,
        baselines=rules.timing.params.baselines,
    log:
        f"{LOG_DIR}/speedup_plot.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy speedup-plot --timings {input} --setups {params.setups} --baselines {params.baselines}"
        " --out {output} > {log} 2>&1"


rule sample_montage:
    input:
        expand(f"{STUDY_DIR}/runs/{{setup}}/trial0/samples.png", setup=SETUPS),
    output:
        report(
            f"{STUDY_DIR}/figures/samples.png",
            caption="../report/sample_montage.rst",
            category="5. Figures",
            labels={"figure": "samples"},
        ),
    params:
        setups=SETUPS,
    log:
        f"{LOG_DIR}/sample_montage.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy montage --grids {input} --setups {params.setups} --out {output} > {log} 2>&1"


if KIND.figures:

    # The figures the study's data kind adds (DataKind.figures), each drawn by the kind's own function.
    rule kind_figure:
        input:
            expand(f"{STUDY_DIR}/scores/{{setup}}/trial0.json", setup=SETUPS),
        output:
            report(
                f"{STUDY_DIR}/figures/{{figure}}.png",
                caption="../report/kind_figure.rst",
                category="5. Figures",
                labels={"figure": "{figure}"},
            ),
        params:
            kind=KIND.name,
            setups=SETUPS,
            caption=lambda wildcards: KIND.figure(wildcards.figure).caption,
        wildcard_constraints:
            figure="|".join(re.escape(figure.name) for figure in KIND.figures),
        log:
            f"{LOG_DIR}/kind_figure/{{figure}}.log",
        conda:
            "../envs/ganstudy.yaml"
        localrule: True
        threads: 1
        shell:
            "ganstudy kind-figure --kind {params.kind} --figure {wildcards.figure} --scores {input}"
            " --setups {params.setups} --out {output} > {log} 2>&1"


rule training_curves:
    input:
        [f"{STUDY_DIR}/runs/{setup}/trial{trial}/losses.csv" for setup, trial in RUNS],
    output:
        report(
            f"{STUDY_DIR}/figures/training_curves.png",
            caption="../report/training_curves.rst",
            category="5. Figures",
            labels={"figure": "training curves"},
        ),
    params:
        setups=SETUPS,
    log:
        f"{LOG_DIR}/training_curves.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy curves --losses {input} --setups {params.setups} --out {output} > {log} 2>&1"


rule smote_samples:
    input:
        rules.prepare_dataset.output.train,
    output:
        report(f"{STUDY_DIR}/figures/smote_samples.png", caption="../report/smote_samples.rst", category="1. Data"),
    log:
        f"{LOG_DIR}/smote_samples.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy smote-samples --train {input} --out {output} > {log} 2>&1"


# Every figure of the study; the summary page links them.
FIGURES = [
    *expand(rules.box_plot.output, metric=METRICS),
    *rules.sample_montage.output,
    *rules.training_curves.output,
    rules.convergence.output.figure,
    *rules.routine_plot.output,
    *(rules.grid_size_plot.output if len(GRID_SIZES) > 1 else []),
    *(rules.speedup_plot.output if BASELINES else []),
    *(rules.smote_samples.output if SMOTE else []),
    *(expand(rules.kind_figure.output, figure=[figure.name for figure in KIND.figures]) if KIND.figures else []),
    *(rules.sweeps.output.figures if SWEEPS else []),
]


rule summary:
    input:
        rules.stats.output,
        rules.convergence.output.table,
        rules.reproduction.output if REFERENCES else [],
        FIGURES,
    output:
        report(f"{STUDY_DIR}/summary.md", caption="../report/summary_page.rst", category="0. The answer"),
    params:
        folder=lambda wildcards, output: os.path.dirname(output[0]),
        study=config["study"],
        setups=SETUPS,
        metrics=METRICS,
        figures=FIGURES,
        digits=config["statistics"]["digits"],
    log:
        f"{LOG_DIR}/summary.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy summary --study-dir {params.folder} --study {params.study} --setups {params.setups} --metrics {params.metrics}"
        " --figures {params.figures} --digits {params.digits} --out {output} > {log} 2>&1"


rule figures:
    input:
        FIGURES,
        RUN_RESULTS,
    localrule: True
