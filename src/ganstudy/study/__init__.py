"""The study as it lies on disk: its folder's paths (ganstudy.study.folder)."""
