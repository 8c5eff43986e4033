"""The ``classifier`` loader: a checkpoint that ``AutoModelForSequenceClassification`` loads with
its trained head (every reward model ``rmtrain`` writes, and most released ones).

The reward is ``logits[:, 0]`` of a one-label head; a head of several outputs (attribute scores,
per-class logits) needs ``--reward-head``, an index or one of ``config.id2label``'s names, and
reads that column. A checkpoint whose head weights are absent (transformers would initialise them
at random: a base model, a causal LM relabelled as a classifier) is refused."""

from __future__ import annotations

from typing import Any

from rmcore.errors import ConfigError
from rmcore.models.device import Placement
from rmcore.models.modeling import ensure_pad_token, load_tokenizer, score_head_names
from rmeval.scoring.loaders import KnownModel, RewardModel, not_a_reward_model, output_reader, parse_head


def matches(path: str, config: dict[str, Any]) -> bool:
    return any(a.endswith("ForSequenceClassification") for a in config.get("architectures") or [])


def load(path: str, config: dict[str, Any], placement: Placement, reward_head: str | int | None, *,
         known: KnownModel | None = None) -> RewardModel:
    from transformers import AutoModelForSequenceClassification

    # transformers: this module loads without it
    from rmcore.console.training import load_quietly

    labels = {int(k): v for k, v in (config.get("id2label") or {}).items()}
    n_out = int(config.get("num_labels") or len(labels) or 1)
    head = parse_head(reward_head, labels)
    if head == "score":
        raise ConfigError(f"--reward-head score: {path} is a plain classifier; choose one of its {n_out} outputs")
    if head is None and n_out != 1:
        names = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))
        raise ConfigError(f"{path} has {n_out} outputs ({names}); choose the reward with --reward-head")

    def refuse(keys: list[str]) -> None:
        raise not_a_reward_model(path, f"its checkpoint has no trained score head (missing {', '.join(keys[:4])})")

    tok = load_tokenizer(path, placement.trust_remote_code)
    model = load_quietly(AutoModelForSequenceClassification.from_pretrained, path, on_fresh=refuse,
                         fresh_head=lambda m: [*score_head_names(m), "pooler"], **placement.load_kwargs())
    ensure_pad_token(tok, model)
    placement.place(model)
    column = 0 if head is None else int(head)
    label = None if head is None else (labels.get(column, str(column)) if isinstance(head, int) else str(head))
    return RewardModel(model, tok, "classifier", output_reader(column if head is not None else None, what=path),
                       head=label, prefix_head=column)
