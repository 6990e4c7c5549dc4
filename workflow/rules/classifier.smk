# Stage 2: what scores are measured with, before any training (a set-up that scores while it trains reads
# them): the data set's classifier (trained, or the user's classifier.weights) and the real images' statistics
# in its features, and those of a pretrained extractor (evaluation.extractor). A scoring job whose extractor is
# a network runs on a GPU where the site has them (ganstudy.plan.scoring_layout).


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
    rules.train_classifier, spec=rules.train_classifier.input.spec[0], train=rules.train_classifier.input.train,
    test=rules.train_classifier.input.test, model=rules.train_classifier.output.model,
    metrics=rules.train_classifier.output.metrics, kept=True,
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
    rules.reference_statistics, spec=rules.reference_statistics.input.spec[0],
    split=rules.reference_statistics.input.split, classifier=rules.reference_statistics.input.classifier,
    out=rules.reference_statistics.output, kept=True,
)


# The real images' statistics in the features of evaluation.extractor when it is a pretrained network.
rule quality_statistics:
    input:
        unpack(arguments_inputs("quality_statistics")),
        split=FOLDER.split(config["evaluation"]["reference_split"]),
        # Data of one class train none: then no --classifier.
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
        rules.quality_statistics, extractor="quality", spec=rules.quality_statistics.input.spec[0],
        split=rules.quality_statistics.input.split, classifier=rules.quality_statistics.input.classifier,
        out=rules.quality_statistics.output, kept=True,
    )
