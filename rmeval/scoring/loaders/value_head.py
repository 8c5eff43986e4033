"""The ``value_head`` loader: a decoder backbone plus a linear value head saved beside it, the
layout of reward models trained outside ``transformers``' classifier classes -- UltraRM
(``model.*`` + ``regression_head``), Starling-RM-34B (``transformer.*`` + ``v_head``), TRL's
value-head models (``v_head.summary``) and OpenRLHF's reward models (``value_head``).

The reward of a text is the head applied to the backbone's last hidden state at the text's last
real token (the last position the attention mask keeps, so left and right padding read the same
token): r = w . h_last (+ b). OpenRLHF saves the reward normalisation it trained with in
config.json (``normalize_reward``, ``mean``, ``std``) and applies it at evaluation; so does this
loader: r <- (r - mean) / std. A head of several rows needs ``--reward-head``.

The backbone loads through ``AutoModel.from_pretrained`` (so dtype, attention kernel and device
map apply as for any model), its weights renamed from the checkpoint's prefix; a backbone weight
missing from the checkpoint is a refusal, not a random initialisation."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch

from rmcore.errors import ConfigError
from rmcore.models.device import Placement
from rmcore.models.modeling import ensure_pad_token, load_tokenizer
from rmeval.scoring.loaders import KnownModel, RewardModel, not_a_reward_model, parse_head

HEAD_NAMES = ("regression_head", "v_head.summary", "v_head", "value_head")
EMBEDDINGS = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight")


def _files(path: str) -> list[Path]:
    p = Path(path)
    if not p.is_dir():
        return []
    return sorted(p.glob("*.safetensors")) or sorted(p.glob("pytorch_model*.bin"))


def _key_files(path: str) -> dict[str, Path]:
    """Tensor name -> the file holding it (only tensor headers are read)."""
    out: dict[str, Path] = {}
    for f in _files(path):
        if f.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(f), framework="pt") as sf:
                out.update({k: f for k in sf.keys()})  # noqa: SIM118 -- safe_open has no __iter__
        else:
            out.update({k: f for k in torch.load(f, map_location="cpu", mmap=True, weights_only=True)})
    return out


def _tensor(f: Path, key: str) -> torch.Tensor:
    if f.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(f), framework="pt") as sf:
            return sf.get_tensor(key)
    return torch.load(f, map_location="cpu", mmap=True, weights_only=True)[key].clone()


def head_name(keys: dict[str, Path] | set[str]) -> str | None:
    return next((h for h in HEAD_NAMES if f"{h}.weight" in keys), None)


def matches(path: str, config: dict[str, Any]) -> bool:
    if any(a.endswith("ForSequenceClassification") for a in config.get("architectures") or []):
        return False
    return head_name(_key_files(path)) is not None


class ValueHeadModel(torch.nn.Module):
    """Backbone + value head as one model whose forward gives ``logits`` (batch, outputs): the head
    at each row's last real token (normalised as the checkpoint says)."""

    def __init__(self, backbone: Any, head: torch.nn.Linear, mean: float = 0.0, std: float = 1.0) -> None:
        super().__init__()
        self.backbone, self.head, self.mean, self.std = backbone, head, mean, std
        self.config = backbone.config

    def get_input_embeddings(self) -> Any:
        return self.backbone.get_input_embeddings()

    def resize_token_embeddings(self, n: int) -> Any:
        return self.backbone.resize_token_embeddings(n)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any) -> Any:
        from transformers.modeling_outputs import SequenceClassifierOutput

        h = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        width = attention_mask.shape[1]
        last = (width - 1 - attention_mask.flip(1).long().argmax(1)).to(h.device)
        rows = h[torch.arange(h.shape[0], device=h.device), last]
        w = self.head.weight
        values = self.head(rows.to(device=w.device, dtype=w.dtype))
        return SequenceClassifierOutput(logits=(values - self.mean) / self.std)


def load(path: str, config: dict[str, Any], placement: Placement, reward_head: str | int | None, *,
         known: KnownModel | None = None) -> RewardModel:
    from transformers import AutoModel

    keys = _key_files(path)
    name = head_name(keys)
    if name is None:
        raise not_a_reward_model(path, f"no value head ({', '.join(h + '.weight' for h in HEAD_NAMES)}) among its "
                                       "weights")
    emb = next((k for k in keys for e in EMBEDDINGS if k.endswith(e)), None)
    if emb is None:
        raise ConfigError(f"{path}: no input embeddings among its weights ({' or '.join(EMBEDDINGS)}); "
                          "the value_head loader cannot find its backbone")
    prefix = emb[: len(emb) - len(next(e for e in EMBEDDINGS if emb.endswith(e)))]
    tok = load_tokenizer(path, placement.trust_remote_code)
    kwargs = placement.load_kwargs()
    if prefix:  # the checkpoint's names of the backbone's weights, without their prefix
        kwargs["key_mapping"] = {f"^{re.escape(prefix)}": ""}
    backbone, info = AutoModel.from_pretrained(path, output_loading_info=True, **kwargs)
    missing = sorted(info.get("missing_keys", ()))
    if missing:
        raise not_a_reward_model(path, f"backbone weights missing from the checkpoint ({', '.join(missing[:4])})")
    weight = _tensor(keys[f"{name}.weight"], f"{name}.weight")
    weight = weight.reshape(-1, weight.shape[-1])
    bias = _tensor(keys[f"{name}.bias"], f"{name}.bias") if f"{name}.bias" in keys else None
    head = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    with torch.no_grad():
        head.weight.copy_(weight)
        if bias is not None:
            head.bias.copy_(bias.reshape(-1))
    last_param = list(backbone.parameters())[-1]
    head.to(device=last_param.device, dtype=last_param.dtype)
    cfg = json.loads((Path(path) / "config.json").read_text()) if (Path(path) / "config.json").is_file() else config
    mean, std = (float(cfg.get("mean", 0.0)), float(cfg.get("std", 1.0))) if cfg.get("normalize_reward") else (0.0, 1.0)
    model = ValueHeadModel(backbone, head, mean, std)
    ensure_pad_token(tok, model)
    placement.place(model)
    column = parse_head(reward_head)
    if column == "score" or (column is None and weight.shape[0] != 1):
        raise ConfigError(f"{path}: its {name} has {weight.shape[0]} outputs; choose one with --reward-head "
                          f"(0..{weight.shape[0] - 1})")
    k = 0 if column is None else int(column)
    if not -weight.shape[0] <= k < weight.shape[0]:
        raise ConfigError(f"--reward-head {k}: {path}'s {name} has {weight.shape[0]} outputs")
    return RewardModel(model, tok, "value_head", lambda out: out.logits[:, k],
                       head=None if column is None else str(k), prefix_head=None,
                       extra={"head": name, "backbone_prefix": prefix, "normalised": (mean, std) != (0.0, 1.0)})
