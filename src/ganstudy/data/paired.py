"""pix2pix's aligned layout (junyanz/pytorch-CycleGAN-and-pix2pix, data/aligned_dataset.py): a data
root with folders train/, val/ and test/ of images, each an input A (left half) and its target B (right
half) side by side, e.g. the facades set. The folders are the source's own split, kept as is."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ganstudy.data.loaders import (
    DataSet,
    LoadOptions,
    RawDataset,
    check_same_size,
    image_files,
    read_image,
    stack_images,
)
from ganstudy.errors import GanstudyError

FOLDERS = ("train", "val", "test")
DIRECTIONS = ("AtoB", "BtoA")


def load_paired_folder(path: str | None, options: LoadOptions = LoadOptions()) -> RawDataset:
    """Every PNG/JPEG of train/ and of val/ and test/ where present (sorted names), split into halves at
    half the width. AtoB: the generator maps A to B, so conditions = A and images = B; BtoA the reverse.
    Both halves are brought to options.image_size and options.channels alike. One class: labels 0."""
    if options.direction not in DIRECTIONS:
        # The schema refuses other values; this catches a hand-written --settings.
        raise GanstudyError(f"dataset.direction must be one of {', '.join(DIRECTIONS)}, got {options.direction!r}")
    if path is None:
        raise GanstudyError("dataset 'paired_folder' needs dataset.path: the folder holding train/ and test/ (or val/)")
    root = Path(path)
    if not root.is_dir():
        raise GanstudyError(
            f"paired image folder {root} does not exist; set dataset.path to the folder holding train/ and test/"
        )
    present = [name for name in FOLDERS if (root / name).is_dir()]
    if "train" not in present:
        raise GanstudyError(
            f"paired image folder {root} has no train/ folder: put the training pairs in {root / 'train'}"
        )
    if present == ["train"]:
        raise GanstudyError(
            f"paired image folder {root} has train/ but neither test/ nor val/: the test split comes from one of them; "
            f"add a folder {root / 'test'} of pairs"
        )
    files: list[Path] = []
    split: list[str] = []
    for name in present:
        found = image_files(root / name)
        files += found
        split += [name] * len(found)
    decoded = [read_image(file) for file in files]
    for file, pixels in zip(files, decoded):
        # pix2pix cuts at int(w / 2) and lets B be a column wider; halves of one array must match.
        if pixels.shape[2] % 2:
            raise GanstudyError(
                f"{file} is {pixels.shape[2]}x{pixels.shape[1]}: a pair needs an even width, input A on the "
                "left half and target B on the right half"
            )
    if options.image_size is None:
        check_same_size(decoded, files)
    a = stack_images([d[:, :, : d.shape[2] // 2] for d in decoded], options)
    b = stack_images([d[:, :, d.shape[2] // 2 :] for d in decoded], options)
    conditions, images = (a, b) if options.direction == "AtoB" else (b, a)
    return RawDataset(
        images, np.zeros(len(files), dtype=np.int64), str(root), conditions=conditions, split=np.array(split)
    )


PAIRED_FOLDER = DataSet(
    load_paired_folder,
    kind="pairs",
    classes=1,
    provide=(
        "pix2pix's layout: train/ and test/ (or val/) folders of images with the two sides of a pair side by side "
        "(A left, B right); facades: ganstudy fetch --name facades --folder data (it unpacks to data/facades)"
    ),
)
