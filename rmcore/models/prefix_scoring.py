"""Prefix-shared scoring for decoder scorers: each prompt is encoded once.

An audit scores every response of a prompt under many conditions, and a transplant scores several
responses under each donor prompt, so many scoring requests start with the same tokens. Requests
are grouped by conversation; a group's shared prefix is the longest common token prefix of its
texts (so a prompt cut differently for two responses shares only what is common, and the result
stays exact). The prefix runs once into a KV cache (``DynamicCache``); its responses then run in
length-sorted batches against a copy of that cache expanded to the batch, with position ids
continuing from the prefix. Each score equals the unshared forward's up to float rounding.

Used by rmeval's sequence-classifier, generative-judge and DPO scorers (``shared_prompt=True``, the
default) and by the trainer's held-out evaluation of decoders trained with the shared prompt (so it
lives below both, with the other foundations); texts without a partner, or whose shared part is shorter than
``MIN_PREFIX`` tokens, go through the scorer's ordinary batched path.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rmcore.data.schema import Message
from rmcore.models.batching import bucket_spans, length_buckets
from rmcore.models.formatting import Encoded
from rmcore.models.modeling import score_encoded
from rmcore.models.shared_prompt import common_prefix_len, unwrap_classifier

MIN_PREFIX = 8  # a shorter shared prefix is not worth a forward pass of its own


def conversation_key(messages: list[Message]) -> str:
    return json.dumps([[m["role"], m["content"]] for m in messages], ensure_ascii=False)


def group_by_prefix(seqs: list[list[int]], keys: list[Hashable],
                    min_prefix: int = MIN_PREFIX) -> tuple[list[tuple[int, list[int]]], list[int]]:
    """([(shared prefix length, indices)], indices scored alone). Every text of a group keeps at
    least one token of its own after the prefix (where its score is read)."""
    by_key: dict[Hashable, list[int]] = {}
    for i, k in enumerate(keys):
        by_key.setdefault(k, []).append(i)
    groups, alone = [], []
    for idx in by_key.values():
        p = min(len(seqs[i]) for i in idx) - 1
        first = seqs[idx[0]]
        for i in idx[1:]:
            p = min(p, common_prefix_len(first, seqs[i]))
        if len(idx) < 2 or p < min_prefix:
            alone += idx
        else:
            groups.append((p, idx))
    return groups, alone


def _suffix_buckets(lengths: list[int], batch_size: int, device_type: str) -> list[list[int]]:
    """Length-sorted batches of a group's responses, cut where the padding saved outweighs another
    forward (the trainer's bucket rule): one group is too small for plain fixed-size batches to
    keep padding low."""

    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    overhead = 4096 if device_type == "cuda" else 128
    out = []
    for start, stop, _ in bucket_spans(length_buckets([lengths[i] for i in order], overhead)):
        for b in range(start, stop, batch_size):
            out.append(order[b:min(b + batch_size, stop)])
    return out


@dataclass
class PrefixChunk:
    """Prefixes run together (left-padded to ``width``) and the responses that continue them."""

    groups: list[int]  # group indices, row order of the prefix batch
    width: int
    output: Any  # the prefix forward's output


def _shared_prefix_batches(model: Any, groups: list[tuple[list[int], list[list[int]]]], *, batch_size: int,
                           pad_id: int, device: Any, padding_side: str, prefix_kwargs: dict[str, Any] | None = None,
                           **kwargs: Any) -> Iterator[tuple[PrefixChunk, Any, list[tuple[int, int]], Any]]:
    """Runs groups' prefixes in batches of similar length into a KV cache, then all their responses
    in length buckets, each response against its own prefix's cache row (cache rows selected per
    response, so small groups batch together). ``groups``: (prefix ids, response suffix ids).
    Yields (chunk, None, [], None) after each prefix batch, then (chunk, output, [(group, response)],
    input ids) per response batch. Prefixes are left-padded, responses ``padding_side``-padded; the
    2-D mask hides both paddings and position ids continue each prefix, so every row sees exactly
    its own text."""
    from transformers import DynamicCache

    cfg = unwrap_classifier(model).config
    order = sorted(range(len(groups)), key=lambda g: len(groups[g][0]))
    for c0 in range(0, len(order), batch_size):
        chunk_groups = order[c0:c0 + batch_size]
        width = max(len(groups[g][0]) for g in chunk_groups)
        g_n = len(chunk_groups)
        ids = torch.full((g_n, width), pad_id, dtype=torch.long)
        mask = torch.zeros((g_n, width), dtype=torch.long)
        pos = torch.zeros((g_n, width), dtype=torch.long)
        for row, g in enumerate(chunk_groups):
            p = len(groups[g][0])
            ids[row, width - p:] = torch.tensor(groups[g][0])
            mask[row, width - p:] = 1
            pos[row, width - p:] = torch.arange(p)
        cache = DynamicCache(config=cfg)
        pre = model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=pos.to(device),
                    cache=cache, use_cache=True, **(prefix_kwargs or {}))
        chunk = PrefixChunk(chunk_groups, width, pre)
        yield chunk, None, [], None
        members = [(row, g, j) for row, g in enumerate(chunk_groups) for j in range(len(groups[g][1]))]
        for idx in _suffix_buckets([len(groups[g][1][j]) for _, g, j in members], batch_size,
                                   torch.device(device).type):
            k = len(idx)
            s_width = max(len(groups[members[i][1]][1][members[i][2]]) for i in idx)
            s_ids = torch.full((k, s_width), pad_id, dtype=torch.long)
            s_mask = torch.zeros((k, width + s_width), dtype=torch.long)
            s_pos = torch.zeros((k, s_width), dtype=torch.long)
            rows = []
            for r, i in enumerate(idx):
                row, g, j = members[i]
                suffix, p = groups[g][1][j], len(groups[g][0])
                n = len(suffix)
                sl = slice(0, n) if padding_side == "right" else slice(s_width - n, s_width)
                s_ids[r, sl] = torch.tensor(suffix)
                s_mask[r, :width] = mask[row]
                s_mask[r, width + sl.start:width + sl.stop] = 1
                s_pos[r, sl] = torch.arange(p, p + n)
                rows.append(row)
            c = copy.deepcopy(cache)
            c.batch_select_indices(torch.tensor(rows, device=ids.device if device is None else device))
            out = model(input_ids=s_ids.to(device), attention_mask=s_mask.to(device), position_ids=s_pos.to(device),
                        cache=c, use_cache=True, **kwargs)
            yield chunk, out, [(members[i][1], members[i][2]) for i in idx], s_ids


def supports_prefix_scoring(model: Any) -> bool:
    """Decoder classifiers (a ``score`` head on a causal backbone); BERT-like encoders see the whole
    text in both directions, so their prompt states depend on the response and cannot be shared."""
    base = unwrap_classifier(model)
    cfg = getattr(base, "config", None)
    return (hasattr(base, "score") and cfg is not None and not getattr(cfg, "is_encoder_decoder", False)
            and hasattr(base, getattr(base, "base_model_prefix", "") or "_"))


@torch.inference_mode()
def classifier_scores(model: Any, encoded: list[Encoded], keys: list[Hashable], *, pad_id: int, batch_size: int,
                      max_tokens: int | None = None, device: Any = None, padding_side: str = "right",
                      head: int = 0) -> np.ndarray:
    """``score_encoded`` with each group's shared prefix run once (decoder classifiers only);
    ``head``: the column of the score head that is the reward."""
    out = np.empty(len(encoded), dtype=np.float64)
    seqs = [e.input_ids for e in encoded]
    groups, alone = group_by_prefix(seqs, keys)
    if alone:
        out[alone] = score_encoded(model, [encoded[i] for i in alone], pad_id=pad_id, batch_size=batch_size,
                                   max_tokens=max_tokens, device=device, padding_side=padding_side,
                                   read=lambda o: o.logits[:, head])
    if not groups:
        return out
    was_training = model.training
    model.eval()
    base = unwrap_classifier(model)
    backbone = getattr(base, base.base_model_prefix)
    device = device or next(model.parameters()).device
    spec = [(seqs[idx[0]][:p], [seqs[i][p:] for i in idx]) for p, idx in groups]
    rows: list[int] = []
    parts: list[torch.Tensor] = []  # kept on the device: one copy to the host at the end
    for _, res, members, _ in _shared_prefix_batches(backbone, spec, batch_size=batch_size, pad_id=pad_id,
                                                     device=device, padding_side="right"):
        if not members:
            continue
        h_all = res.last_hidden_state
        last = torch.tensor([len(spec[g][1][j]) - 1 for g, j in members], device=h_all.device)
        h = h_all[torch.arange(len(members), device=h_all.device), last]
        parts.append(base.score(h)[:, head].float())
        rows += [groups[g][1][j] for g, j in members]
    if parts:
        out[rows] = torch.cat([p.to(parts[0].device) for p in parts]).cpu().numpy()
    if was_training:
        model.train()
    return out


@torch.inference_mode()
def next_token_logits(model: Any, seqs: list[list[int]], keys: list[Hashable], *, batch_size: int, pad_id: int,
                      device: Any, plain: Any) -> torch.Tensor:
    """(n, V) logits of the token after each sequence; ``plain(seqs)`` scores the ungrouped ones."""
    out: list[torch.Tensor | None] = [None] * len(seqs)
    groups, alone = group_by_prefix(seqs, keys)
    if alone:
        for i, row in zip(alone, plain([seqs[i] for i in alone])):
            out[i] = row
    spec = [(seqs[idx[0]][:p], [seqs[i][p:] for i in idx]) for p, idx in groups]
    # left-padded responses: every row's last token is the batch's last position (logits_to_keep=1)
    for _, res, members, _ in _shared_prefix_batches(model, spec, batch_size=batch_size, pad_id=pad_id, device=device,
                                                     padding_side="left", prefix_kwargs={"logits_to_keep": 1},
                                                     logits_to_keep=1):
        if not members:
            continue
        last = res.logits[:, -1].float().cpu()  # one copy per batch, not one per text
        for r, (g, j) in enumerate(members):
            out[groups[g][1][j]] = last[r]
    return torch.stack(out) if out else torch.zeros((0, 0))  # type: ignore[arg-type]


@torch.inference_mode()
def response_logprobs(model: Any, pairs: list[tuple[list[int], list[int]]], keys: list[Hashable], *,
                      batch_size: int, pad_id: int, device: Any, plain: Any) -> np.ndarray:
    """Sum of log p(response token | everything before it) per (prompt ids, response ids), each
    group's shared prefix run once. ``plain(pairs)`` scores the ungrouped ones."""
    out = np.zeros(len(pairs))
    seqs = [pr + r for pr, r in pairs]
    groups, alone = group_by_prefix(seqs, keys)
    if alone:
        out[alone] = plain([pairs[i] for i in alone])
    spec = [(seqs[idx[0]][:p], [seqs[i][p:] for i in idx]) for p, idx in groups]
    pre_lp: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    for chunk, res, members, ids in _shared_prefix_batches(model, spec, batch_size=batch_size, pad_id=pad_id,
                                                           device=device, padding_side="right"):
        if not members:  # a prefix batch: keep each prefix's log-probs (it is left-padded to chunk.width)
            pre_lp.clear()
            for row, g in enumerate(chunk.groups):
                p = len(spec[g][0])
                lp_pre = torch.log_softmax(chunk.output.logits[row, chunk.width - p:].float(), dim=-1).double()
                pre_ids = torch.tensor(spec[g][0], device=lp_pre.device)
                # log p of prefix token t (1 <= t < p), cumulated, for responses that start inside
                # the shared prefix (all responses of a group share their first tokens)
                in_prefix = lp_pre[torch.arange(p - 1, device=lp_pre.device), pre_ids[1:]]
                cum = torch.cat([torch.zeros(2, dtype=torch.float64, device=lp_pre.device), in_prefix.cumsum(0)])
                pre_lp[g] = (lp_pre[p - 1], cum)
            continue
        lp = torch.log_softmax(res.logits.float(), dim=-1).double()  # (k, S, V): predicts suffix tokens 1..
        ids = ids.to(lp.device)
        tok = lp[:, :-1].gather(-1, ids[:, 1:, None]).squeeze(-1)  # suffix token j >= 1
        for r, (g, j) in enumerate(members):
            last_pre, cum = pre_lp[g]
            p, i = len(spec[g][0]), groups[g][1][j]
            n_p, n_s = len(pairs[i][0]), len(spec[g][1][j])
            start = max(n_p, 1)  # first response position in the full sequence
            total = (cum[p] - cum[start]) if start < p else 0.0  # response tokens inside the prefix
            if start <= p:
                total = total + last_pre[ids[r, 0]]  # the suffix's first token, predicted by the prefix's last
            lo = max(start - p, 1)
            total = total + tok[r, lo - 1:n_s - 1].sum()
            out[i] = float(total)
    return out
