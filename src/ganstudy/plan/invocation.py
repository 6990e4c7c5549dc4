"""How Snakemake was started, as far as a study's plan depends on it: a dry-run plans and changes nothing,
a cluster job's own Snakemake plans again without warning twice, and options that build no job (--lint,
--report, ...) read the study and leave it as it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# Snakemake's options that build no job (its command line's actions other than running the workflow): a
# Snakemake started with one reads the study and must change nothing in it. tests/test_study_plan.py checks
# that each is an option of the installed Snakemake, so that a release that renames one fails a test.
NO_JOB_OPTIONS = frozenset(
    {
        *("--report", "--lint", "--list", "-l", "--list-target-rules", "--lt", "--list-rules", "--list-changes"),
        *("--lc", "--list-input-changes", "--li", "--list-params-changes", "--lp", "--list-untracked", "--lu"),
        *("--summary", "-S", "--detailed-summary", "-D", "--dag", "--rulegraph", "--filegraph", "--d3dag"),
        *("--unlock", "--cleanup-metadata", "--cm", "--archive", "--delete-all-output", "--delete-temp-output"),
        *("--touch", "-t", "--containerize", "--export-cwl", "--print-compilation", "--generate-unit-tests"),
        *("--conda-create-envs-only", "--conda-cleanup-envs", "--list-conda-envs", "--cleanup-shadow"),
        *("--container-cleanup-images", "--version", "-v", "--help", "-h"),
    }
)


def builds_jobs(arguments: Sequence[str]) -> bool:
    """Whether a Snakemake started with these command-line ``arguments`` builds and runs jobs (a dry-run
    aside, which Snakemake says itself)."""
    return not {argument.split("=")[0] for argument in arguments} & NO_JOB_OPTIONS


# Snakemake's options that force jobs to run again, which a dry-run then lists with "Forced execution".
FORCE_OPTIONS = frozenset({"-F", "--forceall", "-R", "--forcerun", "-f", "--force"})


def forces_jobs(arguments: Sequence[str]) -> bool:
    """Whether a Snakemake started with these command-line ``arguments`` was told to force jobs."""
    return bool({argument.split("=")[0] for argument in arguments} & FORCE_OPTIONS)


@dataclass(frozen=True)
class Invocation:
    """How the workflow was started, as far as the plan depends on it. ``workflow_dir``: where a site file
    is also looked for; ``main_process``: False in a cluster job's own Snakemake; ``executing``: the run
    builds and runs jobs (not a dry-run, --lint, --report, ...); ``default_resources``: the profile's."""

    workflow_dir: str
    config_files: tuple[str, ...] = ()
    dry_run: bool = False
    main_process: bool = True
    executing: bool = False
    default_resources: Mapping[str, str] = field(default_factory=dict)
    environ: Mapping[str, str] = field(default_factory=dict)
