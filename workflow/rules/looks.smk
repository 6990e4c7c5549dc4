# Stage 3b, only where trials are a schedule {first, step, most}: after each round of training and scoring,
# a look (ganstudy.stats.looks) tests the primary metric's comparisons group-sequentially on every trial so
# far. Each look is a checkpoint: the statistics wait for the looks (common.smk, looks_taken), and the next
# round's training and scoring join the plan when a look leaves a comparison open with looks to come. The
# decision rule writes the last look's record and the lists of the runs taken, which the statistics'
# arguments files name: those are set before any look is taken.

checkpoint look:
    input:
        unpack(arguments_inputs("look/look{look}")),
        scores=lambda wildcards: SCORES(PLAN.look_runs(int(wildcards.look))),
    output:
        f"{PLAN.study_dir}/looks/look{{look}}.json",
    log:
        f"{PLAN.log_dir}/looks/look{{look}}.log",
    conda:
        "../envs/ganstudy.yaml"
    localrule: True
    threads: 1
    shell:
        "ganstudy look @{input.arguments} > {log} 2>&1"


for look in range(1, len(PLAN.schedule.looks) + 1):
    job_arguments(
        f"look/look{look}", "--scores", *SCORES(PLAN.look_runs(look)), "--setups", *PLAN.setups, "--metrics", *PLAN.metrics,
        "--schedule", PLAN.schedule.first, PLAN.schedule.step, PLAN.schedule.most, "--look", look,
        "--settings", as_json(config["statistics"]), "--out", *expand(rules.look.output, look=look),
    )


rule decision:
    input:
        lambda wildcards: looks_taken()[1],
    output:
        record=f"{PLAN.study_dir}/looks/decision.json",
        scores=f"{PLAN.study_dir}/looks/scores.args",
        losses=f"{PLAN.study_dir}/looks/losses.args",
        runs=f"{PLAN.study_dir}/looks/runs.args",
    log:
        f"{PLAN.log_dir}/looks/decision.log",
    localrule: True
    run:
        runs = looks_taken()[0]
        write_text(Path(output.record), Path(input[0]).read_text())
        for name, paths in (("scores", SCORES), ("losses", LOSSES), ("runs", RUN_FOLDERS)):
            write_text(Path(getattr(output, name)), "".join(f"{path}\n" for path in paths(runs)))
        Path(log[0]).write_text(f"{input[0]}: {len(runs)} runs taken\n")
