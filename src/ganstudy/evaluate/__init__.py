"""Evaluation stage: the dataset's classifier, torch-fidelity feature extraction, FID and IS."""
