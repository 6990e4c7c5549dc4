"""An example ganstudy plugin: the spectral-norm DC-GAN of Miyato et al. ("Spectral Normalization for
Generative Adversarial Networks", ICLR 2018), sized for small images, a procedural data set of shapes,
and a Gaussian-kernel MMD metric (Gretton et al., JMLR 2012). ganstudy finds all three through this
package's entry points (pyproject.toml)."""
