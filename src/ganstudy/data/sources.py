"""Published files of the standard data sets: names, checksums and where they are served."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteFiles:
    mirrors: tuple[str, ...]
    # file name -> published MD5; None where nothing is published: fetch then records the sha256 it got.
    md5: dict[str, str | None]
    # A tar archive that fetch unpacks beside itself, for loaders that read the unpacked files.
    extract: bool = False


SOURCES: dict[str, RemoteFiles] = {
    "mnist": RemoteFiles(
        mirrors=("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"),
        md5={
            "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
            "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
            "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
            "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
        },
    ),
    "fashion_mnist": RemoteFiles(
        mirrors=(
            "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
            "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
        ),
        md5={
            "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
            "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
            "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
            "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
        },
    ),
    # One archive each; the loaders read the pickled batches straight out of it.
    "cifar10": RemoteFiles(
        mirrors=("https://www.cs.toronto.edu/~kriz/",),
        md5={"cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a"},
    ),
    "cifar100": RemoteFiles(
        mirrors=("https://www.cs.toronto.edu/~kriz/",),
        md5={"cifar-100-python.tar.gz": "eb9058c3a382ffc7106e4002c42a8d85"},
    ),
    # pix2pix's facades, from the URL of the original's datasets/download_pix2pix_dataset.sh, which
    # publishes no checksum. It unpacks to facades/{train,val,test}: dataset.path (loader paired_folder)
    # points there.
    "facades": RemoteFiles(
        mirrors=("http://efrosgans.eecs.berkeley.edu/pix2pix/datasets/",),
        md5={"facades.tar.gz": None},
        extract=True,
    ),
}
