"""Generative-judge diagnostics (the study's Table 5): the digit mass and digit distribution the
scorer records, checked against a plain forward pass and scipy's softmax; the statistics, checked
against hand computations on planted tables; and the audit's per-row table and section."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.special import logsumexp, softmax
from scipy.stats import rankdata

from rmcore.io.tables import read_table
from rmcore.models.tiny import tiny_causal_lm
from rmeval.cli import main
from rmeval.scoring.judge import JUDGE_TEMPLATE, GenerativeJudgeScorer
from rmeval.stats.judge_diagnostics import DIGIT_COLUMNS, judge_diagnostics

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _judge(path):
    return tiny_causal_lm(path, [JUDGE_TEMPLATE, "Rating: 1 2 3 4 5 bread flour water the user"] * 5, vocab_size=400)


def _items(n: int = 6) -> list:
    return [([{"role": "user", "content": f"How do I bake bread number {i}?"}], "Mix flour and water " * (i + 1))
            for i in range(n)]


def test_digit_mass_and_probabilities_against_a_plain_forward(tmp_path):
    from transformers import AutoModelForCausalLM

    _judge(tmp_path)
    judge = GenerativeJudgeScorer(tmp_path, max_length=200, batch_size=4)
    items = _items()
    scores = judge.score(items)
    rows = judge.last_digits
    assert rows.shape == (len(items), len(DIGIT_COLUMNS))
    model = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    for k, (msgs, resp) in enumerate(items):
        ids, _, _ = judge.encode(msgs, resp)
        with torch.no_grad():
            z = model(input_ids=torch.tensor([ids])).logits[0, -1].double().numpy()
        full = softmax(z)
        spellings = [set(i) for i in judge.digit_ids]  # every single-token spelling of each digit
        mass = sum(full[list(s)].sum() for s in spellings)
        per_digit = np.array([logsumexp(z[list(s)]) for s in spellings])
        p = softmax(per_digit)
        assert rows[k, 0] == pytest.approx(mass, rel=1e-5)
        np.testing.assert_allclose(np.exp(rows[k, 1:]), p, rtol=1e-5)
        assert scores[k] == pytest.approx(float(p @ np.arange(1, 6)), abs=1e-6)
    # recorded rows are looked up, not rescored; the store survives a new scorer on the same file
    judge.keep_digits(tmp_path / "cache.sqlite")
    judge.score(items[:3])
    fresh = GenerativeJudgeScorer(tmp_path, max_length=200, batch_size=4)
    fresh.keep_digits(tmp_path / "cache.sqlite")
    fresh.model = None  # a lookup that tried to score would fail
    np.testing.assert_allclose(fresh.digit_rows(items[:3]), judge.last_digits, rtol=1e-12)


def _icc(values: np.ndarray, k: int, n: int) -> float:
    """ICC(1) of a balanced design (k prompts x n responses), one-way ANOVA by hand."""
    y = values.reshape(k, n)
    msb = n * ((y.mean(1) - y.mean()) ** 2).sum() / (k - 1)
    msw = ((y - y.mean(1, keepdims=True)) ** 2).sum() / (k * (n - 1))
    return (msb - msw) / (msb + (n - 1) * msw)


def _planted(k: int = 40, n: int = 3, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    level = rng.normal(0, 1.5, size=k)  # a prompt effect on the judge's logits
    rows = []
    for p in range(k):
        for r in range(n):
            logits = np.array([0.0, 0.3, 0.8, 1.5, 2.0]) * (1 + level[p]) + rng.normal(0, 0.7, 5)
            lp = logits - logsumexp(logits)
            for cond, mass in (("original", rng.uniform(0.6, 1.0)), ("random", rng.uniform(0.2, 1.0))):
                rows.append({"prompt_id": f"p{p}", "response_id": f"p{p}:{r}", "condition": cond, "variant": 0,
                             "donor_prompt_id": None, "digit_mass": mass,
                             **{f"log_p_{d}": lp[d - 1] for d in range(1, 6)}})
    return pd.DataFrame(rows)


def test_statistics_against_hand_computations():
    t = _planted()
    d = judge_diagnostics(t, n_boot=300, seed=3)
    o = t[t["condition"] == "original"]
    for cond in ("original", "random"):
        m = t.loc[t["condition"] == cond, "digit_mass"].to_numpy()
        got = d["digit_mass"][cond]
        assert got["n_rows"] == len(m) and got["mean"] == pytest.approx(m.mean())
        assert got["median"] == pytest.approx(np.median(m)) and got["min"] == pytest.approx(m.min())
        assert got["share_below"]["estimate"] == pytest.approx((m < 0.9).mean())
        lo, hi = got["share_below"]["ci95"]
        assert lo <= (m < 0.9).mean() <= hi
    lp = o[[f"log_p_{i}" for i in range(1, 6)]].to_numpy()
    p = np.exp(lp)
    top = p.argmax(1) + 1
    assert d["top_digit"]["counts"] == {str(i): int((top == i).sum()) for i in range(1, 6)}
    expected = p @ np.arange(1, 6)
    logit = np.log(p[:, 4] / (1 - p[:, 4]))
    sh = d["share"]
    assert sh["expected_digit"]["estimate"] == pytest.approx(_icc(expected, 40, 3), abs=1e-9)
    assert sh["logit_top_digit"]["estimate"] == pytest.approx(_icc(logit, 40, 3), abs=1e-9)
    assert sh["difference"]["estimate"] == pytest.approx(_icc(logit, 40, 3) - _icc(expected, 40, 3), abs=1e-9)
    assert sh["ranks"]["estimate"] == pytest.approx(_icc(rankdata(expected), 40, 3), abs=1e-9)
    assert "transplants" not in d["digit_mass"]  # one wrong-prompt kind is already its own row


def test_a_ceiling_lowers_the_expected_digit_share_not_the_logit_share():
    """Planted: every response is nearly sure of 5 (a ceiling) and the prompt moves only how sure.
    The expected digit is squeezed against 5, its share diluted by within-prompt noise that the
    logit sees at its true size; on the logit scale the planted prompt share is 0.5."""
    rng = np.random.default_rng(0)
    k, n = 300, 4
    prompt = np.repeat(rng.normal(0, 1, k), n)
    logit5 = 4 + prompt + rng.normal(0, 1, k * n)  # logit p(5): prompt variance 1, noise variance 1
    rest = np.log1p(-1 / (1 + np.exp(-logit5)))  # log(1 - p5), spread evenly over 1..4
    lp = np.column_stack([rest - np.log(4)] * 4 + [logit5 + rest])
    t = pd.DataFrame({"prompt_id": np.repeat(np.arange(k), n).astype(str), "condition": "original",
                      "digit_mass": 0.95, **{f"log_p_{d}": lp[:, d - 1] for d in range(1, 6)}})
    sh = judge_diagnostics(t, n_boot=200)["share"]
    assert sh["logit_top_digit"]["estimate"] == pytest.approx(0.5, abs=0.07)
    assert sh["difference"]["ci95"][0] > 0  # the ceiling lowers the expected digit's share


def test_audit_writes_the_table_and_section_and_stats_recomputes_it(tmp_path):
    _judge(tmp_path / "judge")
    out = tmp_path / "audit"
    args = ["audit", "--checkpoint", str(tmp_path / "judge"), "--scorer", "generative_judge",
            "--data", "simulated:n_prompts=8,responses_per_prompt=2", "--conditions", "original,random",
            "--n-boot", "30", "--n-boot-regression", "30", "--max-length", "200", "--out", str(out),
            "--wandb-mode", "disabled", "--no-progress"]
    assert main(args) == 0
    audit = json.loads((out / "audit.json").read_text())
    scores = read_table(out / "scores.parquet")
    digits = read_table(out / "judge_digits.parquet")
    key = ["prompt_id", "response_id", "condition", "variant"]
    assert len(digits) == len(scores) == 8 * 2 * 5
    m = scores.merge(digits, on=key)
    assert len(m) == len(scores)
    lp = m[[f"log_p_{d}" for d in range(1, 6)]].to_numpy()
    np.testing.assert_allclose(np.exp(lp) @ np.arange(1, 6), m["score"], atol=1e-6)  # the score is E over p
    jd = audit["judge_diagnostics"]
    assert jd["digit_mass"]["original"]["n_rows"] == 16 and jd["digit_mass"]["random"]["n_rows"] == 64
    assert "## Generative judge diagnostics" in (out / "audit.md").read_text()
    # resumed: scores from scores.parquet, digits from the score cache's judge_digits table
    assert main(args) == 0
    pd.testing.assert_frame_equal(read_table(out / "judge_digits.parquet"), digits)
    # recomputed from the tables alone
    assert main(["stats", "--scores", str(out / "scores.parquet"), "--ratings", str(out / "ratings.parquet"),
                 "--n-boot", "30", "--n-boot-regression", "30", "--out", str(tmp_path / "stats"),
                 "--wandb-mode", "disabled"]) == 0
    again = json.loads((tmp_path / "stats" / "audit.json").read_text())["judge_diagnostics"]
    assert again == jd
