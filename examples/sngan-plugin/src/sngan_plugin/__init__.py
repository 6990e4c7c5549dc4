"""An example ganstudy plugin: the spectral-norm DC-GAN of Miyato et al. ("Spectral Normalization for
Generative Adversarial Networks", ICLR 2018), sized for small images, and a procedural data set of
shapes. ganstudy finds both through this package's entry points (pyproject.toml)."""
