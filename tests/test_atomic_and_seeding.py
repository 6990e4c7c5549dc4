import subprocess
import sys

import pytest

from ganstudy.atomic import atomic_path, read_json, write_json
from ganstudy.seeding import derive_seed


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


def test_derived_seeds_are_stable_across_processes_and_distinct_per_stream():
    code = "from ganstudy.seeding import derive_seed; print(derive_seed(7, 3, 'noise'))"
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
