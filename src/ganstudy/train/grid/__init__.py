"""Training mode ``grid``: Lipizzaner's spatial coevolution of GAN populations on a toroidal grid."""
