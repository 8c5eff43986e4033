"""GPU hours of a reproduction: each row's scoring (``row_tokens``) and the work a table needs beyond
its rows (``extra_cost``: the recipe's ``costs``: a training sweep, prompt generation, PPO trainings).

Tokens are words x 1.3 where the dry run counts them (the data on disk), else the recipe's stated
``mean_tokens`` (T: tokens of a prompt with one response). A token that passes through a model of N
parameters costs 2N FLOPs forward and 6N forward and backward, plus 2N when gradient checkpointing
recomputes the forward; N is the *active* parameters of a mixture-of-experts model
(``active_params_b``: DeepSeek-R1 passes each token through 37B of its 671B), its total sizing only
the memory. Prompt tokens run at ``compute.gpu_tflops``, generated tokens at ``compute.decode_tflops``
(decoding is memory-bound). A job's GPU hours add what it holds the GPUs while downloading and
loading (``rmeval.reproduce.cluster``).

Prompt and generated tokens per row, by analysis (A: attributes, k: perturbations):

- audit, pairwise, suitability with a reward model: texts x T (x 2 for a DPO model and its reference).
- a generative judge in an audit: texts x (T + t_J), t_J the rating prompt's own tokens; one reply token.
- a generative judge in a suitability table: a comparison per pair version, texts / 2 calls of
  2T + t_P tokens (t_P: the pairwise prompt), and per call the explanation's tokens
  (``judge_explain_tokens``, style ``explain``) or one verdict token generated.
- a JudgeProfile judge: each item is asked A + 1 questions in each of 2 orders; the item (template,
  query and both responses: T_item) is the prefix of all of them, which both engines compute once
  (the local judge's prefix reuse, vLLM's prefix caching, on in the task's server): prompt tokens =
  items x 2 x (T_item + (A + 1) x T_q), T_q a question's tokens (its words in the inventory); reply
  tokens = items x 2 x (A + 1) x r (r = 4, a served judge's reply cap; 1, a local judge's first
  token; a judge that reasons first, ``reasoning:``, its ``mean_tokens`` per call, else its reply
  budget ``max_tokens``: an upper bound). Without prefix reuse it would be items x 2 x (A + 1) x (T_item +
  T_q); T_item is counted on disk, else 2T + the template (the query counted twice: an upper bound).

Beyond the rows (``extra_cost``; a JudgeProfile table's ``baselines``, ``baselines_cost``: per judge
and source, 2 orders x the held-out quarter of the items x (T_item + T_q) x 2N for rubric prompting
and again for the fine-tuned judge's verdicts, steps x batch x (T_item + T_q) x 6N for LoRA SFT,
and the judge's load for each fine-tuning):

- ``sweep``: per run, training (6 + 2 g) N x pairs x epochs x T_pair (g = 1 with gradient
  checkpointing), its in-training audits (one per saved checkpoint: the audit conditions' texts on
  ``audit.max_prompts`` prompts and the suitability suite's items x (2 + 2k)) and its final audits
  (the sweep's audit conditions on the validation data, per selection rule), 2N per text token;
  runs = per model arms x search grid + arms x (seeds - 1); plus the released scorers' audits.
- ``generation``: per generating model, prompts x T_in x 2N prefill (one per prompt: its n samples
  share it) + prompts x n x T_out x 2N generated, plus its download and load on one GPU.
- ``ppo``: per training (each servable reward model x clean and perturbed), R = prompts x rollouts
  per prompt x epochs rollouts of T_p + T_c tokens (T_c: the completion cap): generation R x T_c x
  2N_pol, forward passes of reference, critic and reward model R x (T_p + T_c) x 2(N_pol + N_pol +
  N_rm), training of actor and critic R x (T_p + T_c) x 6(N_pol + N_pol) (LoRA makes it less), and
  the node's GPUs held while the models load; plus the evaluation's generations."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError
from rmcore.settings.fields import bounded
from rmcore.settings.recipes import load_recipe

WORD_TOKENS = 1.3  # tokens per word (the dry run's count from the data on disk)
COST_KINDS = ("sweep", "generation", "ppo")
SERVED_REPLY_TOKENS = 4  # rmeval.judges.elicit's reply cap of an endpoint judge
CHAT_TOKENS = 10  # the chat template's role markers around a prompt


@dataclass
class ExtraCost:
    """``costs:`` of a recipe: GPU work the table needs beyond its rows, with what its formula
    needs and where the numbers come from (module docstring)."""

    name: str
    kind: str  # sweep | generation | ppo
    recipe: str | None = None  # the training sweep's, the pool's or the PPO policy's recipe
    data: str | None = None  # the data set (of this recipe) it runs on: prompts, tokens, validation sizes
    pairs: int | None = bounded(None, ge=1)  # sweep: preference pairs trained on per epoch
    tokens_in: int | None = bounded(None, ge=1)  # tokens of a training pair (sweep) or of a prompt (generation)
    tokens_out: int | None = bounded(None, ge=1)  # generation: tokens generated per sample
    n: int | None = bounded(None, ge=1)  # generation: samples per prompt (default: the pool recipe's)
    params_b: float | None = bounded(None, gt=0)  # generation: the generator's size when no recipe names it
    source: str = ""


def tokens(words: int) -> int:
    return int(WORD_TOKENS * words)


def text_tokens(text: str) -> int:
    return tokens(len(text.split()))


def params_from_name(hub_id: str) -> float | None:
    """Billions of parameters read from a Hub id (``Qwen/Qwen3-1.7B`` -> 1.7), None when it names none."""
    found = re.findall(r"(?<![\d.])(\d+(?:\.\d+)?)[Bb](?![A-Za-z])", hub_id.split("/")[-1])
    return float(found[-1]) if found else None


def condition_texts(cond: str, n: dict[str, Any], *, n_donors: int, n_related: int, n_paraphrase: int) -> int | None:
    """Texts one model scores under audit condition ``cond`` for sizes ``n`` (prompts P, responses
    R, multi-turn prompts M): original and generic R, prompt_only P, last_turn R x M / P,
    transplants R x donors, related and paraphrase R x variants, fixed replies P x donors or variants."""
    P, R, M = n.get("prompts"), n.get("responses"), n.get("multi_turn")
    per = {"original": R, "generic": R, "prompt_only": P, "last_turn": None if M is None or R is None or not P
           else round(R * M / P)}
    if cond in per:
        return per[cond]
    if cond in ("random", "overlap", "embedding", "length"):
        return None if R is None else R * n_donors
    if cond in ("related", "paraphrase"):
        return None if R is None else R * (n_related if cond == "related" else n_paraphrase)
    if cond == "fixed_reply_random":
        return None if P is None else P * n_donors
    if cond == "fixed_reply_related":
        return None if P is None else P * n_related
    return None


def gpu_seconds(prompt_tokens: float, generated_tokens: float, active_b: float, c: Any) -> float:
    """Seconds of one GPU: 2N FLOPs per token, prompt tokens at gpu_tflops, generated at decode_tflops."""
    return 2 * active_b * 1e9 * (prompt_tokens / (c.gpu_tflops * 1e12) + generated_tokens / (c.decode_tflops * 1e12))


# -- rows ---------------------------------------------------------------------------------------------

def judge_item_tokens(ctx: Any, key: str, size: dict[str, Any], settings: Any = None) -> int:
    """T_item of a JudgeProfile judge on data set ``key``: template + query + both responses (on
    disk: over the pairs it is asked, RM-Bench's in the table's style pairing)."""
    from rmeval.judges.elicit import ITEM_TEMPLATE

    template = text_tokens(ITEM_TEMPLATE.format(query="", first="", second="")) + CHAT_TOKENS
    if size.get("source") == "counted from the data on disk":
        rs = ctx.rating_set(key)
        by = {p.prompt_id: p for p in rs.prompts}
        prefs = rs.preferences
        pairing = getattr(settings, "rm_bench_pairing", None)
        if pairing and str(rs.name).startswith("rm_bench"):
            i, j = (int(x) for x in pairing.split(":"))
            prefs = [p for p in prefs if p.meta_dict().get("chosen_style", i) == i
                     and p.meta_dict().get("rejected_style", j) == j]
        words = []
        for pref in prefs:
            p = by[pref.prompt_id]
            text = {r.response_id: r.text for r in p.responses}
            words.append(sum(len(m["content"].split()) for m in p.messages)
                         + len(text.get(pref.chosen_id, "").split()) + len(text.get(pref.rejected_id, "").split()))
        if words:
            return template + tokens(sum(words) // len(words))
    return template + 2 * (size.get("mean_tokens") or 512)


@functools.lru_cache(maxsize=8)
def _questions(attributes_file: str | None, names: tuple[str, ...]) -> tuple[int, float]:
    from rmeval.judges.elicit import questions_for
    from rmeval.judges.inventory import load_inventory

    inv = load_inventory(attributes_file, names=list(names) or None)  # as the elicitation reads it
    qs = questions_for(inv)
    return len(inv), sum(text_tokens(q) + CHAT_TOKENS for q in qs.values()) / len(qs)


def question_tokens(settings: Any) -> tuple[int, float]:
    """(A, mean T_q) of a JudgeProfile table's questions (its attributes and the overall one)."""
    return _questions(settings.attributes_file, tuple(settings.attributes))


def judge_calls(items: int, settings: Any) -> int:
    """A JudgeProfile judge's calls on ``items`` items: A + 1 questions in 2 orders each."""
    return items * 2 * (question_tokens(settings)[0] + 1)


def no_reuse_tokens(ctx: Any, key: str, calls: int, size: dict[str, Any], settings: Any) -> float:
    """A JudgeProfile judge's prompt tokens if every call computed its item again: calls x (T_item + T_q)."""
    return calls * (judge_item_tokens(ctx, key, size, settings) + question_tokens(settings)[1])


def reply_tokens(m: Any, served: bool) -> int:
    """Tokens a JudgeProfile judge generates per call: a reasoning judge's ``reasoning.mean_tokens``
    (else its reply budget, an upper bound), a served judge's reply cap, a local judge's one."""
    r = getattr(m, "reasoning", None)
    if r is not None and served:
        return r.mean_tokens or r.max_tokens
    return SERVED_REPLY_TOKENS if served else 1


def row_tokens(ctx: Any, m: Any, key: str, texts: int, size: dict[str, Any], settings: Any,
               served: bool) -> tuple[float, float]:
    """(prompt tokens, generated tokens) of model ``m`` scoring ``texts`` texts (a judge: calls) on
    data set ``key`` (module docstring)."""
    T = size.get("mean_tokens") or 512
    analysis = ctx.recipe.reproduce.analysis
    if analysis == "judges":
        a, tq = question_tokens(settings)
        items = texts / (2 * (a + 1))
        prefix = judge_item_tokens(ctx, key, size, settings)
        return items * 2 * (prefix + (a + 1) * tq), texts * reply_tokens(m, served)
    if m.kind != "generative_judge":
        return float(texts * T), 0.0
    if analysis == "audit":
        from rmeval.scoring.judge import JUDGE_TEMPLATE

        return float(texts * (T + text_tokens(JUDGE_TEMPLATE.format(conversation="", response="")) + CHAT_TOKENS)), 0.0
    from rmeval.scoring.pairwise_judge import EXPLAIN_TEMPLATE, PAIRWISE_TEMPLATE

    explain = getattr(settings, "judge_style", "verdict") == "explain"
    template = EXPLAIN_TEMPLATE if explain else PAIRWISE_TEMPLATE
    calls = texts / 2
    t_p = text_tokens(re.sub(r"\{\w+\}", "", template)) + CHAT_TOKENS
    return calls * (2 * T + t_p), calls * (getattr(settings, "judge_explain_tokens", 256) if explain else 1)


# -- beyond the rows ----------------------------------------------------------------------------------

def _recipe(path: str | None, e: ExtraCost) -> dict[str, Any]:
    if not path:
        raise ConfigError(f"costs {e.name}: a {e.kind} cost reads a recipe (recipe: PATH)")
    if not Path(path).is_file():
        raise ConfigError(f"costs {e.name}: recipe {path} not found")
    return load_recipe(path)


def _size(ctx: Any, e: ExtraCost, sizes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if e.data is None or e.data not in sizes:
        raise ConfigError(f"costs {e.name}: data must name one of this recipe's data sets ({', '.join(sizes)})")
    return sizes[e.data]


def _load_hours(weights_gb: float, c: Any, gpus: int = 1) -> float:
    """GPU hours held while a checkpoint downloads and loads (rmeval.reproduce.cluster)."""
    return gpus * (weights_gb * 1000 / c.download_mb_s + weights_gb / c.load_gb_s) / 3600


def sweep_cost(ctx: Any, e: ExtraCost, sizes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A training sweep's GPU hours (module docstring): training, in-training and final audits."""
    raw, c = _recipe(e.recipe, e), ctx.recipe.compute
    if e.pairs is None or e.tokens_in is None:
        raise ConfigError(f"costs {e.name}: a sweep needs pairs and tokens_in (tokens per training pair)")
    sw, t, model = raw.get("sweep", {}), raw.get("training", {}), raw.get("model", {})
    models = sw.get("models") or [model.get("name_or_path", "")]
    grid = math.prod(len(v) for v in (sw.get("search") or {}).values()) or 1
    arms, seeds = len(sw.get("arms", [])) or 1, len(sw.get("seeds", [1]))
    runs_per_model = arms * grid + arms * (seeds - 1)
    epochs = float(t.get("num_epochs", 1))
    per_step = int(t.get("per_device_batch_size", 8)) * int(t.get("gradient_accumulation_steps", 1))
    steps = math.ceil(e.pairs / per_step) * epochs
    checkpoints = math.ceil(steps / int(t.get("save_steps", 500)))
    factor = 6 + (2 if model.get("gradient_checkpointing") else 0)
    val = _size(ctx, e, sizes)
    T = val.get("mean_tokens") or 512
    final_texts = _audit_texts(sw.get("audit", {}).get("conditions", ["original"]), val)
    rules = max(1, len(sw.get("selection_rules") or []))
    inner = _in_training_texts(raw.get("audit", {}), val)
    hours, lines = 0.0, []
    for name in models:
        n = params_from_name(name)
        if n is None:
            raise ConfigError(f"costs {e.name}: {name} names no size (…-0.6B)")
        train_tok = e.pairs * epochs * e.tokens_in
        audit_tok = (checkpoints * inner + rules * final_texts) * T
        s = runs_per_model * (factor * n * 1e9 * train_tok / (c.gpu_tflops * 1e12) + gpu_seconds(audit_tok, 0, n, c))
        h = s / 3600 + runs_per_model * _load_hours(2 * n, c)
        hours += h
        lines.append(f"{name}: {runs_per_model} runs x ({factor} x {n:g}B x {e.pairs} pairs x {epochs:g} epochs x "
                     f"{e.tokens_in} tokens + 2 x {n:g}B x ({checkpoints} x {inner} + {rules} x {final_texts}) audit "
                     f"texts x {T} tokens) / {c.gpu_tflops:g} TFLOP/s = {h:.1f} GPU h")
    released = sw.get("released_scorers") or {}
    for label, spec in released.items():
        hub = spec if isinstance(spec, str) else spec.get("model", "")
        n = params_from_name(hub) or 8.0
        h = gpu_seconds(final_texts * T, 0, n, c) / 3600 + _load_hours(2 * n, c)
        hours += h
        lines.append(f"released scorer {label}: 2 x {n:g}B x {final_texts} texts x {T} tokens = {h:.2f} GPU h")
    runs = runs_per_model * len(models)
    return {"name": e.name, "kind": e.kind, "gpu_hours": round(hours, 1), "runs": runs, "formula": lines,
            "source": e.source}


def _audit_texts(conditions: list[str], size: dict[str, Any], max_prompts: int | None = None) -> int:
    n = dict(size)
    if max_prompts and n.get("prompts") and n["prompts"] > max_prompts:
        f = max_prompts / n["prompts"]
        n = {k: (round(v * f) if isinstance(v, (int, float)) and k in ("prompts", "responses", "multi_turn") else v)
             for k, v in n.items()}
    counts = [condition_texts(c, n, n_donors=4, n_related=3, n_paraphrase=3) for c in conditions]
    return sum(x for x in counts if x)


def _in_training_texts(audit: dict[str, Any], size: dict[str, Any]) -> int:
    """Texts of one in-training audit (a saved checkpoint): its conditions and its suitability suite."""
    if not audit.get("enabled"):
        return 0
    texts = _audit_texts(audit.get("conditions", ["original"]), size, audit.get("max_prompts"))
    s = audit.get("suitability") or {}
    if s.get("enabled"):
        texts += int(s.get("max_items", 128)) * (2 + 2 * len(s.get("perturbations", []) or [None] * 10))
    return texts


def generation_cost(ctx: Any, e: ExtraCost, sizes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Prompt generation (related tasks, a reference pool) on one GPU per generating model."""
    c, size = ctx.recipe.compute, _size(ctx, e, sizes)
    prompts = size.get("prompts")
    if not prompts:
        raise ConfigError(f"costs {e.name}: data {e.data} has no prompt count")
    models: list[tuple[str, float]] = []
    n, out = e.n, e.tokens_out
    if e.recipe:
        raw = _recipe(e.recipe, e)
        for pol in raw.get("policies", []):
            models.append((pol.get("model", ""), params_from_name(pol.get("model", "")) or 0.0))
        n = n or int((raw.get("sampling") or {}).get("n", 1))
        out = out or int((raw.get("sampling") or {}).get("max_new_tokens", 256))
    elif e.params_b:
        models.append(("the generator", e.params_b))
    if not models or any(p <= 0 for _, p in models) or not n or not out:
        raise ConfigError(f"costs {e.name}: a generation needs its models' sizes (params_b or a pool recipe), "
                          "n and tokens_out")
    t_in = e.tokens_in or (size.get("mean_tokens") or 512) // 2
    hours, lines = 0.0, []
    for name, p in models:
        h = gpu_seconds(prompts * t_in, prompts * n * out, p, c) / 3600 + _load_hours(2 * p, c)
        hours += h
        lines.append(f"{name} ({p:g}B): 2 x {p:g}B x ({prompts} prompts x {t_in} tokens / {c.gpu_tflops:g} TFLOP/s "
                     f"+ {prompts} x {n} samples x {out} tokens / {c.decode_tflops:g} TFLOP/s) = {h:.2f} GPU h")
    return {"name": e.name, "kind": e.kind, "gpu_hours": round(hours, 2), "formula": lines, "source": e.source}


def ppo_cost(ctx: Any, e: ExtraCost, sizes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The PPO trainings of the launch plan (each servable reward model, clean and perturbed)."""
    from rmeval.reproduce.policy import serve_reason

    raw, c, size = _recipe(e.recipe, e), ctx.recipe.compute, _size(ctx, e, sizes)
    t, o = raw.get("training", {}), raw.get("openrlhf", {})
    pol = (raw.get("policy") or {}).get("name_or_path", "")
    n_pol = params_from_name(pol)
    if n_pol is None:
        raise ConfigError(f"costs {e.name}: the policy {pol!r} names no size")
    layout = o.get(o.get("layout", "colocated"), {})
    gpus = int(layout.get("nodes", 1)) * int(layout.get("gpus_per_node", 8))
    prompts = max(0, int(size.get("prompts") or 0) - int(raw.get("heldout_prompts", 0)))
    rollouts = prompts * int(t.get("num_generations", 1)) * float(t.get("num_epochs", 1))
    t_p, t_c = size.get("mean_tokens") or 512, int(t.get("max_completion_length", 1024))
    rms = [m for m in ctx.recipe.models if serve_reason(m) is None]
    hours, lines = 0.0, []
    for m in rms:
        n_rm = m.params_b
        s = (gpu_seconds(rollouts * t_p, rollouts * t_c, n_pol, c)
             + 2 * (2 * n_pol + n_rm) * 1e9 * rollouts * (t_p + t_c) / (c.gpu_tflops * 1e12)
             + 6 * (2 * n_pol) * 1e9 * rollouts * (t_p + t_c) / (c.gpu_tflops * 1e12))
        load = gpus * (c.server_start_min / 60 + (4 * 2 * n_pol + 2 * n_rm) / c.load_gb_s / 3600
                       + (2 * n_pol + 2 * n_rm) * 1000 / c.download_mb_s / 3600)
        n_eval = int((raw.get("evaluation") or {}).get("n_prompts", 100))
        ev = gpu_seconds(2 * n_eval * t_p, 2 * n_eval * t_c, n_pol, c) / 3600
        h = 2 * (s / 3600 + load) + ev
        hours += h
        lines.append(f"{m.name}: 2 environments x ({rollouts:g} rollouts x ({t_p} + {t_c}) tokens through the "
                     f"{n_pol:g}B policy, its reference and critic and the {n_rm:g}B reward model, and {gpus} "
                     f"GPUs held while they load) + the evaluation's {2 * n_eval} generations = {h:.1f} GPU h")
    return {"name": e.name, "kind": e.kind, "gpu_hours": round(hours, 1), "trainings": 2 * len(rms),
            "formula": lines, "source": e.source}


def baselines_cost(ctx: Any, sizes: dict[str, dict[str, Any]], s: Any, bs: Any) -> dict[str, Any]:
    """A JudgeProfile table's baselines (``baselines:``, module docstring; ``s`` the table's
    settings, ``bs`` the baselines'): per judge and source, rubric prompting on the held-out quarter
    in both orders and LoRA SFT (its steps, then its verdicts on the same items), the judge loaded
    once per source for the fine-tuning."""
    r, c = ctx.recipe, ctx.recipe.compute
    tq = question_tokens(s)[1]
    hours, lines = 0.0, []
    for name in r.baselines.judges:
        m = r.model(name)
        h_judge, n = 0.0, m.params_b
        for key in ctx.data_keys():
            items = sizes[key].get("items") or 0
            items = min(items, s.max_items_per_source or items)
            t = judge_item_tokens(ctx, key, sizes[key], s) + tq
            calls = 2 * round(0.25 * items) * (("rubric" in bs.kinds) + ("lora" in bs.kinds))
            train = bs.lora_steps * bs.lora_batch_size * t if "lora" in bs.kinds else 0
            h_judge += (gpu_seconds(calls * t, calls, n, c) + 6 * n * 1e9 * train / (c.gpu_tflops * 1e12)) / 3600
            h_judge += _load_hours(2 * n, c) if "lora" in bs.kinds else 0.0
        hours += h_judge
        lines.append(f"{name} ({n:g}B), per source: 2 orders x the held-out quarter of its items x "
                     f"({'rubric + LoRA SFT' if len(bs.kinds) == 2 else bs.kinds[0]}) x (T_item + T_q) tokens x 2 x "
                     f"{n:g}B, + {bs.lora_steps} LoRA steps x {bs.lora_batch_size} x (T_item + T_q) tokens x 6 x "
                     f"{n:g}B at {c.gpu_tflops:g} TFLOP/s, + the judge loaded for each fine-tuning = "
                     f"{h_judge:.2f} GPU h")
    return {"name": "the rubric and LoRA SFT baselines (the panel step)", "kind": "baselines",
            "gpu_hours": round(hours, 2), "formula": lines,
            "source": "rmeval.judges.baselines on the reweighting's 75/25 split; one GPU of the machine running the "
                      "panel step"}


def extra_cost(ctx: Any, e: ExtraCost, sizes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"sweep": sweep_cost, "generation": generation_cost, "ppo": ppo_cost}[e.kind](ctx, e, sizes)
