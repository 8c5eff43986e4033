"""Head-to-head win rate of two policies under a pairwise judge, and how a reward model's
suitability risk and accuracy change predict it across reward models (Reward Auditor §5.2).

Judge prompt: the study's (appendix A.2.2): judge only logic, accuracy and depth; ignore style,
formatting, language, length and position; verdict ``[[A]]``, ``[[B]]`` or ``[[C]]`` (equal).
Every prompt is judged in both presentation orders; the policy under test wins a prompt when both
orders prefer it, loses when both prefer the other, and ties otherwise (an equal verdict, orders
that disagree, or an unreadable verdict, which is also counted). Win rate = (wins + ties / 2) / n,
with a percentile bootstrap over prompts.

Judges, on the backends of the pairwise-judge protocol (``rmeval.backends``; ``make_judge`` takes any
kind of ``rmeval.backends.spec`` that judges): ``HFPairwiseJudge``, a local causal LM read from the
next-token distribution over the verdict letters after ``Final verdict: [[`` (so no sampled analysis
is needed), and ``OpenAIPairwiseJudge``, any OpenAI-compatible endpoint (the model writes its
analysis, the last ``[[X]]`` is the verdict).

Across reward models: per model, the suitability risk is the sum of Cohen's d over the
perturbations its suitability audit marks ``unsuitable`` (rejected at the FDR level and d above
the margin; ``rejected`` when the file has no ``unsuitable``), and the accuracy change is the mean
``accuracy_change`` over its perturbations; a panel's output (``models.<name>``) is read one model
at a time (``PATH#NAME``). ``spearman_table`` correlates each with the win rate.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rmcore.errors import ConfigError, DataError, invalid_json
from rmcore.io.files import atomic_save_figure, is_finite
from rmcore.io.markdown import num
from rmcore.io.markdown import table as md_table
from rmeval.backends import JudgeBackend, Question, Tokens, read_bracket_verdict
from rmeval.backends.spec import OPENAI_API_URL, make_backend, parse_backend_spec
from rmeval.stats.bootstrap import mean_of_prompt_values
from rmeval.stats.settings import N_BOOT

JUDGE_PROMPT = (
    "Role: You are an expert analyst and impartial judge. Your task is to evaluate the responses provided by "
    "two AI assistants (Assistant A and Assistant B) to the user's prompt below.\n\n"
    "Core Judging Principles: Your evaluation MUST be based exclusively on the following three core "
    "content-based criteria:\n"
    "1. Logic: Is the reasoning sound, coherent, and easy to follow? Are there any logical fallacies?\n"
    "2. Accuracy: Is the information provided factually correct and reliable? Are there any errors or "
    "misleading statements?\n"
    "3. Depth: Does the response provide a comprehensive and insightful answer? Does it address the nuances "
    "of the user's prompt or just give a superficial reply?\n\n"
    "Dimensions to Be Ignored: To ensure a fair and focused evaluation, you MUST completely ignore all of the "
    "following superficial differences:\n"
    "1. Style and Tone: Whether a response is formal, casual, friendly, or academic should not influence your "
    "judgment.\n"
    "2. Formatting: Ignore the use of Markdown, bullet points, bolding, or any other structural formatting. A "
    "plain block of text and a well-formatted list should be treated equally if their content quality is the "
    "same.\n"
    "3. Language: This is a critical principle. If one response is in English and another is in a different "
    "language, you must evaluate the underlying logic, accuracy, and depth as if they were in the same "
    "language. A response must not be penalized or rewarded for the language in which it is written.\n"
    "- Length: A longer response is not necessarily a better response. Focus on the quality and density of "
    "correct information, not the word count.\n"
    "- Positional Bias: The order in which the responses are presented must not influence your decision.\n\n"
    "Output Format:\n"
    "1. Brief Analysis: First, provide a brief, comparative analysis explaining your reasoning based only on "
    "the three core criteria above.\n"
    "2. Final Verdict: After the analysis, provide your final verdict in the following format:\n"
    "- [[A]] if Assistant A's response is demonstrably superior based on the core criteria.\n"
    "- [[B]] if Assistant B's response is demonstrably superior based on the core criteria.\n"
    "- [[C]] if both responses are of equal quality in terms of logic, accuracy, and depth, even if they "
    "differ superficially.\n\n"
    "[User Prompt]\n{prompt}\n\n[Assistant A's Response]\n{answer_a}\n\n[Assistant B's Response]\n{answer_b}\n\n"
    "Verdict: Which response is fundamentally better based only on the core criteria?"
)
VERDICTS = ("A", "B", "C")


def parse_verdict(text: str) -> str | None:
    """The last ``[[A]]``/``[[B]]``/``[[C]]`` in a judge's answer, or None."""
    return read_bracket_verdict(text, VERDICTS)


def judge_prompt(prompt: str, answer_a: str, answer_b: str) -> str:
    return JUDGE_PROMPT.format(prompt=prompt, answer_a=answer_a, answer_b=answer_b)


class VerdictQuestion(Question):
    """The study's judge prompt as a question of the pairwise-judge protocol (``rmeval.backends``):
    a local model is read at ``Final verdict: [[`` after it (the prompt's tokens cut from the left to
    ``max_length``); an endpoint writes its analysis and the last ``[[X]]`` is the verdict."""

    letters = VERDICTS

    def __init__(self, max_length: int | None = None) -> None:
        self.max_length = max_length

    def text(self, item: tuple[str, str, str]) -> str:
        return judge_prompt(*item)

    def encode(self, backend: Any, items: Sequence[tuple[str, str, str]]) -> list[Tokens]:
        out = []
        for it in items:
            body = self.text(it)
            if getattr(backend.tokenizer, "chat_template", None):
                text = backend.user_turn(body) + "Final verdict: [["
            else:
                text = body + "\n\nFinal verdict: [["
            ids = backend.ids(text)
            out.append(Tokens(ids[-self.max_length:] if self.max_length else ids))
        return out

    def parse(self, reply: str | None) -> str | None:
        return parse_verdict(reply or "")


class PairwiseJudge:
    """A pairwise judge of two answers: ``judge(items)`` -> 'A' | 'B' | 'C' | None (unreadable) per
    (prompt text, answer A, answer B); the verdict is the letter with the highest score."""

    kind = "pairwise_judge"

    def __init__(self, backend: JudgeBackend, question: VerdictQuestion) -> None:
        self.backend, self.question = backend, question

    def judge(self, items: list[tuple[str, str, str]]) -> list[str | None]:
        if not items:
            return []
        scores = self.backend.letter_scores(self.question, items)
        return [None if row.isnan().any() else VERDICTS[int(row.argmax())] for row in scores]


class HFPairwiseJudge(PairwiseJudge):
    """A local causal LM; verdict = the most likely of the letters A/B/C after ``Final verdict: [[``
    (no sampled analysis is needed). Prompts longer than ``max_length`` (at most the model's own
    limit) keep their end."""

    kind = "hf"

    def __init__(self, model: str | os.PathLike | Any, *, tokenizer: Any | None = None, max_length: int = 4096,
                 batch_size: int = 8, device: str | None = None, dtype: str = "float32") -> None:
        # torch: this module loads without it
        from rmcore.models.modeling import resolve_max_length
        from rmeval.backends.local import LocalBackend

        backend = LocalBackend(model, tokenizer=tokenizer, batch_size=batch_size, device=device, dtype=dtype)
        super().__init__(backend, VerdictQuestion(resolve_max_length(max_length, backend.model, backend.tokenizer)))


class OpenAIPairwiseJudge(PairwiseJudge):
    """An OpenAI-compatible chat endpoint (GPT-5 in the study; vLLM, TGI, llama.cpp...), one request
    at a time."""

    kind = "openai"

    def __init__(self, model: str, *, base_url: str = "https://api.openai.com/v1", api_key_env: str = "OPENAI_API_KEY",
                 max_tokens: int = 1024, timeout: float = 120.0, seed: int | None = 0) -> None:
        # torch: this module loads without it
        from rmeval.backends.endpoint import EndpointBackend

        super().__init__(EndpointBackend(model, base_url=base_url, api_key_env=api_key_env, max_tokens=max_tokens,
                                         timeout=timeout, concurrency=1, seed=seed), VerdictQuestion())


def make_judge(spec: str, *, base_url: str | None = None, max_length: int = 4096,
               placement: Any | None = None, what: str = "judge") -> PairwiseJudge:
    """A backend kind that judges (``rmeval.backends.spec``): ``hf:PATH`` (local causal LM, where
    ``placement`` says: the CPU or GPU in float32 by default), ``openai:MODEL`` (at ``base_url``,
    else OpenAI's), ``openai_logprobs:MODEL``."""
    # torch: this module loads without it
    from rmcore.models.device import Placement

    s = parse_backend_spec(spec, what=what, spelled={"base_url": "evaluation.judge_base_url"},
                           defaults={"base_url": OPENAI_API_URL}, base_url=base_url)
    backend = make_backend("judge", s, placement=placement or Placement(dtype="float32"), batch_size=8,
                           reply_tokens=1024, timeout=120.0, concurrency=1, seed=0)
    limit = backend.fit_length(max_length) if backend.reads_tokens else None
    return PairwiseJudge(backend, VerdictQuestion(limit))


def prompt_outcomes(first: list[str | None], second: list[str | None]) -> np.ndarray:
    """Per prompt: 1 (the tested policy wins), 0 (loses) or 0.5 (tie). ``first``: the tested policy
    was A; ``second``: it was B."""
    if len(first) != len(second):
        raise ValueError("both presentation orders need one verdict per prompt")
    out = np.full(len(first), 0.5)
    for i, (v1, v2) in enumerate(zip(first, second)):
        if v1 == "A" and v2 == "B":
            out[i] = 1.0
        elif v1 == "B" and v2 == "A":
            out[i] = 0.0
    return out


def win_rate(first: list[str | None], second: list[str | None], *, n_boot: int = N_BOOT,
             seed: int = 0) -> dict[str, Any]:
    o = prompt_outcomes(first, second)
    res = mean_of_prompt_values(o, n_boot=n_boot, rng=seed)
    unreadable = sum(v is None for v in list(first) + list(second))
    # both orders name the same position: the judge followed the position, not the policy
    disagree = sum(1 for v1, v2 in zip(first, second) if v1 in ("A", "B") and v1 == v2)
    return {"win_rate": res["estimate"], "ci95": res["ci95"], "n_prompts": len(o), "n_boot": res["n_boot"],
            "wins": int((o == 1).sum()), "losses": int((o == 0).sum()), "ties": int((o == 0.5).sum()),
            "order_disagreements": int(disagree), "unreadable_verdicts": int(unreadable),
            "verdicts_first_order": {v: sum(x == v for x in first) for v in VERDICTS},
            "verdicts_second_order": {v: sum(x == v for x in second) for v in VERDICTS}}


def _model_summary(d: dict[str, Any], file: str, where: str) -> dict[str, float]:
    perts = d.get("perturbations")
    if not isinstance(perts, dict) or not perts:
        raise DataError("no perturbations", file=file, field=f"{where}perturbations")
    risk, acc, n_uns = 0.0, [], 0
    for code, v in perts.items():
        for key in ("cohens_d", "rejected"):
            if key not in v:
                raise DataError("missing field", file=file, field=f"{where}perturbations.{code}.{key}")
        flagged = bool(v.get("unsuitable", v["rejected"]))
        if flagged and is_finite(v["cohens_d"]):
            risk += float(v["cohens_d"])
            n_uns += 1
        if v.get("accuracy_change") is not None:
            acc.append(float(v["accuracy_change"]))
    if d.get("suitability_risk") is not None:  # as the audit computed it (the paper's risk)
        risk = float(d["suitability_risk"])
    return {"suitability_risk": risk, "accuracy_change": float(np.mean(acc)) if acc else float("nan"),
            "n_unsuitable": n_uns}


def _suitability_doc(path: str | os.PathLike) -> tuple[dict[str, Any], Path]:
    path = Path(path)
    if path.is_dir():
        path = path / "suitability.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such suitability file (run `rmeval suitability` on the reward model)")
    try:
        return json.loads(path.read_text()), path
    except json.JSONDecodeError as e:
        raise DataError(invalid_json(e), file=str(path)) from None


def read_suitability(path: str | os.PathLike) -> dict[str, float]:
    """{suitability_risk, accuracy_change, n_unsuitable} of one reward model from an ``rmeval
    suitability`` output: a suitability.json (or its folder) of one model, or of a panel
    (``models.<name>``) as ``PATH#NAME`` (a panel of one model needs no name). The risk is the
    file's ``suitability_risk`` where it has one (older files: the sum of d over the perturbations
    marked unsuitable, else rejected)."""
    text = str(path)
    name = None
    if "#" in text and not Path(text).exists():
        text, _, name = text.rpartition("#")
    d, file = _suitability_doc(text)
    if "models" in d:
        models = d["models"]
        if name is None and len(models) == 1:
            name = next(iter(models))
        if name is None:
            raise DataError(f"a panel of {len(models)} models: name one as PATH#NAME (models: {', '.join(models)})",
                            file=str(file), field="models")
        if name not in models:
            raise DataError(f"no model {name!r} (models: {', '.join(models)})", file=str(file), field="models")
        return _model_summary(models[name], str(file), f"models.{name}.")
    return _model_summary(d, str(file), "")


def read_panel_suitability(path: str | os.PathLike) -> dict[str, dict[str, float]]:
    """``read_suitability`` of every model of a panel output (one model: named by its folder)."""
    d, file = _suitability_doc(path)
    if "models" in d:
        return {n: _model_summary(m, str(file), f"models.{n}.") for n, m in d["models"].items()}
    return {file.parent.name: _model_summary(d, str(file), "")}


def spearman_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Spearman correlation (and two-sided p) of suitability risk and of accuracy change with the
    perturbed policy's win rate; ``rows``: {name, suitability_risk, accuracy_change, win_rate}."""
    from scipy.stats import spearmanr

    if len(rows) < 3:
        raise ConfigError(f"a Spearman table needs at least 3 reward models, got {len(rows)}")
    wr = np.array([r["win_rate"] for r in rows], dtype=float)
    out: dict[str, Any] = {"n_models": len(rows), "models": rows}
    for key in ("suitability_risk", "accuracy_change"):
        x = np.array([r[key] for r in rows], dtype=float)
        ok = np.isfinite(x) & np.isfinite(wr)
        if ok.sum() >= 3:
            rho, p = spearmanr(x[ok], wr[ok])
            out[key] = {"spearman": float(rho), "p_value": float(p), "n": int(ok.sum())}
        else:
            out[key] = {"spearman": float("nan"), "p_value": float("nan"), "n": int(ok.sum())}
    return out


def spearman_markdown(table: dict[str, Any]) -> str:
    # an undefined correlation (fewer than 3 finite points) has always printed as nan here
    def f(x: Any, digits: int = 3) -> str:
        return num(x, digits, missing="nan")

    lines = md_table(["predictor", "Spearman ρ with win rate", "p", "n"],
                     [[label, f(table[key]["spearman"]), f(table[key]["p_value"], 4), table[key]["n"]]
                      for key, label in (("suitability_risk", "suitability risk"),
                                         ("accuracy_change", "accuracy change"))])
    lines += [""] + md_table(["reward model", "suitability risk", "accuracy change", "win rate"],
                             [[m["name"], f(m["suitability_risk"]), f(m["accuracy_change"]), f(m["win_rate"])]
                              for m in table["models"]])
    return "\n".join(lines) + "\n"


def scatter_plot(table: dict[str, Any], path: str | os.PathLike) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    wr = [m["win_rate"] for m in table["models"]]
    for ax, key, label in zip(axes, ("suitability_risk", "accuracy_change"), ("suitability risk", "accuracy change")):
        x = [m[key] for m in table["models"]]
        ax.scatter(x, wr)
        for m, xi, yi in zip(table["models"], x, wr):
            ax.annotate(m["name"], (xi, yi), fontsize=7)
        r = table[key]
        ax.set_title(f"{label}: ρ = {r['spearman']:.3f} (p = {r['p_value']:.3g})")
        ax.set_xlabel(label)
        ax.set_ylabel("perturbed policy win rate")
    fig.tight_layout()
    return atomic_save_figure(fig, path, dpi=120)
