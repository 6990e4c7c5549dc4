# Stage 3: training, one job per (set-up, trial), its ranks started by the site's launcher (mpiexec, srun,
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
        train=run_input("train", rules.prepare_dataset.output.train),
        # What a set-up that scores while it trains scores with (PLAN.inputs.train says which set-ups): the
        # classifier and its real statistics, Inception's statistics for data of one class (whose rule checks
        # the weights), or the held-out split.
        classifier=run_input("classifier", rules.train_classifier.output.model),
        reference=run_input(
            "reference", rules.reference_statistics.output[0] if PLAN.classifier else rules.quality_statistics.output[0]
        ),
        held_out=run_input("held_out", rules.prepare_dataset.output.test),
        job=run_input("job", rules.training_job.output[0]),
        arguments=run_input("arguments", str(PLAN.files.arguments.path("train/{setup}/trial{trial}"))),
        # Where and how the ranks compute: read by training, but no rerun trigger (a new site retrains nothing).
        compute=ancient(rules.compute_options.output[0]),
        # A dry-run lists a run that no longer matches the config by giving it the edited config as an input.
        edited=lambda wildcards: PLAN.edited_run_inputs(wildcards.setup, int(wildcards.trial)),
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
        rules.train, f"train/{setup}/trial{trial}", job=expand(rules.training_job.output, setup=setup),
        compute=PLAN.files.compute_file, trial=trial,
        out_dir=os.path.dirname(expand(rules.train.output.record, setup=setup, trial=trial)[0]),
        checkpoint_dir=PLAN.checkpoint_dir(setup, trial), kept=True,
    )
