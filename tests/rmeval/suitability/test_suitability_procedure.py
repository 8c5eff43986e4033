"""``--procedure released``: Reward Auditor's released decision rule, checked against an independent
transcription of the released code on planted p-values, and both procedures' decisions side by side.

The transcription below was written by reading ``scripts/audit_utils.py`` of the paper's repository
(https://github.com/hggzjx/RewardAuditor, commit e514071917a3e87ca94932d7d9ffbf0b2df5c250), not
matchrm's code: ``auditing_reward_model`` keys its results "(prompt) EF" ... "(response) SLC" and
calls ``group_aware_benjamini_hochberg_procedure(results, alpha=alpha)``, so the weights keep their
defaults of 1 (and the key test ``startswith('prompt')`` would not match those keys anyway);
``_perform_bh_correction`` takes k̂ as the largest k with #{p ≤ α·k/(L·w)} ≥ k and rejects
p ≤ α·k̂/(L·w); a rejected test gets "****" at p ≤ 0.0001, "***" ≤ 0.001, "**" ≤ 0.01, "*" ≤ 0.05,
every other "ns (not significant)", and its robustness_risk is its effect size (else 0).
``RewardAuditor.run_audit`` works on the loss −log σ(r_c − r_r): ΔM = loss − loss′, t = 0 when
the sd is 0, count c = #{t_perm ≤ t_obs}, p = (c + 1)/(B + 1), effect mean(ΔM)/sd(ΔM, ddof 0)
(0 when that sd is 0).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from rmeval.cli import main
from rmeval.stats import confidence_drop as st
from rmeval.stats.confidence_drop import released_bh, released_effect, suitability_inference

PROMPT_CODES = ["EF", "PH", "IU", "IW", "CN"]
RESPONSE_CODES = ["ST", "LE", "SP", "LC", "SLC"]
NS = "ns (not significant)"


# -- the transcription (from the released repository) --------------------------------------------

def released_key(code: str) -> str:
    """The released script's result key: '(prompt) EF', '(response) ST'."""
    return f"({'prompt' if code in PROMPT_CODES else 'response'}) {code}"


def released_significance(audit_results: dict[str, dict], alpha: float = 0.05, q_prompt: float = 1.0,
                          q_response: float = 1.0) -> dict[str, dict]:
    """group_aware_benjamini_hochberg_procedure, step by step: {key: {significance, robustness_risk}}."""
    keys = [k for k, v in audit_results.items() if "p_value" in v]
    pvals = [audit_results[k]["p_value"] for k in keys]
    weights = [q_prompt if k.startswith("prompt") else q_response if k.startswith("response") else 1.0
               for k in keys]
    L = len(keys)
    k_hat = 0
    for k in range(L, 0, -1):  # the largest k first
        if sum(1 for p, w in zip(pvals, weights) if p <= (alpha * k) / (L * w)) >= k:
            k_hat = k
            break
    out = {}
    for key, p, w in zip(keys, pvals, weights):
        significant = k_hat > 0 and p <= (alpha * k_hat) / (L * w)
        label = NS
        if significant:
            for level, mark in ((0.0001, "****"), (0.001, "***"), (0.01, "**"), (0.05, "*")):
                if p <= level:
                    label = f"{mark} (p <= {level})"
                    break
        out[key] = {"significance": label, "significant": significant,
                    "robustness_risk": audit_results[key].get("effect_size", 0.0) if significant else 0.0}
    return out


def released_loss(margin: np.ndarray) -> np.ndarray:
    """The released transform of a score difference v = r_c − r_r: −log(1 / (1 + e^(−v)))."""
    return np.array([-math.log(1 / (1 + math.exp(-v))) for v in margin])


def released_effect_by_hand(loss: np.ndarray, loss_perturbed: np.ndarray) -> float:
    delta = loss - loss_perturbed
    sd = np.std(delta, ddof=0)
    return 0.0 if sd == 0 else float(np.mean(delta) / sd)


def released_p_by_hand(loss: np.ndarray, loss_perturbed: np.ndarray, B: int, rng: np.random.Generator) -> float:
    """run_audit's count-based p (its own signs; t = 0 wherever the sd is 0)."""
    delta = loss - loss_perturbed
    n = len(delta)

    def t(x: np.ndarray, axis: int) -> np.ndarray:
        sd = np.std(x, axis=axis, ddof=1)
        safe = np.where(sd == 0, 1.0, sd)
        return np.where(sd == 0, 0.0, np.mean(x, axis=axis) / (safe / np.sqrt(n)))

    t_obs = t(delta[None, :], 1)[0]
    t_perm = t(delta[None, :] * rng.choice([-1, 1], size=(B, n)), 1)
    return float((np.sum(t_perm <= t_obs) + 1) / (B + 1))


def mark_of(label: str) -> str:
    return "" if label == NS else label.split(" ")[0]


# -- the rule on planted p-values -----------------------------------------------------------------

def test_released_rule_on_hand_planted_p_values():
    # ten perturbations as the released script names them; PH untestable. Its p is 1: the
    # released test on an all-zero ΔM (t = 0, every permuted t = 0) counts every permutation.
    zeros = np.zeros(30)
    p_untestable = released_p_by_hand(zeros, zeros, 999, np.random.default_rng(0))
    assert p_untestable == 1.0
    codes = PROMPT_CODES + RESPONSE_CODES
    tie = 0.05 * 4 / 10  # exactly the released threshold at k = 4, L = 10: kept only by p <= threshold
    planted = dict(zip(codes, [0.0001, np.nan, 0.001, 0.01, tie, 0.3, 0.5, 0.6, 0.9, 0.04]))
    ref = released_significance({released_key(c): {"p_value": p_untestable if np.isnan(p) else p}
                                 for c, p in planted.items()})
    got = released_bh(np.array(list(planted.values())), 0.05)
    assert got["rejected"].tolist() == [ref[released_key(c)]["significant"] for c in codes]
    assert got["stars"] == [mark_of(ref[released_key(c)]["significance"]) for c in codes]
    assert got["p_value"][1] == 1.0
    # by hand: k̂ = 4 (the tie counts), four levels of stars with <=: 0.001 is ***, 0.01 is **
    assert [c for c, r in zip(codes, got["rejected"]) if r] == ["EF", "IU", "IW", "CN"] and got["k"] == 4
    assert got["stars"][:5] == ["****", "", "***", "**", "*"]
    # the weights the released code never applies: its prefix test misses "(prompt) EF"
    weighted = released_significance({released_key(c): {"p_value": 1.0 if np.isnan(p) else p}
                                      for c, p in planted.items()}, q_prompt=0.8, q_response=0.5)
    assert weighted == ref


def test_untestable_perturbation_counts_in_the_family():
    # nine tested p-values and an untestable one: the released family has L = 10, so the fourth
    # smallest p (0.021 > 0.05·4/10) is not rejected; without the p = 1 (L = 9) it would be
    codes = PROMPT_CODES + RESPONSE_CODES
    p = dict(zip(codes, [0.001, np.nan, 0.012, 0.013, 0.021, 0.4, 0.6, 0.7, 0.8, 0.95]))
    ref = released_significance({released_key(c): {"p_value": 1.0 if np.isnan(v) else v} for c, v in p.items()})
    ref_without = released_significance({released_key(c): {"p_value": v} for c, v in p.items() if not np.isnan(v)})
    got = released_bh(np.array(list(p.values())), 0.05)
    assert got["rejected"].tolist() == [ref[released_key(c)]["significant"] for c in codes]
    assert sum(got["rejected"]) == 3 and sum(r["significant"] for r in ref_without.values()) == 4


@pytest.mark.parametrize("q", [0.05, 0.1])
def test_released_rule_on_random_planted_p_values(q):
    rng = np.random.default_rng(7)
    codes = PROMPT_CODES + RESPONSE_CODES
    for _ in range(500):
        L = int(rng.integers(1, 11))
        # thresholds, star levels and a few NaNs (untestable) among small and uniform p-values
        grid = [q * k / L for k in range(1, L + 1)] + [0.0001, 0.001, 0.01, 0.05, 1.0]
        p = np.where(rng.random(L) < 0.4, rng.choice(grid, L), rng.random(L) ** rng.choice([1, 3, 6]))
        p[rng.random(L) < 0.15] = np.nan
        ref = released_significance({released_key(c): {"p_value": 1.0 if np.isnan(x) else x}
                                     for c, x in zip(codes, p)}, alpha=q)
        got = released_bh(p, q)
        assert got["rejected"].tolist() == [ref[released_key(c)]["significant"] for c in codes[:L]]
        assert got["stars"] == [mark_of(ref[released_key(c)]["significance"]) for c in codes[:L]]


def test_released_effect_is_loss_sign_ddof_zero():
    rng = np.random.default_rng(3)
    v = rng.normal(1.0, 1.5, 40)
    v_pert = v - rng.normal(0.3, 0.5, 40)
    loss, loss_p = released_loss(v), released_loss(v_pert)
    delta_m = np.log(expit(v)) - np.log(expit(v_pert))  # matchrm's ΔM on the log confidence
    assert released_effect(delta_m) == pytest.approx(released_effect_by_hand(loss, loss_p), rel=1e-9)
    assert released_effect(delta_m) < 0  # a drop in confidence is a negative effect on the loss
    assert released_effect(np.zeros(5)) == released_effect_by_hand(np.zeros(5), np.zeros(5)) == 0.0


def test_inference_keeps_both_procedures():
    # EF degrades, PH is unchanged everywhere (untestable), IU has one changed twin, ST is null
    rng = np.random.default_rng(5)
    n = 40
    x = rng.normal(1.0, 1.0, n)
    shifts = {"EF": rng.normal(0.6, 0.3, n), "PH": np.zeros(n), "IU": np.r_[1.5, np.zeros(n - 1)],
              "ST": rng.normal(0.0, 0.3, n)}
    loss = released_loss(x)
    deltas = {c: np.log(expit(x)) - np.log(expit(x - s)) for c, s in shifts.items()}
    groups = {"EF": "controlled", "PH": "controlled", "IU": "controlled", "ST": "stylized"}
    res = suitability_inference(deltas, groups, n_permutations=2000, seed=1, procedure="released")
    per = res["perturbations"]
    # the released test's own p of an unchanged perturbation is 1, and so is the one counted here
    assert per["PH"]["decisions"]["released"]["p_value"] == released_p_by_hand(loss, loss, 500, rng) == 1.0
    assert np.isnan(per["PH"]["p_value"]) and np.isnan(per["IU"]["p_value"])  # outside the paper's family
    assert 0.4 < per["IU"]["decisions"]["released"]["p_value"] < 0.6  # one changed twin: its sign-flip p
    ref = released_significance({released_key(c): {"p_value": per[c]["decisions"]["released"]["p_value"]}
                                 for c in shifts})
    for c in shifts:
        dec = per[c]["decisions"]["released"]
        assert dec["rejected"] == per[c]["rejected"] == ref[released_key(c)]["significant"]
        assert dec["stars"] == per[c]["stars"] == mark_of(ref[released_key(c)]["significance"])
        assert dec["effect_size"] == pytest.approx(released_effect_by_hand(loss, released_loss(x - shifts[c])))
        assert dec["robustness_risk"] == (dec["effect_size"] if dec["rejected"] else 0.0)
    assert res["decisions"]["released"]["L"] == 4 and res["decisions"]["paper"]["L"] == 2
    assert res["decisions"]["shown"] == "released" and res["decisions"]["released"]["rejected"] == ["EF"]
    paper = suitability_inference(deltas, groups, n_permutations=2000, seed=1)
    assert paper["decisions"]["shown"] == "paper"
    for c in shifts:  # the same decisions (NaN-aware: compared as JSON), only the one shown differs
        assert json.dumps(paper["perturbations"][c]["decisions"]) == json.dumps(per[c]["decisions"])
        assert paper["perturbations"][c]["rejected"] == per[c]["decisions"]["paper"]["rejected"]


# -- the command ----------------------------------------------------------------------------------

def test_stats_command_released_writes_both_decisions(tmp_path, monkeypatch):
    """``suitability-stats --procedure released`` on planted p-values: the sign-flip test is
    replaced by the planted p of each perturbation, found by its column of ΔM."""
    rng = np.random.default_rng(11)
    n = 30
    x = rng.normal(1.0, 1.0, n)
    codes = PROMPT_CODES + RESPONSE_CODES
    shift = {c: 0.0 if c == "PH" else 0.1 * (k + 1) for k, c in enumerate(codes)}  # one ΔM column per code
    tie = 0.05 * 3 / 10  # the released threshold at k = 3, L = 10
    planted = dict(zip(codes, [0.001, np.nan, 0.012, tie, 0.021, 0.4, 0.6, 0.7, 0.8, 0.95]))
    rows = [{"item_id": f"i{i}", "perturbation": c, "m_original": expit(x[i]), "m_perturbed": expit(x[i] - shift[c]),
             "changed": c != "PH"} for c in codes for i in range(n)]
    pairs = tmp_path / "pairs.csv"
    pd.DataFrame(rows).to_csv(pairs, index=False)
    sums = {c: float(np.sum(np.log(expit(x)) - np.log(expit(x - shift[c])))) for c in codes if c != "PH"}

    def planted_pvalues(deltas, n=None, **_):
        code = [min(sums, key=lambda c: abs(sums[c] - col.sum())) for col in np.asarray(deltas).T]
        assert all(abs(sums[c] - col.sum()) < 1e-6 for c, col in zip(code, np.asarray(deltas).T))
        return np.zeros(len(code)), np.array([planted[c] for c in code])

    monkeypatch.setattr(st, "sign_flip_pvalues", planted_pvalues)
    ref = released_significance({released_key(c): {"p_value": 1.0 if np.isnan(p) else p} for c, p in planted.items()})
    docs = {}
    for procedure in ("released", "paper"):
        out = tmp_path / procedure
        assert main(["suitability-stats", "--pairs", str(pairs), "--out", str(out), "--procedure", procedure,
                     "--no-robustness", "--wandb-mode", "disabled"]) == 0
        docs[procedure] = json.loads((out / "suitability.json").read_text())
        md = (out / "suitability.md").read_text()
        shown = ("the released script's procedure" if procedure == "released" else "the paper's procedure")
        assert f"**Decisions shown: {shown}" in md
    doc = docs["released"]
    per = doc["perturbations"]
    assert doc["settings"]["procedure"] == "released" and doc["decisions"]["shown"] == "released"
    for c in codes:
        r = ref[released_key(c)]
        dec = per[c]["decisions"]["released"]
        assert dec["rejected"] == per[c]["rejected"] == r["significant"], c
        assert dec["stars"] == per[c]["stars"] == mark_of(r["significance"]), c
        assert dec["effect_size"] == pytest.approx(released_effect_by_hand(released_loss(x),
                                                                           released_loss(x - shift[c])))
    # by hand: L = 10, k̂ = 3 (the tie at 0.015 counts); the paper's procedure (L = 9, controlled
    # null share (1 + 0)/(4·0.5) = 0.5, thresholds 0.05·k/4.5) rejects all four controlled tests
    assert doc["decisions"]["released"] == {"L": 10, "k": 3, "rejected": ["EF", "IU", "IW"]}
    assert doc["decisions"]["paper"] == {"L": 9, "k": 4, "rejected": ["EF", "IU", "IW", "CN"]}
    # untested by the paper's procedure: NaN in memory, null in strict JSON (rmcore.io.files.to_json)
    assert per["PH"]["decisions"]["released"]["p_value"] == 1.0 and per["PH"]["decisions"]["paper"]["p_value"] is None
    assert [per[c]["stars"] for c in ("EF", "IU", "IW", "CN")] == ["***", "*", "*", ""]
    # the default shows the paper's decisions; both are written either way
    paper = docs["paper"]
    assert paper["settings"]["procedure"] == "paper" and paper["decisions"]["shown"] == "paper"
    assert {k: v for k, v in paper["decisions"].items() if k != "shown"} == \
        {k: v for k, v in doc["decisions"].items() if k != "shown"}
    assert [c for c in codes if paper["perturbations"][c]["rejected"]] == ["EF", "IU", "IW", "CN"]
    assert paper["perturbations"]["EF"]["stars"] == "**"  # the paper's stars: p < 0.01


def test_bad_procedure_is_one_line_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["suitability-stats", "--pairs", str(tmp_path / "p.csv"), "--out", str(tmp_path / "o"),
              "--procedure", "release"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2
    assert "argument --procedure: invalid choice: 'release'" in err[-1] and "'paper', 'released'" in err[-1]
    assert not (tmp_path / "o").exists()
