"""Pairwise arms: losses on the score difference r(x, y+) - r(x, y-) only, so a score component
shared by all responses to a prompt is invisible to them."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from rmtrain.arms.base import Arm, PairTable, register_arm


@register_arm
class BradleyTerry(Arm):
    """-log sigmoid(r+ - r-) on the preference label."""

    name = "bradley_terry"
    pointwise = False
    needs_ratings = False

    def targets(self, pairs: PairTable, seed: int) -> dict[str, np.ndarray]:
        return {}

    def loss(self, r_chosen: torch.Tensor, r_rejected: torch.Tensor,
             targets: dict[str, torch.Tensor]) -> torch.Tensor:
        return -F.logsigmoid(r_chosen - r_rejected).mean()


@register_arm
class BTMargin(Arm):
    """-log sigmoid(r+ - r- - gap): Bradley-Terry that also sees the size of the rating gap.
    The gap is rating(chosen) - rating(rejected); it can be negative where a released label
    disagrees with the ratings, which then lowers the margin the pair asks for."""

    name = "bt_margin"
    pointwise = False

    def targets(self, pairs: PairTable, seed: int) -> dict[str, np.ndarray]:
        return {"gap": pairs.gap}

    def loss(self, r_chosen: torch.Tensor, r_rejected: torch.Tensor,
             targets: dict[str, torch.Tensor]) -> torch.Tensor:
        return -F.logsigmoid(r_chosen - r_rejected - targets["gap"]).mean()


@register_arm
class GapOnly(Arm):
    """(r+ - r- - gap)^2: regression on the within-prompt rating gap, no absolute level."""

    name = "gap_only"
    pointwise = False

    def targets(self, pairs: PairTable, seed: int) -> dict[str, np.ndarray]:
        return {"gap": pairs.gap}

    def loss(self, r_chosen: torch.Tensor, r_rejected: torch.Tensor,
             targets: dict[str, torch.Tensor]) -> torch.Tensor:
        return ((r_chosen - r_rejected - targets["gap"]) ** 2).mean()
