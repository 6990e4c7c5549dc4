# Stage 2: training, one job per (set-up, trial). Profiles set {resources.mpi} to their launcher
# (mpiexec, srun, jsrun); tasks follows the set-up (grid: one rank per cell, per_class: one per class,
# up to compute.max_ranks; data_parallel: max_ranks), nodes, GPUs and the jsrun geometry follow
# compute.node_cores/node_gpus/gpus_per_rank, memory the training split (ganstudy.resources). The
# scheduler signals the job wall_warning_minutes before its limit: it checkpoints, exits 75, and the
# profile's retry resumes it with more wall time.


rule train:
    input:
        unpack(train_inputs),
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
        settings=setup_settings,
        seed=config["seed"],
        out_dir=subpath(output.record, parent=True),
        scoring=scoring_args,
        # Outside the declared outputs: Snakemake must not delete them with a failed job.
        checkpoints=lambda wildcards: f"{STUDY_DIR}/checkpoints/{wildcards.setup}/trial{wildcards.trial}",
        rank_threads=THREADS,
        launch=mpi_launch,
        compute=compute_args(),
    log:
        f"{LOG_DIR}/train/{{setup}}/trial{{trial}}.log",
    conda:
        "../envs/ganstudy.yaml"
    threads: setup_threads
    priority: train_priority
    envmodules:
        *config["compute"]["modules"],
    resources:
        tasks=setup_tasks,
        nodes=setup_nodes,
        cpus_per_task=THREADS,
        mpi="mpiexec",
        gpu=train_gpus,
        # Otherwise the Slurm plugin adds --ntasks-per-gpu=<tasks>; srun binds the GPUs per task instead.
        tasks_per_gpu=0,
        mem_mb=train_memory,
        runtime=train_runtime,
        slurm_extra=f"--signal=USR1@{WARNING_SECONDS}",
        wall_warning_minutes=config["compute"]["wall_warning_minutes"],
    shell:
        "{params.launch} ganstudy train --setup {wildcards.setup}"
        " --settings {params.settings:q} --train {input.train} --seed {params.seed}"
        " --trial {wildcards.trial} --out-dir {params.out_dir} {params.scoring} --checkpoint-dir {params.checkpoints}"
        " {params.compute} --threads {params.rank_threads} > {log} 2>&1"
