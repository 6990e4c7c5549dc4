# Stage 3: the dataset's classifier (FID/IS features; trained, or the user's classifier.weights), real-data
# statistics, scores per run.


rule train_classifier:
    input:
        unpack(arguments_inputs("train_classifier")),
        train=rules.prepare_dataset.output.train,
        test=rules.prepare_dataset.output.test,
        weights=user_file(config["classifier"]["weights"]),
        spec=spec_inputs("classifier"),
    output:
        model=f"{STUDY_DIR}/classifier/classifier.pt",
        metrics=report(
            f"{STUDY_DIR}/classifier/classifier.json",
            caption="../report/classifier.rst",
            category="2. Classifier",
        ),
    log:
        f"{LOG_DIR}/train_classifier.log",
    conda:
        "../envs/ganstudy.yaml"
    envmodules:
        *config["compute"]["modules"],
    threads: THREADS
    resources:
        mem_mb=2000,
        runtime=30,
    shell:
        "ganstudy train-classifier @{input.arguments} --threads {threads} > {log} 2>&1"


job_arguments(
    "train_classifier", "--settings", as_json(CLASSIFIER_SETTINGS), "--train", rules.train_classifier.input.train,
    "--test", rules.train_classifier.input.test, "--seed", config["seed"], "--model", rules.train_classifier.output.model,
    "--metrics", rules.train_classifier.output.metrics, kept=True,
)


rule reference_statistics:
    input:
        unpack(arguments_inputs("reference_statistics")),
        split=f"{STUDY_DIR}/data/{config['evaluation']['reference_split']}.npz",
        classifier=rules.train_classifier.output.model,
        spec=spec_inputs("reference"),
    output:
        f"{STUDY_DIR}/classifier/reference_stats.npz",
    log:
        f"{LOG_DIR}/reference_statistics.log",
    conda:
        "../envs/ganstudy.yaml"
    envmodules:
        *config["compute"]["modules"],
    threads: THREADS
    resources:
        mem_mb=2000,
        runtime=15,
    shell:
        "ganstudy reference-stats @{input.arguments} --threads {threads} > {log} 2>&1"


# Only the layer: training scores with these statistics, so an evaluation edit (metrics, samples, batch size)
# must not rewrite them (they are computed in the schema's default batches).
job_arguments(
    "reference_statistics", "--settings", as_json({"fid_features": config["evaluation"]["fid_features"]}),
    "--split", rules.reference_statistics.input.split, "--classifier", rules.reference_statistics.input.classifier,
    "--out", *rules.reference_statistics.output, kept=True,
)


# The real images' statistics in the features of evaluation.extractor when it is a pretrained network.
rule quality_statistics:
    input:
        unpack(arguments_inputs("quality_statistics")),
        split=f"{STUDY_DIR}/data/{config['evaluation']['reference_split']}.npz",
        # Data of one class train none: then --classifier is given without a file.
        classifier=rules.train_classifier.output.model if CLASSIFIER else [],
        weights=user_file(PRETRAINED_WEIGHTS),
        spec=spec_inputs("evaluation"),
    output:
        QUALITY_REFERENCE,
    log:
        f"{LOG_DIR}/quality_statistics.log",
    conda:
        "../envs/ganstudy.yaml"
    envmodules:
        *config["compute"]["modules"],
    threads: THREADS
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        "ganstudy reference-stats @{input.arguments} --threads {threads} > {log} 2>&1"


if PRETRAINED_MODEL:
    job_arguments(
        "quality_statistics", "--extractor", "quality", "--settings", EVALUATION_SETTINGS,
        "--split", rules.quality_statistics.input.split,
        *(["--classifier", rules.quality_statistics.input.classifier] if CLASSIFIER else []),
        "--out", *rules.quality_statistics.output, kept=True,
    )


rule evaluate:
    input:
        unpack(evaluate_inputs),
        unpack(arguments_inputs("evaluate/{setup}/trial{trial}")),
    output:
        f"{STUDY_DIR}/scores/{{setup}}/trial{{trial}}.json",
    log:
        f"{LOG_DIR}/evaluate/{{setup}}/trial{{trial}}.log",
    conda:
        "../envs/ganstudy.yaml"
    envmodules:
        *config["compute"]["modules"],
    threads: THREADS
    resources:
        mem_mb=2000,
        runtime=15,
    shell:
        "ganstudy evaluate @{input.arguments} --threads {threads} > {log} 2>&1"


for setup, trial in RUNS:
    inputs = evaluate_inputs(SimpleNamespace(setup=setup, trial=trial))
    job_arguments(
        f"evaluate/{setup}/trial{trial}", "--settings", EVALUATION_SETTINGS, "--generator", inputs["generator"],
        "--run-record", inputs["record"], *evaluate_against(inputs), "--seed", config["seed"], "--trial", trial,
        "--out", *expand(rules.evaluate.output, setup=setup, trial=trial), kept=True,
    )
