"""The ``remote_code`` loader: a checkpoint that ships its own modelling code (``auto_map`` in its
config.json), such as ArmoRM's multi-objective model, whose forward returns its per-attribute
``rewards`` and the ``score`` its gating layer mixes from them.

Running that code needs ``--trust-remote-code`` (``trust_remote_code`` in a recipe): without it the
checkpoint is refused with one line naming the code it would run. The class is the one
``auto_map`` gives for ``AutoModelForSequenceClassification`` (else ``AutoModel``). The reward is
the model's own ``score`` output when it has one; ``--reward-head K`` reads column K of its
``rewards`` (or of its ``logits``); a plain one-output model reads ``logits[:, 0]``."""

from __future__ import annotations

from typing import Any

from rmcore.errors import ConfigError
from rmcore.models.device import Placement
from rmcore.models.modeling import ensure_pad_token, load_tokenizer
from rmeval.scoring.loaders import KnownModel, RewardModel, output_reader, parse_head

AUTO_CLASSES = ("AutoModelForSequenceClassification", "AutoModel")


def matches(path: str, config: dict[str, Any]) -> bool:
    return any(c in (config.get("auto_map") or {}) for c in AUTO_CLASSES)


def load(path: str, config: dict[str, Any], placement: Placement, reward_head: str | int | None, *,
         known: KnownModel | None = None) -> RewardModel:
    import transformers

    auto_map = config.get("auto_map") or {}
    cls = next((c for c in AUTO_CLASSES if c in auto_map), None)
    if cls is None:
        raise ConfigError(f"{path}: its config.json has no auto_map entry for {' or '.join(AUTO_CLASSES)}; "
                          "it does not ship a reward model's code")
    if not placement.trust_remote_code:
        raise ConfigError(f"{path} ships its own modelling code ({auto_map[cls]}); pass --trust-remote-code "
                          "(trust_remote_code: true in a recipe) to run it")
    labels = {int(k): v for k, v in (config.get("id2label") or {}).items()}
    head = parse_head(reward_head, labels)
    tok = load_tokenizer(path, trust_remote_code=True)
    model = getattr(transformers, cls).from_pretrained(path, **placement.load_kwargs())
    ensure_pad_token(tok, model)
    placement.place(model)
    label = None if head is None else (labels.get(head, str(head)) if isinstance(head, int) else str(head))
    # the shared-prompt path reads score(h) columns; a model with its own output head is scored whole
    return RewardModel(model, tok, "remote_code", output_reader(head, what=path), head=label, prefix_head=None,
                       extra={"class": auto_map[cls]})
