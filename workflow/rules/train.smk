# Stage 2: training, one job per (set-up, trial), its ranks started by the site's launcher (mpiexec, srun,
# jsrun: profiles/<name>/site.yaml). Its ranks (the resource tasks) follow the set-up, its nodes, GPUs,
# memory and wall time the site (ganstudy.plan.layout: grid one rank per cell, per_class one per class, up to
# compute.max_ranks; data_parallel max_ranks; memory from the training split, ganstudy.core.resources). The
# scheduler signals the job wall_warning_minutes before its limit: it checkpoints, exits 75, and the
# profile's retry resumes it with more wall time.


rule training_job:
    output:
        FOLDER.training_job(),
    params:
        # Canonical JSON: the order of a set-up's keys in the config is no change.
        job=lambda wildcards: as_json(PLAN.jobs[wildcards.setup]),
    log:
        FOLDER.log("jobs/{setup}"),
    localrule: True
    run:
        write_job(output[0], json.loads(params.job))
        Path(log[0]).write_text(f"wrote {output[0]}\n")


rule compute_options:
    output:
        PLAN.files.compute_file,
    params:
        compute=as_json(PLAN.files.compute_options),
    log:
        FOLDER.log("site/compute"),
    localrule: True
    run:
        Path(output[0]).write_text(f"{params.compute}\n")
        Path(log[0]).write_text(f"wrote {output[0]}\n")


rule train:
    input:
        # common.smk: the prepared split, the in-training scorer's files, the job file, compute options, arguments.
        unpack(training_inputs),
    output:
        generator=FOLDER.run_file("generator.pt"),
        losses=FOLDER.run_file("losses.csv"),
        samples=report(
            FOLDER.run_file("samples.png"),
            caption="../report/samples.rst",
            category="3. Samples",
            subcategory="{setup}",
            labels={"set-up": "{setup}", "trial": "{trial}"},
        ),
        profile=FOLDER.run_file("profile.csv"),
        record=FOLDER.run_file("run.json"),
    params:
        launch=lambda wildcards, resources: Untracked(PLAN.launch_line(resources.tasks)),
    log:
        FOLDER.train_log(),
    conda:
        "../envs/ganstudy.yaml"
    threads: lambda wildcards: setup_ranks(wildcards) * PLAN.threads
    priority: lambda wildcards: PLAN.train_priority(wildcards.setup, wildcards.trial)
    envmodules:
        *COMPUTE["modules"],
    resources:
        tasks=setup_ranks,  # Snakemake's name for the MPI ranks of a job (sbatch --ntasks)
        nodes=lambda wildcards: PLAN.layout.nodes(setup_ranks(wildcards)),
        cpus_per_task=PLAN.threads,
        # The launcher for a job of several ranks: Snakemake's Slurm plugin asks sbatch for --ntasks only
        # where mpi is set, and refuses an MPI job of one task.
        mpi=lambda wildcards: PLAN.site["launcher"] if setup_ranks(wildcards) > 1 else "",
        gpu=lambda wildcards: setup_ranks(wildcards) * PLAN.layout.gpus_per_rank,
        mem_mb=train_memory,
        runtime=lambda wildcards, attempt: PLAN.layout.runtime_minutes(attempt),
        wall_warning_minutes=COMPUTE["wall_warning_minutes"],
        **PLAN.train_resources,
    shell:
        "{params.launch} ganstudy train @{input.arguments} > {log} 2>&1"


for setup, trial in PLAN.runs:
    job_arguments(
        f"train/{setup}/trial{trial}", expand(rules.training_job.output, setup=setup)[0], "--compute", PLAN.files.compute_file,
        "--trial", trial, "--out-dir", os.path.dirname(expand(rules.train.output.record, setup=setup, trial=trial)[0]),
        "--checkpoint-dir", PLAN.checkpoint_dir(setup, trial), kept=True,
    )
