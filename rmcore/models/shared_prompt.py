"""Shared-prompt forward for decoder reward models (prefix sharing, Wang and Hegde 2024).

A pair's chosen and rejected texts start with the same prompt. Instead of two rows
``[prompt][chosen]`` and ``[prompt][rejected]`` the batch holds one row
``[prompt][chosen][rejected]`` (and every response of that prompt the batch holds), with

- a 4-D attention mask: the prompt is causal over itself, each response sees the prompt and,
  causally, itself only (never another response);
- position ids that restart each response at the prompt's end;
- each reward read at its response's last token (the score head applied there).

So every reward is exactly what a separate forward of ``[prompt][response]`` gives, while the prompt
is computed once. The shared part is the longest common token prefix of the texts, found on the
token ids, so it is exact even where a prompt was cut differently for two responses (then less is
shared). Decoder classifiers only (``score`` head on a causal backbone, SDPA or eager attention,
which take a custom 4-D mask); anything else keeps the ordinary forward.
"""

from __future__ import annotations

from typing import Any

import torch

SHARED_PROMPT_MODES = ("auto", "true", "false")


def common_prefix_len(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def unwrap_classifier(model: Any) -> Any:
    """The transformers classifier inside DDP / DeepSpeed / peft wrappers."""
    while hasattr(model, "module") and not hasattr(model, "score"):
        model = model.module
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()
    return model


def unsupported_reason(model: Any) -> str | None:
    """Why ``model`` cannot take the shared-prompt forward, or None when it can."""
    base = unwrap_classifier(model)
    cfg = getattr(base, "config", None)
    if cfg is None or not hasattr(base, "score"):
        return f"{type(base).__name__} is not a decoder classifier with a score head (e.g. a BERT encoder)"
    if getattr(cfg, "is_encoder_decoder", False):
        return f"{type(base).__name__} is an encoder-decoder model"
    impl = getattr(cfg, "_attn_implementation", None)
    if impl not in ("sdpa", "eager"):
        # flash-attention kernels take padding masks only; a custom 4-D mask would be ignored
        return f"attention implementation '{impl}' does not take a custom 4-D mask (use sdpa or eager)"
    text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    if any(t != "full_attention" for t in (getattr(text_cfg, "layer_types", None) or [])):
        # a ready 4-D mask is used as is, so sliding-window layers would lose their window
        return "model has sliding-window attention layers"
    return None


MIN_SHARED = 16  # a pair sharing fewer tokens keeps two rows: merging saves little and widens rows


def pack_pairs(chosen: list[list[int]], rejected: list[list[int]], pad_id: int,
               min_shared: int | None = None) -> dict[str, torch.Tensor]:
    """Rows ``[shared prefix][response]...`` for a batch of pairs.

    Pairs whose shared prefix is the same token sequence (pairs of one prompt) go in one row, and a
    response that occurs in several of those pairs is computed once. A pair sharing fewer than
    ``min_shared`` tokens (e.g. a long prompt cut at different points for its two responses) gets
    one row per text, as the ordinary forward. ``reward_index`` (2n, 2) holds (row, position) of
    each text's last token: chosen texts first, then rejected, as the ordinary collator orders them."""
    min_shared = MIN_SHARED if min_shared is None else min_shared
    rows: dict[Any, tuple[list[int], list[list[int]]]] = {}  # key -> (prefix, distinct suffixes)
    where: list[tuple[Any, int]] = []
    n = len(chosen)
    shared = [min(common_prefix_len(c, r), len(c) - 1, len(r) - 1) for c, r in zip(chosen, rejected)]
    for slot, text in enumerate(chosen + rejected):
        i = slot % n
        p = shared[i]
        if p < min_shared:
            key: Any = ("alone", slot)
            p = 0
        else:
            key = tuple(text[:p])
        prefix, suffixes = rows.setdefault(key, (text[:p], []))
        s = text[p:]
        if s not in suffixes:
            suffixes.append(s)
        where.append((key, suffixes.index(s)))
    keys = list(rows)
    width = max(len(rows[k][0]) + sum(len(s) for s in rows[k][1]) for k in keys)
    n_rows = len(keys)
    ids = torch.full((n_rows, width), pad_id, dtype=torch.long)
    pos = torch.zeros((n_rows, width), dtype=torch.long)
    seg = torch.full((n_rows, width), -1, dtype=torch.long)  # 0 prefix, k response k, -1 padding
    last: dict[tuple[Any, int], tuple[int, int]] = {}
    for row, key in enumerate(keys):
        prefix, suffixes = rows[key]
        p = len(prefix)
        ids[row, :p] = torch.tensor(prefix, dtype=torch.long)
        pos[row, :p] = torch.arange(p)
        seg[row, :p] = 0
        start = p
        for k, s in enumerate(suffixes):
            m = len(s)
            ids[row, start:start + m] = torch.tensor(s, dtype=torch.long)
            pos[row, start:start + m] = torch.arange(p, p + m)
            seg[row, start:start + m] = k + 1
            last[(key, k)] = (row, start + m - 1)
            start += m
    reward_index = torch.tensor([last[w] for w in where], dtype=torch.long).reshape(-1, 2)
    return {"input_ids": ids, "position_ids": pos, "segment_ids": seg, "reward_index": reward_index}


def shared_prompt_mask(segment_ids: torch.Tensor, dtype: torch.dtype, additive: bool = True) -> torch.Tensor:
    """(rows, 1, W, W) mask from segment ids: causal, and a response token sees only the prefix and
    its own response. Padding sees itself only, so no attention row is empty (an empty row is NaN in
    softmax, and NaN times a zero gradient is still NaN). Additive (0 / dtype min) for eager
    attention; boolean (True = attend) where SDPA takes it, which is smaller."""
    w = segment_ids.shape[1]
    dev = segment_ids.device
    sq, sk = segment_ids[:, :, None], segment_ids[:, None, :]
    causal = torch.ones((w, w), dtype=torch.bool, device=dev).tril()
    allowed = causal & (sk >= 0) & ((sk == 0) | (sk == sq))
    allowed |= torch.eye(w, dtype=torch.bool, device=dev)
    allowed = allowed[:, None]
    if not additive:
        return allowed
    return torch.zeros(allowed.shape, dtype=dtype, device=dev).masked_fill_(~allowed, torch.finfo(dtype).min)


def shared_prompt_forward(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-position scores (rows, W) of a packed batch: the score head's output at every token,
    captured with a hook so the call goes through the outer module (DDP's gradient hooks, peft's
    adapters and gradient checkpointing all stay in force)."""
    base = unwrap_classifier(model)
    impl = base.config._attn_implementation
    dtype = next(base.parameters()).dtype
    mask = shared_prompt_mask(batch["segment_ids"], dtype, additive=impl != "sdpa")
    captured: list[torch.Tensor] = []
    handle = base.score.register_forward_hook(lambda _m, _i, out: captured.append(out))
    try:
        model(input_ids=batch["input_ids"], attention_mask=mask, position_ids=batch["position_ids"], use_cache=False)
    finally:
        handle.remove()
    return captured[-1][..., 0]


def gather_rewards(per_position: torch.Tensor, reward_index: torch.Tensor) -> torch.Tensor:
    return per_position[reward_index[:, 0], reward_index[:, 1]]
