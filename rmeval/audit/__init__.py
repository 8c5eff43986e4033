"""The audit of a checkpoint: ``pipeline`` (score the conditions, compute the statistics, write
and log; ``rmeval audit``), ``report`` (audit.md and figures), ``features`` (per-response text
features), ``callback`` (the in-training audit), ``variants`` (prompt variants), ``human`` (the same
statistics of human ratings), ``pairwise`` (RewardBench-style pair accuracy)."""
