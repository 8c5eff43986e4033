"""Reward-model loaders: how a released reward model is loaded, and where its reward is read.

A reward model here is a network whose forward pass over one text (conversation + response, laid
out by ``rmcore.models.formatting``) gives one number. For most released models that number is
``logits[0]`` of a one-label ``AutoModelForSequenceClassification``; for others it is not, and each
such shape has a loader, one file per kind (as reward-bench's ``REWARD_MODEL_CONFIG`` and Reward
Auditor's loaders key custom code by model):

- ``classifier``: ``AutoModelForSequenceClassification``; a one-label head is the reward, a
  multi-output head needs ``--reward-head`` (an index or a label name of ``config.id2label``).
- ``remote_code``: a checkpoint that ships its modelling code (``auto_map`` in config.json, e.g.
  ArmoRM's gated multi-objective head); needs ``--trust-remote-code``. The reward is the model's
  own ``score`` output (ArmoRM: the gating layer's mixture of its attribute rewards); with
  ``--reward-head K`` the K-th of its per-attribute ``rewards`` (or logits).
- ``value_head``: a decoder backbone plus a linear value head saved beside it under its own name
  (``regression_head``: UltraRM; ``v_head``: Starling-RM-34B, TRL value-head models;
  ``value_head``: OpenRLHF), read at the last real token; OpenRLHF's saved reward normalisation
  (``normalize_reward``, ``mean``, ``std`` in config.json) is applied.
- ``lm_logit``: a causal LM whose reward is one token's logit after the conversation
  (Nemotron-70B-Reward: token 0); never chosen from a config, only by name.

``KNOWN_MODELS`` names released models whose loader or chat template cannot be read off the
checkpoint (matched by Hub id or by a local directory of the same name, or chosen with ``--loader
NAME``); a named model may carry the chat template it was trained with, used when its tokenizer has
none. Otherwise the loader is chosen from the checkpoint: value-head weights, then ``auto_map``,
then a ``*ForSequenceClassification`` architecture, then any kind added with ``register_reward_loader``
(docs/extending.md).

Anything else -- a causal LM, a base encoder -- is not a reward model: scoring it through a
classifier would read a randomly initialised head. It is refused with one line naming what to use
instead (``--scorer generative_judge``, ``--scorer dpo_implicit``, a loader); so is a classifier
checkpoint whose head weights are missing (transformers would initialise them).
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from rmcore.errors import ConfigError, PathNotFoundError
from rmcore.io.files import check_path, check_safetensors
from rmcore.models.device import Placement, describe, input_device
from rmcore.models.modeling import check_model_name, resolve_model_path
from rmcore.settings.recipes import training_recipe_writing
from rmcore.settings.registry import Registry, did_you_mean

# UltraLM/UltraRM's layout as reward-bench evaluates UltraRM (its "openbmb" conversation template):
# "User: <turn>\n\nAssistant: <turn>\n\n", every turn followed by the separator
OPENBMB_TEMPLATE = ("{% for m in messages %}{% if m['role'] == 'user' %}User: {% elif m['role'] == 'assistant' %}"
                    "Assistant: {% endif %}{{ m['content'] }}\n\n{% endfor %}"
                    "{% if add_generation_prompt %}Assistant: {% endif %}")


@dataclass(frozen=True)
class KnownModel:
    """A released reward model whose loader (or chat template) is known by name."""

    name: str
    hub_ids: tuple[str, ...]
    loader: str
    chat_template: str | None = None  # used when the tokenizer has none
    note: str = ""


KNOWN_MODELS = {m.name: m for m in (
    KnownModel("armorm", ("RLHFlow/ArmoRM-Llama3-8B-v0.1",), "remote_code",
               note="gated mixture of 19 attribute rewards; --reward-head K reads attribute K"),
    KnownModel("ultrarm", ("openbmb/UltraRM-13b",), "value_head", chat_template=OPENBMB_TEMPLATE,
               note="Llama backbone + regression_head, User:/Assistant: layout"),
    KnownModel("starling-rm-34b", ("Nexusflow/Starling-RM-34B",), "value_head",
               note="Yi backbone (transformer.*) + v_head"),
    KnownModel("nemotron-70b-reward", ("nvidia/Llama-3.1-Nemotron-70B-Reward-HF",), "lm_logit",
               note="causal LM; the reward is the logit of token 0 after the conversation"),
)}


@dataclass
class RewardModel:
    """A loaded reward model: the network (eval mode, placed), its tokenizer, and where its reward
    is read. ``prefix_head``: the score column the shared-prompt path may read off the backbone
    (``rmcore.models.prefix_scoring``); None where the reward is not a plain column of ``score``."""

    model: Any
    tokenizer: Any
    loader: str
    read: Callable[[Any], torch.Tensor]
    head: str | None = None  # as recorded: None (the one reward), an index, a label, or "score"
    prefix_head: int | None = 0
    known: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """What a report says about the model: placement (device, dtype, attention) and how it is read."""
        return {**describe(self.model), "loader": self.loader, "reward_head": self.head,
                **({"known_model": self.known} if self.known else {})}


class RewardLoader(Protocol):
    """What a loader kind provides (each built-in is a module of these two functions)."""

    def matches(self, path: str, config: dict[str, Any]) -> bool:
        """Whether this loader reads the checkpoint at ``path`` (``config``: its config.json)."""

    def load(self, path: str, config: dict[str, Any], placement: Placement, reward_head: str | int | None, *,
             known: KnownModel | None = None) -> RewardModel:
        """The loaded, placed reward model."""


# loader kind -> a RewardLoader, or the name of a module that is one (imported when used). The
# automatic choice tries them in this order, most specific first; a registered kind comes after
# the built-ins, so it is chosen for checkpoints they do not claim, or by name (--loader KIND).
LOADER_KINDS: Registry[str | RewardLoader] = Registry("reward-model loader", {
    "value_head": "rmeval.scoring.loaders.value_head",
    "remote_code": "rmeval.scoring.loaders.remote_code",
    "classifier": "rmeval.scoring.loaders.classifier",
    "lm_logit": "rmeval.scoring.loaders.lm_logit",  # never matched from a config: named only
}, sort_known=True)


def known_names() -> list[str]:
    """Loader kinds and named released models: what ``--loader`` takes."""
    return sorted([*LOADER_KINDS, *KNOWN_MODELS])


def known_hub_ids() -> tuple[str, ...]:
    """The Hub ids of the named released reward models (suggested when a model name is not found)."""
    return tuple(h for m in KNOWN_MODELS.values() for h in m.hub_ids)


def known_model(name_or_path: str) -> KnownModel | None:
    """The named released model ``name_or_path`` is (its Hub id, or a local copy whose directory
    has the repository's name)."""
    s = str(name_or_path).rstrip("/")
    for m in KNOWN_MODELS.values():
        if s in m.hub_ids or any(Path(s).name == h.split("/")[-1] for h in m.hub_ids):
            return m
    return None


def check_reward_path(name_or_path: str | os.PathLike) -> None:
    """A reward model that is neither an existing local path nor a Hub id (``owner/name``) is one
    line naming it and what writes it, not the Hub's repo-id error: a path that a training recipe
    in ``recipes/`` writes (its ``output_dir``) is local whatever its shape, and the line names the
    recipe. A Hub id neither in the cache nor on a Hub that answers is one line too
    (``rmcore.models.modeling.check_model_name``). ``pkg:`` models are checked by their package. A local
    checkpoint's safetensors files must be whole (``rmcore.io.files.check_safetensors``)."""
    name = str(name_or_path)
    path = resolve_model_path(name)
    if Path(os.path.expanduser(path)).exists():
        check_safetensors(path)
        return
    recipe = training_recipe_writing(name)
    if recipe:
        raise PathNotFoundError(f"reward model {name}: not found; train it with `rmtrain train --config {recipe}`")
    try:
        check_path(path, "reward model", kind="any", hub_ok=True)
    except PathNotFoundError:
        raise PathNotFoundError(f"reward model {name}: not found; not a local checkpoint, nor a Hub id owner/name "
                                f"(`rmtrain train --config RECIPE --out {name}` trains one there)") from None
    check_model_name(path, f"reward model {name}")  # a Hub id: in the cache, or the Hub asked once


def read_config(path: str) -> dict[str, Any]:
    """config.json of a local checkpoint or a Hub id (through the Hub cache), as a dict; no model code runs."""
    local = Path(path) / "config.json"
    if local.is_file():
        return json.loads(local.read_text())
    from transformers import PretrainedConfig

    try:
        cfg, _ = PretrainedConfig.get_config_dict(path)
    except (OSError, ValueError) as e:
        raise ConfigError(f"reward model {path}: cannot read its config.json ({str(e).splitlines()[0]})") from None
    return cfg


def not_a_reward_model(path: str, why: str) -> ConfigError:
    """The one-line refusal of a checkpoint that has no trained reward head."""
    return ConfigError(f"{path} is not a reward model: {why}; scoring it as a sequence classifier would read a "
                       "randomly initialised head. Use --scorer generative_judge (the model as an LLM judge) or "
                       "--scorer dpo_implicit --reference REF (a DPO policy), or --loader NAME for a released reward "
                       f"model with its own head (known: {', '.join(known_names())})")


def register_reward_loader(kind: str, loader: str | RewardLoader, *, replace: bool = False) -> None:
    """Add a loader kind: an object (or the name of a module) with ``matches`` and ``load`` (see
    ``RewardLoader``). A kind already registered is an error unless ``replace``."""
    LOADER_KINDS.register(kind, loader, replace=replace)


def _module(kind: str) -> RewardLoader:
    loader = LOADER_KINDS.lookup(kind)
    return importlib.import_module(loader) if isinstance(loader, str) else loader


def choose_loader(path: str, config: dict[str, Any], requested: str | None = None) -> tuple[str, KnownModel | None]:
    """(loader kind, named model or None) for a checkpoint: ``requested`` (a kind or a known
    model's name), else the named model ``path`` is, else the first kind whose ``matches(path,
    config)`` holds (value head, remote code, classifier). Nothing matching is a refusal."""
    if requested:
        if requested in LOADER_KINDS:
            return requested, None
        if requested in KNOWN_MODELS:
            return KNOWN_MODELS[requested].loader, KNOWN_MODELS[requested]
        raise ConfigError(f"--loader {requested}: unknown; known: {', '.join(known_names())}"
                          + did_you_mean(requested, known_names()))
    known = known_model(path)
    if known is not None:
        return known.loader, known
    for kind in LOADER_KINDS:
        if _module(kind).matches(path, config):
            return kind, None
    archs = config.get("architectures") or ["no architecture"]
    what = "a causal LM" if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs) else "no reward head"
    raise not_a_reward_model(path, f"its config names {', '.join(archs)} ({what})")


def parse_head(head: str | int | None, labels: dict[int, str] | None = None) -> int | str | None:
    """``--reward-head`` as an index, ``"score"`` (a model's own overall output), or None; a label
    name is looked up in ``labels`` (config.id2label)."""
    if head is None or isinstance(head, int):
        return head
    text = str(head).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    if text == "score":
        return "score"
    by_name = {str(v): int(k) for k, v in (labels or {}).items()}
    lowered = {k.lower(): v for k, v in by_name.items()}
    if text in by_name or text.lower() in lowered:
        return by_name.get(text, lowered.get(text.lower()))
    raise ConfigError(f"--reward-head {text}: not an index, 'score' or one of the model's labels "
                      f"({', '.join(by_name) or 'it names none'})")


def load_reward(name_or_path: str | os.PathLike, placement: Placement | None = None, *,
                reward_head: str | int | None = None, loader: str | None = None) -> RewardModel:
    """The reward model at ``name_or_path`` (local path, Hub id or ``pkg:`` model), loaded by its
    loader (see the module docstring) and placed as ``placement`` says; one short probe forward
    checks that the reward can be read, so a wrong ``--reward-head`` fails before any scoring."""
    placement = placement or Placement()
    placement.validate()
    check_reward_path(name_or_path)
    path = resolve_model_path(name_or_path)
    config = read_config(path)
    kind, known = choose_loader(path, config, loader)
    rm = _module(kind).load(path, config, placement, reward_head, known=known)
    if known is not None:
        rm.known = known.name
        if known.chat_template and not getattr(rm.tokenizer, "chat_template", None):
            rm.tokenizer.chat_template = known.chat_template
    _probe(rm, str(name_or_path))
    return rm


@torch.inference_mode()
def _probe(rm: RewardModel, name: str) -> None:
    ids = rm.tokenizer("Hello", add_special_tokens=True)["input_ids"] or [rm.tokenizer.pad_token_id or 0]
    dev = input_device(rm.model)
    out = rm.model(input_ids=torch.tensor([ids], device=dev), attention_mask=torch.ones((1, len(ids)), dtype=torch.long,
                                                                                          device=dev))
    value = rm.read(out)
    if value.shape != (1,):
        raise ConfigError(f"reward model {name}: the {rm.loader} loader read a reward of shape {tuple(value.shape)} "
                          "per text, expected one number; choose an output with --reward-head")


def output_reader(head: int | str | None, *, what: str) -> Callable[[Any], torch.Tensor]:
    """The reward of a forward output: ``score`` (a model's own overall output) when it has one and
    no head is asked for, else column ``head`` (default 0 of a single column) of its per-attribute
    ``rewards`` or of its ``logits``. ``what`` names the model in errors."""

    def field_of(out: Any, name: str) -> torch.Tensor | None:
        v = out.get(name) if isinstance(out, dict) else getattr(out, name, None)
        return v if isinstance(v, torch.Tensor) else None

    def read(out: Any) -> torch.Tensor:
        score = field_of(out, "score")
        if head == "score" or (head is None and score is not None):
            if score is None:
                raise ConfigError(f"{what}: --reward-head score, but its forward output has no 'score'")
            return score.reshape(score.shape[0], -1)[:, 0]
        table = field_of(out, "rewards")
        table = table if table is not None else field_of(out, "logits")
        if table is None:
            raise ConfigError(f"{what}: its forward output has neither 'score', 'rewards' nor 'logits'")
        table = table.reshape(table.shape[0], -1)
        if head is None:
            if table.shape[1] != 1:
                raise ConfigError(f"{what} has {table.shape[1]} outputs; choose the reward with --reward-head "
                                  f"(0..{table.shape[1] - 1})")
            return table[:, 0]
        if not -table.shape[1] <= int(head) < table.shape[1]:
            raise ConfigError(f"--reward-head {head}: {what} has {table.shape[1]} outputs (0..{table.shape[1] - 1})")
        return table[:, int(head)]

    return read
