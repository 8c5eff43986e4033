"""The six matched arms, registered by name."""

from rmtrain.arms import pairwise, pointwise  # noqa: F401  (registration)
from rmtrain.arms.base import ARMS, Arm, ArmConfig, PairTable, make_arm, register_arm

__all__ = ["ARMS", "Arm", "ArmConfig", "PairTable", "make_arm", "register_arm"]
