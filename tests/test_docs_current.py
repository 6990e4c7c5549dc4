"""The pages that quote the default study's run (README.md's caption, docs/first-hour.md, docs/results.md's entry)
were made from the training code as it is: a change to training regenerates them in the same change
(tests/regenerate_docs.py)."""

import shutil

import pytest

import regenerate_docs as docs
from conftest import REPO


@pytest.mark.parametrize("page", docs.PAGES, ids=lambda page: page.name)
def test_each_page_quotes_a_run_of_the_training_code_as_it_is(page):
    stamps = docs.recorded(page.read_text())
    name = page.relative_to(REPO)
    assert len(stamps) == 1, f"{name} holds {len(stamps)} stamps of {docs.COMMAND}, not one"
    now = docs.training_code_sha256()[:12]
    assert stamps[0]["code"] == now, (
        f"{name} quotes a run of the training code {stamps[0]['code']} (commit {stamps[0]['commit']}); the training "
        f"code ({', '.join(docs.TRAINING_CODE)}) is now {now}: run `{docs.COMMAND}` (about 25 minutes on 2 cores, "
        "nothing else running) and commit the pages it rewrites"
    )


def test_the_training_codes_hash_moves_with_each_of_its_files_and_nothing_else(tmp_path):
    for name in docs.TRAINING_CODE:
        source = REPO / name
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        copy = shutil.copytree if source.is_dir() else shutil.copyfile
        copy(source, tmp_path / name)
    assert docs.training_code_sha256(tmp_path) == docs.training_code_sha256()
    # A byte cache and a file outside the training code change nothing.
    (tmp_path / "src/ganstudy/train/__pycache__").mkdir(exist_ok=True)
    (tmp_path / "src/ganstudy/train/__pycache__/run.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "src/ganstudy/stats").mkdir()
    (tmp_path / "src/ganstudy/stats/tests.py").write_text("# the statistics are not training code\n")
    before = docs.training_code_sha256(tmp_path)
    assert before == docs.training_code_sha256()
    for name in docs.TRAINING_CODE:
        path = tmp_path / name
        edited = path if path.is_file() else (sorted(path.rglob("*.py")) or sorted(path.rglob("*.yaml")))[0]
        kept = edited.read_bytes()
        edited.write_bytes(kept + b"\n")
        assert docs.training_code_sha256(tmp_path) != before, f"an edit of {edited.relative_to(tmp_path)}"
        edited.write_bytes(kept)
    # A file renamed is another file: its path is hashed with its bytes.
    moved = tmp_path / "src/ganstudy/models/perceptron.py"
    moved.rename(moved.with_name("perceptron_renamed.py"))
    assert docs.training_code_sha256(tmp_path) != before


def test_a_pages_block_is_rewritten_and_nothing_around_it():
    stamped = docs.stamp("0123456789abcdef", "fedcba9876543210ff")
    page = f"before\n{docs.stamp('aaaa', 'bbbb')}\nold text\n{docs.END}\nafter\n"
    assert docs.with_block(page, "new text\n", stamped) == f"before\n{stamped}\nnew text\n{docs.END}\nafter\n"
    assert docs.recorded(stamped) == [{"commit": "0123456789ab", "code": "fedcba987654"}]
