# Stage 1: data preparation.

if PLAN.inputs.fetched_files():

    rule fetch_dataset:
        output:
            PLAN.inputs.fetched_files(),
        params:
            name=config["dataset"]["name"],
            folder=config["dataset"]["path"],
            mirror=f"--mirror {config['dataset']['mirror']}" if config["dataset"]["mirror"] else "",
        log:
            FOLDER.log("fetch_dataset"),
        conda:
            "../envs/ganstudy.yaml"
        # On the login node: compute nodes usually have no internet.
        localrule: True
        shell:
            "ganstudy fetch --name {params.name} --folder {params.folder} {params.mirror} > {log} 2>&1"


# What decides a stage's outputs (PLAN.files.specs, ganstudy.plan.planned_files), written where missing; a real run rewrites a spec the
# config has changed before any job, so its stage is redone with or without Snakemake's metadata.
rule spec:
    output:
        FOLDER.spec(),
    params:
        content=lambda wildcards: as_json(PLAN.files.specs[wildcards.spec]),
    log:
        FOLDER.log("specs/{spec}"),
    localrule: True
    run:
        Path(output[0]).write_text(f"{params.content}\n")
        Path(log[0]).write_text(f"wrote {output[0]}\n")


# A job's arguments (job_arguments, common.smk), written where missing; a real run writes them before any job.
rule arguments:
    output:
        str(PLAN.files.arguments.path("{job}")),
    params:
        content=lambda wildcards: PLAN.files.arguments.contents[PLAN.files.arguments.path(wildcards.job)],
    log:
        FOLDER.log("arguments/{job}"),
    localrule: True
    run:
        write_text(output[0], params.content)
        Path(log[0]).write_text(f"wrote {output[0]}\n")


rule prepare_dataset:
    input:
        PLAN.inputs.dataset_files(),
        unpack(arguments_inputs("prepare_dataset")),
        spec=PLAN.files.spec_inputs("data"),
    output:
        train=FOLDER.split("train"),
        test=FOLDER.split("test"),
        partitions=FOLDER.split("partitions"),
        manifest=report(
            FOLDER.manifest(),
            caption="../report/manifest.rst",
            category="1. Data",
        ),
    log:
        FOLDER.log("prepare_dataset"),
    conda:
        "../envs/ganstudy.yaml"
    envmodules:
        *COMPUTE["modules"],
    threads: 1
    resources:
        mem_mb=COMPUTE["prepare_mem_mb"],
        runtime=15,
        **PLAN.scheduler_resources,
    shell:
        "ganstudy prepare @{input.arguments} > {log} 2>&1"


job_arguments(rules.prepare_dataset, spec=rules.prepare_dataset.input.spec[0],
              out_dir=os.path.dirname(rules.prepare_dataset.output.manifest), kept=True)


rule anova:
    input:
        unpack(arguments_inputs("anova")),
        split=rules.prepare_dataset.output.train,
    output:
        # In the report once, as Markdown.
        csv=FOLDER.table("anova", "csv"),
        markdown=report(FOLDER.table("anova", "md"), caption="../report/anova.rst", category="1. Data"),
    log:
        FOLDER.log("anova"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy anova @{input.arguments} > {log} 2>&1"


if PLAN.anova:
    job_arguments(rules.anova, split=rules.anova.input.split, csv=rules.anova.output.csv,
                  markdown=rules.anova.output.markdown)
