"""RewardBench and RewardBench 2 files in their released schemas: the loaders, RewardBench's
section-weighted score and RewardBench 2's best-of-N accuracy with its Ties rule, checked against
values worked out by hand (the arithmetic is in the comments), and both through `rmeval pairwise`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rmcore.data.registry import load_data
from rmcore.data.rewardbench import rewardbench2_table
from rmcore.errors import DataError
from rmeval.stats.pairwise import pairwise_accuracy
from rmeval.stats.rewardbench2 import rewardbench2_scores


def _write(path: Path, rows: list[dict]) -> Path:
    """jsonl, or one JSON list for .json (both ways the released rows are saved locally)."""
    if path.suffix == ".json":
        path.write_text(json.dumps(rows))
    else:
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def rb2_rows() -> list[dict]:
    """RewardBench 2 rows as released (allenai/reward-bench-2, split test)."""
    def row(rid, subset, chosen, rejected, prompt="q"):
        return {"id": rid, "prompt": f"{prompt} {rid}", "chosen": chosen, "rejected": rejected,
                "num_correct": len(chosen), "num_incorrect": len(rejected),
                "total_completions": len(chosen) + len(rejected), "models": ["m"] * (len(chosen) + len(rejected)),
                "subset": subset, "additional_metadata": {}}
    return [row("1", "Factuality", ["c1"], ["a1", "b1", "d1"]),
            row("2", "Factuality", ["c2"], ["a2", "b2", "d2"]),
            row("3", "Factuality", ["c3"], ["a3", "b3", "d3"]),
            row("4", "Focus", ["c4"], ["a4", "b4", "d4"]),
            row("ref:0", "Ties", ["A0"], ["X0", "Y0"]),
            row("tied:0", "Ties", ["A0", "B0", "C0"], ["X0", "Y0"]),
            row("ref:1", "Ties", ["A1"], ["X1"]),
            row("tied:1", "Ties", ["A1", "B1"], ["X1"])]


# planted scores, per prompt id: [correct..., incorrect...] in file order
RB2_SCORES = {"1": [2, 1, 0, -1], "2": [1, 1, 0, 1], "3": [0, 1, 0, 0], "4": [5, 4, 4, 4],
              "ref:0": [3, 1, 2], "tied:0": [3, 4, 5, 1, 2], "ref:1": [1, 2], "tied:1": [4, 4.5, 1]}


def _planted(rs) -> pd.DataFrame:
    rows = []
    for p in rs.prompts:
        for r, s in zip(p.responses, RB2_SCORES[p.meta["rb2_id"]]):
            rows.append({"prompt_id": p.prompt_id, "response_id": r.response_id, "score": float(s)})
    return pd.DataFrame(rows)


def test_rewardbench2_loader_reads_the_released_schema(tmp_path):
    rs = load_data(f"rewardbench2:{_write(tmp_path / 'rb2.jsonl', rb2_rows())}")
    assert len(rs.prompts) == 8 and rs.attributes == ()
    p = rs.by_id()["rb2-tied:0"]
    assert [r.response_id for r in p.responses] == [f"rb2-tied:0:chosen:{i}" for i in range(3)] + [
        f"rb2-tied:0:rejected:{j}" for j in range(2)]
    assert p.messages == [{"role": "user", "content": "q tied:0"}]
    # every correct answer against every incorrect one: 3 x 3 per best-of-4 prompt, 1x2 + 3x2 + 1 + 2 in Ties
    assert len(rs.preferences) == 4 * 3 + 2 + 6 + 1 + 2
    table = rewardbench2_table(rs)
    assert table.groupby("prompt_id")["correct"].sum().to_dict()["rb2-tied:0"] == 3


def test_rewardbench2_best_of_4_and_ties_by_hand(tmp_path):
    rs = load_data(f"rewardbench2:{_write(tmp_path / 'rb2.jsonl', rb2_rows())}")
    res = rewardbench2_scores(rewardbench2_table(rs), _planted(rs), n_boot=200, rng=0)
    # Factuality: 1 (c alone best) + 1/3 (c tied with two at the top) + 0 (c below) over 3 prompts
    assert res["subsets"]["Factuality"]["estimate"] == pytest.approx(4 / 9)
    assert res["subsets"]["Focus"]["estimate"] == pytest.approx(1.0)
    # Ties. q0: ref gap 3-2=1 (right), tied gap 3-2=1 (right), spread 5-3=2.
    #       q1: ref gap 1-2=-1 (wrong), tied gap 4-1=3 (right), spread 4.5-4=0.5.
    t = res["ties"]
    assert t["ref_accuracy"] == pytest.approx(0.5) and t["tied_accuracy"] == pytest.approx(1.0)
    assert t["correctness_preferred"] == pytest.approx(0.5)  # 1 > 2 no; 3 > 0.5 yes
    assert t["correctness_preferred_hard"] == pytest.approx(0.0)  # min(1,1) > 2 no; min(-1,3) > 0.5 no
    margin = (math.tanh(1 / 2 - 1) + math.tanh(-1 / 0.5 - 1)) / 2
    assert t["correctness_margin_score"] == pytest.approx(margin)
    ties = 0.3 * 1.0 + 0.3 * 0.5 + 0.2 * 0.5 + 0.2 * 0.0 + 0.01 * margin
    assert res["subsets"]["Ties"]["estimate"] == pytest.approx(ties)
    assert res["score"]["estimate"] == pytest.approx((4 / 9 + 1.0 + ties) / 3)
    lo, hi = res["score"]["ci95"]
    assert lo <= res["score"]["estimate"] <= hi


def test_a_constant_reward_model_is_at_chance_on_best_of_4(tmp_path):
    rs = load_data(f"rewardbench2:{_write(tmp_path / 'rb2.jsonl', rb2_rows()[:4])}")
    flat = _planted(rs).assign(score=0.0)
    res = rewardbench2_scores(rewardbench2_table(rs), flat, n_boot=20)
    assert res["subsets"]["Factuality"]["estimate"] == pytest.approx(0.25)  # 1/4: tied with all three


def test_rewardbench2_bad_rows_name_file_row_and_field(tmp_path):
    rows = rb2_rows()
    rows[1]["num_correct"] = 2
    f = _write(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DataError, match=r"row 2, field 'num_correct'"):
        load_data(f"rewardbench2:{f}")
    rows = rb2_rows()
    rows[4]["id"] = "4b"  # a Ties row that is neither ref:N nor tied:N
    rows[2]["rejected"] = ["ok", ""]
    f = _write(tmp_path / "bad2.jsonl", rows)
    with pytest.raises(DataError, match=r"row 3, field 'rejected\[1\]'"):
        load_data(f"rewardbench2:{f}")
    rs = load_data(f"rewardbench2:{f},on_bad=skip")
    assert rs.skipped["rewardbench2_bad_completions"] == 1 and rs.skipped["rewardbench2_ties_id"] == 1
    assert len(rs.prompts) == 6


def rb1_rows() -> list[dict]:
    """RewardBench (v1) rows as released (allenai/reward-bench, split filtered)."""
    def row(i, subset, chosen="good answer", rejected="bad answer"):
        return {"prompt": f"question {i}", "chosen": chosen, "chosen_model": "gpt-4", "rejected": rejected,
                "rejected_model": "llama", "subset": subset, "id": i}
    return [row(0, "alpacaeval-easy"), row(1, "alpacaeval-easy"), row(2, "mt-bench-easy"), row(3, "donotanswer")]


def test_rewardbench_section_weighted_score_by_hand(tmp_path):
    rs = load_data(f"rewardbench:{_write(tmp_path / 'rb.json', rb1_rows())}")
    assert [p.prompt_id for p in rs.prompts] == ["rb-0", "rb-1", "rb-2", "rb-3"]
    prefs = rs.preferences_table()
    assert list(prefs["subset"]) == ["alpacaeval-easy", "alpacaeval-easy", "mt-bench-easy", "donotanswer"]
    # chosen wins in rows 0, 2, 3; loses in row 1
    right = {"rb-0": (1, 0), "rb-1": (0, 1), "rb-2": (1, 0), "rb-3": (2, 1)}
    scores = pd.DataFrame([{"prompt_id": p, "response_id": f"{p}:{lab}", "score": float(v)}
                           for p, (c, r) in right.items() for lab, v in (("chosen", c), ("rejected", r))])
    res = pairwise_accuracy(prefs, scores, n_boot=50, ties="wrong")
    # Chat: alpacaeval-easy 0.5 (weight 100) and mt-bench-easy 1.0 (weight 28): (50 + 28) / 128
    assert res["rewardbench"]["sections"]["Chat"]["estimate"] == pytest.approx(78 / 128)
    assert res["rewardbench"]["sections"]["Safety"]["estimate"] == pytest.approx(1.0)
    assert res["rewardbench"]["score"]["estimate"] == pytest.approx((78 / 128 + 1.0) / 2)


def test_rewardbench_bad_row_is_one_clean_error(tmp_path):
    rows = rb1_rows()
    rows[2]["chosen"] = ["a list"]
    f = _write(tmp_path / "rb.jsonl", rows)
    with pytest.raises(DataError, match=r"row 3, field 'chosen'"):
        load_data(f"rewardbench:{f}")
    assert load_data(f"rewardbench:{f},on_bad=skip").skipped["rewardbench_bad_completion"] == 1


def test_pairwise_reports_both_benchmarks(tmp_path, minilm_ckpt):
    """End to end on a real encoder reward model: the report's RewardBench 2 figures equal the
    published rules applied here to the scores table it wrote."""
    from rmeval.cli import main

    f = _write(tmp_path / "rb2.jsonl", rb2_rows())
    out = tmp_path / "rb2"
    assert main(["pairwise", "--checkpoint", str(minilm_ckpt), "--data", f"rewardbench2:{f}", "--out", str(out),
                 "--n-boot", "50", "--wandb-mode", "disabled"]) == 0
    doc = json.loads((out / "pairwise.json").read_text())
    scores = pd.read_parquet(out / "scores.parquet")
    by = {(p, r): s for p, r, s in zip(scores["prompt_id"], scores["response_id"], scores["score"])}
    fact = []
    for row in rb2_rows()[:3]:
        pid = f"rb2-{row['id']}"
        s = [by[(pid, f"{pid}:chosen:0")]] + [by[(pid, f"{pid}:rejected:{j}")] for j in range(3)]
        fact.append(1 / sum(v == max(s) for v in s) if s[0] == max(s) else 0.0)
    assert doc["rewardbench2"]["subsets"]["Factuality"]["estimate"] == pytest.approx(np.mean(fact))
    assert set(doc["rewardbench2"]["subsets"]) == {"Factuality", "Focus", "Ties"}
    assert "RewardBench 2" in (out / "pairwise.md").read_text()
    out1 = tmp_path / "rb1"
    assert main(["pairwise", "--checkpoint", str(minilm_ckpt), "--data",
                 f"rewardbench:{_write(tmp_path / 'rb.jsonl', rb1_rows())}", "--out", str(out1), "--n-boot", "50",
                 "--ties", "wrong", "--wandb-mode", "disabled"]) == 0
    assert set(json.loads((out1 / "pairwise.json").read_text())["rewardbench"]["sections"]) == {"Chat", "Safety"}
