"""What Pairwise Evaluation Misses' Table 22: the leaderboard under unequal prompt coverage, read
from ``rmeval leaderboard`` (``rmeval.experiments.leaderboard``: five policies answer the single-turn
HelpSteer2 validation prompts, three reward models score them, a 70B judge and a 24B judge compare
each policy with the anchor; the rankings over twenty assignments of four prompt mixes).

The experiment is one pipeline over all its reward models (the responses, the judgments and the
mixes are shared), so the table has no model rows: its rows are panel rows, one per reward model
of the experiment recipe (``settings.recipe``) and one for the judges, read from the
``leaderboard.json`` that ``rmeval leaderboard --config RECIPE --out OUT`` writes
(``settings.out``). Per reward model and judge: ``raw`` / ``centred`` (the rankings by the raw and
the anchor-centred mean score: ``n_assignments_differing_from_full_coverage``,
``mean_tau_vs_judge``), ``centred_minus_raw_tau_vs_judge``; for the judges: ``vs_human`` (the
primary judge's agreement with the human order on the untied rated pairs, ``n_pairs``),
``second_vs_human`` and ``vs_second`` (the two judges' Kendall tau over the policies and their
pairwise agreement over the judged pairs). A real run reads the file where it is (its cells say
what to run when it is not there); a stand-in run runs the experiment itself on the stand-in data
with tiny untrained policies (``tiny:SEED``), tiny stand-in reward models and tiny judges, the
experiment recipe's names kept, and the recipe's ``overrides`` (fewer resamples, shorter replies)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError
from rmeval.backends.spec import is_local
from rmeval.reproduce.settings import LeaderboardTableSettings, analysis_settings


def command(s: LeaderboardTableSettings) -> str:
    return f"rmeval leaderboard --config {s.recipe} --out {s.out}"


def stand_in_config(ctx: Any, s: LeaderboardTableSettings) -> Any:
    """The experiment recipe with every model a tiny local stand-in and the stand-in data."""
    cfg = s.experiment()
    rms = {name: ctx.reward_stand_in(name) for name in cfg.reward_model_settings()}
    policies = [{"name": p["name"], "model": f"tiny:{i + 1}"} for i, p in enumerate(cfg.policies)]
    judges = {name: {"model": f"tiny:{90 + i}", "max_length": 512} for i, name in enumerate(cfg.judges)}
    return replace(cfg, data=ctx.spec(s.data or next(iter(ctx.recipe.data))), policies=policies, reward_models=rms,
                   judges=judges, toy=True, progress=False)


def _judges(s: LeaderboardTableSettings, res: dict[str, Any]) -> tuple[str, str | None]:
    names = list(res.get("judges") or res["reward_models"][next(iter(res["reward_models"]))])
    judge = s.judge or names[0]
    if judge not in names or (s.second_judge and s.second_judge not in names):
        raise ConfigError(f"settings judge / second_judge: not judges of {s.recipe} ({', '.join(names)})")
    return judge, s.second_judge


def leaderboard_figures(res: dict[str, Any], s: LeaderboardTableSettings) -> dict[str, Any]:
    """The panel document: per reward model its figures under the judge and the second judge, and
    the judges' own (module docstring)."""
    judge, second = _judges(s, res)
    panel: dict[str, Any] = {rm: {"judge": by.get(judge), "second_judge": by.get(second) if second else None}
                             for rm, by in res["reward_models"].items()}
    both = res.get("judge_vs_judge", {})
    pair = both.get(f"{judge} vs {second}") or both.get(f"{second} vs {judge}")
    panel["judges"] = {"vs_human": res.get("judge_vs_human", {}).get(judge),
                       "second_vs_human": res.get("judge_vs_human", {}).get(second) if second else None,
                       "vs_second": pair}
    panel["leaderboard"] = {k: res[k] for k in ("policies", "anchor", "mix_sizes", "meta", "notice") if k in res}
    return panel


def leaderboard_panel(ctx: Any, docs: dict[str, Any]) -> dict[str, Any]:
    """The table's panel: the stand-in experiment run here, or a real run's leaderboard.json read
    (each cell saying what to run while it is not there)."""
    s = analysis_settings(ctx.recipe, stand_in=ctx.stand_in)
    if ctx.stand_in:
        from rmeval.experiments.leaderboard import run_leaderboard

        res = run_leaderboard(stand_in_config(ctx, s), out=ctx.out / "panel" / "leaderboard", **ctx.wandb)
        return leaderboard_figures(res, s)
    path = Path(s.out) / "leaderboard.json"
    if not path.is_file():
        why = f"no {path} yet: {command(s)}"
        return {"cell_reasons": [[r.name, c.name, why] for r in ctx.recipe.panel_rows for c in ctx.recipe.columns]}
    return leaderboard_figures(json.loads(path.read_text()), s)


def experiment_models(s: LeaderboardTableSettings) -> list[str]:
    """The Hub ids the experiment loads (its policies, reward models and local judges)."""
    cfg = s.experiment()
    ids = [p["model"] for p in cfg.policies] + [str(v.model) for v in cfg.reward_model_settings().values()]
    ids += [j.model for j in cfg.judge_settings().values() if is_local(j.backend)]
    return sorted({i for i in ids if "/" in i and not Path(i).exists()})


def leaderboard_steps(s: LeaderboardTableSettings) -> list[str]:
    """The dry run's preparation: the experiment's command and the servers its judges read."""
    cfg = s.experiment()
    steps = [command(s)]
    for name, j in cfg.judge_settings().items():
        if j.base_url:
            steps.append(f"serve {j.model} at {j.base_url} for its judge {name} (an OpenAI-compatible server with "
                         f"log-probabilities, e.g. vllm serve {j.model}; see the recipe's description)")
    return steps
