"""The study as it lies on disk: its folder's paths (ganstudy.study.folder) and how each of its runs ended
(ganstudy.study.outcomes)."""
