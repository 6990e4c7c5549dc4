"""What a scoring job's extractor costs: Inception-v3 features of generated images, on the CPU or a GPU,
through the scoring path (ganstudy.evaluate.extractor: torch-fidelity's resize to 299x299, 2048 features and
the logits), with random weights (the published file cannot be fetched here; the cost is the same).

The plan sizes every scoring job's wall time and memory from these figures (ganstudy.core.resources:
SCORING_GMAC_PER_SECOND, ACTIVATION_MB); run it on the CPU kind and the GPU a site has to check them.

- images_per_second: images scored per second at batch 50, after a warm-up batch; gmac_per_second: that
  times Inception-v3's 5.7 G multiply-adds per image (per thread on the CPU: threads says how many).
- activation_mb_per_image: the growth of the process's peak resident memory per image of a batch, from
  batches of 10 and 50 (on a GPU the activations are in its memory: gpu_mb_per_image, torch's peak
  allocation, likewise).
- peak_rss_mb: the process's peak resident memory.
- device, threads.
--quick: 8 images, batches of 2 and 4: a check that the script runs, not a measurement. Prints one
JSON record last (benchmarks/common.py).

    python benchmarks/scoring.py [--quick] [--threads N] [--out FILE]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from common import emit, parser
from ganstudy.core.resources import EXTRACTOR_GMAC, peak_memory
from ganstudy.evaluate.extractor import inception_extractor
from ganstudy.evaluate.fidelity_extractor import random_inception_weights

FULL = {"images": 400, "batches": (10, 50)}
QUICK = {"images": 8, "batches": (2, 4)}
LAYERS = ["2048", "logits_unbiased"]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def main() -> None:
    arguments = parser(__doc__)
    arguments.add_argument("--threads", type=int, default=1, help="torch threads on the CPU (default 1)")
    args = arguments.parse_args()
    torch.set_num_threads(args.threads)
    size = QUICK if args.quick else FULL
    small, large = size["batches"]
    with tempfile.TemporaryDirectory() as tmp:
        weights = Path(tmp) / "inception.pth"
        random_inception_weights(weights)
        extractor = inception_extractor(weights, None)
        # Digits-sized grey images, as a study of the embedded data set scores them.
        images = torch.randint(0, 256, (size["images"], 1, 8, 8), dtype=torch.uint8)
        peaks = {}
        for batch in (small, large):
            extractor.features(images[:batch], LAYERS, batch, DEVICE)  # warm-up, and this batch's peak
            peak = peak_memory()
            peaks[batch] = (peak["rss_mb"], sum(peak["gpu_mb"].values()))
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        extractor.features(images, LAYERS, large, DEVICE)
        seconds = time.perf_counter() - started
    rate = size["images"] / seconds
    results = {
        "images_per_second": round(rate, 2),
        "gmac_per_second": round(rate * EXTRACTOR_GMAC["inception"] / (args.threads if DEVICE == "cpu" else 1), 2),
        "activation_mb_per_image": round((peaks[large][0] - peaks[small][0]) / (large - small), 2),
        "gpu_mb_per_image": round((peaks[large][1] - peaks[small][1]) / (large - small), 2),
        "peak_rss_mb": peak_memory()["rss_mb"],
        "device": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu",
        "threads": args.threads,
    }
    emit("scoring", results, args)


if __name__ == "__main__":
    main()
