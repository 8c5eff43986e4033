"""What Pairwise Evaluation Misses, Table 1, end to end: the dry run lists the six core models and the
0.6B checkpoint with their loaders, heads, GPU memory and text counts without any network call; the
stand-in run (every Hub id a tiny local model of its kind, HelpSteer2/HelpSteer simulated in their
released schemas) writes the table in the paper's layout with published, ours and difference cells,
whose differences and outside-interval marks are checked against the row documents here; a second
run scores nothing again; a partial run (--only) lists the cells it lacks."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rmeval.cli import main
from tests.support import ROOT

TABLE1 = ROOT / "recipes" / "reproduce" / "pairwise_misses_table1_helpsteer2_audit.yaml"
CORE = ["skywork-v2-qwen3-8b", "skywork-llama-3.1-8b-v0.2", "tulu-3-8b-rm", "armorm-llama3-8b", "urm-llama-3.1-8b",
        "dpa-mistral-7b", "qwen3-0.6b-checkpoint"]


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_dry_run_lists_the_core_models_with_loaders_heads_memory_and_texts(tmp_path, capsys, no_network):
    assert main(["reproduce", str(TABLE1), "--dry-run", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    plan = json.loads((tmp_path / "plan.json").read_text())
    rows = {r["row"]: r for r in plan["rows"]}
    assert [r for r in rows if r in CORE] == CORE
    assert {r for r in rows if r not in CORE} == {"human-hs2-validation", "human-hs2-train", "human-helpsteer"}
    assert rows["armorm-llama3-8b"]["loader"] == "armorm" and rows["armorm-llama3-8b"]["head"].startswith("0")
    assert rows["urm-llama-3.1-8b"]["loader"] == "remote_code"
    assert rows["skywork-v2-qwen3-8b"]["head"] == "its one output"
    # HelpSteer2 validation as the paper counts it: 1,038 original + 1,038 generic + 519 prompt-only
    # + 4 x 1,038 random donors + 3 x 1,038 related tasks
    assert rows["tulu-3-8b-rm"]["texts"] == {"hs2": 1038 * 2 + 519 + 4 * 1038 + 3 * 1038}
    # 8.03B parameters in bfloat16: 16.06 GB of weights, x 1.25 + 1 GB, one 80 GB GPU
    assert rows["tulu-3-8b-rm"]["gpu_memory_gb"] == pytest.approx(8.03 * 2 * 1.25 + 1, abs=0.06)
    assert rows["tulu-3-8b-rm"]["gpus"] == 1 and rows["qwen3-0.6b-checkpoint"]["params_b"] == 0.6
    assert all(rows[m]["gpu_hours"] > 0 for m in CORE)
    for m in CORE:
        assert m in out
    assert not any((tmp_path / "rows").glob("*"))  # nothing scored, nothing downloaded


def _figures(out: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(out / "figures.csv", newline="") as f:
        return {(r["row"], r["column"]): r for r in csv.DictReader(f)}


def test_stand_in_run_writes_the_paper_layout_table_and_resumes(tmp_path, capsys, one_torch_thread):
    out = tmp_path / "t1"
    assert main(["reproduce", str(TABLE1), "--stand-in", "--out", str(out), "--wandb-mode", "disabled"]) == 0
    md = (out / "table.md").read_text()
    assert "STAND-IN RUN" in md and "share (all): published" in md and "share (all): ours" in md
    assert "share (all): Δ" in md
    figs = _figures(out)
    # independently: the human share of the stand-in HelpSteer2 ratings, and a model's generic share
    human = json.loads((out / "rows/human-hs2-validation/hs2/human.json").read_text())
    share = human["attributes"]["helpfulness"]["share"]["all"]
    f = figs[("human-hs2-validation", "share_all")]
    assert float(f["ours"]) == pytest.approx(share["estimate"])
    assert float(f["difference"]) == pytest.approx(-0.01 - share["estimate"])
    assert (f["outside_interval"] == "True") == (not share["ci95"][0] <= -0.01 <= share["ci95"][1])
    audit = json.loads((out / "rows/urm-llama-3.1-8b/hs2/audit.json").read_text())
    g = figs[("urm-llama-3.1-8b", "share_generic")]
    assert float(g["difference"]) == pytest.approx(0.59 - audit["share"]["generic"]["estimate"])
    assert (g["outside_interval"] == "True") == (not audit["share"]["generic"]["ci95"][0] <= 0.59
                                                 <= audit["share"]["generic"]["ci95"][1])
    margin = figs[("tulu-3-8b-rm", "margin_random")]
    assert float(margin["difference"]) == pytest.approx(1.1 - json.loads(
        (out / "rows/tulu-3-8b-rm/hs2/audit.json").read_text())["transplant"]["random"]["margin_sd"]["estimate"])
    with open(out / "table.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0][:4] == ["row", "share (all): published", "share (all): ours", "share (all): Δ"]
    assert len(rows) == 1 + 10 and all(len(r) == 1 + 3 * 8 for r in rows)
    assert "0.26 [0.20, 0.33]" in rows[3][1]  # human HelpSteer: the published interval beside ours
    # a second run scores nothing again: every row is read from its done record
    done = {p: p.stat().st_mtime_ns for p in (out / "rows").glob("*/done.json")}
    capsys.readouterr()
    assert main(["reproduce", str(TABLE1), "--stand-in", "--out", str(out), "--wandb-mode", "disabled"]) == 0
    assert "0 rows computed, 10 cached" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in done} == done


def test_a_partial_run_lists_the_missing_cells(tmp_path, capsys, one_torch_thread):
    out = tmp_path / "part"
    assert main(["reproduce", str(TABLE1), "--stand-in", "--out", str(out), "--wandb-mode", "disabled",
                 "--only", "human-hs2-validation", "tulu-3-8b-rm"]) == 0
    assert "2 rows computed" in capsys.readouterr().out
    md = (out / "table.md").read_text()
    assert "## Missing cells" in md
    assert "URM-LLaMa-3.1-8B × share_generic: not yet computed" in md
    assert "waits for skywork-v2-qwen3-8b" in md  # the six-model range needs all six
    figs = _figures(out)
    assert figs[("tulu-3-8b-rm", "margin_random")]["ours"] != ""
    assert figs[("armorm-llama3-8b", "share_all")]["ours"] == "" and figs[("armorm-llama3-8b", "share_all")]["missing"]
    assert not (out / "rows" / "armorm-llama3-8b").exists()
    capsys.readouterr()
    assert main(["reproduce", str(TABLE1), "--out", str(out), "--only", "tulu-3-8b-rm"]) == 2  # no mixed OUT
    assert "holds a stand-in run" in capsys.readouterr().err
