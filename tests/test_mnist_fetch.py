"""MNIST's IDX files and the fetch step, against a loopback HTTP server serving files the test made."""

import gzip
import hashlib
import http.server
import threading
from functools import partial

import numpy as np
import pytest

from ganstudy.data import sources
from ganstudy.data.fetch import fetch_dataset
from ganstudy.data.loaders import load_mnist
from ganstudy.errors import GanstudyError


def idx_bytes(array: np.ndarray) -> bytes:
    magic = 2049 if array.ndim == 1 else 2051
    header = magic.to_bytes(4, "big") + b"".join(n.to_bytes(4, "big") for n in array.shape)
    return header + array.astype(np.uint8).tobytes()


@pytest.fixture()
def tiny_mnist(tmp_path, monkeypatch):
    """Four gzipped IDX files of a 30+10 image 'MNIST', and a published-checksum table for them."""
    rng = np.random.default_rng(0)
    served = tmp_path / "served"
    served.mkdir()
    arrays = {
        "train-images-idx3-ubyte.gz": rng.integers(0, 256, (30, 28, 28)),
        "train-labels-idx1-ubyte.gz": np.arange(30) % 10,
        "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (10, 28, 28)),
        "t10k-labels-idx1-ubyte.gz": np.arange(10) % 10,
    }
    md5 = {}
    for name, array in arrays.items():
        data = gzip.compress(idx_bytes(array))
        (served / name).write_bytes(data)
        md5[name] = hashlib.md5(data).hexdigest()
    monkeypatch.setitem(sources.SOURCES, "mnist", sources.RemoteFiles(mirrors=("http://127.0.0.1:9/",), md5=md5))
    return served, arrays


@pytest.fixture()
def server(tiny_mnist):
    served, _ = tiny_mnist
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}/"
    httpd.shutdown()
    httpd.server_close()


def test_fetch_downloads_verifies_and_the_loader_reads_every_image(server, tiny_mnist, tmp_path):
    _, arrays = tiny_mnist
    placed = fetch_dataset("mnist", tmp_path / "mnist", mirror=server, timeout=10)
    assert sorted(p.name for p in placed) == sorted(arrays)
    raw = load_mnist(str(tmp_path / "mnist"))
    assert raw.images.shape == (40, 1, 28, 28)
    expected = np.concatenate([arrays["train-images-idx3-ubyte.gz"], arrays["t10k-images-idx3-ubyte.gz"]])
    np.testing.assert_array_equal(np.rint(raw.images[:, 0] * 255).astype(int), expected)
    assert list(raw.labels) == list(np.arange(30) % 10) + list(np.arange(10) % 10)


def test_fetch_refuses_a_tampered_file_and_leaves_nothing(server, tiny_mnist, tmp_path):
    served, _ = tiny_mnist
    (served / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(b"tampered"))
    with pytest.raises(GanstudyError, match=r"t10k-labels-idx1-ubyte.gz.*checksum .* instead of the published"):
        fetch_dataset("mnist", tmp_path / "mnist", mirror=server, timeout=10)
    assert not (tmp_path / "mnist" / "t10k-labels-idx1-ubyte.gz").exists()


def test_without_a_network_fetch_says_what_to_place_where(tiny_mnist, tmp_path):
    with pytest.raises(GanstudyError) as error:
        fetch_dataset("mnist", tmp_path / "mnist", timeout=2)
    message = str(error.value)
    assert f"place these files in {tmp_path / 'mnist'}/" in message
    assert "train-images-idx3-ubyte.gz  (md5 " in message


def test_files_already_in_place_are_kept(server, tiny_mnist, tmp_path):
    fetch_dataset("mnist", tmp_path / "mnist", mirror=server, timeout=10)
    # No server needed the second time: the checksums match.
    fetch_dataset("mnist", tmp_path / "mnist", mirror="http://127.0.0.1:9/", timeout=2)


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("train-images-idx3-ubyte.gz", gzip.compress(idx_bytes(np.zeros(30))), "magic 2049, expected 2051"),
        ("train-images-idx3-ubyte.gz", gzip.compress(idx_bytes(np.zeros((30, 28, 28)))[:-5]), "header promises"),
        ("train-labels-idx1-ubyte.gz", b"\x1f\x8b broken gzip", "unreadable"),
        ("train-labels-idx1-ubyte.gz", gzip.compress(idx_bytes(np.zeros(29))), "30 train images but 29 labels"),
    ],
    # gzip stamps the time into its bytes: ids from them would differ between pytest-xdist's workers.
    ids=["wrong-magic", "truncated", "broken-gzip", "too-few-labels"],
)
def test_corrupt_idx_files_are_named(server, tmp_path, name, content, message):
    folder = tmp_path / "mnist"
    fetch_dataset("mnist", folder, mirror=server, timeout=10)
    (folder / name).write_bytes(content)
    with pytest.raises(GanstudyError, match=message) as error:
        load_mnist(str(folder))
    assert str(folder) in str(error.value)
