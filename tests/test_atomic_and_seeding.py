import hashlib
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from ganstudy.core.atomic import atomic_path, read_json, write_json
from ganstudy.core.checkpoint import FinishedOutputs, checkpoint_due, load_state, run_fingerprint, save_state
from ganstudy.core.seeding import derive_seed


def test_atomic_path_leaves_nothing_when_the_writer_fails(tmp_path):
    target = tmp_path / "sub" / "result.csv"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert not target.exists()
    assert list((tmp_path / "sub").iterdir()) == []


def test_atomic_path_keeps_the_old_file_until_the_new_one_is_complete(tmp_path):
    target = tmp_path / "result.json"
    write_json(target, {"v": 1})
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("{broken")
            raise RuntimeError("killed")
    assert read_json(target) == {"v": 1}


def test_atomic_path_keeps_the_suffix_for_format_sniffing_writers(tmp_path):
    with atomic_path(tmp_path / "figure.png") as tmp:
        assert tmp.suffix == ".png"
        tmp.write_bytes(b"x")
    assert (tmp_path / "figure.png").read_bytes() == b"x"


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_atomic_files_get_the_mode_of_the_user_s_umask_not_mkstemp_s(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        write_json(tmp_path / "run.json", {"v": 1})
        with atomic_path(tmp_path / "weights.npy") as tmp:
            np.save(tmp, np.zeros(3))  # a writer that opens the existing temporary file
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "run.json").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "weights.npy").stat().st_mode) == mode


def test_atomic_files_are_fsynced_before_and_their_folder_after_the_rename(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(
        os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))), real_fsync(fd))[1]
    )
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("rename", str(b))), real_replace(a, b))[1])
    write_json(tmp_path / "out" / "run.json", {"v": 1})
    final = str(tmp_path / "out" / "run.json")
    assert [kind for kind, _ in events] == ["fsync", "rename", "fsync"]
    assert events[0][1].startswith(str(tmp_path / "out" / ".run.json."))  # the temporary file's data
    assert events[1][1] == final and events[2][1] == str(tmp_path / "out")  # then the folder's entry


def test_derived_seeds_are_stable_across_processes_and_distinct_per_stream():
    code = "from ganstudy.core.seeding import derive_seed; print(derive_seed(7, 3, 'noise'))"
    other_process = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert other_process == derive_seed(7, 3, "noise")
    seeds = {derive_seed(7, t, s) for t in range(5) for s in ("init", "noise", "batches")}
    assert len(seeds) == 15
    assert derive_seed(8, 3, "noise") != derive_seed(7, 3, "noise")
    assert all(0 <= s < 2**63 for s in seeds)


def test_seed_keys_must_be_ints_or_strings():
    with pytest.raises(TypeError):
        derive_seed(1, 2.5)
    with pytest.raises(ValueError):
        derive_seed(1, -1)


def test_every_mode_s_checkpoints_follow_one_policy():
    # Every 3rd of 10 iterations, none after the last unless the run keeps its finished state (per-class jobs).
    assert [done for done in range(1, 11) if checkpoint_due(done, 10, 3)] == [3, 6, 9]
    assert [done for done in range(1, 10) if checkpoint_due(done, 9, 3)] == [3, 6]
    assert [done for done in range(1, 10) if checkpoint_due(done, 9, 3, final=True)] == [3, 6, 9]
    assert not any(checkpoint_due(done, 10, 0) for done in range(1, 11)) and checkpoint_due(10, 10, 0, final=True)
    # The fingerprint is the sha256 of the identity as sorted JSON, whatever the order it was built in:
    # checkpoints written before this policy was shared still resume.
    assert (
        run_fingerprint({"seed": 2, "setup": {"lr": 0.5}})
        == hashlib.sha256(b'{"seed": 2, "setup": {"lr": 0.5}}').hexdigest()
    )
    assert run_fingerprint({"setup": {"lr": 0.5}, "seed": 2}) == run_fingerprint({"seed": 2, "setup": {"lr": 0.5}})


def test_a_finished_run_s_outputs_replace_its_checkpoints_and_come_back_only_to_the_same_run(tmp_path):
    out, folder = tmp_path / "run", tmp_path / "ckpt"
    (folder / "iter-000004").mkdir(parents=True)
    (folder / "iter-000004" / "COMPLETE").write_text("{}")
    (folder / "elapsed.json").write_text("{}")
    (out / "cells").mkdir(parents=True)
    files = {"run.json": b"{}", "generator.pt": b"weights", "cells/0-0.csv": b"a,b"}
    for name, data in files.items():
        (out / name).write_bytes(data)
    identity = {"now": "one"}
    finished = FinishedOutputs(folder, lambda: identity["now"])
    finished.keep(out)
    assert sorted(path.name for path in folder.iterdir()) == ["finished"]
    # Links, not copies: keeping a finished run costs no disk.
    assert all((folder / "finished" / name).stat().st_ino == (out / name).stat().st_ino for name in files)
    # As Snakemake leaves an incomplete job's folder before it runs the job again.
    for name in files:
        (out / name).unlink()
    identity["now"] = "another"
    assert not finished.restore(out) and not (out / "run.json").exists()
    identity["now"] = "one"
    assert finished.restore(out)
    assert {name: (out / name).read_bytes() for name in files} == files
    # A file missing from the kept set: the run trains again, it does not come back in part.
    (folder / "finished" / "generator.pt").unlink()
    (out / "run.json").unlink()
    assert not finished.restore(out) and not (out / "run.json").exists()


def test_the_same_state_saved_twice_gives_the_same_bytes(tmp_path):
    # Saved through a randomly named temporary file, torch used to name the archive's records after it.
    import torch

    state = {"weights": torch.arange(6.0).reshape(2, 3), "name": "g"}
    save_state(tmp_path / "a.pt", state)
    save_state(tmp_path / "b.pt", state)
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
    assert torch.equal(load_state(tmp_path / "b.pt", "rerun")["weights"], state["weights"])
