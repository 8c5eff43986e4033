"""Pairwise arms: losses on the score difference r(x, y+) - r(x, y-) only, so a score component
shared by all responses to a prompt is invisible to them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from rmcore.errors import ConfigError
from rmtrain.arms.base import Arm, ArmConfig, PairTable, register_arm


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


MARGIN_ORIENTATIONS = ("label", "rating")


@dataclass
class BTMarginConfig(ArmConfig):
    """``margin_orientation``: which order the pair is trained in when the released label and the
    ratings disagree (the gap always comes from the ratings).

    - ``label`` (default): the label's order, as every other arm; the signed gap
      rating(chosen) - rating(rejected) is subtracted, so a pair whose ratings disagree asks for
      less than zero margin. Default because matched arms must share the preference label: with it,
      bt_margin differs from bradley_terry only by the gap it sees.
    - ``rating``: the ratings' order; a disagreeing pair is flipped and asks the higher-rated
      response to win by |gap| (a tie in the ratings keeps the label's order)."""

    margin_orientation: str = "label"

    def __post_init__(self) -> None:
        if self.margin_orientation not in MARGIN_ORIENTATIONS:
            raise ConfigError(f"bt_margin: margin_orientation must be 'label' or 'rating', "
                              f"got {self.margin_orientation!r}")


@register_arm
class BTMargin(Arm):
    """-log sigmoid(o * (r+ - r-) - m): Bradley-Terry that also sees the size of the rating gap.
    With ``margin_orientation: label`` o = 1 and m = rating(chosen) - rating(rejected), which is
    negative where a released label disagrees with the ratings; with ``rating`` o = sign(gap)
    (1 for a tie) and m = |gap|. See BTMarginConfig."""

    name = "bt_margin"
    pointwise = False
    config_class = BTMarginConfig

    def targets(self, pairs: PairTable, seed: int) -> dict[str, np.ndarray]:
        gap = pairs.gap
        if self.config.margin_orientation == "label":
            return {"gap": gap, "orientation": np.ones_like(gap)}
        return {"gap": np.abs(gap), "orientation": np.where(gap < 0, -1.0, 1.0)}

    def loss(self, r_chosen: torch.Tensor, r_rejected: torch.Tensor,
             targets: dict[str, torch.Tensor]) -> torch.Tensor:
        o = targets.get("orientation", torch.ones_like(targets["gap"]))
        return -F.logsigmoid(o * (r_chosen - r_rejected) - targets["gap"]).mean()


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
