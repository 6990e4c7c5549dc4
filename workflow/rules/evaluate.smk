# Stage 3: the dataset's classifier (FID/IS features; trained, or the user's classifier.weights), real-data
# statistics, scores per run. A scoring job whose extractor is a network runs on a GPU where the site has
# them (ganstudy.plan.scoring_layout); its memory and wall time grow with the images it scores.


rule train_classifier:
    input:
        unpack(arguments_inputs("train_classifier")),
        train=rules.prepare_dataset.output.train,
        test=rules.prepare_dataset.output.test,
        weights=PLAN.inputs.user_file(config["classifier"]["weights"]),
        spec=PLAN.files.spec_inputs("classifier"),
    output:
        model=FOLDER.classifier("classifier.pt"),
        metrics=report(
            FOLDER.classifier("classifier.json"),
            caption="../report/classifier.rst",
            category="2. Classifier",
        ),
    log:
        FOLDER.log("train_classifier"),
    conda:
        "../envs/ganstudy.yaml"
    envmodules:
        *COMPUTE["modules"],
    threads: PLAN.threads
    resources:
        mem_mb=2000,
        runtime=30,
        **PLAN.scheduler_resources,
    shell:
        "ganstudy train-classifier @{input.arguments} --threads {threads} > {log} 2>&1"


job_arguments(
    "train_classifier", "--spec", rules.train_classifier.input.spec[0], "--train", rules.train_classifier.input.train,
    "--test", rules.train_classifier.input.test, "--model", rules.train_classifier.output.model,
    "--metrics", rules.train_classifier.output.metrics, kept=True,
)


rule reference_statistics:
    input:
        unpack(arguments_inputs("reference_statistics")),
        split=FOLDER.split(config["evaluation"]["reference_split"]),
        classifier=rules.train_classifier.output.model,
        spec=PLAN.files.spec_inputs("reference"),
    output:
        FOLDER.classifier("reference_stats.npz"),
    log:
        FOLDER.log("reference_statistics"),
    conda:
        "../envs/ganstudy.yaml"
    envmodules:
        *COMPUTE["modules"],
    threads: PLAN.threads
    resources:
        mem_mb=2000,
        runtime=15,
        **PLAN.scheduler_resources,
    shell:
        "ganstudy reference-stats @{input.arguments} --threads {threads} > {log} 2>&1"


# Its spec holds the layer alone, and why (ganstudy.plan.planned_files.stage_specs).
job_arguments(
    "reference_statistics", "--spec", rules.reference_statistics.input.spec[0],
    "--split", rules.reference_statistics.input.split, "--classifier", rules.reference_statistics.input.classifier,
    "--out", *rules.reference_statistics.output, kept=True,
)


# The real images' statistics in the features of evaluation.extractor when it is a pretrained network.
rule quality_statistics:
    input:
        unpack(arguments_inputs("quality_statistics")),
        split=FOLDER.split(config["evaluation"]["reference_split"]),
        # Data of one class train none: then --classifier is given without a file.
        classifier=rules.train_classifier.output.model if PLAN.classifier else [],
        weights=PLAN.inputs.user_file(PLAN.inputs.pretrained_weights),
        spec=PLAN.files.spec_inputs("evaluation"),
    output:
        PLAN.inputs.quality_reference,
    params:
        **scoring_params(),
    log:
        FOLDER.log("quality_statistics"),
    conda:
        "../envs/ganstudy.yaml"
    envmodules:
        *COMPUTE["modules"],
    threads: PLAN.scoring.threads
    resources:
        **PLAN.scoring_resources("quality_statistics"),
        **PLAN.scheduler_resources,
    shell:
        "{params.launch} ganstudy reference-stats @{input.arguments} --threads {threads} --device {params.device} > {log} 2>&1"


if PLAN.inputs.pretrained:
    job_arguments(
        "quality_statistics", "--extractor", "quality", "--spec", rules.quality_statistics.input.spec[0],
        "--split", rules.quality_statistics.input.split,
        *(["--classifier", rules.quality_statistics.input.classifier] if PLAN.classifier else []),
        "--out", *rules.quality_statistics.output, kept=True,
    )


rule evaluate:
    input:
        unpack(arguments_inputs("evaluate/{setup}/trial{trial}")),
        generator=rules.train.output.generator,
        record=rules.train.output.record,
        # The classifier and real statistics (rules train_classifier, reference_statistics), a pretrained
        # extractor's (quality_statistics), or the held-out split (prepare_dataset): the same for every run.
        **PLAN.inputs.scored_against(),
        spec=PLAN.files.spec_inputs("evaluation"),
    output:
        FOLDER.score(),
    params:
        **scoring_params(),
    log:
        FOLDER.log("evaluate/{setup}/trial{trial}"),
    conda:
        "../envs/ganstudy.yaml"
    envmodules:
        *COMPUTE["modules"],
    threads: PLAN.scoring.threads
    resources:
        **PLAN.scoring_resources("evaluate"),
        **PLAN.scheduler_resources,
    shell:
        "{params.launch} ganstudy evaluate @{input.arguments} --threads {threads} --device {params.device} > {log} 2>&1"


for setup, trial in PLAN.runs:
    job_arguments(
        f"evaluate/{setup}/trial{trial}", "--spec", rules.evaluate.input.spec[0],
        "--generator", *expand(rules.evaluate.input.generator, setup=setup, trial=trial),
        "--run-record", *expand(rules.evaluate.input.record, setup=setup, trial=trial),
        *PLAN.inputs.evaluate_against(PLAN.inputs.scored_against()), "--trial", trial,
        "--out", *expand(rules.evaluate.output, setup=setup, trial=trial), kept=True,
    )


# The runs' files that the later stages read, as functions of the runs (common.smk: taken).
SCORES = run_paths(rules.evaluate.output[0])
LOSSES = run_paths(rules.train.output.losses)
RUN_FOLDERS = run_paths(os.path.dirname(rules.train.output.record))
# Each run's record and score, targets of the tables: Snakemake redoes a missing file only for a job that
# needs it, so a run archived or deleted by hand would otherwise leave old tables standing.
RESULTS = lambda runs: [*SCORES(runs), *run_paths(rules.train.output.record)(runs)]
