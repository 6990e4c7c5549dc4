"""evaluation.extractor dinov2 and clip: the networks, read from local files, score FID and KID against
independent computations. The published weights may not be downloaded here: the files hold small
networks of the same architectures with random weights (laid out key by key as the published files are),
so the scoring path is the same and the features are not the published models'."""

import json

import numpy as np
import pytest
import torch
from torch import nn
from torch_fidelity.interpolate_compat_tensorflow import interpolate_bilinear_2d_like_tensorflow1x

from ganstudy.core.seeding import derive_seed
from ganstudy.data.arrays import Split, file_digest, load_split, save_split, to_uint8
from ganstudy.errors import GanstudyError
from ganstudy.evaluate.extractor import pretrained_extractor
from ganstudy.evaluate.metrics import metric_problems
from ganstudy.evaluate.scores import evaluate_generator, reference_statistics
from ganstudy.evaluate.settings import EvaluationSettings
from ganstudy.evaluate.vit import load_dino_vit
from ganstudy.models import NetworkSpec, build_pair
from ganstudy.models.artifact import sample_generator, save_generator
from ganstudy.models.mixture import MixtureGenerator
from test_evaluate import _independent_fid, _independent_kid

IMAGES = 48


def dino_state(
    width: int = 128, depth: int = 2, grid: int = 16, registers: int = 0, swiglu: bool = False
) -> dict[str, torch.Tensor]:
    """A DINOv2 state dict with the keys and shapes of facebookresearch/dinov2's *_pretrain.pth files
    (written out here, not taken from ganstudy's network), random weights."""
    generator = torch.Generator().manual_seed(width + depth + grid + registers + swiglu)

    def random(*shape: int, around: float = 0.0, scale: float = 0.05) -> torch.Tensor:
        return around + scale * torch.randn(*shape, generator=generator)

    state = {
        "cls_token": random(1, 1, width),
        "pos_embed": random(1, grid * grid + 1, width, scale=0.1),
        "mask_token": random(1, width),
        "patch_embed.proj.weight": random(width, 3, 14, 14),
        "patch_embed.proj.bias": random(width),
        "norm.weight": random(width, around=1.0),
        "norm.bias": random(width),
    }
    if registers:
        state["register_tokens"] = random(1, registers, width)
    # dinov2's SwiGLUFFNFused rounds two thirds of the MLP's width up to a multiple of 8.
    hidden = (int(4 * width * 2 / 3) + 7) // 8 * 8 if swiglu else 4 * width
    for block in range(depth):
        prefix = f"blocks.{block}."
        state |= {
            prefix + "norm1.weight": random(width, around=1.0),
            prefix + "norm1.bias": random(width),
            prefix + "attn.qkv.weight": random(3 * width, width),
            prefix + "attn.qkv.bias": random(3 * width),
            prefix + "attn.proj.weight": random(width, width),
            prefix + "attn.proj.bias": random(width),
            prefix + "ls1.gamma": random(width, around=1.0, scale=0.2),
            prefix + "norm2.weight": random(width, around=1.0),
            prefix + "norm2.bias": random(width),
            prefix + "ls2.gamma": random(width, around=1.0, scale=0.2),
        }
        first, second = ("w12", "w3") if swiglu else ("fc1", "fc2")
        state |= {
            f"{prefix}mlp.{first}.weight": random(hidden * (2 if swiglu else 1), width),
            f"{prefix}mlp.{first}.bias": random(hidden * (2 if swiglu else 1)),
            f"{prefix}mlp.{second}.weight": random(width, hidden),
            f"{prefix}mlp.{second}.bias": random(width),
        }
    return state


def timm_dino(state: dict[str, torch.Tensor]) -> nn.Module:
    """The same weights in timm's VisionTransformer, an independent implementation (timm keeps the class
    token's position in the token itself and the registers unpositioned, as DINOv2 does)."""
    from timm.layers import Mlp, SwiGLUPacked
    from timm.models.vision_transformer import VisionTransformer

    width, grid = state["cls_token"].shape[-1], int((state["pos_embed"].shape[1] - 1) ** 0.5)
    depth = 1 + max(int(key.split(".")[1]) for key in state if key.startswith("blocks."))
    swiglu = "blocks.0.mlp.w12.weight" in state
    first = state["blocks.0.mlp.w12.weight" if swiglu else "blocks.0.mlp.fc1.weight"].shape[0]
    registers = state["register_tokens"].shape[1] if "register_tokens" in state else 0
    model = VisionTransformer(
        img_size=grid * 14,
        patch_size=14,
        embed_dim=width,
        depth=depth,
        num_heads=width // 64,
        mlp_ratio=first / width,
        init_values=1.0,
        num_classes=0,
        global_pool="token",
        reg_tokens=registers,
        no_embed_class=True,
        mlp_layer=SwiGLUPacked if swiglu else Mlp,
        act_layer=nn.SiLU if swiglu else nn.GELU,
    )
    renamed = {
        key.replace("mlp.w12", "mlp.fc1").replace("mlp.w3", "mlp.fc2"): value
        for key, value in state.items()
        if key not in ("mask_token", "register_tokens", "cls_token", "pos_embed")
    }
    renamed |= {"cls_token": state["cls_token"] + state["pos_embed"][:, :1], "pos_embed": state["pos_embed"][:, 1:]}
    if registers:
        renamed["reg_token"] = state["register_tokens"]
    model.load_state_dict(renamed, strict=True)
    return model.eval()


@pytest.mark.parametrize("variant", [{}, {"registers": 4}, {"swiglu": True}], ids=["mlp", "registers", "swiglu"])
def test_the_dinov2_network_computes_what_timm_s_vision_transformer_computes(variant):
    state = dino_state(**variant)
    ours = load_dino_vit(state, "test")
    images = torch.randn(3, 3, 224, 224)
    with torch.no_grad():
        assert torch.allclose(ours(images), timm_dino(state)(images), atol=1e-5)
    assert ours.shape.registers == variant.get("registers", 0) and ours.shape.swiglu == variant.get("swiglu", False)


def test_the_dinov2_network_reads_224_pixels_with_positions_trained_at_518():
    # The published files hold a 37 x 37 grid of positions (518 pixels); images are read at 16 x 16 patches.
    network = load_dino_vit(dino_state(grid=37, depth=1), "test")
    assert network.positions(16, 16).shape == (1, 257, 128)
    # Resizing keeps a constant table constant (bicubic weights sum to one).
    with torch.no_grad():
        network.pos_embed.fill_(0.25)
        assert torch.allclose(network.positions(16, 16), torch.full((1, 257, 128), 0.25))
    with torch.no_grad():
        assert network(torch.randn(2, 3, 224, 224)).shape == (2, 128)


def test_a_file_that_is_not_a_dinov2_state_dict_is_refused_naming_what_is_missing():
    state = dino_state()
    with pytest.raises(GanstudyError, match=r"x.pth is not a DINOv2 state dict \(no pos_embed\)"):
        load_dino_vit({key: value for key, value in state.items() if key != "pos_embed"}, "x.pth")
    with pytest.raises(GanstudyError, match=r"x.pth does not load as a DINOv2 ViT: .*extra"):
        load_dino_vit({**state, "extra": torch.zeros(1)}, "x.pth")


class _TinyClip(nn.Module):
    """An OpenAI CLIP file's image half at a small size (torch-fidelity's own ViT, 64 pixels, patch 16) and the
    text projection its loader reads the embedding width from."""

    def __init__(self) -> None:
        super().__init__()
        from torch_fidelity.feature_extractor_clip import VisionTransformer

        torch.manual_seed(3)
        self.visual = VisionTransformer(input_resolution=64, patch_size=16, width=64, layers=2, heads=1, output_dim=32)
        self.text_projection = nn.Parameter(torch.randn(16, 32))
        # torch-fidelity holds CLIP's weights in half precision, as the published files do.
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.copy_(parameter.half().float())

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.visual(images)


@pytest.fixture(scope="module")
def scored(tmp_path_factory, digits_dir):
    """A generator, real images, and the DINOv2 and CLIP files."""
    folder = tmp_path_factory.mktemp("pretrained")
    spec = NetworkSpec((1, 8, 8), 16, 32)
    torch.manual_seed(0)
    generator = MixtureGenerator([build_pair("perceptron4", spec)[0]], [1.0])
    save_generator(folder / "generator.pt", generator, "perceptron4", spec)
    (folder / "run.json").write_text(json.dumps({"setup_name": "tiny", "train_seconds": 1.0}))
    split = load_split(digits_dir / "train.npz")
    save_split(folder / "real.npz", Split(split.images[:IMAGES], split.labels[:IMAGES]))
    torch.save(dino_state(), folder / "dinov2.pth")
    traced = torch.jit.trace(_TinyClip().eval(), torch.randn(1, 3, 64, 64))
    traced.save(str(folder / "clip.pt"))
    fake = to_uint8(sample_generator(generator, spec.latent_dim, IMAGES, derive_seed(5, 0, "evaluate"), IMAGES).numpy())
    return folder, torch.from_numpy(fake), torch.from_numpy(to_uint8(split.images[:IMAGES]))


def _read(images: torch.Tensor, size: int, mean: tuple[float, ...], deviation: tuple[float, ...]) -> torch.Tensor:
    """uint8 grey images as the pretrained networks read them: 3 channels, resized, normalised."""
    resized = interpolate_bilinear_2d_like_tensorflow1x(
        images.repeat(1, 3, 1, 1).float(), size=(size, size), align_corners=False
    )
    return (resized - 255 * torch.tensor(mean)[:, None, None]) / (255 * torch.tensor(deviation)[:, None, None])


def _independent(kind: str, folder, images: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        if kind == "dinov2":
            read = _read(images, 224, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
            return timm_dino(torch.load(folder / "dinov2.pth")).forward(read).double().numpy()
        read = _read(images, 64, (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))
        return torch.jit.load(str(folder / "clip.pt"))(read).double().numpy()


@pytest.mark.parametrize("kind,file,width", [("dinov2", "dinov2.pth", 128), ("clip", "clip.pt", 32)])
def test_fid_and_kid_on_dinov2_and_clip_features_match_independent_computations(scored, tmp_path, kind, file, width):
    folder, fake, real = scored
    weights = folder / file
    digest = file_digest(weights)
    settings = EvaluationSettings.of(
        {
            "samples": IMAGES,
            "batch_size": 16,
            "metrics": ["fid", "kid"],
            "extractor": kind,
            "extractor_weights": str(weights),
            "extractor_sha256": digest[:10],
            "kid_subsets": 1,
        }
    )
    extractor = pretrained_extractor(kind, weights, digest[:10])
    reference_statistics(folder / "real.npz", extractor, kind, 16, tmp_path / "reference.npz", 1)
    record = evaluate_generator(
        folder / "generator.pt",
        folder / "run.json",
        None,
        None,
        settings,
        5,
        0,
        tmp_path / "s.json",
        1,
        tmp_path / "reference.npz",
    )
    generated, real_features = _independent(kind, folder, fake), _independent(kind, folder, real)
    assert real_features.shape == (IMAGES, width)
    assert record["scores"]["fid"] == pytest.approx(_independent_fid(generated, real_features), rel=1e-3)
    assert record["scores"]["kid"] == pytest.approx(_independent_kid(generated, real_features), rel=1e-3, abs=1e-6)
    quality = record["protocol"]["extractors"]["quality"]
    assert (quality["kind"], quality["sha256"], quality["layers"]) == (kind, digest, [kind])
    assert f"8x8 uint8 resized to {'224x224' if kind == 'dinov2' else 'the model'}" in quality["input"]
    # 48 images for features 128 or 32 wide: below the width + 1 the covariance needs, the record says so.
    assert (f"{width} features" in record["notes"].get("fid", "")) == (IMAGES <= width)


def test_a_wrong_or_missing_dinov2_file_and_is_on_an_embedding_are_refused(scored, tmp_path):
    folder = scored[0]
    with pytest.raises(GanstudyError, match=r"not evaluation.extractor_sha256=0000000000"):
        pretrained_extractor("dinov2", folder / "dinov2.pth", "0000000000")
    with pytest.raises(
        GanstudyError,
        match=r"evaluation.extractor_weights .*missing.pth' is not a file: evaluation.extractor "
        r"dinov2 reads a DINOv2 backbone's weights .*dl.fbaipublicfiles.com/dinov2",
    ):
        pretrained_extractor("dinov2", tmp_path / "missing.pth", None)
    from ganstudy.data.kinds import get_kind

    problems = metric_problems(get_kind("images"), ["fid", "isc"], "clip")
    assert problems == [
        "evaluation.metrics ['isc'] read class probabilities, and evaluation.extractor clip gives an embedding "
        "without classes: score them with the classifier or inception, or remove them"
    ]
    assert metric_problems(get_kind("pairs"), ["fid", "l1"], "dinov2") == []
