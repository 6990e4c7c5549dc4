"""ganstudy: reproducible HPC studies of GAN training."""

__version__ = "0.1.0"
