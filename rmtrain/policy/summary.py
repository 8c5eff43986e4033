"""The parts of ``policy_summary.json`` that trl runs (``rmtrain.policy.train``) and OpenRLHF runs
(``rmtrain.policy.openrlhf``) share, so ``policy-eval`` reads both alike: the file name, the reward
model's arm and seed, and the reward at the start and the end of training (the mean of the first
and of the last tenth of the per-batch reward means, at least one batch each)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rmcore.runtime.checkpoints import CONFIG_FILE
from rmcore.runtime.checkpoints import SUMMARY_FILE as RUN_SUMMARY_FILE

SUMMARY_FILE = "policy_summary.json"


def reward_model_tags(reward_model: str) -> dict[str, Any]:
    """arm and seed of an ``rmtrain train`` checkpoint (train_summary.json, else matchrm_config.json)."""
    out: dict[str, Any] = {}
    for name in (RUN_SUMMARY_FILE, CONFIG_FILE):
        p = Path(reward_model) / name
        if p.exists():
            d = json.loads(p.read_text())
            for k in ("arm", "seed"):
                if k in d and k not in out:
                    out[k] = d[k]
    return out


def tenth_means(values: list[float]) -> tuple[float, float]:
    """Mean of the first and of the last tenth (at least one value each) of a training curve."""
    if not values:
        return math.nan, math.nan
    k = max(1, len(values) // 10)
    return float(sum(values[:k]) / k), float(sum(values[-k:]) / k)
