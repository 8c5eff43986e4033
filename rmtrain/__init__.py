"""rmtrain: data, matched reward-model arms, trainers, policy training and sweeps."""

__version__ = "0.1.0"
