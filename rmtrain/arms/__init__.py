"""The matched arms, registered by name (``ARMS``: the six of the study, deferred until one is
looked up, and any registered in code or by a plugin)."""

from rmtrain.arms.base import ARMS, Arm, ArmConfig, PairTable, make_arm, register_arm

__all__ = ["ARMS", "Arm", "ArmConfig", "PairTable", "make_arm", "register_arm"]
