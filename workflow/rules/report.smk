# Stage 5: figures for the paper and the HTML report (snakemake --report report.html).


rule box_plot:
    input:
        unpack(arguments_inputs("box_plot/{metric}")),
        scores=rules.aggregate.output,
    output:
        report(
            f"{STUDY_DIR}/figures/box_{{metric}}.png",
            caption="../report/box_plot.rst",
            category="5. Figures",
            labels={"metric": "{metric}"},
        ),
    log:
        f"{LOG_DIR}/box_plot_{{metric}}.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy box-plot @{input.arguments} > {log} 2>&1"


for metric in METRICS:
    job_arguments(f"box_plot/{metric}", "--scores", *rules.box_plot.input.scores, "--metric", metric, "--setups", *SETUPS,
                  "--out", *expand(rules.box_plot.output, metric=metric))


rule cost_plot:
    input:
        unpack(arguments_inputs("cost_plot/{metric}")),
        scores=rules.aggregate.output,
        summary=f"{STUDY_DIR}/tables/summary_{{metric}}.csv",
    output:
        report(
            f"{STUDY_DIR}/figures/cost_{{metric}}.png",
            caption="../report/cost_plot.rst",
            category="5. Figures",
            labels={"metric": "{metric}"},
        ),
    log:
        f"{LOG_DIR}/cost_plot_{{metric}}.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy cost-plot @{input.arguments} > {log} 2>&1"


for metric in METRICS:
    job_arguments(f"cost_plot/{metric}", "--scores", *rules.cost_plot.input.scores, "--summary",
                  *expand(rules.cost_plot.input.summary, metric=metric), "--metric", metric, "--setups", *SETUPS,
                  "--out", *expand(rules.cost_plot.output, metric=metric))


rule grid_size_plot:
    input:
        unpack(arguments_inputs("grid_size_plot")),
        scores=rules.aggregate.output,
    output:
        report(
            f"{STUDY_DIR}/figures/grid_sizes.png",
            caption="../report/grid_size_plot.rst",
            category="5. Figures",
            labels={"figure": "scores by grid size"},
        ),
    log:
        f"{LOG_DIR}/grid_size_plot.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy grid-plot @{input.arguments} > {log} 2>&1"


if len(GRID_SIZES) > 1:
    job_arguments("grid_size_plot", "--scores", *rules.grid_size_plot.input.scores, "--metrics", *METRICS, "--setups", *SETUPS,
                  "--out", *rules.grid_size_plot.output)


rule routine_plot:
    input:
        unpack(arguments_inputs("routine_plot")),
        timings=rules.aggregate_timings.output.timings,
    output:
        report(
            f"{STUDY_DIR}/figures/routines.png",
            caption="../report/routine_plot.rst",
            category="5. Figures",
            labels={"figure": "seconds per routine"},
        ),
    log:
        f"{LOG_DIR}/routine_plot.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy routine-plot @{input.arguments} > {log} 2>&1"


job_arguments("routine_plot", "--timings", rules.routine_plot.input.timings, "--setups", *SETUPS, "--out", *rules.routine_plot.output)


rule speedup_plot:
    input:
        unpack(arguments_inputs("speedup_plot")),
        timings=rules.aggregate_timings.output.timings,
    output:
        report(
            f"{STUDY_DIR}/figures/speedup.png",
            caption="../report/speedup_plot.rst",
            category="5. Figures",
            labels={"figure": "speed-up"},
        ),
    log:
        f"{LOG_DIR}/speedup_plot.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy speedup-plot @{input.arguments} > {log} 2>&1"


if BASELINES:
    job_arguments("speedup_plot", "--timings", rules.speedup_plot.input.timings, "--setups", *SETUPS, "--baselines",
                  *BASELINE_ARGUMENTS, "--out", *rules.speedup_plot.output)


rule sample_montage:
    input:
        unpack(arguments_inputs("sample_montage")),
        grids=expand(f"{STUDY_DIR}/runs/{{setup}}/trial0/samples.png", setup=SETUPS),
    output:
        report(
            f"{STUDY_DIR}/figures/samples.png",
            caption="../report/sample_montage.rst",
            category="5. Figures",
            labels={"figure": "samples"},
        ),
    log:
        f"{LOG_DIR}/sample_montage.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy montage @{input.arguments} > {log} 2>&1"


job_arguments("sample_montage", "--grids", *rules.sample_montage.input.grids, "--setups", *SETUPS, "--out", *rules.sample_montage.output)


if KIND.figures:

    # The figures the study's data kind adds (DataKind.figures), each drawn by the kind's own function.
    rule kind_figure:
        input:
            unpack(arguments_inputs("kind_figure/{figure}")),
            scores=expand(f"{STUDY_DIR}/scores/{{setup}}/trial0.json", setup=SETUPS),
        output:
            report(
                f"{STUDY_DIR}/figures/{{figure}}.png",
                caption="../report/kind_figure.rst",
                category="5. Figures",
                labels={"figure": "{figure}"},
            ),
        params:
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
            "ganstudy kind-figure @{input.arguments} > {log} 2>&1"

    for figure in KIND.figures:
        job_arguments(f"kind_figure/{figure.name}", "--kind", KIND.name, "--figure", figure.name, "--scores", *rules.kind_figure.input.scores,
                      "--setups", *SETUPS, "--out", *expand(rules.kind_figure.output, figure=figure.name))


rule training_curves:
    input:
        unpack(arguments_inputs("training_curves")),
        losses=[f"{STUDY_DIR}/runs/{setup}/trial{trial}/losses.csv" for setup, trial in RUNS],
    output:
        report(
            f"{STUDY_DIR}/figures/training_curves.png",
            caption="../report/training_curves.rst",
            category="5. Figures",
            labels={"figure": "training curves"},
        ),
    log:
        f"{LOG_DIR}/training_curves.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy curves @{input.arguments} > {log} 2>&1"


job_arguments("training_curves", "--losses", *rules.training_curves.input.losses, "--setups", *SETUPS, "--out", *rules.training_curves.output)


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
    *expand(rules.cost_plot.output, metric=METRICS),
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
        unpack(arguments_inputs("summary")),
        rules.stats.output,
        rules.convergence.output.table,
        rules.reproduction.output if REFERENCES else [],
        FIGURES,
    output:
        report(f"{STUDY_DIR}/summary.md", caption="../report/summary_page.rst", category="0. The answer"),
    log:
        f"{LOG_DIR}/summary.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy summary @{input.arguments} > {log} 2>&1"


job_arguments(
    "summary", "--study-dir", os.path.dirname(rules.summary.output[0]), "--study", config["study"], "--setups", *SETUPS,
    "--metrics", *METRICS, "--figures", *FIGURES, "--settings", as_json(config["statistics"]), "--out", *rules.summary.output,
)


rule figures:
    input:
        FIGURES,
        RUN_RESULTS,
    localrule: True
