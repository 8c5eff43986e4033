"""Pointwise arms: squared error of each response's score to a per-response target."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rmcore.settings.fields import bounded
from rmtrain.arms.base import Arm, ArmConfig, PairTable, register_arm


class PointwiseArm(Arm):
    """Squared error to per-response targets ``t_chosen`` / ``t_rejected``. Both members of each
    pair count, so every arm sees the same responses per step."""

    pointwise = True

    def loss(self, r_chosen: torch.Tensor, r_rejected: torch.Tensor,
             targets: dict[str, torch.Tensor]) -> torch.Tensor:
        return 0.5 * (((r_chosen - targets["t_chosen"]) ** 2).mean()
                      + ((r_rejected - targets["t_rejected"]) ** 2).mean())


@register_arm
class Regression(PointwiseArm):
    """r(x, y) regressed on the rating: sees absolute levels and within-prompt differences."""

    name = "regression"

    def targets(self, pairs: PairTable, seed: int) -> dict[str, np.ndarray]:
        return {"t_chosen": pairs.y_chosen.copy(), "t_rejected": pairs.y_rejected.copy()}


def prompt_derangement(prompt_ids: list[str], seed: int) -> dict[str, str]:
    """Seeded permutation of prompts with no fixed point: each prompt gets *another* prompt.

    A random cyclic order is used, so it is a derangement for any number of prompts >= 2."""
    order = sorted(set(prompt_ids))
    if len(order) < 2:
        raise ValueError("shuffled_mean needs at least two prompts")
    rng = np.random.default_rng(seed)
    perm = [order[i] for i in rng.permutation(len(order))]
    return {p: perm[(i + 1) % len(perm)] for i, p in enumerate(perm)}


@dataclass
class ShuffledMeanConfig(ArmConfig):
    permutation_seed: int | None = bounded(None, ge=0)  # default: the run seed


@register_arm
class ShuffledMean(PointwiseArm):
    """Targets y - mean_p + mean_pi(p): right within-prompt deviations, a wrong prompt level."""

    name = "shuffled_mean"
    config_class = ShuffledMeanConfig

    def targets(self, pairs: PairTable, seed: int) -> dict[str, np.ndarray]:
        s = self.config.permutation_seed if self.config.permutation_seed is not None else seed
        pids = pairs.prompt_id.tolist()
        donor = prompt_derangement(pids, s)
        mean_of = dict(zip(pids, pairs.prompt_mean.tolist()))
        shift = np.array([mean_of[donor[p]] - mean_of[p] for p in pids])
        return {"t_chosen": pairs.y_chosen + shift, "t_rejected": pairs.y_rejected + shift}


@register_arm
class Binarized(PointwiseArm):
    """1 for the preferred and 0 for the other response of each pair: sees only who won."""

    name = "binarized"
    needs_ratings = False

    def targets(self, pairs: PairTable, seed: int) -> dict[str, np.ndarray]:
        n = len(pairs)
        return {"t_chosen": np.ones(n), "t_rejected": np.zeros(n)}
