# ganstudy: one study config -> trained GANs, scores, rank-sum tables, figures, report.
# Run from the repository root:  snakemake --profile local   (or slurm, summit)
from snakemake.utils import min_version

min_version("9.0")


# The embedded default study, unless the command line names a study config: Snakemake would
# otherwise merge the two, and a study's set-ups would silently gain the default ones.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/classifier.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"


# Only a study whose trials are a schedule takes looks between its rounds.
if PLAN.schedule is not None:

    include: "workflow/rules/looks.smk"


include: "workflow/rules/stats.smk"
include: "workflow/rules/report.smk"



# The study's answer (written by the summary step beside summary.md) once it exists, else what the workflow does.
report: PLAN.report_description


# What `ganstudy status` reads to list every run, waiting ones included (not on dry-runs).
onstart:
    write_plan(PLAN.study_dir, config)


# The study's lock goes when the run ends, whatever the executor does with this process afterwards.
# Then where the answer is, and its first lines.
onsuccess:
    release_study_lock(STUDY_LOCK)
    print_headline()


onerror:
    release_study_lock(STUDY_LOCK)


rule all:
    default_target: True
    input:
        rules.tables.input,
        rules.figures.input,
        rules.summary.output,


# Every rule is defined and has recorded its arguments: the lock, and the study's files and runs brought in
# line with the config, before any job (common.smk).
STUDY_LOCK = start_study()
