# Stage 1: data preparation.


rule prepare_dataset:
    input:
        dataset_files(),
    output:
        train=f"{STUDY_DIR}/data/train.npz",
        test=f"{STUDY_DIR}/data/test.npz",
        manifest=report(
            f"{STUDY_DIR}/data/manifest.json",
            caption="../report/manifest.rst",
            category="1. Data",
        ),
    params:
        settings=as_json(config["dataset"]),
        seed=config["seed"],
        out_dir=subpath(output.manifest, parent=True),
    log:
        f"{LOG_DIR}/prepare_dataset.log",
    conda:
        "../envs/ganstudy.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    shell:
        "ganstudy prepare --settings {params.settings:q} --seed {params.seed}"
        " --out-dir {params.out_dir} > {log} 2>&1"
