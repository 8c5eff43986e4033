"""What an arm is: a loss plus the targets it is fed.

Every arm trains on the *same* batches of preference pairs (chosen, rejected) drawn from the same
prompts, so the forward/backward budget per step is identical across arms. Pointwise arms apply
their loss to both members of each pair; pairwise arms to the score difference. Arms differ only
in ``targets`` (the information they see) and ``loss``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from rmcore.errors import ConfigError
from rmcore.settings.registry import Registry

if TYPE_CHECKING:  # torch: the registry's names are read by --help, which must not import it
    import torch


@dataclass
class ArmConfig:
    """Options shared by every arm; arms subclass it for their own."""


@dataclass
class PairTable:
    """The training pairs as arrays, aligned by index.

    ``y_chosen`` / ``y_rejected`` are the target attribute's ratings (NaN where unrated);
    ``gap`` = y_chosen - y_rejected."""

    prompt_id: np.ndarray  # object array of str
    chosen_id: np.ndarray
    rejected_id: np.ndarray
    y_chosen: np.ndarray  # float64
    y_rejected: np.ndarray
    prompt_mean: np.ndarray  # mean rating of all the prompt's rated responses, per pair

    def __len__(self) -> int:
        return len(self.prompt_id)

    @property
    def gap(self) -> np.ndarray:
        return self.y_chosen - self.y_rejected


class Arm(ABC):
    name: ClassVar[str]
    pointwise: ClassVar[bool]
    needs_ratings: ClassVar[bool] = True
    config_class: ClassVar[type[ArmConfig]] = ArmConfig

    def __init__(self, config: ArmConfig | None = None) -> None:
        self.config = config or self.config_class()

    @abstractmethod
    def targets(self, pairs: PairTable, seed: int) -> dict[str, np.ndarray]:
        """Per-pair float targets (keys are arm-specific, e.g. t_chosen/t_rejected or gap)."""

    @abstractmethod
    def loss(self, r_chosen: torch.Tensor, r_rejected: torch.Tensor,
             targets: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean loss over the batch of pairs."""

    def check(self, pairs: PairTable) -> None:
        if self.needs_ratings and (np.isnan(pairs.y_chosen).any() or np.isnan(pairs.y_rejected).any()):
            n = int(np.isnan(pairs.y_chosen).sum() + np.isnan(pairs.y_rejected).sum())
            raise ConfigError(f"arm '{self.name}' needs ratings on every paired response; {n} are missing")


A = TypeVar("A", bound=type[Arm])


def _adopt(name: str, cls: Any) -> type[Arm]:
    """A plugin's entry point must name an ``Arm`` subclass of that name."""
    if not (isinstance(cls, type) and issubclass(cls, Arm)) or getattr(cls, "name", None) != name:
        raise ConfigError(f"plugin arm '{name}': {cls!r} is not an Arm subclass named '{name}'")
    return cls


# arm name -> class; a recipe's `arm:` is checked against it (rmtrain.config), `rmtrain train --arm`
# lists it. The built-ins are deferred (their modules import torch; --help reads the names), and
# plugins come from the entry points of group matchrm.arms (rmcore.settings.registry).
ARMS: Registry[type[Arm]] = Registry("arm", message="unknown arm '{name}'; known arms: {known}", sort_known=True,
                                     group="matchrm.arms", adopt=_adopt)
for _name, _ref in (("bradley_terry", "pairwise:BradleyTerry"), ("bt_margin", "pairwise:BTMargin"),
                    ("gap_only", "pairwise:GapOnly"), ("regression", "pointwise:Regression"),
                    ("shuffled_mean", "pointwise:ShuffledMean"), ("binarized", "pointwise:Binarized")):
    ARMS.defer(_name, f"rmtrain.arms.{_ref}")


def register_arm(cls: A, *, replace: bool = False) -> A:
    """Class decorator: make ``cls`` trainable as ``arm: <cls.name>``. A name already registered is
    an error; ``register_arm(cls, replace=True)`` replaces it."""
    ARMS.register(cls.name, cls, replace=replace)
    return cls


def make_arm(name: str, options: dict[str, Any] | None = None) -> Arm:
    """The arm registered as ``name``, configured by ``options`` (its ``config_class`` fields): read
    as a recipe block is (``rmcore.settings.recipes.build_config``: an unknown option is one line naming the
    arm and the options it takes, values coerced to their types and checked against their ranges)."""
    from rmcore.settings.recipes import build_config

    cls = ARMS.lookup(name)
    try:
        cfg = build_config(cls.config_class, options or {}, "arm_options")
    except ConfigError as e:
        raise ConfigError(f"arm '{name}': {e}", key=e.key, reason=f"arm '{name}': {e.reason}") from None
    return cls(cfg)
