# Stage 5: figures for the paper and the HTML report (snakemake --report report.html).


rule box_plot:
    input:
        unpack(arguments_inputs("box_plot/{metric}")),
        scores=rules.aggregate.output,
    output:
        report(
            FOLDER.figure("box_{metric}"),
            caption="../report/box_plot.rst",
            category="5. Figures",
            labels={"metric": "{metric}"},
        ),
    log:
        FOLDER.log("box_plot_{metric}"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy box-plot @{input.arguments} > {log} 2>&1"


for metric in PLAN.metrics:
    job_arguments(rules.box_plot, f"box_plot/{metric}", scores=rules.box_plot.input.scores, metric=metric, setups=PLAN.setups,
                  out=expand(rules.box_plot.output, metric=metric))


rule cost_plot:
    input:
        unpack(arguments_inputs("cost_plot/{metric}")),
        scores=rules.aggregate.output,
        summary=FOLDER.table("summary_{metric}", "csv"),
    output:
        report(
            FOLDER.figure("cost_{metric}"),
            caption="../report/cost_plot.rst",
            category="5. Figures",
            labels={"metric": "{metric}"},
        ),
    log:
        FOLDER.log("cost_plot_{metric}"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy cost-plot @{input.arguments} > {log} 2>&1"


for metric in PLAN.metrics:
    job_arguments(rules.cost_plot, f"cost_plot/{metric}", scores=rules.cost_plot.input.scores,
                  summary=expand(rules.cost_plot.input.summary, metric=metric), metric=metric, setups=PLAN.setups,
                  out=expand(rules.cost_plot.output, metric=metric))


rule grid_size_plot:
    input:
        unpack(arguments_inputs("grid_size_plot")),
        scores=rules.aggregate.output,
    output:
        report(
            FOLDER.figure("grid_sizes"),
            caption="../report/grid_size_plot.rst",
            category="5. Figures",
            labels={"figure": "scores by grid size"},
        ),
    log:
        FOLDER.log("grid_size_plot"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy grid-plot @{input.arguments} > {log} 2>&1"


if len(PLAN.grid_sizes) > 1:
    job_arguments(rules.grid_size_plot, scores=rules.grid_size_plot.input.scores, metrics=PLAN.metrics, setups=PLAN.setups,
                  out=rules.grid_size_plot.output)


rule routine_plot:
    input:
        unpack(arguments_inputs("routine_plot")),
        timings=rules.aggregate_timings.output.timings,
    output:
        report(
            FOLDER.figure("routines"),
            caption="../report/routine_plot.rst",
            category="5. Figures",
            labels={"figure": "seconds per routine"},
        ),
    log:
        FOLDER.log("routine_plot"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy routine-plot @{input.arguments} > {log} 2>&1"


job_arguments(rules.routine_plot, timings=rules.routine_plot.input.timings, setups=PLAN.setups, out=rules.routine_plot.output)


rule speedup_plot:
    input:
        unpack(arguments_inputs("speedup_plot")),
        timings=rules.aggregate_timings.output.timings,
    output:
        report(
            FOLDER.figure("speedup"),
            caption="../report/speedup_plot.rst",
            category="5. Figures",
            labels={"figure": "speed-up"},
        ),
    log:
        FOLDER.log("speedup_plot"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy speedup-plot @{input.arguments} > {log} 2>&1"


if PLAN.baselines:
    job_arguments(rules.speedup_plot, timings=rules.speedup_plot.input.timings, setups=PLAN.setups,
                  baselines=BASELINE_ARGUMENTS, out=rules.speedup_plot.output)


rule sample_montage:
    input:
        unpack(arguments_inputs("sample_montage")),
        grids=expand(FOLDER.run_file("samples.png", trial=0), setup=PLAN.setups),
    output:
        report(
            FOLDER.figure("samples"),
            caption="../report/sample_montage.rst",
            category="5. Figures",
            labels={"figure": "samples"},
        ),
    log:
        FOLDER.log("sample_montage"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy montage @{input.arguments} > {log} 2>&1"


job_arguments(rules.sample_montage, grids=rules.sample_montage.input.grids, setups=PLAN.setups, out=rules.sample_montage.output)


if PLAN.kind.figures:

    # The figures the study's data kind adds (DataKind.figures), each drawn by the kind's own function.
    rule kind_figure:
        input:
            unpack(arguments_inputs("kind_figure/{figure}")),
            scores=expand(FOLDER.score(trial=0), setup=PLAN.setups),
        output:
            report(
                FOLDER.figure("{figure}"),
                caption="../report/kind_figure.rst",
                category="5. Figures",
                labels={"figure": "{figure}"},
            ),
        params:
            caption=lambda wildcards: PLAN.kind.figure(wildcards.figure).caption,
        wildcard_constraints:
            figure="|".join(re.escape(figure.name) for figure in PLAN.kind.figures),
        log:
            FOLDER.log("kind_figure/{figure}"),
        conda:
            "../envs/ganstudy.yaml"
        localrule: True
        threads: 1
        shell:
            "ganstudy kind-figure @{input.arguments} > {log} 2>&1"

    for figure in PLAN.kind.figures:
        job_arguments(rules.kind_figure, f"kind_figure/{figure.name}", kind=PLAN.kind.name, figure=figure.name,
                      scores=rules.kind_figure.input.scores, setups=PLAN.setups, out=expand(rules.kind_figure.output, figure=figure.name))


rule training_curves:
    input:
        unpack(arguments_inputs("training_curves")),
        losses=taken(LOSSES),
        listed=rules.decision.output.losses if PLAN.schedule else [],
    output:
        report(
            FOLDER.figure("training_curves"),
            caption="../report/training_curves.rst",
            category="5. Figures",
            labels={"figure": "training curves"},
        ),
    log:
        FOLDER.log("training_curves"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy curves @{input.arguments} > {log} 2>&1"


job_arguments(rules.training_curves, losses=taken_arguments(LOSSES, rules.training_curves.input.listed), setups=PLAN.setups,
              out=rules.training_curves.output)


rule smote_samples:
    input:
        unpack(arguments_inputs("smote_samples")),
        train=rules.prepare_dataset.output.train,
    output:
        report(FOLDER.figure("smote_samples"), caption="../report/smote_samples.rst", category="1. Data"),
    log:
        FOLDER.log("smote_samples"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy smote-samples @{input.arguments} > {log} 2>&1"


if PLAN.smote:
    job_arguments(rules.smote_samples, train=rules.smote_samples.input.train, out=rules.smote_samples.output)


# Every figure of the study; the summary page links them.
FIGURES = [
    *expand(rules.box_plot.output, metric=PLAN.metrics),
    *expand(rules.cost_plot.output, metric=PLAN.metrics),
    *rules.sample_montage.output,
    *rules.training_curves.output,
    rules.convergence.output.figure,
    *rules.routine_plot.output,
    *(rules.grid_size_plot.output if len(PLAN.grid_sizes) > 1 else []),
    *(rules.speedup_plot.output if PLAN.baselines else []),
    *(rules.smote_samples.output if PLAN.smote else []),
    *(expand(rules.kind_figure.output, figure=[figure.name for figure in PLAN.kind.figures]) if PLAN.kind.figures else []),
    *(rules.sweeps.output.figures if PLAN.sweeps else []),
]


rule summary:
    input:
        unpack(arguments_inputs("summary")),
        rules.stats.output,
        rules.convergence.output.table,
        rules.reproduction.output if PLAN.references else [],
        FIGURES,
        looks=rules.decision.output.record if PLAN.schedule else [],
    output:
        report(FOLDER.answer(), caption="../report/summary_page.rst", category="0. The answer"),
        # The HTML report's first page and its metadata (ganstudy.report.report_page; make report).
        **PLAN.report_files,
    log:
        FOLDER.log("summary"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy summary @{input.arguments} > {log} 2>&1"


job_arguments(
    rules.summary, study_dir=os.path.dirname(rules.summary.output[0]), study=config["study"], setups=PLAN.setups,
    metrics=PLAN.metrics, figures=FIGURES, settings=as_json(config["statistics"]), out=rules.summary.output[0],
    looks=rules.summary.input.looks,
)


rule figures:
    input:
        FIGURES,
        taken(RESULTS),
    localrule: True
