"""Statistics stage: tidy score table, per-set-up summaries, pairwise rank-sum tests."""
