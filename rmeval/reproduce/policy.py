"""Reward Auditor's PPO table (§5.2, Figure 3 and Figure 12): for each of the ten reward models, the
win rate of the policy trained in the perturbed environment against the one trained in the clean
environment, beside the reward model's suitability risk on RM-Bench chat, and the Spearman
correlations of the risk (published −0.881) and of the accuracy change (published −0.261,
p = 0.4671) with the win rate.

The policies are trained by ``rmtrain policy`` (PPO through OpenRLHF: its command lines are
generated, and checked against OpenRLHF's own parser, in ``rmtrain.policy.openrlhf``) and judged
by ``rmtrain policy-eval``, which writes ``<winrates>/<reward model>/winrate.json``; this table
reads those files (a reward model without one is a missing cell that says what to run). rmeval
does not train policies and writes no PPO of its own: the launch plan (``launch_plan``, printed by
``--dry-run`` and written to ``OUT/policy/``) is a policy recipe for ``rmtrain policy`` derived from
the recipe's ``policy.recipe`` (its ``reward_models`` the rows here, each a local snapshot of its
Hub id, since OpenRLHF's reward comes from ``rmeval serve-reward --checkpoint DIR``; its
``evaluation.suitability`` this run's suitability panel) and, per reward model, the commands: the
snapshot, ``rmtrain policy`` in each environment (which writes OpenRLHF's ``train_ppo.sh`` and
``plan.json``; ``--launch`` runs it) and the evaluation. ``rmeval serve-reward`` serves a one-label
sequence classifier: a reward model read through another loader or a head has no launch plan, and
its win-rate cell says "not reproducible" and why (``serve_reason``); its risk is still shown. The
Spearman correlations are over the reward models that have a win rate. In a stand-in run each
reward model's two policies are two untrained tiny causal LMs (``tiny:SEED``,
``rmeval.experiments.responses``) answering the held-out prompts greedily, judged in both orders by the tiny
judge through the same win-rate code (``rmeval.experiments.winrate``): the plumbing of the table, not a policy
result."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rmcore.io.files import atomic_write_json, atomic_write_text
from rmeval.experiments.responses import generate_responses
from rmeval.experiments.settings import PolicySpec, SamplingSettings
from rmeval.experiments.winrate import (
    HFPairwiseJudge,
    read_panel_suitability,
    spearman_markdown,
    spearman_table,
    win_rate,
)
from rmeval.reproduce.standins import stand_in_seed

STANDIN_PROMPTS = 6
POLICY_RECIPE = "policy_recipe.yaml"


def serve_reason(m: Any) -> str | None:
    """Why ``rmeval serve-reward`` cannot be the PPO reward of model ``m`` (None: it can)."""
    if m.not_reproducible:
        return m.not_reproducible
    if m.kind != "seq_classifier":
        return f"a {m.kind} gives no scalar reward that rmeval serve-reward serves"
    if m.loader not in (None, "classifier") or m.head is not None or m.trust_remote_code:
        how = ", ".join(x for x in (f"loader {m.loader}" if m.loader else "", f"head {m.head}" if m.head else "",
                                    "remote code" if m.trust_remote_code else "") if x)
        return (f"rmeval serve-reward serves a one-label sequence classifier; {m.hub_id} is read through {how}, "
                "so no PPO reward server can be started for it")
    return None


def snapshot_dir(out: Path, name: str) -> Path:
    return out / "policy" / "reward_models" / name


def policy_data(recipe: Any) -> Any:
    """The policies' prompts: ``policy.data`` with its ``{NAME}`` replaced by the recipe's data
    sources' paths (``--data-source`` included)."""
    from rmeval.reproduce.sources import substitute

    return substitute(recipe.policy.data, recipe.data_sources)


def policy_data_fetch(recipe: Any) -> str | None:
    """What to fetch when the policies' prompts are not on disk (None: they are, or the policy
    recipe's own data is used)."""
    from rmeval.reproduce.sources import missing

    if recipe.policy is None or recipe.policy.data is None:
        return None
    why = missing(recipe, policy_data(recipe), recipe.policy.data)
    return f"policy.data: {why}" if why else None


def policy_recipe_text(recipe: Any, out: Path, key: str) -> str:
    """The ``rmtrain policy`` recipe of this table: ``policy.recipe`` with the servable rows as its
    reward models (local snapshots) and this run's suitability panel as their suitability."""
    import yaml

    from rmcore.settings.recipes import load_recipe

    raw = dict(load_recipe(recipe.policy.recipe))
    names = [m.name for m in recipe.models if serve_reason(m) is None]
    raw["reward_models"] = {n: str(snapshot_dir(out, n)) for n in names}
    if recipe.policy.data is not None:  # the prompts where this run's data sources put them
        raw["data"] = policy_data(recipe)
    raw.pop("reward_models_from", None)
    suit = out / "panel" / key / "suitability.json"
    ev = dict(raw.get("evaluation") or {})
    ev.update(n_prompts=recipe.policy.n_prompts, suitability={n: f"{suit}#{n}" for n in names})
    if recipe.policy.judge:
        ev["judge"] = recipe.policy.judge
    raw["evaluation"] = ev
    head = (f"# written by `rmeval reproduce {recipe.path}` from {recipe.policy.recipe}: the reward models are the\n"
            "# table's rows that rmeval serve-reward can serve, each a local snapshot of its Hub id"
            + ("; data: the reproduction's policy.data in its data sources" if recipe.policy.data is not None else "")
            + "\n")
    return head + yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)


def launch_plan(recipe: Any, out: str | os.PathLike, *, write: bool = True) -> dict[str, Any]:
    """Per reward model of the PPO table: the snapshot, the two ``rmtrain policy`` runs and where
    their win rate will be, or why it has none; with the evaluation command. ``write``: the policy
    recipe and the plan are written under ``OUT/policy/``."""
    from rmcore.io.files import atomic_write_json, atomic_write_text

    out = Path(out)
    key = next(iter(recipe.data))
    cfg = out / "policy" / POLICY_RECIPE
    models = []
    for m in recipe.models:
        why = serve_reason(m)
        row: dict[str, Any] = {"reward_model": m.name, "hub_id": m.hub_id, "servable": why is None,
                               "winrate": str(Path(recipe.policy.winrates) / m.name / "winrate.json")}
        if why is not None:
            row["not_reproducible"] = why
        else:
            rev = f" --revision {m.revision}" if m.revision else ""
            row["snapshot"] = str(snapshot_dir(out, m.name))
            row["commands"] = [f"hf download {m.hub_id}{rev} --local-dir {row['snapshot']}",
                               *[f"rmtrain policy --config {cfg} --reward-model {m.name} --environment {env}"
                                 for env in ("clean", "perturbed")]]
        models.append(row)
    plan = {"policy_recipe": str(cfg), "base_recipe": recipe.policy.recipe, "judge": recipe.policy.judge,
            "models": models,
            "evaluate": f"rmtrain policy-eval --config {cfg} --out {recipe.policy.winrates}",
            "note": ("each `rmtrain policy` writes OUT/openrlhf/train_ppo.sh (rmeval serve-reward on the snapshot, "
                     "OpenRLHF's train_ppo_ray, the collection) and plan.json; add --launch to run it there")}
    if write:
        atomic_write_text(cfg, policy_recipe_text(recipe, out, key))
        atomic_write_json(out / "policy" / "launch_plan.json", plan)
    return plan


def _stand_in_winrate(ctx: Any, name: str, key: str) -> dict[str, Any]:
    # torch: this module loads without it
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
    second = judge.judge([(t, got["clean"][p.prompt_id], got["perturbed"][p.prompt_id])
                          for t, p in zip(texts, prompts)])
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
    key = next(iter(ctx.recipe.data))
    panel: dict[str, Any] = {**spanel, "missing_winrates": [], "cell_reasons": []}
    if key not in spanel:
        return panel
    risks = read_panel_suitability(ctx.out / "panel" / key / "suitability.json")
    lp = launch_plan(ctx.recipe, ctx.out, write=not ctx.stand_in)
    plan = {p["reward_model"]: p for p in lp["models"]}
    rows = []
    for name in risks:
        docs[name]["policy"] = dict(risks[name])  # the risk and accuracy change, with or without a win rate
        why = None if ctx.stand_in else plan[name].get("not_reproducible")
        wr = None if why else _winrate(ctx, name, key)
        if wr is None:
            panel["missing_winrates"].append(name)
            todo = "; ".join(plan[name].get("commands", [])[1:]) + f"; then {lp['evaluate']}"
            panel["cell_reasons"].append([name, "win_rate", f"not reproducible: {why}" if why
                                          else f"no {plan[name]['winrate']} yet: {todo}"])
            continue
        docs[name]["policy"]["win_rate"] = {"estimate": wr["win_rate"], "ci95": wr.get("ci95")}
        rows.append({"name": name, "win_rate": wr["win_rate"], **risks[name]})
    panel["spearman_n"] = len(rows)
    if len(rows) >= 3:
        table = spearman_table(rows)
        atomic_write_json(ctx.out / "panel" / "spearman.json", table)
        atomic_write_text(ctx.out / "panel" / "spearman.md", spearman_markdown(table))
        panel["spearman"] = {k: table[k] for k in ("suitability_risk", "accuracy_change", "n_models")}
    return panel
