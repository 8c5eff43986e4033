"""Baselines under the same labels: LoRA SFT of a tiny local judge, rubric prompting."""

from __future__ import annotations

import numpy as np
import pytest

from rmeval.judges.baselines import lora_sft_accuracy, rubric_accuracy
from rmeval.judges.elicit import OVERALL_QUESTION, LocalPairJudge, build_calls, rubric_question
from rmeval.judges.inventory import OVERALL, load_inventory
from tests.support import BAD, GOOD, planted_items, save_tiny_judge

pytestmark = pytest.mark.usefixtures("one_torch_thread")

def test_lora_sft_learns_the_labels_and_rubric_is_scored_by_hand(tmp_path):
    items = planted_items()
    model = save_tiny_judge(tmp_path / "judge", [OVERALL_QUESTION, *items["query"], f"{GOOD} {BAD}"])
    train, test = items.iloc[:32], items.iloc[32:]
    base = LocalPairJudge(model, max_length=512)
    p = base.p_first(build_calls(test, {OVERALL: OVERALL_QUESTION}))
    first_good = np.array([(r.label == "A") == (o == "AB") for r in test.itertuples() for o in ("AB", "BA")])
    base_letter_acc = float(np.mean((p > 0.5) == first_good))
    res = lora_sft_accuracy(model, train, test, tmp_path / "sft", steps=60, lr=5e-3, batch_size=8, max_length=512)
    assert res["loss_last"] < res["loss_first"] - 0.2
    assert res["accuracy"] >= 0.9 > base_letter_acc
    assert (tmp_path / "sft" / "adapter" / "adapter_config.json").is_file()
    # the adapter is a judge checkpoint: it loads and answers like the trained model
    tuned = LocalPairJudge(tmp_path / "sft" / "adapter", max_length=512)
    pt = tuned.p_first(build_calls(test, {OVERALL: OVERALL_QUESTION}))
    assert float(np.mean((pt > 0.5) == first_good)) >= 0.9

    criteria = load_inventory(names=["verbosity", "correctness"])
    rub = rubric_accuracy(base, test, criteria, tmp_path / "rubric")
    pr = base.p_first(build_calls(test, {OVERALL: rubric_question(criteria)})).reshape(-1, 2)
    d_ab, d_ba = np.where(pr[:, 0] > 0.5, 1, -1), np.where(pr[:, 1] > 0.5, -1, 1)  # BA letters mapped back
    stable = np.where(d_ab == d_ba, d_ab, 0)
    y = np.where(test["label"] == "A", 1, -1)
    assert rub["accuracy_stable"] == pytest.approx(float(np.mean(np.where(stable == 0, 0.5, stable == y))))
    assert rub["accuracy"] == pytest.approx(float(np.mean(d_ab == y)))  # one order (AB), the paper's rule
    assert rub["attributes"] == ["verbosity", "correctness"]


def test_reweight_command_runs_both_baselines_on_the_judges_split(tmp_path):
    import json

    from rmeval.cli import main
    from rmeval.judges.elicit import elicit_shard, questions_for

    items = planted_items(40)
    model = save_tiny_judge(tmp_path / "judge", [OVERALL_QUESTION, *items["query"], f"{GOOD} {BAD}"])
    items.to_json(tmp_path / "items.jsonl", orient="records", lines=True)
    judge = LocalPairJudge(model, max_length=512, name="tiny")
    stats = elicit_shard(items, judge, questions_for(load_inventory(names=["verbosity", "correctness"])),
                         tmp_path / "el", progress=False)
    assert main(["judges", "reweight", "--judgments", stats.table, "--items", str(tmp_path / "items.jsonl"),
                 "--out", str(tmp_path / "rw"), "--budgets", "8", "--n-repeats", "1", "--top-k", "1",
                 "--baselines", "rubric,lora", "--baseline-model", str(model), "--baseline-judge", "tiny",
                 "--rubric-k", "1", "--lora-budget", "8", "--lora-steps", "2", "--max-length", "512",
                 "--wandb-mode", "disabled"]) == 0
    r = json.loads((tmp_path / "rw" / "reweight.json").read_text())["judges"]["tiny"]["sources"]["s"]
    assert r["n_test"] == 10
    assert r["baselines"]["rubric"]["attributes"] == r["top_k"]["1"]["attributes"]
    assert r["baselines"]["lora_sft"]["budget"] == 8 and r["baselines"]["lora_sft"]["n_test"] == 10
    assert 0 <= r["baselines"]["rubric"]["accuracy"] <= 1 and 0 <= r["baselines"]["lora_sft"]["accuracy"] <= 1
