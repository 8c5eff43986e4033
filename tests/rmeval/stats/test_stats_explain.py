"""What explains the prompt-level variance, on the simulated set with a reward built from what it
plants (rmcore.data.simulated keeps the truth in meta): the prompt offset u_i, its visible part
(a function of the prompt's features) and each response's within-prompt quality q_ij.

    reward_ij = u_i + q_ij + e_ij,   e_ij ~ N(0, 0.5^2)

* prompt probe from the prompt's features (one-hot topic, task, number of constraints,
context length -- the levels the offset is drawn on): the
  features see the visible part of u only, so the cross-fitted R^2 of the prompt-mean reward is
  about Var(visible) / Var(prompt mean) (planted, computed from meta) and the residual share about
  Var(hidden part) / (Var(hidden part) + Var(q + e));
* response probe (ridge) from q itself plus noise columns: R^2 about Var(q) / Var(reward) and the
  residual share about Var(u) / (Var(u) + Var(e));
* residualising on a rating column that IS q leaves share Var(u) / (Var(u) + Var(e)) too.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rmcore.data.simulated import simulate_rating_set
from rmcore.variance import icc1
from rmeval.stats.bootstrap import PromptSetResamples
from rmeval.stats.explain import prompt_probe, rating_residuals, response_probes

NOISE = 0.5


def _planted(n_prompts: int = 600):
    rs = simulate_rating_set(n_prompts=n_prompts, responses_per_prompt=4, human_share=0.3, prompt_visibility=0.6,
                             multi_turn_fraction=0.0, with_preferences=False, seed=3)
    rng = np.random.default_rng(0)
    rows, prompts = [], []
    for p in rs.prompts:
        prompts.append({"prompt_id": p.prompt_id, **{f"pemb_0_topic_{p.meta['topic']}": 1.0,
                                                      f"pemb_0_task_{p.meta['task_type']}": 1.0,
                                                      f"pemb_0_length_{p.meta['length']}": 1.0},
                        f"pemb_0_constraints_{len(p.meta['constraints'])}": 1.0,
                        "u": p.meta["prompt_offset"], "visible": p.meta["visible_offset"]})
        for r in p.responses:
            rows.append({"prompt_id": p.prompt_id, "response_id": r.response_id, "u": p.meta["prompt_offset"],
                         "q": r.meta["quality"], "e": rng.normal(0, NOISE)})
    orig = pd.DataFrame(rows)
    orig["score"] = orig["u"] + orig["q"] + orig["e"]
    pf = pd.DataFrame(prompts).fillna(0.0)
    return orig, pf


def test_prompt_probe_recovers_the_visible_share_of_the_prompt_offset():
    orig, pf = _planted()
    means = orig.groupby("prompt_id", sort=False)["score"].mean()
    visible = pf.set_index("prompt_id").loc[means.index, "visible"]
    planted_r2 = np.var(visible) / np.var(means)  # what the prompt's features can see
    hidden = orig["u"] - orig["prompt_id"].map(pf.set_index("prompt_id")["visible"])
    planted_residual = icc1(hidden + orig["q"] + orig["e"], orig["prompt_id"])
    out = prompt_probe(orig, None, pf.drop(columns=["u", "visible"]), PromptSetResamples(0, 200))
    emb = out["embedding"]
    assert abs(emb["r2"]["estimate"] - planted_r2) < 0.08, (emb["r2"]["estimate"], planted_r2)
    assert emb["r2_in_sample"]["estimate"] >= emb["r2"]["estimate"]
    assert abs(emb["residual_share"]["estimate"] - planted_residual) < 0.04, (emb["residual_share"], planted_residual)
    lo, hi = emb["r2"]["ci95"]
    assert lo < emb["r2"]["estimate"] < hi


def test_response_probe_and_rating_residual_leave_the_prompt_offset():
    orig, _ = _planted()
    planted_share = icc1(orig["u"] + orig["e"], orig["prompt_id"])  # what remains once q is explained
    planted_r2 = np.var(orig["q"]) / np.var(orig["score"])
    rng = np.random.default_rng(1)
    feats = orig[["prompt_id", "response_id"]].assign(txt_quality=orig["q"],
                                                      **{f"txt_noise_{j}": rng.normal(size=len(orig)) for j in range(5)})
    rp = response_probes(orig, feats, None, PromptSetResamples(0, 200), learners=("ridge",))
    assert abs(rp["ridge"]["r2"]["estimate"] - planted_r2) < 0.05
    assert abs(rp["ridge"]["share"]["estimate"] - planted_share) < 0.05
    assert rp["n_text_features"] == 6 and rp["n_embedding"] == 0
    res = rating_residuals(orig.assign(quality=orig["q"]), ["quality"], PromptSetResamples(0, 200))
    # a single rating column: no complexity/verbosity pair, no "all ratings" set
    assert res == {}
    res = rating_residuals(orig.assign(quality=orig["q"], other=rng.normal(size=len(orig))), ["quality", "other"],
                           PromptSetResamples(0, 200))
    assert abs(res["all_ratings"]["share"]["estimate"] - planted_share) < 0.05
    # the residual on q keeps u: almost none of the between-prompt variance is removed
    assert abs(res["all_ratings"]["between_removed"]["estimate"]) < 0.1
