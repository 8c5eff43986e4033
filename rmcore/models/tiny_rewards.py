"""Tiny released-reward-model shapes built locally (nothing is downloaded): the checkpoints the
loaders of ``rmeval.scoring.loaders`` read, at a size a CPU scores in milliseconds.

- ``save_gated_remote_code``: a checkpoint that ships its own modelling code (``auto_map`` in
  config.json), ArmoRM's shape: per-attribute ``rewards`` from a linear layer on the last token's
  state and a gated ``score`` (softmax gating over the attributes). Loaded with
  ``trust_remote_code``; ``--reward-head K`` reads attribute K.
- ``save_value_head``: a decoder backbone with a linear value head saved beside it under its own
  name (``model.`` + ``value_head``: OpenRLHF; ``model.`` + ``regression_head``: UltraRM;
  ``transformer.`` + ``v_head``: Starling), optionally OpenRLHF's reward normalisation in config.json.

Both take the tokenizer (``rmcore.models.tiny.train_tokenizer``) and a seed, so the same call writes the
same weights; the tests of the loaders check the rewards against these weights by hand, and
``rmeval.reproduce.standins`` uses them as stand-ins for the released models of those shapes."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from rmcore.models.tiny import tiny_model

GATED_MODULE = "modeling_gated_rm"
GATED_CODE = '''
from dataclasses import dataclass

import torch
from transformers import LlamaConfig, LlamaModel, PreTrainedModel
from transformers.utils import ModelOutput


class GatedRewardConfig(LlamaConfig):
    model_type = "gated_reward_test"

    def __init__(self, num_objectives=3, **kwargs):
        super().__init__(**kwargs)
        self.num_objectives = num_objectives


@dataclass
class GatedRewardOutput(ModelOutput):
    rewards: torch.FloatTensor = None
    score: torch.FloatTensor = None


class GatedRewardModel(PreTrainedModel):
    config_class = GatedRewardConfig
    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__(config)
        self.model = LlamaModel(config)
        self.regression_layer = torch.nn.Linear(config.hidden_size, config.num_objectives, bias=False)
        self.gating = torch.nn.Linear(config.hidden_size, config.num_objectives)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        h = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        last = attention_mask.sum(1) - 1
        x = h[torch.arange(h.shape[0]), last]
        rewards = self.regression_layer(x)
        weights = torch.softmax(self.gating(x), dim=-1)
        return GatedRewardOutput(rewards=rewards, score=(rewards * weights).sum(-1, keepdim=True))
'''
VALUE_HEAD_LAYOUTS = {"openrlhf": ("model.", "value_head"), "ultrarm": ("model.", "regression_head"),
                      "starling": ("transformer.", "v_head")}


def _gated_module(code_dir: Path) -> Any:
    """The modelling module written to ``code_dir`` and imported (registered for the auto classes,
    so ``save_pretrained`` copies it beside the weights and writes ``auto_map``)."""
    src = code_dir / f"{GATED_MODULE}.py"
    src.write_text(GATED_CODE)
    spec = importlib.util.spec_from_file_location(GATED_MODULE, src)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[GATED_MODULE] = mod
    spec.loader.exec_module(mod)
    mod.GatedRewardConfig.register_for_auto_class()
    mod.GatedRewardModel.register_for_auto_class("AutoModelForSequenceClassification")
    return mod


def save_gated_remote_code(path: str | os.PathLike, tokenizer: Any, *, num_objectives: int = 3, seed: int = 0,
                           hidden_size: int = 32, max_position_embeddings: int = 128) -> Any:
    """A gated multi-objective reward model with its code saved under ``path``; returns the model
    (eval mode). Its modelling file is written next to ``path`` first, then copied into it."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mod = _gated_module(path.parent)
    cfg = mod.GatedRewardConfig(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                                num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                                max_position_embeddings=max_position_embeddings, num_objectives=num_objectives,
                                pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    model = mod.GatedRewardModel(cfg).eval()
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return model


def save_value_head(path: str | os.PathLike, tokenizer: Any, *, layout: str = "openrlhf", seed: int = 0,
                    normalize: tuple[float, float] | None = None,
                    max_position_embeddings: int = 128) -> tuple[Any, Any]:
    """A tiny Llama backbone and a one-row value head saved as ``layout`` lays them out (see
    ``VALUE_HEAD_LAYOUTS``); ``normalize`` = (mean, std) writes OpenRLHF's reward normalisation.
    Returns (backbone, head weight (1, hidden))."""
    import torch
    from safetensors.torch import save_file

    prefix, name = VALUE_HEAD_LAYOUTS[layout]
    backbone = tiny_model(tokenizer, "llama", seed=seed, max_position_embeddings=max_position_embeddings).model.eval()
    torch.manual_seed(seed + 1)
    head = torch.randn(1, backbone.config.hidden_size)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tensors = {prefix + k: v.contiguous() for k, v in backbone.state_dict().items()}
    tensors[f"{name}.weight"] = head
    save_file(tensors, str(path / "model.safetensors"))
    cfg = backbone.config.to_dict()
    cfg["architectures"] = ["LlamaRewardModel" if layout == "ultrarm" else "LlamaForCausalLM"]
    if normalize is not None:
        cfg.update(normalize_reward=True, mean=normalize[0], std=normalize[1])
    (path / "config.json").write_text(json.dumps(cfg))
    tokenizer.save_pretrained(path)
    return backbone, head
