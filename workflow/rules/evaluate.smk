# Stage 3: the dataset's classifier (FID/IS features; trained, or the user's classifier.weights), real-data
# statistics, scores per run.


rule train_classifier:
    input:
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
    params:
        settings=as_json(CLASSIFIER_SETTINGS),
        seed=config["seed"],
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
        "ganstudy train-classifier --settings {params.settings:q} --train {input.train} --test {input.test}"
        " --seed {params.seed} --model {output.model} --metrics {output.metrics} --threads {threads} > {log} 2>&1"


rule reference_statistics:
    input:
        split=f"{STUDY_DIR}/data/{config['evaluation']['reference_split']}.npz",
        classifier=rules.train_classifier.output.model,
        spec=spec_inputs("reference"),
    output:
        f"{STUDY_DIR}/classifier/reference_stats.npz",
    params:
        # Only the layer: training scores with these statistics, so an evaluation edit (metrics, samples,
        # batch size) must not rewrite them (they are computed in the schema's default batches).
        settings=as_json({"fid_features": config["evaluation"]["fid_features"]}),
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
        "ganstudy reference-stats --settings {params.settings:q} --split {input.split}"
        " --classifier {input.classifier} --out {output} --threads {threads} > {log} 2>&1"


# The real images' statistics in the features of evaluation.extractor when it is a pretrained network.
rule quality_statistics:
    input:
        split=f"{STUDY_DIR}/data/{config['evaluation']['reference_split']}.npz",
        # Data of one class train none: then --classifier is given without a file.
        classifier=rules.train_classifier.output.model if CLASSIFIER else [],
        weights=user_file(PRETRAINED_WEIGHTS),
        spec=spec_inputs("evaluation"),
    output:
        QUALITY_REFERENCE,
    params:
        settings=EVALUATION_SETTINGS,
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
        "ganstudy reference-stats --extractor quality --settings {params.settings:q} --split {input.split}"
        " --classifier {input.classifier} --out {output} --threads {threads} > {log} 2>&1"


rule evaluate:
    input:
        unpack(evaluate_inputs),
    output:
        f"{STUDY_DIR}/scores/{{setup}}/trial{{trial}}.json",
    params:
        settings=EVALUATION_SETTINGS,
        seed=config["seed"],
        against=evaluate_args,
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
        "ganstudy evaluate --settings {params.settings:q} --generator {input.generator}"
        " --run-record {input.record} {params.against}"
        " --seed {params.seed} --trial {wildcards.trial} --out {output} --threads {threads} > {log} 2>&1"
