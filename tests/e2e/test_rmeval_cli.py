"""End to end: `rmeval audit` on a saved MiniLM reward model with all ten conditions, `rmeval stats`
on the tables it wrote and on a small hand-made table, checkpoint comparison, and SPEC parsing."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from rmcore.checkpoints import find_checkpoints
from rmcore.data.registry import load_rating_set, parse_data_spec
from rmeval.cli import main

SPEC = "simulated:n_prompts=30,responses_per_prompt=3,seed=1"


def _rewrite_file(path, rs, kind):
    rows = []
    for i, p in enumerate(rs.prompts):
        for v in range(1 + i % 2):  # 1 or 2 variants per prompt
            rows.append({"prompt_id": p.prompt_id, "variant": v, "text": f"{kind} {v}: {p.last_user_text} again"})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return len(rows)


def test_parse_data_spec(tmp_path):
    assert parse_data_spec("simulated") == {"name": "simulated"}
    assert parse_data_spec("simulated:n_prompts=100,seed=3") == {"name": "simulated", "n_prompts": 100, "seed": 3}
    assert parse_data_spec("rm_bench:/d/chat_filtered.json") == {"name": "rm_bench", "path": "/d/chat_filtered.json"}
    assert parse_data_spec("helpsteer2:validation") == {"name": "helpsteer2", "split": "validation"}
    assert parse_data_spec('{"name": "simulated", "n_prompts": 5}') == {"name": "simulated", "n_prompts": 5}
    f = tmp_path / "spec.yaml"
    f.write_text("name: simulated\nn_prompts: 7\n")
    assert parse_data_spec(str(f)) == {"name": "simulated", "n_prompts": 7}


@pytest.mark.heavy  # ~40 s: every condition end to end, resumed, recomputed by stats
@pytest.mark.slow
def test_audit_all_ten_conditions_then_stats(tmp_path, minilm_ckpt):
    rs = load_rating_set(parse_data_spec(SPEC))
    n_rel = _rewrite_file(tmp_path / "related.jsonl", rs, "related")
    n_par = _rewrite_file(tmp_path / "para.jsonl", rs, "paraphrase")
    out = tmp_path / "audit"
    rc = main(["audit", "--checkpoint", str(minilm_ckpt), "--data", SPEC, "--out", str(out),
               "--related-file", str(tmp_path / "related.jsonl"), "--paraphrase-file", str(tmp_path / "para.jsonl"),
               "--max-length", "128", "--n-boot", "100", "--wandb-mode", "disabled"])
    assert rc == 0
    audit = json.loads((out / "audit.json").read_text())
    assert sorted(audit["meta"]["conditions"]) == sorted(
        ["original", "generic", "prompt_only", "random", "overlap", "embedding", "length", "related",
         "paraphrase", "last_turn", "fixed_reply_random", "fixed_reply_related"])
    for key in ("share", "prompt_only", "transplant", "paraphrase", "last_turn", "sibling_regression",
                "selection", "pairwise", "truncation"):
        assert key in audit, key
    assert set(audit["transplant"]) == {"random", "overlap", "embedding", "length", "related"}
    assert set(audit["fixed_reply"]) == {"random", "related"}
    assert (out / "audit.md").read_text().strip()
    assert (out / "shares.png").stat().st_size > 0 and (out / "transplant.png").stat().st_size > 0

    # row count worked out by hand: 90 responses, 30 prompts, the multi-turn prompts x 3 responses
    scores = pd.read_parquet(out / "scores.parquet")
    n_resp, n_prompts, n_multi = 90, 30, sum(not p.single_turn for p in rs.prompts)
    assert n_multi > 0
    expected = {"original": n_resp, "generic": n_resp, "prompt_only": n_prompts, "random": 4 * n_resp,
                "overlap": 4 * n_resp, "embedding": 4 * n_resp, "length": 4 * n_resp, "related": 3 * n_rel,
                "paraphrase": 3 * n_par, "last_turn": 3 * n_multi,
                "fixed_reply_random": 4 * n_prompts, "fixed_reply_related": n_rel}
    assert scores.groupby("condition").size().to_dict() == expected
    assert audit["truncation"]["total"]["n"] == sum(expected.values())
    tr = scores[scores.condition.isin(["random", "overlap", "embedding", "length"])]
    assert (tr.donor_prompt_id != tr.prompt_id).all() and tr.donor_prompt_id.notna().all()
    assert np.isfinite(scores.score).all()

    # second run: resumes from scores.parquet + cache and gives the same scores
    rc = main(["audit", "--checkpoint", str(minilm_ckpt), "--data", SPEC, "--out", str(out),
               "--related-file", str(tmp_path / "related.jsonl"), "--paraphrase-file", str(tmp_path / "para.jsonl"),
               "--max-length", "128", "--n-boot", "100", "--wandb-mode", "disabled"])
    again = json.loads((out / "audit.json").read_text())
    assert again["truncation"]["total"]["n_resumed"] == sum(expected.values())
    assert again["share"] == audit["share"]

    # stats recomputes the same audit from the written tables, without a model
    st = tmp_path / "stats"
    assert main(["stats", "--scores", str(out / "scores.parquet"), "--ratings", str(out / "ratings.parquet"),
                 "--preferences", str(out / "preferences.parquet"), "--out", str(st), "--n-boot", "100",
                 "--wandb-mode", "disabled"]) == 0
    recomputed = json.loads((st / "audit.json").read_text())
    assert audit["transplant"]["related"].pop("variants")["n_texts"] == n_rel  # the related file, as the audit read it
    assert recomputed["share"] == audit["share"] and recomputed["transplant"] == audit["transplant"]


def test_stats_on_small_hand_table(tmp_path):
    rng = np.random.default_rng(0)
    ratings, scores = [], []
    for p in range(8):
        for r in range(3):
            ratings.append({"prompt_id": f"q{p}", "response_id": f"q{p}:{r}", "helpfulness": float(r + p % 2),
                            "single_turn": True, "response_length": 10 + r})
            for cond in ("original", "generic"):
                scores.append({"prompt_id": f"q{p}", "response_id": f"q{p}:{r}", "condition": cond, "variant": 0,
                               "donor_prompt_id": None, "score": float(r + (p if cond == "original" else 0))
                               + rng.normal(0, 0.1)})
    pd.DataFrame(ratings).to_json(tmp_path / "ratings.jsonl", orient="records", lines=True)
    pd.DataFrame(scores).to_parquet(tmp_path / "scores.parquet")
    out = tmp_path / "out"
    assert main(["stats", "--scores", str(tmp_path / "scores.parquet"), "--ratings", str(tmp_path / "ratings.jsonl"),
                 "--out", str(out), "--n-boot", "50", "--wandb-mode", "disabled"]) == 0
    audit = json.loads((out / "audit.json").read_text())
    assert audit["meta"]["n_prompts"] == 8 and audit["meta"]["n_responses"] == 24
    assert set(audit["meta"]["conditions"]) == {"original", "generic"}
    assert "transplant" not in audit  # not scored -> absent, not zero
    # original scores carry a prompt offset of 0..7 over a within-prompt spread of 0..2; generic none,
    # so the between-prompt share must be far higher under the original prompts
    assert audit["share"]["original"]["estimate"] > 0.8 > 0.2 > audit["share"]["generic"]["estimate"]
    assert (out / "audit.md").exists()


def test_several_checkpoints_summary(tmp_path, minilm_ckpt):
    import shutil

    root = tmp_path / "run"
    for name in ("checkpoint-10", "checkpoint-2"):
        shutil.copytree(minilm_ckpt, root / name)
    assert [n for n, _ in find_checkpoints(root)] == ["checkpoint-2", "checkpoint-10"]
    out = tmp_path / "cmp"
    assert main(["audit", "--checkpoint", str(root), "--data", "simulated:n_prompts=12,responses_per_prompt=2",
                 "--out", str(out), "--conditions", "original", "generic", "--max-length", "64", "--n-boot", "50",
                 "--wandb-mode", "disabled"]) == 0
    for name in ("checkpoint-2", "checkpoint-10"):
        assert (out / name / "audit.json").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == ["checkpoint-2", "checkpoint-10"]
    # identical weights -> identical figures
    assert summary["checkpoint-2"]["share/original/estimate"] == summary["checkpoint-10"]["share/original/estimate"]
    assert "share/original/estimate" in (out / "summary.md").read_text()


def test_bad_condition_is_a_clean_error(tmp_path, minilm_ckpt, capsys):
    rc = main(["audit", "--checkpoint", str(minilm_ckpt), "--data", "simulated:n_prompts=6", "--out",
               str(tmp_path), "--conditions", "related", "--wandb-mode", "disabled"])
    assert rc == 2 and "needs --related-file" in capsys.readouterr().err


def test_audit_run_carries_arm_and_seed_to_wandb(tmp_path, minilm_ckpt, monkeypatch):
    """An audit of a checkpoint trained by rmtrain is tagged with its arm and seed and grouped with
    its sweep, so arms can be compared on W&B."""
    import shutil

    from tests.support import read_run

    ckpt = tmp_path / "bt"
    shutil.copytree(minilm_ckpt, ckpt)
    (ckpt / "train_summary.json").write_text(json.dumps({"arm": "bt_margin", "seed": 3, "model": "m"}))
    (ckpt / "matchrm_config.json").write_text(json.dumps({"wandb": {"group": "demo-sweep"}}))
    out = tmp_path / "audit"
    assert main(["audit", "--checkpoint", str(ckpt), "--data", "simulated:n_prompts=8,responses_per_prompt=2",
                 "--out", str(out), "--conditions", "original", "--max-length", "64", "--n-boot", "20",
                 "--wandb-mode", "offline"]) == 0
    run = read_run(out / "wandb")
    assert set(run["tags"]) == {"arm:bt_margin", "seed:3"}
    assert run["config"]["arm"] == "bt_margin" and run["config"]["seed"] == 3
    audit = json.loads((out / "audit.json").read_text())
    assert audit["meta"]["arm"] == "bt_margin" and audit["meta"]["group"] == "demo-sweep"
    assert audit["meta"]["run_seed"] == 3 and audit["meta"]["seed"] == 0  # the audit's own seed kept
    logged = [h for h in run["history"] if any("share" in k for k in h)]
    assert logged and any(v == pytest.approx(audit["share"]["original"]["estimate"])
                          for h in logged for k, v in h.items() if "share" in k and "original" in k
                          and k.endswith("estimate"))


def test_stats_picks_up_preferences_beside_the_scores(tmp_path, capsys):
    ratings = pd.DataFrame({"prompt_id": list("aabbccdd"), "response_id": list("12345678"),
                            "helpfulness": [1.0, 2, 3, 4, 2, 5, 1, 1]})
    scores = ratings.assign(condition="original", score=[0.1, 0.9, 0.5, 0.2, 0.3, 0.8, 0.4, 0.6])
    prefs = pd.DataFrame({"prompt_id": list("abcd"), "chosen_id": list("2458"), "rejected_id": list("1367")})
    scores.drop(columns="helpfulness").to_parquet(tmp_path / "scores.parquet")
    ratings.to_parquet(tmp_path / "ratings.parquet")
    prefs.to_parquet(tmp_path / "preferences.parquet")
    rc = main(["stats", "--scores", str(tmp_path / "scores.parquet"), "--ratings",
               str(tmp_path / "ratings.parquet"), "--out", str(tmp_path / "o"), "--n-boot", "20",
               "--n-boot-regression", "20", "--wandb-mode", "disabled"])
    assert rc == 0
    audit = json.loads((tmp_path / "o" / "audit.json").read_text())
    assert audit["pairwise"]["accuracy"]["estimate"] == pytest.approx(2 / 4)  # a, c right; b, d wrong
    assert "preferences.parquet" in capsys.readouterr().err


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.usefixtures("one_torch_thread")
def test_audit_named_by_arm_and_seed_with_progress(tmp_path, demo_ckpt, monkeypatch):
    fake = _Tty()
    monkeypatch.setattr("sys.stderr", fake)
    out = tmp_path / "a"
    rc = main(["audit", "--checkpoint", str(demo_ckpt), "--data", "simulated:n_prompts=8,seed=1",
               "--out", str(out), "--conditions", "original", "generic", "random", "--max-length", "32",
               "--n-boot", "20", "--n-boot-regression", "20", "--wandb-mode", "disabled"])
    assert rc == 0
    assert (out / "audit.md").read_text().splitlines()[0] == "# Audit of bt_margin seed 1"
    audit = json.loads((out / "audit.json").read_text())
    assert audit["donor_exclusions"] == {"n_pairs": 0, "n_prompts": 0}  # simulated prompts are all distinct
    bars = fake.getvalue()
    assert "bt_margin seed 1 original" in bars and "bt_margin seed 1 generic" in bars
    fake.seek(0)
    fake.truncate()
    rc = main(["audit", "--checkpoint", str(demo_ckpt), "--data", "simulated:n_prompts=8,seed=1",
               "--out", str(tmp_path / "b"), "--conditions", "original", "--max-length", "32", "--n-boot",
               "20", "--n-boot-regression", "20", "--wandb-mode", "disabled", "--no-progress"])
    assert rc == 0 and "original" not in fake.getvalue()
