"""Scorer backends (sequence classifier, generative judge, DPO implicit reward) and a score cache."""

from rmeval.scoring.base import SCORERS, ScoreItem, Scorer, make_scorer, register_scorer

__all__ = ["SCORERS", "ScoreItem", "Scorer", "make_scorer", "register_scorer"]
