"""Exact savings for encoder reward models: real tokens only, and the pooled token only at the top.

A BERT-family sequence classifier (BERT, MiniLM, RoBERTa, XLM-R, ELECTRA) wastes two kinds of
work on a padded batch, and this module removes both without changing a score or a gradient:

- **Padding.** Every sublayer except attention works token by token (the Q/K/V and output
  projections, the feed-forward block, the norms, dropout), yet a padded batch runs them on pad
  positions too. Here those sublayers run on the real tokens packed into one ``[tokens, hidden]``
  matrix (one large matmul, no padded rows); only attention sees the padded ``[batch, heads, len,
  len]`` view, where padding is masked as keys. This is the padding-free layout of the unpadded
  BERT implementations (NVIDIA's BERT, MosaicBERT), here on the model's own modules.
- **The top layer.** The head reads the first token's final hidden state only (the pooler or
  classification head takes ``hidden[:, 0]``), so in the last layer every other token's query,
  attention output, feed-forward block and norms are thrown away: only their keys and values
  feed the first token's attention. The last layer computes the first token alone (its query
  against every real token's key and value); for 6 layers this is ~14% of the model's compute.

Bidirectional attention rules out the decoder's shared prompt for encoders (each prompt token
sees the response), so these are the encoder's exact savings; decoders use ``rmcore.models.shared_prompt``.

The change is an instance-level ``forward`` on each encoder layer, installed and removed by the
context manager, so nothing is saved with the model and gradient checkpointing re-runs the same
code. Inside it the encoder's last hidden state has one position and pad positions of the other
layers hold zeros, so nothing that reads other positions (``output_hidden_states``, token-level
heads) may run inside it. A batch that is not right-padded (a pad at position 0) runs the model's
own layers.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from rmcore.models.batching import bucket_spans, length_buckets

log = logging.getLogger(__name__)

# Sequence classifiers whose head reads the first token's final hidden state and nothing else,
# with BERT's layer layout (attention.self.{query,key,value}, attention.output, feed_forward_chunk).
FIRST_TOKEN_CLASSIFIERS = frozenset({
    "BertForSequenceClassification", "RobertaForSequenceClassification", "XLMRobertaForSequenceClassification",
    "CamembertForSequenceClassification", "ElectraForSequenceClassification",
})
# attention kernels that take the [batch, 1, q, k] mask the model builds from a padding mask
_MASKED_KERNELS = ("eager", "sdpa")


def _base_model(model: Any) -> Any:
    while hasattr(model, "module") and isinstance(model.module, torch.nn.Module):  # DDP / DeepSpeed wrappers
        model = model.module
    if hasattr(model, "get_base_model"):  # peft
        model = model.get_base_model()
    return model


def encoder_layers_if_supported(model: Any) -> tuple[list[Any] | None, str]:
    """(the encoder layers, "") where the packed forward is exact for ``model``, else (None, why not)."""
    base = _base_model(model)
    name = type(base).__name__
    if name not in FIRST_TOKEN_CLASSIFIERS:
        return None, f"{name} is not a first-token sequence classifier with BERT's layer layout"
    config = base.config
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        return None, "decoder / cross-attention configuration"
    impl = getattr(config, "_attn_implementation", "eager") or "eager"
    if impl not in _MASKED_KERNELS:
        return None, f"attention implementation {impl!r} (needs eager or sdpa)"
    body = getattr(base, base.base_model_prefix, None)
    layers = list(getattr(getattr(body, "encoder", None), "layer", None) or [])
    if not layers:
        return None, "no encoder layers found"
    for layer in layers:
        attn = getattr(getattr(layer, "attention", None), "self", None)
        if attn is None or not all(hasattr(attn, n) for n in ("query", "key", "value", "attention_head_size")) \
                or not hasattr(layer, "feed_forward_chunk"):
            return None, f"{type(layer).__name__} does not have BERT's layer layout"
    return layers, ""


def _real_tokens(mask: torch.Tensor | None, n: int) -> torch.Tensor | None:
    """[batch, len] bool of real tokens from the layer's 4-D attention mask (what the first token
    may attend: the key-padding mask); None where there is no padding or the batch is not right-padded."""
    if mask is None or mask.dim() != 4 or mask.shape[-1] != n:
        return None
    row = mask[:, 0, 0, :]
    real = row if row.dtype == torch.bool else row > torch.finfo(row.dtype).min / 2  # additive: 0 or min
    if bool(real.all()) or not bool(real[:, 0].all()):
        return None
    return real


def _scatter(t: torch.Tensor, index: torch.Tensor, rows: int) -> torch.Tensor:
    """Packed [tokens, d] back to padded [rows, d] (zeros at pad positions), differentiably."""
    return t.new_zeros(rows, t.shape[-1]).index_copy(0, index, t)


def _attend(layer: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The model's own attention kernel on [batch, len, hidden] inputs; returns [batch, q_len, hidden]."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    attn = layer.attention.self
    b, d = q.shape[0], attn.attention_head_size
    q, k, v = (x.view(b, x.shape[1], -1, d).transpose(1, 2) for x in (q, k, v))
    eager = sys.modules[type(attn).__module__].eager_attention_forward
    interface = ALL_ATTENTION_FUNCTIONS.get_interface(attn.config._attn_implementation, eager)
    out, _ = interface(attn, q, k, v, mask, dropout=attn.dropout.p if attn.training else 0.0, scaling=attn.scaling)
    return out.reshape(b, q.shape[2], -1)


@dataclass
class _Layout:
    """Where a batch's real tokens are, and its attention groups (rows of similar length, each
    padded to its own longest row). Every layer gets the same mask, so this is built once a batch."""

    index: torch.Tensor  # flat [batch * len] positions of the real tokens, in packed order
    groups: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]  # rows, slots, packed rows, mask
    inverse: torch.Tensor | None  # one group: its packed rows' order back to packed order
    first_row_mask: torch.Tensor  # the first query's row of the mask (the pooled layer's)


# Padded tokens (per row) another attention call is worth; attention is the only padded work left,
# so rows are grouped by length and each group is padded to its own longest row.
ATTENTION_BUCKET_OVERHEAD = 64
_last: tuple[Any, _Layout | None] = (None, None)  # (mask, its layout): the layers of one forward share it


def _layout(mask: torch.Tensor | None, n: int) -> _Layout | None:
    global _last
    if _last[0] is not None and _last[0] is mask:
        return _last[1]
    real = _real_tokens(mask, n)
    layout = None if real is None else _build_layout(real, mask)
    _last = (mask, layout)
    return layout


def _build_layout(real: torch.Tensor, mask: torch.Tensor) -> _Layout:

    b, n = real.shape
    dev = real.device
    index = real.reshape(-1).nonzero().squeeze(1)
    lengths = real.sum(dim=1)
    order = torch.argsort(lengths, descending=True, stable=True)
    packed_row = torch.full((b * n,), -1, dtype=torch.long, device=dev)
    packed_row[index] = torch.arange(len(index), device=dev)
    groups = []
    for start, stop, w in bucket_spans(length_buckets(lengths[order].tolist(), ATTENTION_BUCKET_OVERHEAD)):
        rows = order[start:stop]
        keep = real[rows, :w].reshape(-1)
        slots = keep.nonzero().squeeze(1)  # real tokens' places in the [rows * w] padded block
        src = packed_row[(rows[:, None] * n + torch.arange(w, device=dev)[None, :]).reshape(-1)[keep]]
        m = mask.index_select(0, rows)[:, :, :w, :w] if mask.shape[-2] > 1 else mask.index_select(0, rows)[..., :w]
        groups.append((rows, slots, src, m))
    inverse = torch.argsort(groups[0][2]) if len(groups) == 1 else None
    first_row = mask[:, :, :1, :] if mask.shape[-2] > 1 else mask
    return _Layout(index, groups, inverse, first_row)


def _packed_layer_forward(layer: Any, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                          *args: Any, **kwargs: Any) -> torch.Tensor:
    """BertLayer.forward with the token-wise sublayers on the real tokens only."""
    b, n, h = hidden_states.shape
    layout = _layout(attention_mask, n)
    if layout is None:
        return type(layer).forward(layer, hidden_states, attention_mask, *args, **kwargs)
    x = hidden_states.reshape(b * n, h).index_select(0, layout.index)  # [tokens, hidden]
    attn = layer.attention.self
    context = _grouped_attention(layer, [f(x) for f in (attn.query, attn.key, attn.value)], layout)
    y = layer.feed_forward_chunk(layer.attention.output(context, x))
    return _scatter(y, layout.index, b * n).view(b, n, -1)


def _grouped_attention(layer: Any, qkv: list[torch.Tensor], layout: _Layout) -> torch.Tensor:
    """Attention for packed [tokens, hidden] q, k, v, group by group; packed context out."""
    parts = []
    for rows, slots, src, m in layout.groups:
        w = m.shape[-1]
        q, k, v = (_scatter(t.index_select(0, src), slots, len(rows) * w).view(len(rows), w, -1) for t in qkv)
        parts.append(_attend(layer, q, k, v, m).reshape(-1, q.shape[-1]).index_select(0, slots))
    out = torch.cat(parts)
    if layout.inverse is not None:
        return out.index_select(0, layout.inverse)
    return _scatter(out, torch.cat([g[2] for g in layout.groups]), len(layout.index))


def _pooled_layer_forward(layer: Any, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                          *args: Any, **kwargs: Any) -> torch.Tensor:
    """BertLayer.forward for the first token only (keys and values of the real tokens); [batch, 1, hidden]."""
    b, n, h = hidden_states.shape
    first = hidden_states[:, :1]
    layout = _layout(attention_mask, n)
    attn = layer.attention.self
    if layout is None:
        k, v = attn.key(hidden_states), attn.value(hidden_states)
        if attention_mask is not None and attention_mask.dim() == 4 and attention_mask.shape[-2] > 1:
            attention_mask = attention_mask[:, :, :1, :]  # the first query's row: which keys it may see
    else:
        x = hidden_states.reshape(b * n, h).index_select(0, layout.index)
        k, v = (_scatter(f(x), layout.index, b * n).view(b, n, -1) for f in (attn.key, attn.value))
        attention_mask = layout.first_row_mask
    context = _attend(layer, attn.query(first), k, v, attention_mask)
    return layer.feed_forward_chunk(layer.attention.output(context, first))


@contextlib.contextmanager
def packed_encoder_forward(model: Any, enabled: bool = True) -> Iterator[bool]:
    """Within the block an encoder classifier runs its token-wise sublayers on real tokens only and
    its last layer for the pooled token only; yields whether it does. Models it does not fit run
    unchanged (said once per model class)."""
    layers, why = encoder_layers_if_supported(model) if enabled else (None, "disabled")
    if layers is None:
        if enabled:
            _say_once(type(_base_model(model)).__name__, why)
        yield False
        return
    if "forward" in vars(layers[-1]):  # already installed (nested use)
        yield True
        return
    for layer in layers[:-1]:
        layer.forward = _packed_layer_forward.__get__(layer)
    layers[-1].forward = _pooled_layer_forward.__get__(layers[-1])
    try:
        yield True
    finally:
        global _last
        _last = (None, None)  # drop the last batch's mask and layout
        for layer in layers:
            del layer.forward


_said: set[str] = set()


def _say_once(cls: str, why: str) -> None:
    if cls not in _said:
        _said.add(cls)
        log.info("packed encoder forward off for %s: %s (the model's own layers; same scores)", cls, why)
