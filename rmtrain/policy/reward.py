"""The reward model as a trl reward function: rmeval's ``SeqClassifierScorer`` (the audit's text
layout and forward pass) on (the conversation the reward model sees, the completion), placed by
``rmcore.models.device`` (``auto``: this process's GPU in bfloat16 where there is one, else the CPU)."""

from __future__ import annotations

import json
from typing import Any

from rmcore.models.device import Placement, describe
from rmeval.scoring.server import load_reward_scorer


def completion_text(completion: Any) -> str:
    """trl passes a string (standard prompts) or a list of messages (conversational prompts)."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content", "") for m in completion if m.get("role") == "assistant")


class ScorerReward:
    """Callable with trl's reward-function signature. ``reward_messages`` (a dataset column, JSON)
    is the conversation to score against; without it the prompt itself is used."""

    def __init__(self, checkpoint: str, *, max_length: int | None = None, batch_size: int = 32, device: str = "auto",
                 dtype: str = "auto") -> None:
        # max_length None: the checkpoint's training length (rmcore.runtime.checkpoints.scoring_max_length)
        self.scorer = load_reward_scorer(str(checkpoint), Placement(device=device, dtype=dtype), max_length=max_length,
                                         batch_size=batch_size)
        self.max_length: int = self.scorer.max_length  # the length used: recorded in the run's summary
        self.placement = {k: v for k, v in describe(self.scorer.model).items() if k in ("device", "dtype")}
        self.__name__ = f"reward_model:{self.scorer.name}"  # trl names the reward in its logs by this
        self.batch_means: list[float] = []  # one per rollout batch: the training curve in the summary
        self.n_scored = 0

    def __call__(self, prompts: list[Any], completions: list[Any], reward_messages: list[str] | None = None,
                 **kwargs: Any) -> list[float]:
        convs = []
        for i, p in enumerate(prompts):
            if reward_messages is not None:
                convs.append(json.loads(reward_messages[i]))
            elif isinstance(p, str):
                convs.append([{"role": "user", "content": p}])
            else:
                convs.append(list(p))
        scores = self.scorer.score([(c, completion_text(x)) for c, x in zip(convs, completions)])
        self.n_scored += len(scores)
        self.batch_means.append(float(scores.mean()))
        return [float(s) for s in scores]

    def close(self) -> None:
        self.scorer.close()
