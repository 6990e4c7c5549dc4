import subprocess

from ganstudy.profiles import install_profiles

from conftest import REPO


def test_profiles_are_linked_by_name(tmp_path):
    messages = install_profiles(REPO / "profiles", tmp_path)
    assert (tmp_path / "local").resolve() == (REPO / "profiles" / "local").resolve()
    assert any("linked" in m for m in messages)
    # Idempotent.
    assert all("already linked" in m for m in install_profiles(REPO / "profiles", tmp_path))


def test_a_users_own_profile_is_never_replaced(tmp_path):
    mine = tmp_path / "local"
    mine.mkdir()
    (mine / "config.yaml").write_text("cores: 1\n")
    messages = install_profiles(REPO / "profiles", tmp_path)
    assert not mine.is_symlink() and (mine / "config.yaml").read_text() == "cores: 1\n"
    assert any("kept your existing" in m and "local" in m for m in messages)


def test_a_dangling_link_from_a_deleted_clone_is_replaced(tmp_path):
    (tmp_path / "local").symlink_to(tmp_path / "gone")
    install_profiles(REPO / "profiles", tmp_path)
    assert (tmp_path / "local").resolve() == (REPO / "profiles" / "local").resolve()


def test_snakemake_finds_the_profile_by_name_from_the_repo_root(tmp_path, env):
    env = {**env, "XDG_CONFIG_HOME": str(tmp_path)}
    subprocess.run(["ganstudy", "install-profiles", "profiles"], cwd=REPO, env=env, check=True, capture_output=True)
    done = subprocess.run(
        ["snakemake", "--profile", "local", "-n", "--forceall"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Using profile local" in done.stderr
    # printshellcmds comes from our profile: without it a dry-run shows no shell lines.
    assert "mpiexec -n 1 ganstudy train" in done.stdout


def test_user_errors_print_one_line_without_traceback(tmp_path, env):
    done = subprocess.run(
        ["ganstudy", "prepare", "--settings", '{"name": "npz", "path": "missing.npz", "test_fraction": 0.2}',
         "--seed", "1", "--out-dir", str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "ganstudy prepare: error: dataset file missing.npz does not exist; set dataset.path to an existing .npz file"
    )


def test_validate_config_command(tmp_path, env):
    bad = tmp_path / "study.yaml"
    bad.write_text("study: x\nsetups:\n  a:\n    batchsize: 10\n")
    done = subprocess.run(
        ["ganstudy", "validate-config", str(bad), "--schema", str(REPO / "workflow/schemas/config.schema.yaml")],
        capture_output=True, text=True, env=env,
    )
    assert done.returncode == 2
    assert "unknown key 'setups.a.batchsize' (did you mean 'batch_size'?)" in done.stderr
