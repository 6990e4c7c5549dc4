"""Registered data sets: each a ``DataSet`` whose loader, ``load(path, options)``, returns images as
float32 (N, C, H, W) in [0, 1] and int64 labels. Only the image folders, whose files differ, read the
options themselves; prepare_dataset brings every other set to the configured size and channels afterwards."""

from __future__ import annotations

import gzip
import io
import pickle
import tarfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ganstudy.config.typed import FrozenMapping
from ganstudy.contracts import ClassCounter, Loader
from ganstudy.data.conform import conform
from ganstudy.data.kinds import get_kind
from ganstudy.errors import GanstudyError
from ganstudy.registry import Registry, keeping


@dataclass(frozen=True)
class RawDataset:
    images: np.ndarray  # float32 (N, C, H, W) in [0, 1]
    labels: np.ndarray  # int64 (N,), classes 0..K-1
    source: str
    class_names: tuple[str, ...] | None = None
    # float32 (N, C, H, W) in [0, 1]: what a paired generator maps from, row for row; None for noise GANs.
    conditions: np.ndarray | None = None
    # "train" / "val" / "test" per row where the source splits its images itself; None: prepare splits.
    split: np.ndarray | None = None
    # Data in the model's own units (calorimeter showers, scaled GeV), images and conditions both: prepare
    # neither resizes them nor brings them to [-1, 1].
    native_units: bool = False


@dataclass(frozen=True)
class LoadOptions:
    """How images are delivered: square side in pixels and channels (None = as stored), for paired sets
    which half of a pair is the generator's input (AtoB: the left half A), and the data set's own
    options (dataset.options, checked against DataSet.options with its defaults filled in)."""

    image_size: int | None = None
    channels: int | None = None
    direction: str = "AtoB"
    dataset_options: Mapping[str, Any] = field(default_factory=FrozenMapping)


@dataclass(frozen=True)
class DataSet:
    """A data set a study names: its loader, the kind of its data (ganstudy.data.kinds: what trains and
    scores on it) and its number of classes where that is known before it is read (per-class set-ups
    are sized by it while the workflow plans; None: counted once read, and such a set-up names its ranks)."""

    load: Loader
    kind: str = "images"
    classes: int | None = None
    # What the user puts at dataset.path, and where to get it: said while the workflow plans a study whose
    # data are not there yet (empty: the data ship with a package or are fetched by the workflow).
    provide: str = ""
    # The images' (C, H, W) as stored, where known before reading: the workflow checks each set-up's
    # network against it (after dataset.image_size and channels) while it plans.
    image_shape: tuple[int, int, int] | None = None
    # Images as stored, where known before reading and split by dataset.test_fraction: the workflow
    # refuses a batch larger than the training split while it plans.
    images: int | None = None
    # The number of classes at dataset.path, told without reading the data (an image folder's subfolders),
    # for a data set whose entry cannot declare it: the workflow sizes per-class set-ups by it and refuses
    # what needs several classes on data of one, while it plans.
    count_classes: ClassCounter | None = None
    # A JSON schema of dataset.options (None: the data set takes none); unnamed keys are refused unless it
    # says otherwise.
    options: dict[str, Any] | None = None

    def classes_at(self, path: str | None) -> int | None:
        """The data's classes where known before they are read: declared, or counted at ``path``."""
        if self.classes is not None:
            return self.classes
        if self.count_classes is None or path is None or not Path(path).exists():
            return None
        return self.count_classes(path)

    def read(self, name: str, path: str | None, options: LoadOptions) -> RawDataset:
        """The loader's data, checked against the contract, so that a plugin's loader that breaks it is
        named here and not by a shape error deep in training."""
        raw = self.load(path, options)
        problem = _contract_problem(raw, self, get_kind(self.kind).conditions)
        if problem:
            raise GanstudyError(
                f"data set '{name}' (loader {getattr(self.load, '__module__', '?')}."
                f"{getattr(self.load, '__qualname__', self.load)}) {problem}; fix its loader"
            )
        return raw


def _contract_problem(raw: object, data_set: DataSet, conditions: bool) -> str | None:
    if not isinstance(raw, RawDataset):
        return f"returned {type(raw).__name__}, not a RawDataset"
    images, labels = raw.images, raw.labels
    if not isinstance(images, np.ndarray) or images.dtype != np.float32 or images.ndim < 4:
        got = f"{getattr(images, 'dtype', type(images).__name__)} {getattr(images, 'shape', '')}"
        return f"returned images of {got}, not float32 (N, C, H, W)"
    if not isinstance(labels, np.ndarray) or labels.dtype != np.int64 or labels.shape != images.shape[:1]:
        got = f"{getattr(labels, 'dtype', type(labels).__name__)} {getattr(labels, 'shape', '')}"
        return f"returned labels of {got}, not {len(images)} int64"
    if labels.size and (labels.min() < 0 or (data_set.classes is not None and labels.max() >= data_set.classes)):
        return (
            f"returned labels {labels.min()}..{labels.max()}, outside its declared classes "
            f"0..{(data_set.classes or 0) - 1}"
        )
    if conditions != (raw.conditions is not None):
        have = "no conditions" if raw.conditions is None else "conditions"
        return f"returned {have}, but its kind '{data_set.kind}' {'has' if conditions else 'has none'}"
    if raw.conditions is not None and len(raw.conditions) != len(images):
        return f"returned {len(raw.conditions)} condition rows for {len(images)} images"
    return None


DATASETS: Registry[DataSet] = Registry(
    "data set", "ganstudy.datasets", keeping(DataSet, load=Loader, count_classes=ClassCounter)
)


def get_dataset(name: str) -> DataSet:
    return DATASETS.get(name)


def load_digits(path: str | None = None, options: LoadOptions = LoadOptions()) -> RawDataset:
    """scikit-learn's embedded 8x8 digits: grey levels 0..16, so no download is ever needed."""
    if path is not None:
        raise GanstudyError("dataset 'digits' is embedded in scikit-learn; remove dataset.path from the config")
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    images = (bunch.images.astype(np.float32) / 16.0)[:, None, :, :]
    return RawDataset(images, bunch.target.astype(np.int64), "sklearn.datasets.load_digits")


def load_npz(path: str | None, options: LoadOptions = LoadOptions()) -> RawDataset:
    """A user's arrays: 'images' (N,H,W or N,C,H,W; uint8 0-255 or float 0-1) and 'labels' (N ints)."""
    if path is None:
        raise GanstudyError("dataset 'npz' needs dataset.path: the .npz file with arrays 'images' and 'labels'")
    file = Path(path)
    if not file.is_file():
        raise GanstudyError(f"dataset file {file} does not exist; set dataset.path to an existing .npz file")
    try:
        with np.load(file, allow_pickle=False) as arrays:
            missing = {"images", "labels"} - set(arrays.files)
            if missing:
                raise GanstudyError(f"{file} lacks array(s) {sorted(missing)}; it has {sorted(arrays.files)}")
            images, labels = arrays["images"], arrays["labels"]
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise GanstudyError(f"{file} is not a readable .npz file ({exc})") from None
    if images.ndim == 3:
        images = images[:, None]
    if images.ndim != 4 or images.shape[1] not in (1, 3):
        raise GanstudyError(f"{file}: 'images' must have shape (N,H,W) or (N,C,H,W) with C 1 or 3, got {images.shape}")
    if labels.shape != (images.shape[0],) or not np.issubdtype(labels.dtype, np.integer):
        raise GanstudyError(f"{file}: 'labels' must be {images.shape[0]} integers, got {labels.dtype} {labels.shape}")
    if labels.min() < 0:
        raise GanstudyError(f"{file}: labels must be 0 or more, found {labels.min()}")
    if images.dtype == np.uint8:
        images = images.astype(np.float32) / 255.0
    else:
        images = images.astype(np.float32)
        if images.min() < 0 or images.max() > 1:
            raise GanstudyError(f"{file}: float images must lie in [0, 1], found [{images.min()}, {images.max()}]")
    return RawDataset(images, labels.astype(np.int64), str(file))


def _read_idx(path: Path, magic: int, dims: int) -> np.ndarray:
    """An IDX file (the MNIST format): big-endian magic and sizes, then unsigned bytes; gzip or plain."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            raw = handle.read()
    except (OSError, EOFError) as exc:
        raise GanstudyError(f"{path} is unreadable ({exc}); fetch it again") from None
    header = 4 + 4 * dims
    found = int.from_bytes(raw[:4], "big") if len(raw) >= 4 else None
    if found != magic:
        raise GanstudyError(f"{path} is not an IDX file of {dims} dimension(s): magic {found}, expected {magic}")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    if len(raw) != header + int(np.prod(shape)):
        raise GanstudyError(
            f"{path} holds {len(raw) - header} bytes of data, its header promises {int(np.prod(shape))}"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def _idx_file(folder: Path, stem: str) -> Path:
    """An IDX file as published (gzip) or unpacked."""
    for candidate in (folder / f"{stem}.gz", folder / stem):
        if candidate.is_file():
            return candidate
    raise GanstudyError(
        f"{folder / stem}.gz (or the unpacked {stem}) does not exist; run the fetch_dataset rule or place it there"
    )


def _load_idx_set(path: str | None, name: str, classes: int) -> RawDataset:
    """The four IDX files of MNIST-like sets (train and t10k images and labels), read together."""
    if path is None:
        raise GanstudyError(f"dataset '{name}' needs dataset.path: the folder that holds (or will hold) its IDX files")
    folder = Path(path)
    images, labels = [], []
    for prefix in ("train", "t10k"):
        x = _read_idx(_idx_file(folder, f"{prefix}-images-idx3-ubyte"), 2051, 3)
        label_file = _idx_file(folder, f"{prefix}-labels-idx1-ubyte")
        y = _read_idx(label_file, 2049, 1)
        if len(x) != len(y):
            raise GanstudyError(f"{folder}: {len(x)} {prefix} images but {len(y)} labels")
        if y.size and y.max() >= classes:
            raise GanstudyError(f"{label_file}: label {y.max()} is outside 0..{classes - 1}")
        images.append(x)
        labels.append(y)
    pixels = np.concatenate(images).astype(np.float32)[:, None] / 255.0
    return RawDataset(pixels, np.concatenate(labels).astype(np.int64), str(folder))


def load_mnist(path: str | None, options: LoadOptions = LoadOptions()) -> RawDataset:
    """MNIST's four IDX files, training and test sets together."""
    return _load_idx_set(path, "mnist", 10)


def load_fashion_mnist(path: str | None, options: LoadOptions = LoadOptions()) -> RawDataset:
    """Fashion-MNIST: MNIST's format and file names, ten kinds of clothing."""
    return _load_idx_set(path, "fashion_mnist", 10)


IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg"}


def read_image(file: Path) -> np.ndarray:
    """A PNG/JPEG file as float32 (C, H, W) in [0, 1]: one channel when stored grey, else RGB."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(file) as image:
            image.load()
            grey = image.mode in ("1", "L", "LA", "I", "I;16", "F")
            pixels = np.asarray(image.convert("L" if grey else "RGB"), dtype=np.float32) / 255.0
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise GanstudyError(f"{file} is not a readable PNG/JPEG image ({exc}); replace or remove it") from None
    return pixels[None] if grey else pixels.transpose(2, 0, 1)


def check_same_size(decoded: list[np.ndarray], files: list[Path]) -> None:
    """Images kept at their stored size must share it: they end up in one array."""
    for file, pixels in zip(files, decoded):
        if pixels.shape[1:] != decoded[0].shape[1:]:
            raise GanstudyError(
                f"{file} is {pixels.shape[2]}x{pixels.shape[1]} but {files[0]} is "
                f"{decoded[0].shape[2]}x{decoded[0].shape[1]}: set dataset.image_size to resize every image"
            )


def stack_images(decoded: list[np.ndarray], options: LoadOptions) -> np.ndarray:
    """Decoded images as one array at options.image_size with options.channels (None: RGB as soon as
    one image is in colour)."""
    channels = options.channels or (1 if all(d.shape[0] == 1 for d in decoded) else 3)
    return np.stack([conform(d[None], options.image_size, channels)[0] for d in decoded])


def image_files(folder: Path, what: str = "") -> list[Path]:
    """The PNG/JPEG files of ``folder`` in sorted name order, so the order never depends on the file
    system; a folder without any is an error naming ``what`` it is."""
    found = sorted(f for f in folder.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)
    if not found:
        raise GanstudyError(f"{what}{folder} holds no PNG or JPEG images")
    return found


def class_folders(root: Path) -> list[str]:
    """An image folder's class subfolders in label order (sorted names; hidden folders are no class)."""
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def count_folder_classes(path: str) -> int | None:
    if not Path(path).is_dir():
        return None
    return len(class_folders(Path(path))) or None


def count_npz_classes(path: str) -> int | None:
    """Classes 0..K-1 of a .npz file's 'labels' (read alone: the images stay on disk); None when unreadable
    (its loader names the problem)."""
    try:
        with np.load(path, allow_pickle=False) as arrays:
            labels = arrays["labels"]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None
    return int(labels.max()) + 1 if labels.size and np.issubdtype(labels.dtype, np.integer) else None


def load_image_folder(path: str | None, options: LoadOptions = LoadOptions()) -> RawDataset:
    """One subfolder per class (class labels 0.. in sorted folder-name order) of PNG/JPEG files, grey
    or colour, each resized to options.image_size (the COVID-19 x-ray set's layout)."""
    if path is None:
        raise GanstudyError(
            "dataset 'image_folder' needs dataset.path: a folder with one subfolder of images per class"
        )
    root = Path(path)
    if not root.is_dir():
        raise GanstudyError(
            f"image folder {root} does not exist; set dataset.path to a folder with one subfolder per class"
        )
    classes = class_folders(root)
    if not classes:
        raise GanstudyError(
            f"image folder {root} has no class subfolders; put each class's images in a subfolder of its own"
        )
    files: list[Path] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        found = image_files(root / name, "class folder ")
        files += found
        labels += [label] * len(found)
    decoded = [read_image(file) for file in files]
    if options.image_size is None:
        check_same_size(decoded, files)
    return RawDataset(stack_images(decoded, options), np.array(labels, dtype=np.int64), str(root), tuple(classes))


class _BatchUnpickler(pickle.Unpickler):
    """CIFAR's python batches are pickles: allow the numpy array reconstruction they need and
    nothing else, so a tampered archive cannot run code."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        return super().find_class(module, name)


def _cifar_batch(
    archive: tarfile.TarFile, member: str, label_key: str, classes: int, where: str
) -> tuple[np.ndarray, np.ndarray]:
    name = f"{where}:{member}"
    try:
        handle = archive.extractfile(member)
        if handle is None:
            raise KeyError(member)
        batch = _BatchUnpickler(io.BytesIO(handle.read()), encoding="latin1").load()
        data, labels = np.asarray(batch["data"]), np.asarray(batch[label_key])
    except KeyError as exc:
        raise GanstudyError(
            f"{name} is missing ({exc}); the archive is not the published one — fetch it again"
        ) from None
    except (pickle.UnpicklingError, EOFError, TypeError, ValueError, tarfile.TarError, OSError) as exc:
        raise GanstudyError(f"{name} is not a CIFAR python batch ({exc}); fetch the archive again") from None
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise GanstudyError(f"{name}: 'data' must be uint8 rows of 3072 pixels, got {data.dtype} {data.shape}")
    if labels.shape != (len(data),) or labels.min(initial=0) < 0 or labels.max(initial=0) >= classes:
        raise GanstudyError(f"{name}: expected {len(data)} labels in 0..{classes - 1}, got shape {labels.shape}")
    return data.reshape(-1, 3, 32, 32), labels


def _load_cifar(
    path: str | None, name: str, folder: str, members: tuple[str, ...], label_key: str, classes: int
) -> RawDataset:
    if path is None:
        raise GanstudyError(f"dataset '{name}' needs dataset.path: the folder that holds (or will hold) its archive")
    from ganstudy.data.sources import SOURCES

    (file,) = SOURCES[name].md5
    archive_path = Path(path) / file
    try:
        archive = tarfile.open(archive_path, "r:gz")
    except (OSError, EOFError, tarfile.TarError) as exc:
        raise GanstudyError(f"{archive_path} is unreadable ({exc}); fetch it again") from None
    with archive:
        parts = [
            _cifar_batch(archive, f"{folder}/{member}", label_key, classes, str(archive_path)) for member in members
        ]
    images = np.concatenate([p[0] for p in parts]).astype(np.float32) / 255.0
    return RawDataset(images, np.concatenate([p[1] for p in parts]).astype(np.int64), str(archive_path))


def load_cifar10(path: str | None, options: LoadOptions = LoadOptions()) -> RawDataset:
    """CIFAR-10's python batches (five training batches and the test batch), read from the archive."""
    batches = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",)
    return _load_cifar(path, "cifar10", "cifar-10-batches-py", batches, "labels", 10)


def load_cifar100(path: str | None, options: LoadOptions = LoadOptions()) -> RawDataset:
    """CIFAR-100's python files with the 100 fine labels, read from the archive."""
    return _load_cifar(path, "cifar100", "cifar-100-python", ("train", "test"), "fine_labels", 100)


DIGITS = DataSet(load_digits, classes=10, image_shape=(1, 8, 8), images=1797)
NPZ = DataSet(
    load_npz,
    count_classes=count_npz_classes,
    provide="a .npz file with arrays 'images' (N, H, W or N, C, H, W; uint8 or float in [0, 1]) and "
    "'labels' (N integers from 0), saved with numpy.savez",
)
MNIST = DataSet(load_mnist, classes=10, image_shape=(1, 28, 28))
FASHION_MNIST = DataSet(load_fashion_mnist, classes=10, image_shape=(1, 28, 28))
IMAGE_FOLDER = DataSet(
    load_image_folder,
    count_classes=count_folder_classes,
    provide="a folder with one subfolder of PNG or JPEG images per class (one subfolder "
    "for a single class), e.g. the COVID-19 positive chest x-rays of Cohen et al.'s covid-chestxray-dataset "
    "(github.com/ieee8023/covid-chestxray-dataset) that Flores (2021) used",
)
CIFAR10 = DataSet(load_cifar10, classes=10, image_shape=(3, 32, 32))
CIFAR100 = DataSet(load_cifar100, classes=100, image_shape=(3, 32, 32))
