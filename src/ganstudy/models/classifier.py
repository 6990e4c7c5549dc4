"""The per-dataset CNN used as the feature extractor of FID and IS.

It follows Lipizzaner's MNIST scorer (two conv layers, fc 50, fc 10 logits) with 3x3 kernels and
padding so that 8x8 digits fit as well as 28x28 MNIST.
"""

from __future__ import annotations

from torch import nn


class ImageClassifier(nn.Module):
    def __init__(self, image_shape: tuple[int, int, int], num_classes: int) -> None:
        super().__init__()
        channels, height, width = image_shape
        self.image_shape = tuple(image_shape)
        self.num_classes = num_classes
        self.conv = nn.Sequential(
            nn.Conv2d(channels, 10, kernel_size=3, padding=1),
            nn.MaxPool2d(2),
            nn.ReLU(),
            nn.Conv2d(10, 20, kernel_size=3, padding=1),
            nn.MaxPool2d(2),
            nn.ReLU(),
            nn.Flatten(),
        )
        flat = 20 * (height // 4) * (width // 4)
        self.penultimate = nn.Sequential(nn.Linear(flat, 50), nn.ReLU())
        self.head = nn.Linear(50, num_classes)

    def features(self, x):
        """(penultimate activations, logits) of images in [-1, 1]."""
        hidden = self.penultimate(self.conv(x))
        return hidden, self.head(hidden)

    def forward(self, x):
        return self.features(x)[1]
