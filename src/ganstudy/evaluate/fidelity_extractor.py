"""The extraction of features by torch-fidelity, on uint8 images in memory: the data set's classifier and
DINOv2 (ganstudy.evaluate.vit) registered as torch-fidelity feature extractors, torch-fidelity's own
Inception-v3 and CLIP."""

from __future__ import annotations

from pathlib import Path

import torch
import torchvision
from torch.utils.data import Dataset
from torch_fidelity import FeatureExtractorBase, register_feature_extractor
from torch_fidelity.interpolate_compat_tensorflow import interpolate_bilinear_2d_like_tensorflow1x
from torch_fidelity.registry import FEATURE_EXTRACTORS_REGISTRY
from torch_fidelity.utils import create_feature_extractor, extract_featuresdict_from_input_id

from ganstudy.evaluate.classifier import load_classifier
from ganstudy.evaluate.vit import load_dino_vit


class _LocalFeatureExtractor(FeatureExtractorBase):
    """What torch-fidelity asks of an extractor of ganstudy's own: the layers it provides (``LAYERS``, the
    first its default for every metric), and that it is not compiled."""

    LAYERS: tuple[str, ...] = ()

    @classmethod
    def get_provided_features_list(cls) -> tuple[str, ...]:
        return cls.LAYERS

    @classmethod
    def get_default_feature_layer_for_metric(cls, metric: str) -> str:
        return cls.LAYERS[0]

    @staticmethod
    def can_be_compiled() -> bool:
        return False

    @staticmethod
    def get_dummy_input_for_compile() -> torch.Tensor:
        raise NotImplementedError("ganstudy's feature extractors are not compiled")


class ClassifierFeatureExtractor(_LocalFeatureExtractor):
    """Reads uint8 images (N, C, H, W) as torch-fidelity passes them; returns the requested layers."""

    LAYERS = ("logits", "penultimate")

    def __init__(self, name: str, features_list: list[str], feature_extractor_weights_path: str, **_: object):
        super().__init__(name, features_list)
        self.classifier = load_classifier(feature_extractor_weights_path)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
        hidden, logits = self.classifier.features(images.float() / 127.5 - 1.0)
        layers = {"penultimate": hidden, "logits": logits}
        return tuple(layers[name] for name in self.features_list)


class DinoFeatureExtractor(_LocalFeatureExtractor):
    """DINOv2 from a local state dict, reading images as torch-fidelity's own DINOv2 extractor does
    (which loads through torch.hub only): resized to 224x224 by TensorFlow-1 bilinear interpolation,
    normalised by ImageNet's mean and deviation; the features are the class token."""

    LAYERS = ("dinov2",)
    SIZE = 224

    def __init__(self, name: str, features_list: list[str], feature_extractor_weights_path: str, **_: object):
        super().__init__(name, features_list)
        state = torch.load(feature_extractor_weights_path, map_location="cpu", weights_only=True)
        self.model = load_dino_vit(state, feature_extractor_weights_path)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = interpolate_bilinear_2d_like_tensorflow1x(images.float(), size=(self.SIZE, self.SIZE), align_corners=False)
        x = torchvision.transforms.functional.normalize(
            x, (255 * 0.485, 255 * 0.456, 255 * 0.406), (255 * 0.229, 255 * 0.224, 255 * 0.225)
        )
        return (self.model(x),)


# torch-fidelity's extractor of each kind, by name; the classifier and DINOv2 are registered under the
# extractor's own name (Extractor.name, which carries the weights' hash).
_FIDELITY_NAMES = {
    "inception": "inception-v3-compat",
    # Its name only picks a download address, unused with a weights path: the model is built
    # from the file, whichever CLIP it holds.
    "clip": "clip-vit-b-16",
}
_REGISTERED = {"classifier": ClassifierFeatureExtractor, "dinov2": DinoFeatureExtractor}


class UInt8Images(Dataset):
    """A tensor of uint8 images as the Dataset torch-fidelity consumes."""

    def __init__(self, images: torch.Tensor) -> None:
        if images.dtype != torch.uint8 or images.dim() != 4:
            raise ValueError(f"expected uint8 (N, C, H, W) images, got {images.dtype} {tuple(images.shape)}")
        self.images = images

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.images[index]


def extract_features(
    kind: str, name: str, weights: Path, images: torch.Tensor, layers: list[str], batch_size: int, cuda: bool = False
) -> dict[str, torch.Tensor]:
    """The ``layers`` of uint8 ``images``, by the extractor of ``kind`` and ``name``
    (ganstudy.evaluate.extractor.Extractor) with the weights file ``weights``: on the CPU, or with ``cuda``
    on the current GPU (torch-fidelity moves the network and each batch there, the features back)."""
    name = _FIDELITY_NAMES.get(kind, name)
    if kind != "classifier":
        # The pretrained networks read colour images; a grey image is the same grey in each channel.
        images = images.expand(-1, 3, -1, -1) if images.shape[1] == 1 else images
    if name not in FEATURE_EXTRACTORS_REGISTRY:
        register_feature_extractor(name, _REGISTERED[kind])
    options = _options(weights, cuda)
    made = create_feature_extractor(name, layers, **options)
    return extract_featuresdict_from_input_id(
        1, made, input1=UInt8Images(images.contiguous()), batch_size=batch_size, save_cpu_ram=True, **options
    )


def inception_network(weights: Path, layers: list[str]) -> torch.nn.Module:
    """torch-fidelity's Inception-v3 from the weights file ``weights``, returning ``layers``."""
    return create_feature_extractor("inception-v3-compat", layers, **_options(weights))


def _options(weights: Path, cuda: bool = False) -> dict:
    return dict(cuda=cuda, verbose=False, feature_extractor_weights_path=str(weights))


def random_inception_weights(path: Path, seed: int = 0) -> torch.nn.Module:
    """torch-fidelity's Inception-v3 with random weights, written to ``path`` in the file format
    evaluation.inception_weights reads, and returned: the scoring path and its cost without the published
    weights (which a machine without internet cannot fetch); its features are not FID's."""
    from torch_fidelity import feature_extractor_inceptionv3 as module

    # The constructor loads the published file; with no file here it gets nothing to load.
    load, apply = module.torch.load, module.FeatureExtractorInceptionV3.load_state_dict
    module.torch.load = lambda *args, **kwargs: {}
    module.FeatureExtractorInceptionV3.load_state_dict = lambda self, state, *args, **kwargs: None
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = module.FeatureExtractorInceptionV3(
                "inception-v3-compat", ["2048"], feature_extractor_weights_path="unused"
            )
    finally:
        module.torch.load, module.FeatureExtractorInceptionV3.load_state_dict = load, apply
    torch.save(model.state_dict(), path)
    return model
