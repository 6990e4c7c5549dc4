"""DINOv2's vision transformer (Oquab et al. 2023, "DINOv2: Learning Robust Visual Features without
Supervision"), built from a published ``dinov2_vit*14*_pretrain.pth`` state dict alone.

torch-fidelity's DINOv2 extractor loads its model through ``torch.hub`` from GitHub, which a compute
node without internet cannot do; this module is that network, written from the paper's code
(facebookresearch/dinov2, ``models/vision_transformer.py`` as its hub models configure it: layer scale,
no block chunks, positional embeddings resized bicubically with an offset of 0.1 and no antialiasing).
Its size (width, depth, patch, registers, MLP or SwiGLU feed-forward) is read from the weights, so the
small, medium, large and giant models and their register variants all load; every head is 64 wide, as in
all published models. The features are the class token after the last norm, as the hub model returns.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional

from ganstudy.errors import GanstudyError

HEAD_WIDTH = 64
# The published models' pretraining resolution is 518 = 37 x 14; they are read at 224.
INTERPOLATE_OFFSET = 0.1
_BLOCK = re.compile(r"blocks\.(\d+)\.")


@dataclass(frozen=True)
class VitShape:
    """What a DINOv2 state dict says of its network."""

    width: int
    depth: int
    patch: int
    grid: int  # positional embeddings per side
    registers: int
    hidden: int  # feed-forward width
    swiglu: bool


def vit_shape(state: Mapping[str, torch.Tensor], source: str) -> VitShape:
    """The network a DINOv2 state dict holds, or an error naming ``source`` and what is missing."""
    needed = ("cls_token", "pos_embed", "patch_embed.proj.weight", "norm.weight", "blocks.0.attn.qkv.weight")
    missing = [key for key in needed if key not in state]
    if missing:
        raise GanstudyError(
            f"{source} is not a DINOv2 state dict (no {', '.join(missing)}): give the "
            "dinov2_vit*14*_pretrain.pth file of facebookresearch/dinov2"
        )
    width = state["cls_token"].shape[-1]
    if width % HEAD_WIDTH:
        raise GanstudyError(f"{source}: width {width} is not a multiple of DINOv2's {HEAD_WIDTH}-wide heads")
    positions = state["pos_embed"].shape[1] - 1
    grid = math.isqrt(positions)
    if grid * grid != positions:
        raise GanstudyError(f"{source}: {positions} positional embeddings do not form a square grid")
    swiglu = "blocks.0.mlp.w12.weight" in state
    hidden = state["blocks.0.mlp.w3.weight" if swiglu else "blocks.0.mlp.fc1.weight"].shape[1 if swiglu else 0]
    registers = state["register_tokens"].shape[1] if "register_tokens" in state else 0
    depth = 1 + max(int(match.group(1)) for key in state if (match := _BLOCK.match(key)))
    return VitShape(width, depth, state["patch_embed.proj.weight"].shape[-1], grid, registers, hidden, swiglu)


class _Attention(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.heads = width // HEAD_WIDTH
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, width = x.shape
        q, k, v = self.qkv(x).reshape(batch, tokens, 3, self.heads, HEAD_WIDTH).permute(2, 0, 3, 1, 4)
        attended = functional.scaled_dot_product_attention(q, k, v)
        return self.proj(attended.transpose(1, 2).reshape(batch, tokens, width))


class _Mlp(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(functional.gelu(self.fc1(x)))


class _SwiGlu(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.w12, self.w3 = nn.Linear(width, 2 * hidden), nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, value = self.w12(x).chunk(2, dim=-1)
        return self.w3(functional.silu(gate) * value)


class _LayerScale(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class _Block(nn.Module):
    def __init__(self, shape: VitShape) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(shape.width, eps=1e-6), nn.LayerNorm(shape.width, eps=1e-6)
        self.attn = _Attention(shape.width)
        self.mlp = (_SwiGlu if shape.swiglu else _Mlp)(shape.width, shape.hidden)
        self.ls1, self.ls2 = _LayerScale(shape.width), _LayerScale(shape.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


class _PatchEmbed(nn.Module):
    def __init__(self, shape: VitShape) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, shape.width, kernel_size=shape.patch, stride=shape.patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class DinoVit(nn.Module):
    """DINOv2's backbone; ``forward`` maps normalised RGB images (N, 3, H, W), H and W multiples of the
    patch, to their class-token features (N, width)."""

    def __init__(self, shape: VitShape) -> None:
        super().__init__()
        self.shape = shape
        self.patch_embed = _PatchEmbed(shape)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, shape.width))
        self.pos_embed = nn.Parameter(torch.zeros(1, shape.grid * shape.grid + 1, shape.width))
        # Trained only to fill masked patches; kept so that the published files load strictly.
        self.mask_token = nn.Parameter(torch.zeros(1, shape.width))
        if shape.registers:
            self.register_tokens = nn.Parameter(torch.zeros(1, shape.registers, shape.width))
        self.blocks = nn.ModuleList(_Block(shape) for _ in range(shape.depth))
        self.norm = nn.LayerNorm(shape.width, eps=1e-6)

    def positions(self, height: int, width: int) -> torch.Tensor:
        """The positional embeddings of a (height x width)-patch image: the trained grid, resized as
        DINOv2 resizes it (a scale factor with the offset, so that the sampled positions are DINOv2's)."""
        grid = self.shape.grid
        if (height, width) == (grid, grid):
            return self.pos_embed
        table = self.pos_embed.float()
        patches = table[:, 1:].reshape(1, grid, grid, -1).permute(0, 3, 1, 2)
        scale = ((height + INTERPOLATE_OFFSET) / grid, (width + INTERPOLATE_OFFSET) / grid)
        resized = functional.interpolate(patches, scale_factor=scale, mode="bicubic", antialias=False)
        resized = resized.permute(0, 2, 3, 1).reshape(1, height * width, -1)
        return torch.cat((table[:, :1], resized), dim=1).to(self.pos_embed.dtype)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        height, width = (side // self.shape.patch for side in images.shape[-2:])
        tokens = self.patch_embed(images)
        tokens = torch.cat((self.cls_token.expand(len(tokens), -1, -1), tokens), dim=1)
        tokens = tokens + self.positions(height, width)
        if self.shape.registers:
            registers = self.register_tokens.expand(len(tokens), -1, -1)
            tokens = torch.cat((tokens[:, :1], registers, tokens[:, 1:]), dim=1)
        for block in self.blocks:
            tokens = block(tokens)
        return self.norm(tokens)[:, 0]


def load_dino_vit(state: Mapping[str, torch.Tensor], source: str) -> DinoVit:
    """The network of a DINOv2 state dict, its weights loaded strictly (a key too many or too few is an error)."""
    network = DinoVit(vit_shape(state, source))
    try:
        network.load_state_dict(state, strict=True)
    except RuntimeError as error:
        raise GanstudyError(f"{source} does not load as a DINOv2 ViT: {' '.join(str(error).split())}") from None
    return network.eval().requires_grad_(False)
