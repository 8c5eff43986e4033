"""Stand-ins for a ``--stand-in`` run: each Hub id mapped to a tiny local model of the same kind, and
each data set the recipe reads from the Hub replaced by local data (nothing is downloaded).

Models (``stand_in_model``), built once under ``OUT/stand_ins/<name>/`` with a seed drawn from the
model's name (so two stand-ins score differently) and a byte-level BPE tokenizer (every text
encodes) with the minimal chat template of ``rmcore.models.tiny``:

- a sequence classifier (``loader`` classifier or none): a tiny Llama classifier, one output, or
  as many as its ``head`` needs (a label name becomes ``id2label``);
- a remote-code multi-head model (``remote_code``, or a named model loaded by it such as
  ``armorm``): the gated multi-objective model of ``rmcore.models.tiny_rewards``;
- a value-head model (``value_head``, ``ultrarm``, ``starling-rm-34b``): a backbone and a linear
  head saved beside it (``rmcore.models.tiny_rewards``); a reward read at one token's logit of a causal LM
  (``lm_logit``, ``nemotron-70b-reward``): a tiny causal LM;
- a generative judge (its expected digit; a pairwise verdict in a suitability audit; a JudgeProfile
  judge): a tiny Llama causal LM whose tokenizer spells 1-5 and A-C as single tokens;
- a DPO pair: two tiny causal LMs, the policy and its reference (none when the recipe says none).

Data (``stand_in_spec``): a recipe's ``stand_in.data`` names, per data set, a local SPEC (the real
RM-Bench and HH-RLHF files of the recipe's data sources, read in place) or a ``{synthetic: SCHEMA, ...}``
mapping: a small file in the released schema written under ``OUT/stand_in_data/`` from the shipped
simulator (``rmcore.data.simulated``) and read back by the real loader: ``helpsteer2``,
``helpsteer`` (HelpSteer's four responses per prompt), ``rewardbench``, ``rewardbench2``, ``shp``
(a post's four comments as SHP's pairs of comments, with votes and posting times), and
``rm_bench`` (a folder of RM-Bench files: the first rows of each file of the folder ``dir`` names,
e.g. ``dir: "{rm_bench}"``, the recipe's data source; simulated rows in its schema for a subset not
there, and for every subset without ``dir``); HelpSteer2 with ``preferences: true`` also writes its
preference file, and with ``annotations: true`` its per-annotator file (three raters per response,
beside the ratings file: ``*.disagreements.jsonl``). A data set whose stand-in is null is left out of
a stand-in run (its cells stay missing). Stand-in figures mean nothing; the table says so.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmcore.data.helpsteer import helpsteer_rows_from
from rmcore.data.simulated import simulate_rating_set
from rmcore.errors import ConfigError
from rmcore.models.tiny import CHAT_TEMPLATE, EOS, PAD, save_tiny, tiny_model, train_tokenizer
from rmcore.models.tiny_rewards import save_gated_remote_code, save_value_head
from rmcore.settings.registry import Registry
from rmeval.backends.generators import write_variants

CORPUS = [
    "You are an impartial judge. Rate how good the assistant's response is as a reply to the conversation below",
    "Answer with a single digit from 1 to 5. Rating: 1 2 3 4 5 A B C [[A]] [[B]] [[C]] Yes No",
    "Which response is more helpful? Response A or Response B. Final verdict: [[A]]",
    "How do I bake bread at home? Mix flour water salt and yeast then bake it for forty minutes.",
    "First, make sure you plan the week. A common mistake is forgetting to rest. For example, in short.",
]
STANDIN_MAX_LENGTH = 256
VALUE_HEAD_LAYOUT = {"ultrarm": "ultrarm", "starling-rm-34b": "starling"}
SYNTHETIC = ("helpsteer2", "helpsteer", "rewardbench", "rewardbench2", "rm_bench", "shp")


def stand_in_seed(name: str) -> int:
    return int(hashlib.sha256(name.encode()).hexdigest()[:6], 16) % 10_000


def _tokenizer() -> Any:
    return train_tokenizer(CORPUS * 3, 500, chat_template=CHAT_TEMPLATE, eos_token=EOS, pad_token=PAD)


def _loader_kind(loader: str | None) -> str:
    # torch: this module loads without it
    from rmeval.scoring.loaders import KNOWN_MODELS

    if loader in KNOWN_MODELS:
        return KNOWN_MODELS[loader].loader
    return loader or "classifier"


def _classifier(path: Path, tok: Any, head: str | None, seed: int) -> None:
    extra: dict[str, Any] = {"num_labels": 1}
    if head is not None and str(head).lstrip("-").isdigit():
        extra["num_labels"] = max(int(head) + 1, 2)
    elif head is not None:  # a label name: the stand-in carries it in id2label
        extra.update(num_labels=2, id2label={0: str(head), 1: "other"}, label2id={str(head): 0, "other": 1})
    model = tiny_model(tok, "llama", head="classifier", seed=seed, max_position_embeddings=2 * STANDIN_MAX_LENGTH,
                       **extra)
    save_tiny(path, model, tok)


def _causal_lm(path: Path, tok: Any, seed: int) -> None:
    save_tiny(path, tiny_model(tok, "llama", seed=seed, max_position_embeddings=4 * STANDIN_MAX_LENGTH), tok)


def _remote_code(path: Path, tok: Any, model: Any, seed: int) -> dict[str, Any]:
    n = max(3, int(model.head) + 1) if model.head is not None and str(model.head).isdigit() else 3
    save_gated_remote_code(path, tok, num_objectives=n, seed=seed, max_position_embeddings=2 * STANDIN_MAX_LENGTH)
    return {"trust_remote_code": True, "what": f"tiny gated multi-objective remote-code model ({n} heads)"}


def _lm_logit(path: Path, tok: Any, model: Any, seed: int) -> dict[str, Any]:
    _causal_lm(path, tok, seed)
    return {"what": "tiny Llama causal LM read at one token's logit (lm_logit)"}


def _value_head(path: Path, tok: Any, model: Any, seed: int) -> dict[str, Any]:
    layout = VALUE_HEAD_LAYOUT.get(str(model.loader), "openrlhf")
    save_value_head(path, tok, layout=layout, seed=seed, max_position_embeddings=2 * STANDIN_MAX_LENGTH)
    return {"what": f"tiny Llama backbone + value head ({layout} layout)"}


def _sequence_classifier(path: Path, tok: Any, model: Any, seed: int) -> dict[str, Any]:
    _classifier(path, tok, model.head, seed)
    return {"what": "tiny Llama sequence classifier"}


# reward-model loader kind (rmeval.scoring.loaders) -> the stand-in it reads; any other: a classifier
LOADER_STAND_INS: Registry[Callable[..., dict[str, Any]]] = Registry("reward-model stand-in", {
    "remote_code": _remote_code, "lm_logit": _lm_logit, "value_head": _value_head})


def _reward_model(root: Path, tok: Any, model: Any, seed: int) -> dict[str, Any]:
    build = LOADER_STAND_INS.get(_loader_kind(model.loader), _sequence_classifier)
    return build(root / "model", tok, model, seed)


def _judge(root: Path, tok: Any, model: Any, seed: int) -> dict[str, Any]:
    _causal_lm(root / "model", tok, seed)
    return {"what": "tiny Llama causal LM judge (expected digit / verdict letters)"}


def _dpo(root: Path, tok: Any, model: Any, seed: int) -> dict[str, Any]:
    _causal_lm(root / "model", tok, seed)
    info = {"reference": "none"}
    if str(model.reference).lower() != "none":
        _causal_lm(root / "reference", tok, seed + 1)
        info["reference"] = str(root / "reference")
    info["what"] = "tiny Llama DPO policy" + (" and reference" if info["reference"] != "none" else "")
    return info


# scorer kind (rmeval.scoring.SCORERS) -> how its stand-in is built under OUT/stand_ins/<name>/
STAND_INS: Registry[Callable[..., dict[str, Any]]] = Registry("stand-in", {
    "seq_classifier": _reward_model, "generative_judge": _judge, "dpo_implicit": _dpo},
    message="no stand-in for a {name}")


def stand_in_model(model: Any, root: str | os.PathLike) -> dict[str, Any]:
    """The tiny local model standing in for ``model`` (a ``ModelSpec``), built under
    ``root/<name>/`` unless it is there: {path, reference?, loader, head, trust_remote_code, what}."""
    root = Path(root) / model.name
    done = root / "stand_in.json"
    if done.is_file():
        return json.loads(done.read_text())
    build = STAND_INS.lookup(model.kind)
    seed, tok = stand_in_seed(model.name), _tokenizer()
    info: dict[str, Any] = {"path": str(root / "model"), "loader": model.loader, "head": model.head,
                            "trust_remote_code": False}
    info.update(build(root, tok, model, seed))
    done.write_text(json.dumps(info, indent=2))
    return info


# -- data ---------------------------------------------------------------------------------------------

def stand_in_spec(key: str, spec: Any, root: str | os.PathLike) -> Any:
    """The data SPEC a stand-in run reads for data set ``key``: a local SPEC as given, or the file a
    ``{synthetic: SCHEMA, ...}`` mapping writes under ``root``."""
    if not isinstance(spec, dict) or "synthetic" not in spec:
        return spec
    opts = dict(spec)
    schema = opts.pop("synthetic")
    if schema not in SYNTHETIC:
        raise ConfigError(f"stand_in.data.{key}: synthetic must be one of {', '.join(SYNTHETIC)}, got {schema!r}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    writer = {"helpsteer2": _helpsteer, "helpsteer": _helpsteer, "rewardbench": _rewardbench,
              "rewardbench2": _rewardbench2, "rm_bench": _rm_bench, "shp": _shp}[schema]
    return writer(schema, key, opts, root)


def _simulated(opts: dict[str, Any], responses: int) -> Any:
    known = ("n_prompts", "multi_turn_fraction", "human_share", "seed")
    extra = sorted(set(opts) - set(known) - {"split", "limit_per_file", "subsets", "dir", "preferences", "annotations"})
    if extra:
        raise ConfigError(f"synthetic data: unknown option(s) {extra}; allowed: {sorted(known)}")
    return simulate_rating_set(responses_per_prompt=responses, **{k: opts[k] for k in known if k in opts})


def _helpsteer(schema: str, key: str, opts: dict[str, Any], root: Path) -> dict[str, Any]:
    split = opts.get("split", "validation")
    rs = _simulated(opts, 2 if schema == "helpsteer2" else 4)
    path = root / f"{key}.{schema}.jsonl"
    rows = helpsteer_rows_from(rs)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {"name": schema, "path": str(path), "split": split}
    if schema == "helpsteer2" and opts.get("preferences"):  # the released preference file's schema
        prefs = []
        for a, b in zip(rows[::2], rows[1::2]):
            diff = int(b["helpfulness"]) - int(a["helpfulness"])  # > 0: response_2 better
            prefs.append({"split": split, "prompt": a["prompt"], "response_1": a["response"],
                          "response_2": b["response"], "preference_strength": max(-3, min(3, diff)) or 1,
                          "preference_statement": ""})
        pref = root / f"{key}.preference.jsonl"
        pref.write_text("".join(json.dumps(r) + "\n" for r in prefs))
        spec["preference_path"] = str(pref)
    if schema == "helpsteer2" and opts.get("annotations"):
        _annotations(rows, path.with_suffix(".disagreements.jsonl"), int(opts.get("seed", 0)))
    return spec


def _annotations(rows: list[dict[str, Any]], path: Path, seed: int) -> None:
    """HelpSteer2's per-annotator file (``disagreements``) for the synthetic rows: three raters per
    response, each the released rating moved by -1, 0 or +1 (kept in 0..4)."""
    import numpy as np

    from rmcore.data.helpsteer import HELPSTEER_ATTRIBUTES

    rng = np.random.default_rng(seed)
    out = []
    for r in rows:
        rec = {"prompt": r["prompt"], "response": r["response"]}
        for a in HELPSTEER_ATTRIBUTES:
            rec[a] = [int(min(4, max(0, int(r[a]) + d))) for d in rng.integers(-1, 2, size=3)]
        out.append(rec)
    path.write_text("".join(json.dumps(x) + "\n" for x in out))


def _ordered(rs: Any) -> list[tuple[Any, list[Any]]]:
    """Each prompt with its responses, best rated first (ties: the first)."""
    return [(p, sorted(p.responses, key=lambda r: -float(r.ratings.get("helpfulness", 0)))) for p in rs.prompts]


def _shp(schema: str, key: str, opts: dict[str, Any], root: Path) -> dict[str, Any]:
    """SHP's released rows (a pair of a post's comments per row) from a simulated set of four
    responses per prompt: a comment's score 1 + 3 x its helpfulness rating (at least one vote),
    each comment posted an hour after the previous one, the label the higher score (A on ties)."""
    rows = []
    for i, p in enumerate(_simulated(opts, 4).prompts):
        made = [(f"c{i}-{k}", r.text, 1 + 3 * int(round(float(r.ratings.get("helpfulness", 0)))),
                 1.7e9 + 3600.0 * (4 * i + k))
                for k, r in enumerate(p.responses)]
        for a, b in zip(made, made[1:]):
            rows.append({"post_id": f"post{i}", "domain": "askscience_train", "upvote_ratio": 0.9,
                         "history": p.messages[-1]["content"], "c_root_id_A": a[0], "c_root_id_B": b[0],
                         "created_at_utc_A": a[3], "created_at_utc_B": b[3], "score_A": a[2], "score_B": b[2],
                         "human_ref_A": a[1], "human_ref_B": b[1], "labels": int(a[2] >= b[2]),
                         "seconds_difference": b[3] - a[3], "score_ratio": max(a[2], b[2]) / min(a[2], b[2])})
    path = root / f"{key}.shp.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"name": "shp", "path": str(path), "split": opts.get("split", "validation")}


RB_SUBSETS = ("alpacaeval-easy", "mt-bench-hard", "refusals-dangerous", "hep-python", "llmbar-natural",
              "xstest-should-respond", "math-prm")
RB2_SUBSETS = ("Factuality", "Precise IF", "Math", "Safety", "Focus")


def _rewardbench(schema: str, key: str, opts: dict[str, Any], root: Path) -> dict[str, Any]:
    rows = []
    for i, (p, rs) in enumerate(_ordered(_simulated(opts, 2))):
        rows.append({"id": i, "prompt": p.messages[-1]["content"], "chosen": rs[0].text, "rejected": rs[-1].text,
                     "subset": RB_SUBSETS[i % len(RB_SUBSETS)], "chosen_model": "sim", "rejected_model": "sim"})
    path = root / f"{key}.rewardbench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"name": "rewardbench", "path": str(path)}


def _rewardbench2(schema: str, key: str, opts: dict[str, Any], root: Path) -> dict[str, Any]:
    rows = []
    for i, (p, rs) in enumerate(_ordered(_simulated(opts, 4))):
        rows.append({"id": str(i), "prompt": p.messages[-1]["content"], "chosen": [rs[0].text],
                     "rejected": [r.text for r in rs[1:]], "num_correct": 1, "num_incorrect": 3,
                     "total_completions": 4, "subset": RB2_SUBSETS[i % len(RB2_SUBSETS)], "models": ["sim"] * 4})
    path = root / f"{key}.rewardbench2.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"name": "rewardbench2", "path": str(path)}


def _styles(text: str) -> list[str]:
    """RM-Bench's three style levels of one response: concise, detailed plain, detailed Markdown."""
    detailed = text + " To explain in more detail: each step above matters, and skipping one changes the result."
    return [text, detailed, "## Answer\n\n- " + detailed.replace(". ", ".\n- ")]


def _rm_bench(schema: str, key: str, opts: dict[str, Any], root: Path) -> dict[str, Any]:
    """A folder of RM-Bench files: per subset the first ``limit_per_file`` rows of the local file
    ``dir/<subset>_filtered.json`` when ``dir`` is given and the file exists, else simulated rows
    in RM-Bench's schema (no folder is read by default)."""
    n = int(opts.get("limit_per_file", 6))
    src = Path(os.path.expanduser(str(opts["dir"]))) if opts.get("dir") else None
    out = root / f"{key}.rm_bench"
    out.mkdir(parents=True, exist_ok=True)
    for k, subset in enumerate(opts.get("subsets", ["chat"])):
        local = src / f"{subset}_filtered.json" if src is not None else None
        if local is not None and local.is_file():
            rows = json.loads(local.read_text())[:n]
        else:
            sim = _ordered(_simulated({"n_prompts": n, "seed": k,
                                       **{x: opts[x] for x in ("human_share",) if x in opts}}, 2))
            rows = [{"id": f"{subset}-{i}", "subset": subset, "prompt": p.messages[-1]["content"],
                     "chosen": _styles(rs[0].text), "rejected": _styles(rs[-1].text)} for i, (p, rs) in enumerate(sim)]
        (out / f"{subset}_filtered.json").write_text(json.dumps(rows))
    return {"name": "rm_bench", "path": str(out)}


RELATED_TEMPLATES = ("A related question on the same subject: what should someone avoid when they try this? ({q})",
                     "Different task, same topic: write a short checklist instead. ({q})",
                     "Follow-up on the subject: how long does it usually take to learn this? ({q})")
PARAPHRASE_TEMPLATES = ("In other words: {q}", "Put differently, {q}", "Let me rephrase my request: {q}")


def template_variants(rating_set: Any, task: str, n: int, path: str | os.PathLike, subtype: str | None = None) -> Path:
    """A stand-in run's related tasks or paraphrases of every prompt, from fixed templates around its
    last user turn (any data: no model writes them), in ``rmeval variants``' file format."""
    templates = RELATED_TEMPLATES if task == "related" else PARAPHRASE_TEMPLATES
    texts = {p.prompt_id: [templates[i % len(templates)].format(q=p.last_user_text) for i in range(n)]
             for p in rating_set.prompts}
    return write_variants(texts, path, subtype=subtype or ("different" if task == "related" else None))
