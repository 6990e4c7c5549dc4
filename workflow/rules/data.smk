# Stage 1: data preparation.

if fetched_files():

    rule fetch_dataset:
        output:
            fetched_files(),
        params:
            name=config["dataset"]["name"],
            folder=config["dataset"]["path"],
            mirror=f"--mirror {config['dataset']['mirror']}" if config["dataset"]["mirror"] else "",
        log:
            f"{LOG_DIR}/fetch_dataset.log",
        conda:
            "../envs/ganstudy.yaml"
        # On the login node: compute nodes usually have no internet.
        localrule: True
        shell:
            "ganstudy fetch --name {params.name} --folder {params.folder} {params.mirror} > {log} 2>&1"


# What decides a stage's outputs (SPECS, common.smk), written where missing; a real run rewrites a spec the
# config has changed before any job, so its stage is redone with or without Snakemake's metadata.
rule spec:
    output:
        f"{STUDY_DIR}/specs/{{spec}}.json",
    params:
        content=lambda wildcards: as_json(SPECS[wildcards.spec]),
    log:
        f"{LOG_DIR}/specs/{{spec}}.log",
    localrule: True
    run:
        Path(output[0]).write_text(f"{params.content}\n")
        Path(log[0]).write_text(f"wrote {output[0]}\n")


# A job's arguments (job_arguments, common.smk), written where missing; a real run writes them before any job.
rule arguments:
    output:
        f"{STUDY_DIR}/arguments/{{job}}.args",
    params:
        content=lambda wildcards: ARGUMENT_FILES.contents[ARGUMENT_FILES.path(wildcards.job)],
    log:
        f"{LOG_DIR}/arguments/{{job}}.log",
    localrule: True
    run:
        write_text(output[0], params.content)
        Path(log[0]).write_text(f"wrote {output[0]}\n")


rule prepare_dataset:
    input:
        dataset_files(),
        unpack(arguments_inputs("prepare_dataset")),
        spec=spec_inputs("data"),
    output:
        train=f"{STUDY_DIR}/data/train.npz",
        test=f"{STUDY_DIR}/data/test.npz",
        partitions=f"{STUDY_DIR}/data/partitions.npz",
        manifest=report(
            f"{STUDY_DIR}/data/manifest.json",
            caption="../report/manifest.rst",
            category="1. Data",
        ),
    log:
        f"{LOG_DIR}/prepare_dataset.log",
    conda:
        "../envs/ganstudy.yaml"
    envmodules:
        *config["compute"]["modules"],
    threads: 1
    resources:
        mem_mb=config["compute"]["prepare_mem_mb"],
        runtime=15,
    shell:
        "ganstudy prepare @{input.arguments} > {log} 2>&1"


job_arguments("prepare_dataset", "--settings", as_json(dataset_settings(config["dataset"])), "--seed", config["seed"],
              "--out-dir", os.path.dirname(rules.prepare_dataset.output.manifest), kept=True)


rule anova:
    input:
        rules.prepare_dataset.output.train,
    output:
        csv=report(f"{STUDY_DIR}/tables/anova.csv", caption="../report/anova.rst", category="1. Data"),
        markdown=report(f"{STUDY_DIR}/tables/anova.md", caption="../report/anova.rst", category="1. Data"),
    log:
        f"{LOG_DIR}/anova.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy anova --split {input} --csv {output.csv} --markdown {output.markdown} > {log} 2>&1"
