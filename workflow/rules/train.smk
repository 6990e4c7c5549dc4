# Stage 2: training, one job per (set-up, trial), its ranks started by the site's launcher (mpiexec, srun,
# jsrun: profiles/<name>/site.yaml). Its ranks (the resource tasks) follow the set-up, its nodes, GPUs,
# memory and wall time the site (ganstudy.plan.layout: grid one rank per cell, per_class one per class, up to
# compute.max_ranks; data_parallel max_ranks; memory from the training split, ganstudy.resources). The
# scheduler signals the job wall_warning_minutes before its limit: it checkpoints, exits 75, and the
# profile's retry resumes it with more wall time.


rule training_job:
    output:
        f"{STUDY_DIR}/jobs/{{setup}}.json",
    params:
        # Canonical JSON: the order of a set-up's keys in the config is no change.
        job=lambda wildcards: as_json(JOBS[wildcards.setup]),
    log:
        f"{LOG_DIR}/jobs/{{setup}}.log",
    localrule: True
    run:
        write_job(output[0], json.loads(params.job))
        Path(log[0]).write_text(f"wrote {output[0]}\n")


rule compute_options:
    output:
        COMPUTE_FILE,
    params:
        compute=as_json(COMPUTE_OPTIONS),
    log:
        f"{LOG_DIR}/site/compute.log",
    localrule: True
    run:
        Path(output[0]).write_text(f"{params.compute}\n")
        Path(log[0]).write_text(f"wrote {output[0]}\n")


rule train:
    input:
        unpack(train_rule_inputs),
    output:
        generator=f"{STUDY_DIR}/runs/{{setup}}/trial{{trial}}/generator.pt",
        losses=f"{STUDY_DIR}/runs/{{setup}}/trial{{trial}}/losses.csv",
        samples=report(
            f"{STUDY_DIR}/runs/{{setup}}/trial{{trial}}/samples.png",
            caption="../report/samples.rst",
            category="3. Samples",
            subcategory="{setup}",
            labels={"set-up": "{setup}", "trial": "{trial}"},
        ),
        profile=f"{STUDY_DIR}/runs/{{setup}}/trial{{trial}}/profile.csv",
        record=f"{STUDY_DIR}/runs/{{setup}}/trial{{trial}}/run.json",
    params:
        launch=mpi_launch,
    log:
        f"{LOG_DIR}/train/{{setup}}/trial{{trial}}.log",
    conda:
        "../envs/ganstudy.yaml"
    threads: setup_threads
    priority: train_priority
    envmodules:
        *config["compute"]["modules"],
    resources:
        tasks=setup_ranks,  # Snakemake's name for the MPI ranks of a job (sbatch --ntasks)
        nodes=setup_nodes,
        cpus_per_task=THREADS,
        mpi=train_mpi,
        gpu=train_gpus,
        mem_mb=train_memory,
        runtime=train_runtime,
        wall_warning_minutes=config["compute"]["wall_warning_minutes"],
        **TRAIN_RESOURCES,
    shell:
        "{params.launch} ganstudy train @{input.arguments} > {log} 2>&1"


for setup, trial in RUNS:
    job_arguments(
        f"train/{setup}/trial{trial}", expand(rules.training_job.output, setup=setup)[0], "--compute", COMPUTE_FILE,
        "--trial", trial, "--out-dir", os.path.dirname(expand(rules.train.output.record, setup=setup, trial=trial)[0]),
        "--checkpoint-dir", checkpoint_dir(SimpleNamespace(setup=setup, trial=trial)), kept=True,
    )
