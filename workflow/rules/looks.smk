# Stage 3b, only where trials are a schedule {first, step, most}: after each round of training and scoring,
# a look (ganstudy.stats.looks) tests the primary metric's comparisons group-sequentially on every trial so
# far. Each look is a checkpoint: the statistics wait for the looks (common.smk, looks_taken), and the next
# round's training and scoring join the plan when a look leaves a comparison open with looks to come, for the
# set-ups that have not stopped taking rounds (look_runs: the previous look's record says which). The
# decision rule writes the last look's record and the lists of the runs taken, which the statistics'
# arguments files name: those are set before any look is taken.


checkpoint look:
    input:
        unpack(arguments_inputs("look/look{look}")),
        scores=lambda wildcards: SCORES(look_runs(int(wildcards.look))),
    output:
        FOLDER.look(),
    log:
        FOLDER.log("looks/look{look}"),
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy look @{input.arguments} --scores {input.scores:q} > {log} 2>&1"


for look in range(1, len(PLAN.schedule.looks) + 1):
    job_arguments(
        rules.look, f"look/look{look}", setups=PLAN.setups, metrics=PLAN.metrics, schedule=PLAN.schedule.to_json(),
        look=look, seed=config["seed"], settings=as_json(config["statistics"]), out=expand(rules.look.output, look=look),
    )


# The runs' files that rule decision lists, by its outputs' names.
TAKEN = {"scores": SCORES, "losses": LOSSES, "runs": RUN_FOLDERS}


rule decision:
    input:
        lambda wildcards: looks_taken()[1],
    output:
        record=FOLDER.decision(),
        scores=FOLDER.taken("scores"),
        losses=FOLDER.taken("losses"),
        runs=FOLDER.taken("runs"),
    log:
        FOLDER.log("looks/decision"),
    localrule: True
    run:
        from ganstudy.stats.looks import write_taken  # pandas and scipy: only where the decision is made

        write_taken(input[0], output, {name: TAKEN[name](looks_taken()[0]) for name in TAKEN}, log[0])
