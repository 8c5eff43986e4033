"""Reward Auditor's PPO table (§5.2, Figure 3 and Figure 12): for each of the ten reward models, the
win rate of the policy trained in the perturbed environment against the one trained in the clean
environment, beside the reward model's suitability risk on RM-Bench chat, and the Spearman
correlations of the risk (published −0.881) and of the accuracy change (published −0.261,
p = 0.4671) with the win rate.

The policies are trained by ``rmtrain policy`` (PPO through OpenRLHF, ``recipes/policy_llama3_8b_ppo.yaml``)
and judged by ``rmtrain policy-eval``, which writes ``<winrates>/<reward model>/winrate.json``;
this table reads those files (a reward model without one is a missing cell, and the dry run prints
the commands). rmeval does not train policies. In a stand-in run each reward model's two policies
are two untrained tiny causal LMs (``tiny:SEED``, ``rmeval.experiments.responses``) answering the
held-out prompts greedily, judged in both orders by the tiny judge through the same win-rate code
(``rmeval.experiments.winrate``): the plumbing of the table, not a policy result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

STANDIN_PROMPTS = 6


def _stand_in_winrate(ctx: Any, name: str, key: str) -> dict[str, Any]:
    from rmcore.io import atomic_write_json
    from rmeval.experiments.responses import PolicySpec, SamplingSettings, generate_responses
    from rmeval.experiments.winrate import HFPairwiseJudge, win_rate
    from rmeval.reproduce.standins import stand_in_seed
    from rmeval.scoring.judge import conversation_text

    path = ctx.out / "stand_in_policy" / name / "winrate.json"
    if path.is_file():
        return json.loads(path.read_text())
    prompts = ctx.rating_set(key).prompts[:STANDIN_PROMPTS]
    sampling = SamplingSettings(n=1, temperature=0.0, max_new_tokens=12)
    seed = stand_in_seed(name) + 1
    got = {}
    for env, s in (("clean", seed), ("perturbed", seed + 1)):
        df = generate_responses(prompts, PolicySpec(name=f"{name}-{env}", model=f"tiny:{s}"), sampling,
                                cache=ctx.out / "stand_in_policy" / "responses.sqlite",
                                build_dir=ctx.out / "stand_in_policy" / "models")
        got[env] = dict(zip(df["prompt_id"], df["response"]))
    judge = HFPairwiseJudge(ctx.judge_stand_in(), max_length=512)
    texts = [conversation_text(p.messages) for p in prompts]
    first = judge.judge([(t, got["perturbed"][p.prompt_id], got["clean"][p.prompt_id]) for t, p in zip(texts, prompts)])
    second = judge.judge([(t, got["clean"][p.prompt_id], got["perturbed"][p.prompt_id]) for t, p in zip(texts, prompts)])
    res = {**win_rate(first, second, n_boot=200, seed=0), "stand_in": "two untrained tiny policies, tiny judge"}
    atomic_write_json(path, res)
    return res


def _winrate(ctx: Any, name: str, key: str) -> dict[str, Any] | None:
    if ctx.stand_in:
        return _stand_in_winrate(ctx, name, key)
    path = Path(ctx.recipe.policy.winrates) / name / "winrate.json"
    return json.loads(path.read_text()) if path.is_file() else None


def policy_table(ctx: Any, docs: dict[str, dict[str, Any]], spanel: dict[str, Any]) -> dict[str, Any]:
    """The suitability panel, each reward model's win rate and the Spearman table across them."""
    from rmcore.io import atomic_write_json, atomic_write_text
    from rmeval.experiments.winrate import read_panel_suitability, spearman_markdown, spearman_table

    key = next(iter(ctx.recipe.data))
    panel: dict[str, Any] = {**spanel, "missing_winrates": []}
    if key not in spanel:
        return panel
    risks = read_panel_suitability(ctx.out / "panel" / key / "suitability.json")
    rows = []
    for name in risks:
        wr = _winrate(ctx, name, key)
        if wr is None:
            panel["missing_winrates"].append(name)
            continue
        docs[name]["policy"] = {"win_rate": {"estimate": wr["win_rate"], "ci95": wr.get("ci95")}, **risks[name]}
        rows.append({"name": name, "win_rate": wr["win_rate"], **risks[name]})
    if len(rows) >= 3:
        table = spearman_table(rows)
        atomic_write_json(ctx.out / "panel" / "spearman.json", table)
        atomic_write_text(ctx.out / "panel" / "spearman.md", spearman_markdown(table))
        panel["spearman"] = {k: table[k] for k in ("suitability_risk", "accuracy_change", "n_models")}
    return panel
