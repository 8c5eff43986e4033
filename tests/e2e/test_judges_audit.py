"""A judge checkpoint (here a LoRA adapter on a tiny causal LM) profiled as part of its audit, with
the figures in audit.json and on W&B beside the other audit metrics."""

from __future__ import annotations

import json
import time

import pytest
import torch

from rmeval.cli import main
from rmeval.judges.elicit import ATTRIBUTE_QUESTION, OVERALL_QUESTION
from rmeval.judges.tables import load_judgments
from tests.support import BAD, GOOD, planted_items, read_run, save_tiny_judge

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_audit_profiles_a_lora_judge_checkpoint(tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    items = planted_items(16)
    items.to_json(tmp_path / "items.jsonl", orient="records", lines=True)
    base = save_tiny_judge(tmp_path / "base", [ATTRIBUTE_QUESTION, OVERALL_QUESTION, GOOD, BAD, "0 1 2 3 4 5 6 7 8 9"])
    torch.manual_seed(0)
    peft = get_peft_model(AutoModelForCausalLM.from_pretrained(base), LoraConfig(r=4, target_modules="all-linear"))
    peft.save_pretrained(tmp_path / "lora_judge")
    AutoTokenizer.from_pretrained(base).save_pretrained(tmp_path / "lora_judge")
    out = tmp_path / "audit"
    assert main(["audit", "--checkpoint", str(tmp_path / "lora_judge"), "--scorer", "generative_judge",
                 "--data", "simulated:n_prompts=6,responses_per_prompt=2", "--conditions", "original",
                 "--n-boot", "20", "--n-boot-regression", "20", "--max-length", "256", "--judge-items",
                 str(tmp_path / "items.jsonl"), "--judge-attribute-names", "verbosity,correctness",
                 "--out", str(out), "--wandb-mode", "offline"]) == 0
    audit = json.loads((out / "audit.json").read_text())
    prof = audit["judge_profile"]
    j = load_judgments(out / "judge_profile" / "judgments")  # the judgment store, as a long table
    assert prof["n_calls"] == len(j) == 16 * 2 * 3
    res = j[(j["attribute"] != "overall") & (j["direction"] != 0)]
    first = ((res["order"] == "AB") & (res["direction"] == 1)) | ((res["order"] == "BA") & (res["direction"] == -1))
    assert prof["first_position_rate"] == pytest.approx(float(first.mean()))
    assert set(prof["reweight"]["s"]) == {"base_accuracy", "base_accuracy_stable", "reweighted_accuracy", "gain",
                                          "n_test"}
    for _ in range(50):  # the offline run file is completed shortly after finish()
        logged = {k: v for h in read_run(out / "wandb")["history"] for k, v in h.items()}
        if "audit/judge_profile/first_position_rate" in logged:
            break
        time.sleep(0.2)
    assert logged["audit/judge_profile/first_position_rate"] == pytest.approx(prof["first_position_rate"])
    assert any(k.startswith("audit/share") for k in logged)  # beside the other audit metrics
