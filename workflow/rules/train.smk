# Stage 2: training, one job per (set-up, trial). The shell line is MPI-ready: profiles set
# {resources.mpi} to their launcher (mpiexec, srun, jsrun) and distributed modes raise tasks.


rule train:
    input:
        train=rules.prepare_dataset.output.train,
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
        record=f"{STUDY_DIR}/runs/{{setup}}/trial{{trial}}/run.json",
    params:
        settings=setup_settings,
        seed=config["seed"],
        out_dir=subpath(output.record, parent=True),
    log:
        f"{LOG_DIR}/train/{{setup}}/trial{{trial}}.log",
    conda:
        "../envs/ganstudy.yaml"
    threads: THREADS
    resources:
        tasks=1,
        mpi="mpiexec",
        mem_mb=2000,
        runtime=60,
    shell:
        "{resources.mpi} -n {resources.tasks} ganstudy train --setup {wildcards.setup}"
        " --settings {params.settings:q} --train {input.train} --seed {params.seed}"
        " --trial {wildcards.trial} --out-dir {params.out_dir} --threads {threads} > {log} 2>&1"
