# Stage 4: one scoring job per run, against what stage 2 made (classifier.smk) or the held-out split. A
# scoring job whose extractor is a network runs on a GPU where the site has them (ganstudy.plan.scoring_layout);
# its memory and wall time grow with the images it scores.


rule evaluate:
    input:
        unpack(arguments_inputs("evaluate/{setup}/trial{trial}")),
        generator=rules.train.output.generator,
        record=rules.train.output.record,
        # What every run is scored against (PLAN.inputs.scored_against says which this study's metrics need):
        # the classifier and its real statistics, a pretrained extractor's statistics, the reference split for
        # a metric that reads the real images; or, for a kind scored on it, the held-out split (and the
        # pretrained weights its metrics read).
        classifier=PLAN.inputs.scored_with("classifier", rules.train_classifier.output.model),
        reference=PLAN.inputs.scored_with("reference", rules.reference_statistics.output[0]),
        quality=PLAN.inputs.scored_with("quality", rules.quality_statistics.output[0]),
        real=PLAN.inputs.scored_with("real", rules.prepare_dataset.output[config["evaluation"]["reference_split"]]),
        held_out=PLAN.inputs.scored_with("held_out", rules.prepare_dataset.output.test),
        weights=PLAN.inputs.scored_with("weights"),
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
        rules.evaluate, f"evaluate/{setup}/trial{trial}", spec=rules.evaluate.input.spec[0],
        generator=expand(rules.evaluate.input.generator, setup=setup, trial=trial),
        run_record=expand(rules.evaluate.input.record, setup=setup, trial=trial),
        # A kind scored on its held-out split, or one scored by the classifier or a pretrained network: the
        # inputs a study does not read are empty, and left out.
        kind=PLAN.kind.name if rules.evaluate.input.held_out else None, held_out=rules.evaluate.input.held_out,
        classifier=rules.evaluate.input.classifier, reference=rules.evaluate.input.reference,
        quality_reference=rules.evaluate.input.quality, real=rules.evaluate.input.real,
        trial=trial, out=expand(rules.evaluate.output, setup=setup, trial=trial), kept=True,
    )


# The runs' files that the later stages read, as functions of the runs (common.smk: taken).
SCORES = run_paths(rules.evaluate.output[0])
LOSSES = run_paths(rules.train.output.losses)
RUN_FOLDERS = run_paths(os.path.dirname(rules.train.output.record))
# Each run's record and score, targets of the tables: Snakemake redoes a missing file only for a job that
# needs it, so a run archived or deleted by hand would otherwise leave old tables standing.
RESULTS = lambda runs: [*SCORES(runs), *run_paths(rules.train.output.record)(runs)]
