"""Data preparation stage: loaders, splits and the prepared-array format."""
