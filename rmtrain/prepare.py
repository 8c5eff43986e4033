"""Data preparation for one run: the split, the pairs, the arm's targets and the encoded texts.

Everything here is identical for every arm given the config (same prompts, pairs and split), so a
matched comparison differs only in the loss."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

from rmcore.data.loading import load_rating_set
from rmcore.data.pairs import build_pairs, split_by_prompt
from rmcore.data.schema import RatingSet
from rmcore.errors import ConfigError
from rmcore.models.formatting import Encoded, encode_example
from rmtrain.arms import PairTable
from rmtrain.config import TrainConfig
from rmtrain.trainer import HeldoutSet


@dataclasses.dataclass
class PreparedData:
    """Everything an arm trains and is evaluated on; identical for every arm given the config."""

    rating_set: RatingSet
    train_pairs: list[Any]
    heldout_pairs: list[Any]
    train_prompt_ids: list[str]
    heldout_prompt_ids: list[str]
    selection_pairs: list[Any]  # the selection split (empty: selection reads the held-out split)
    selection_prompt_ids: list[str]
    pair_counts: dict[str, Any]


def load_run_data(cfg: TrainConfig) -> RatingSet:
    """The run's rating set, loaded with the run's on_bad (a data spec's own on_bad wins)."""
    spec = dict(cfg.data)
    spec.setdefault("on_bad", cfg.on_bad)
    return load_rating_set(spec)


def split_prompts(cfg: TrainConfig, rs: RatingSet) -> tuple[list[str], list[str], list[str]]:
    """(train, held-out, selection) prompt ids of ``rs``: the split alone, no pairs built."""
    # Split on the conversation text, not the id: a prompt that recurs under two ids (HelpSteer2
    # repeats some non-consecutively; HH-RLHF rows share openings) must not sit on both sides.
    text_of = prompt_texts(rs)
    train_texts, held_texts = split_by_prompt(text_of.values(), cfg.heldout_fraction, cfg.split_seed)
    held_text_set = set(held_texts)
    held_ids = sorted(pid for pid, t in text_of.items() if t in held_text_set)
    train_ids = sorted(pid for pid, t in text_of.items() if t not in held_text_set)
    sel_ids: list[str] = []
    if cfg.selection_fraction > 0:
        # Selection (checkpoint, search grid) on its own prompts, so the reported held-out figures
        # are not chosen on the data they are measured on. Carved from the training prompts.
        tr_texts = sorted({text_of[p] for p in train_ids})
        _, sel_texts = split_by_prompt(tr_texts, cfg.selection_fraction / (1 - cfg.heldout_fraction),
                                       cfg.split_seed + 1)
        sel_text_set = set(sel_texts)
        sel_ids = sorted(p for p in train_ids if text_of[p] in sel_text_set)
        train_ids = sorted(p for p in train_ids if text_of[p] not in sel_text_set)
    return train_ids, held_ids, sel_ids


def prepare_data(cfg: TrainConfig) -> PreparedData:
    rs = load_run_data(cfg)
    _check_attribute(cfg, rs)
    pairset = build_pairs(rs, attribute=cfg.attribute, use_released=cfg.use_released_preferences)
    train_ids, held_ids, sel_ids = split_prompts(cfg, rs)
    train_set, held_set, sel_set = set(train_ids), set(held_ids), set(sel_ids)
    train_pairs = [p for p in pairset.pairs if p.prompt_id in train_set]
    held_pairs = [p for p in pairset.pairs if p.prompt_id in held_set]
    if cfg.max_train_pairs and len(train_pairs) > cfg.max_train_pairs:
        # Same subset for every arm and seed: drawn with the split seed, not the run seed.
        idx = np.sort(np.random.default_rng(cfg.split_seed).permutation(len(train_pairs))[: cfg.max_train_pairs])
        train_pairs = [train_pairs[i] for i in idx]
    if not train_pairs:
        raise ConfigError(f"no training pairs from data {cfg.data}")
    sel_pairs = [p for p in pairset.pairs if p.prompt_id in sel_set]
    return PreparedData(rs, train_pairs, held_pairs, train_ids, held_ids, sel_pairs, sel_ids, pairset.summary())


def prompt_texts(rs: RatingSet) -> dict[str, str]:
    """prompt_id -> the conversation as canonical text (what the split and disjointness checks compare)."""
    return {p.prompt_id: json.dumps(p.messages, sort_keys=True) for p in rs.prompts}


def _check_attribute(cfg: TrainConfig, rs: RatingSet) -> None:
    if rs.attributes and cfg.attribute not in rs.attributes:
        raise ConfigError(f"unknown attribute '{cfg.attribute}'; this data has: {', '.join(rs.attributes)}")


def pair_table(pairs: list[Any], rs: RatingSet, attribute: str) -> PairTable:
    by_id = rs.by_id()
    rating: dict[tuple[str, str], float] = {}
    prompt_mean: dict[str, float] = {}
    for p in rs.prompts:
        vals = []
        for r in p.responses:
            v = float(r.ratings.get(attribute, np.nan))
            rating[(p.prompt_id, r.response_id)] = v
            if not np.isnan(v):
                vals.append(v)
        prompt_mean[p.prompt_id] = float(np.mean(vals)) if vals else np.nan
    assert all(q.prompt_id in by_id for q in pairs)
    return PairTable(
        prompt_id=np.array([q.prompt_id for q in pairs], dtype=object),
        chosen_id=np.array([q.chosen_id for q in pairs], dtype=object),
        rejected_id=np.array([q.rejected_id for q in pairs], dtype=object),
        y_chosen=np.array([rating[(q.prompt_id, q.chosen_id)] for q in pairs], dtype=np.float64),
        y_rejected=np.array([rating[(q.prompt_id, q.rejected_id)] for q in pairs], dtype=np.float64),
        prompt_mean=np.array([prompt_mean[q.prompt_id] for q in pairs], dtype=np.float64),
    )


class ResponseEncoder:
    """Encodes each (prompt, response) once, however many pairs it appears in."""

    def __init__(self, rs: RatingSet, tokenizer: Any, max_length: int) -> None:
        self.by_id = rs.by_id()
        self.tok, self.max_length = tokenizer, max_length
        self.cache: dict[tuple[str, str], Encoded] = {}
        self.n_prompt_truncated = 0
        self.n_response_truncated = 0

    def __call__(self, prompt_id: str, response_id: str) -> Encoded:
        key = (prompt_id, response_id)
        if key not in self.cache:
            p = self.by_id[prompt_id]
            resp = next(r for r in p.responses if r.response_id == response_id)
            e = encode_example(self.tok, p.messages, resp.text, self.max_length)
            self.n_prompt_truncated += e.prompt_truncated
            self.n_response_truncated += e.response_truncated
            self.cache[key] = e
        return self.cache[key]


def build_train_dataset(pairs: list[Any], targets: dict[str, np.ndarray], encoder: ResponseEncoder) -> Any:
    import datasets

    cols: dict[str, list[Any]] = {"chosen_input_ids": [], "rejected_input_ids": [], "length": []}
    has_tt = None
    for q in pairs:
        c, r = encoder(q.prompt_id, q.chosen_id), encoder(q.prompt_id, q.rejected_id)
        cols["chosen_input_ids"].append(c.input_ids)
        cols["rejected_input_ids"].append(r.input_ids)
        cols["length"].append(max(len(c), len(r)))
        has_tt = c.token_type_ids is not None
        if has_tt:
            cols.setdefault("chosen_token_type_ids", []).append(c.token_type_ids)
            cols.setdefault("rejected_token_type_ids", []).append(r.token_type_ids)
    for k, v in targets.items():
        cols[f"target_{k}"] = np.asarray(v, dtype=np.float64).tolist()
    return datasets.Dataset.from_dict(cols)


def build_heldout(rs: RatingSet, held_prompt_ids: list[str], held_pairs: list[Any], encoder: ResponseEncoder,
                  attribute: str) -> HeldoutSet:
    by_id = rs.by_id()
    keys, enc, ratings = [], [], []
    for pid in held_prompt_ids:
        for r in by_id[pid].responses:
            keys.append((pid, r.response_id))
            enc.append(encoder(pid, r.response_id))
            ratings.append(float(r.ratings.get(attribute, np.nan)))
    pos = {k: i for i, k in enumerate(keys)}
    pi = np.array([[pos[(q.prompt_id, q.chosen_id)], pos[(q.prompt_id, q.rejected_id)]] for q in held_pairs],
                  dtype=np.int64).reshape(-1, 2)
    return HeldoutSet(keys, enc, np.array(ratings, dtype=np.float64), pi)


@dataclasses.dataclass
class EncodedInputs:
    """The tokenised training pairs and the evaluation sets of one run."""

    encoder: ResponseEncoder
    train_dataset: Any
    heldout: HeldoutSet
    selection: HeldoutSet  # the held-out set itself when the config has no selection split


def encode_inputs(cfg: TrainConfig, data: PreparedData, targets: dict[str, np.ndarray], tokenizer: Any,
                  max_length: int | None = None) -> EncodedInputs:
    """`max_length`: the length the model can read (resolve_max_length); the recipe's by default."""
    encoder = ResponseEncoder(data.rating_set, tokenizer, max_length or cfg.training.max_length)
    train_ds = build_train_dataset(data.train_pairs, targets, encoder)
    heldout = build_heldout(data.rating_set, data.heldout_prompt_ids, data.heldout_pairs, encoder, cfg.attribute)
    selection = (build_heldout(data.rating_set, data.selection_prompt_ids, data.selection_pairs, encoder, cfg.attribute)
                 if data.selection_prompt_ids else heldout)
    return EncodedInputs(encoder, train_ds, heldout, selection)
