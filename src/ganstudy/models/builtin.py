"""ganstudy's own networks as their registry entries: what the workflow checks while it plans (conditional,
task, options, the shapes each can build for), with each builder named by reference and imported when a
job builds its first pair. Free of torch, so that planning a study (every Snakemake start, every cluster
job step re-reading the workflow) does not import it."""

from __future__ import annotations

from functools import partial

from ganstudy.errors import GanstudyError
from ganstudy.models import Network, NetworkSpec

# pix2pix's U-Net halves the image down to 1x1: the smallest side it takes.
PIX2PIX_MIN_SIZE = 16
# calo3d's smallest shower: the first map its generator grows (X, Y) and (Z).
CALO3D_MIN_XY, CALO3D_MIN_Z = 5, 7

PIX2PIX_OPTIONS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "norm": {
            "enum": ["batch", "instance"],
            "default": "batch",
            "description": "The original's --norm: batch (pix2pix's default; statistics over the rows normalised "
            "together) or instance (each image's own statistics, no affine parameters; CycleGAN's "
            "default).",
        },
    },
}


def _dcgan_fits(spec: NetworkSpec, conditional: bool) -> None:
    _, height, width = spec.image_shape
    if height % 4 or width % 4:
        raise GanstudyError(
            f"the DC-GAN networks upsample twice by 2, so image height and width must be multiples of 4; "
            f"got {height}x{width}: resize the data set or choose network perceptron4"
        )
    if conditional and spec.num_classes < 2:
        raise GanstudyError(f"a conditional network needs at least 2 classes, the data has {spec.num_classes}")


dcgan_fits = partial(_dcgan_fits, conditional=False)
dccgan_fits = partial(_dcgan_fits, conditional=True)


def _cnn_fits(size: int, spec: NetworkSpec) -> None:
    _, height, width = spec.image_shape
    if (height, width) != (size, size):
        raise GanstudyError(
            f"network cnn{size} makes {size}x{size} images, the data are {height}x{width}: set dataset.image_size to "
            f"{size}"
        )


cnn28_fits = partial(_cnn_fits, 28)
cnn64_fits = partial(_cnn_fits, 64)


def calo3d_fits(spec: NetworkSpec) -> None:
    if spec.condition_shape is None:
        raise GanstudyError(
            "network calo3d generates showers for a primary energy but the set-up gives no condition "
            "(condition_shape is None): use it with a calorimeter data set whose rows carry the energy"
        )
    if tuple(spec.condition_shape) != (1,):
        raise GanstudyError(
            f"network calo3d is conditioned on one number, the primary energy (condition_shape (1,)); "
            f"got condition_shape {tuple(spec.condition_shape)}"
        )
    if len(spec.image_shape) != 4 or spec.image_shape[0] != 1:
        raise GanstudyError(
            f"network calo3d makes one-channel 3D showers, image_shape (1, X, Y, Z); got {tuple(spec.image_shape)}"
        )
    _, x, y, z = spec.image_shape
    if min(x, y) < CALO3D_MIN_XY or (x - 1) % 4 or (y - 1) % 4 or z < CALO3D_MIN_Z or (z - 1) % 6:
        raise GanstudyError(
            f"network calo3d's generator grows a small 3D map into the shower through the original's fixed "
            f"chain of upsamplings and convolutions, so X and Y must be 5, 9, 13, ... (4k + 1) and Z 7, 13, "
            f"19, 25, ... (6k + 1), e.g. 25x25x25 or 13x13x13; got {x}x{y}x{z}"
        )


def pix2pix_fits(spec: NetworkSpec) -> None:
    if spec.condition_shape is None:
        raise GanstudyError(
            "network pix2pix maps an input image to an output image but the set-up gives no input image "
            "shape (condition_shape is None): use it with a paired data set"
        )
    if len(spec.condition_shape) != 3 or len(spec.image_shape) != 3:
        raise GanstudyError(
            f"network pix2pix maps (C, H, W) images to (C, H, W) images; got inputs {spec.condition_shape} and outputs "
            f"{spec.image_shape}: use it with a paired image data set (dataset.name paired_folder)"
        )
    _, in_height, in_width = spec.condition_shape
    _, out_height, out_width = spec.image_shape
    if (in_height, in_width) != (out_height, out_width):
        raise GanstudyError(
            f"network pix2pix needs input and output images of the same size; got input {in_height}x{in_width} "
            f"and output {out_height}x{out_width}: resize one of the paired data set's sides"
        )
    if in_height != in_width or in_height < PIX2PIX_MIN_SIZE or in_height & (in_height - 1):
        raise GanstudyError(
            f"network pix2pix's U-Net halves the image down to 1x1, so it needs square images whose side is "
            f"a power of two of at least {PIX2PIX_MIN_SIZE} (16, 32, 64, 128, 256, ...); got {in_height}x{in_width}: "
            f"resize or crop the paired data set"
        )


PERCEPTRON4 = Network("ganstudy.models.perceptron:build")
DCGAN = Network("ganstudy.models.dcgan:build_dcgan", fits=dcgan_fits)
DCCGAN = Network("ganstudy.models.dcgan:build_dccgan", conditional=True, fits=dccgan_fits)
CNN28 = Network("ganstudy.models.lipizzaner_cnn:build_cnn28", fits=cnn28_fits)
CNN64 = Network("ganstudy.models.lipizzaner_cnn:build_cnn64", fits=cnn64_fits)
PIX2PIX = Network("ganstudy.models.pix2pix:build", task="paired", options=PIX2PIX_OPTIONS, fits=pix2pix_fits)
CALO3D = Network("ganstudy.models.calo3d:build", task="energy", fits=calo3d_fits)
