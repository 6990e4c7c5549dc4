"""The cluster profiles by name: Snakemake looks a --profile name up in the working directory before the
user's config folder, and the repository root links each name to profiles/<name>. So the names work in any
clone without touching the home folder, whatever it holds. And the `ganstudy` command as a person meets
it: a help that fits a screen, its version, any working directory."""

import re
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.parametrize("name", ["local", "slurm", "summit"])
def test_each_profile_name_at_the_root_is_its_folder_under_profiles(name):
    link = REPO / name
    assert link.is_symlink() and link.resolve() == (REPO / "profiles" / name).resolve()


def test_a_dangling_link_in_the_home_folder_does_not_hide_the_repository_s_profile(tmp_path, env):
    # What a deleted clone used to leave behind: ~/.config/snakemake/summit pointing nowhere.
    config = tmp_path / "config" / "snakemake"
    config.mkdir(parents=True)
    (config / "summit").symlink_to(tmp_path / "deleted-clone" / "profiles" / "summit")
    env = {**env, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    done = subprocess.run(
        ["snakemake", "--profile", "summit", "-n", "--forceall", "--config", f"results_dir={tmp_path / 'results'}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"Using profiles? summit\b", done.stderr)
    # The summit profile's launcher and printshellcmds: the repository's profile was used.
    assert "jsrun -n 1 -r 6 -a 1 -c 7 -g 1 -b packed:7 ganstudy train" in done.stdout


def test_another_clone_s_profile_in_the_home_folder_is_not_used(tmp_path, env):
    other = tmp_path / "config" / "snakemake" / "local"
    other.mkdir(parents=True)
    (other / "config.yaml").write_text("cores: 1\nprintshellcmds: false\n")
    env = {**env, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    done = subprocess.run(
        ["snakemake", "--profile", "local", "-n", "--forceall", "--config", f"results_dir={tmp_path / 'results'}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "mpiexec -n 1 ganstudy train" in done.stdout


def test_the_help_fits_a_screen_and_names_every_command(env):
    from ganstudy.cli import build_parser

    done = subprocess.run(["ganstudy", "--help"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) <= 30, done.stdout
    listed, steps = done.stdout.split("workflow steps")
    persons = ("status", "validate-config", "plan-trials", "scoring-noise", "placement", "export", "config-reference")
    for command in (*persons, "fetch"):
        assert re.search(rf"^    {command}\b", listed, re.MULTILINE), command
    # The workflow's steps: named in the second group, each still a command with its own help.
    commands = build_parser()._subparsers._group_actions[0].choices
    named = set(re.findall(r"[a-z][a-z-]+", steps.split(":", 1)[1]))
    assert named == set(commands) - {*persons, "fetch"}
    for step in ("train", "evaluate", "sweep-stats"):
        assert subprocess.run(["ganstudy", step, "--help"], capture_output=True, env=env).returncode == 0


def test_version_names_the_package_version_and_the_commit(env, tmp_path):
    import ganstudy

    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    done = subprocess.run(["ganstudy", "--version"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ganstudy {ganstudy.__version__} (git {commit[:12]}"), done.stdout


def test_validate_config_works_from_any_directory(env, tmp_path):
    done = subprocess.run(
        ["ganstudy", "validate-config", str(REPO / "config" / "config.yaml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "valid; study 'digits_grid' with set-ups grid1x1, grid2x2" in done.stdout


def test_no_tracked_link_dangles():
    # A dangling link inside a profile folder travels with every site copy of it.
    listed = subprocess.run(["git", "ls-files", "-s"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    links = [line.split("\t", 1)[1] for line in listed.splitlines() if line.startswith("120000 ")]
    assert links, "the root's profile links are tracked links"
    assert [link for link in links if not (REPO / link).exists()] == []


def test_a_step_that_dies_by_a_signal_leaves_its_python_stack_in_the_log(env):
    # A handler that aborts the process as a C++ std::terminate in a torch or MPI thread would.
    script = (
        "import argparse, importlib, os, sys\n"
        "main = importlib.import_module('ganstudy.cli.main')\n"
        "def abort_here(args):\n"
        "    os.abort()\n"
        "parser = main.build_parser()\n"
        "parser.parse_args = lambda argv: argparse.Namespace(command='train', handler=abort_here)\n"
        "main.build_parser = lambda: parser\n"
        "sys.exit(main.main([]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0
    assert "Fatal Python error: Aborted" in done.stderr, done.stderr
    assert "abort_here" in done.stderr, done.stderr


def test_a_step_s_spec_file_that_is_missing_or_not_its_stage_s_is_named(tmp_path, capsys):
    from ganstudy.cli.main import main

    evaluate = ["evaluate", "--generator", "g.pt", "--run-record", "run.json", "--trial", "0", "--out", "s.json"]
    with pytest.raises(SystemExit):
        main([*evaluate, "--spec", str(tmp_path / "evaluation.json")])
    assert f"argument --spec: cannot read the spec file {tmp_path / 'evaluation.json'}" in capsys.readouterr().err
    # The reference statistics' spec (the layer, no seed) given to a step that draws from the study seed.
    (tmp_path / "reference.json").write_text('{"fid_features": "logits"}')
    with pytest.raises(SystemExit):
        main([*evaluate, "--spec", str(tmp_path / "reference.json")])
    assert (
        f"{tmp_path / 'reference.json'} is not a spec file of this step: it must be a JSON object with the evaluation "
        "settings and the study's seed"
    ) in capsys.readouterr().err


@pytest.mark.parametrize("step", ["stats", "look", "summary", "reproduction"])
def test_a_statistics_step_run_by_hand_takes_the_schema_s_defaults_for_what_it_is_not_given(step):
    from ganstudy.cli.main import build_parser
    from ganstudy.config.schema import CONFIG_SCHEMA
    from ganstudy.config.validate import validate_study_config
    from ganstudy.stats.settings import StatisticsSettings

    parser = build_parser()
    required = [
        option
        for action in parser._subparsers._group_actions[0].choices[step]._actions
        if action.required
        for option in (
            action.option_strings[-1],
            {"--schedule": "8,2,10", "--references": "{}"}.get(action.option_strings[-1], "1"),
        )
    ]
    args = parser.parse_args([step, *required])
    defaults = validate_study_config({}, CONFIG_SCHEMA)["statistics"]
    assert args.settings == {} and StatisticsSettings.of(args.settings) == StatisticsSettings.of(defaults)
    given = parser.parse_args([step, *required, "--settings", '{"digits": 3}'])
    assert StatisticsSettings.of(given.settings).digits == 3
