"""The reference pool end to end (``rmeval pool`` on the toy recipe, shrunk), the pool table's
checks, and ``rmeval audit --reference-pool`` scoring the pool with the audited checkpoint."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rmcore.data.loading import load_data
from rmcore.errors import DataError
from rmeval.cli import main
from rmeval.experiments.pool import pool_rating_set, read_pool
from tests.support import ROOT

DATA = "simulated:n_prompts=8,responses_per_prompt=3,seed=2"


def test_read_pool_names_the_bad_row(tmp_path):
    p = tmp_path / "pool.csv"
    pd.DataFrame({"prompt_id": ["a", "a"], "text": ["x", "y"]}).to_csv(p, index=False)
    with pytest.raises(DataError, match=r"pool.csv.*field 'response'"):
        read_pool(p)
    pd.DataFrame({"prompt_id": ["a", "b"], "response": ["x", None]}).to_json(tmp_path / "p.jsonl", orient="records",
                                                                              lines=True)
    with pytest.raises(DataError, match=r"row 2, field 'response'"):
        read_pool(tmp_path / "p.jsonl")
    pd.DataFrame({"prompt_id": ["a", "a"], "response_id": ["r", "r"], "response": ["x", "y"]}).to_csv(p, index=False)
    with pytest.raises(DataError, match=r"row 3.*duplicate"):  # CSV rows are file lines: the header is line 1
        read_pool(p)
    with pytest.raises(DataError, match="not found"):
        read_pool(tmp_path / "missing.parquet")
    pd.DataFrame({"prompt_id": [1, 1, 2], "response": ["x", "y", "z"]}).to_csv(p, index=False)
    pool = read_pool(p)
    assert (pool["response_id"].tolist() == ["pool-0", "pool-1", "pool-2"]
            and pool["prompt_id"].tolist() == ["1", "1", "2"])


def test_pool_rating_set_keeps_covered_prompts():
    rs = load_data(DATA)
    pool = pd.DataFrame({"prompt_id": [rs.prompts[0].prompt_id] * 2 + ["elsewhere"], "response_id": ["a", "b", "c"],
                         "response": ["one", "two", "three"]})
    ps = pool_rating_set(rs, pool)
    assert [p.prompt_id for p in ps.prompts] == [rs.prompts[0].prompt_id]
    assert [r.text for r in ps.prompts[0].responses] == ["one", "two"]
    assert ps.prompts[0].messages == rs.prompts[0].messages


def test_pool_command_then_audit_with_the_pool(tmp_path, capfd, minilm_ckpt):
    out = tmp_path / "pool"
    assert main(["pool", "--config", str(ROOT / "recipes" / "pool_toy.yaml"), "--out", str(out), "--data", DATA,
                 "--set", f"reward_models.minilm={minilm_ckpt}", "--set", "sampling.n=2",
                 "--set", "sampling.max_new_tokens=6", "--set", "progress=false",
                 "--wandb-mode", "disabled"]) == 0
    # stdout (the file descriptor: the tiny policies' tokenizer training writes there) holds the result alone
    notice, line = capfd.readouterr().out.splitlines()
    assert notice.startswith("TOY RUN") and line.startswith("pool: 32 responses to 8 prompts (2 policies x 2")
    pool = pd.read_parquet(out / "pool.parquet")
    assert len(pool) == 32 and set(pool["policy"]) == {"tiny-a", "tiny-b"}
    assert pool.groupby("prompt_id").size().eq(4).all() and (pool["n_tokens"] <= 6).all()
    scores = pd.read_parquet(out / "scores" / "minilm.parquet")
    assert len(scores) == 32 and np.isfinite(scores["score"]).all()
    res = json.loads((out / "pool.json").read_text())
    assert res["notice"].startswith("TOY RUN") and res["by_policy"]["tiny-a"]["n_responses"] == 16
    # the shrinkage weight by hand: four pool responses per prompt
    g = scores.groupby("prompt_id")["score"]
    s_w2 = g.var().mean()
    tau2 = g.mean().var(ddof=1) - s_w2 / 4
    sh = res["reward_models"]["minilm"]["shrinkage"]
    assert (sh["s_w2"], sh["tau2"]) == pytest.approx((s_w2, tau2), rel=1e-9)
    assert sh["eb_weight_range"] == pytest.approx([tau2 / (tau2 + s_w2 / 4)] * 2, rel=1e-9)
    assert "TOY RUN" in (out / "pool.md").read_text()
    # a rerun generates and scores nothing new
    assert main(["pool", "--config", str(ROOT / "recipes" / "pool_toy.yaml"), "--out", str(out), "--data", DATA,
                 "--set", f"reward_models.minilm={minilm_ckpt}", "--set", "sampling.n=2",
                 "--set", "sampling.max_new_tokens=6", "--set", "progress=false",
                 "--wandb-mode", "disabled"]) == 0
    again = json.loads((out / "pool.json").read_text())
    assert all(g["n_generated"] == 0 for g in again["meta"]["generation"].values())
    # the audit scores the pool with the checkpoint it audits, and centres on it
    audit_out = tmp_path / "audit"
    assert main(["audit", "--checkpoint", str(minilm_ckpt), "--data", DATA, "--reference-pool",
                 str(out / "pool.parquet"), "--conditions", "original", "--n-boot", "100", "--n-boot-regression",
                 "100", "--out", str(audit_out), "--wandb-mode", "disabled", "--no-progress"]) == 0
    audit = json.loads((audit_out / "audit.json").read_text())
    assert audit["reference_pool"]["n_scored"] == 32 and audit["reference_pool"]["n_prompts"] == 8
    v = audit["centering"]["variants"]
    assert {"pool", "pool_shrunk", "pool_1", "pool_2", "pool_3", "pool_partial"} <= set(v)
    assert set(v["pool_partial"]["lambda_chosen"].values()) <= {round(0.1 * i, 1) for i in range(11)}
    ref = pd.read_parquet(audit_out / "reference_scores.parquet")
    assert len(ref) == 32 and {"prompt_id", "response_id", "policy", "sample", "score"} <= set(ref.columns)


def test_pool_help_writes_nothing_and_bad_recipe_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["pool", "--help"])
    assert e.value.code == 0 and list(tmp_path.iterdir()) == []
    bad = tmp_path / "bad.yaml"
    bad.write_text("experiment: pool\ndata: simulated\npolicies: [{name: a, model: 'tiny:1'}]\nsampling: {k: 3}\n")
    assert main(["pool", "--config", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "sampling: unknown key(s) ['k']" in err
    assert main(["pool", "--config", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "o")]) == 2
    assert "not found" in capsys.readouterr().err
    bad.write_text("experiment: leaderboard\ndata: simulated\n")
    assert main(["pool", "--config", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "not a pool recipe" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_missing_reward_model_is_one_line_saying_what_trains_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "rm.yaml").write_text("arm: bradley_terry\nmodel: m\ndata: simulated\n"
                                                  "output_dir: outputs/rm\n")
    recipe = tmp_path / "pool.yaml"
    for model, says in (("outputs/rm", "reward model outputs/rm: not found; train it with "
                                       "`rmtrain train --config recipes/rm.yaml`"),
                        ("./no/such/rm", "reward model ./no/such/rm: not found; not a local checkpoint, nor a Hub id")):
        recipe.write_text(f"experiment: pool\ndata: {DATA}\npolicies: [{{name: a, model: 'tiny:1'}}]\n"
                          f"reward_models: {{r: {model}}}\n")
        assert main(["pool", "--config", str(recipe), "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith("rmeval: error: " + says), err
        assert not (tmp_path / "o").exists()  # checked before anything is generated
