"""The metrics by what they score; each data kind (ganstudy.data.kinds) says which of them score its generators.
Free of torch, so that the workflow refuses a metric that cannot be computed while it builds the DAG, before any job."""

from __future__ import annotations

# Of any generator's outputs, on evaluation.extractor's features.
QUALITY = {"fid", "isc", "kid", "precision", "recall"}
# Of labelled generators, always on the data set's classifier (its classes are the data's).
LABELLED = {"class_fid", "label_tvd"}
# Of paired generators (pix2pix) against their targets.
PAIRED = {"l1", "psnr", "ssim"}
# Of energy-conditioned shower generators (calo3d) against the real showers: 3DGAN's physics.
SHOWER = {"sf_mean", "sf_width", "longitudinal", "transverse_x", "transverse_y"}

