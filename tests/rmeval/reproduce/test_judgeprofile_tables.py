"""JudgeProfile's tables issue #34 adds (Tables 9, 11, 12, 19 and 20) and the hidden consensus's
per-attribute figures: the panel step on a planted judge panel, with Table 11's agreement by
source and Table 9's shares recomputed here by hand from the long judgments table, and every
recipe's stand-in run on three judges sharing one OUT (the rows are elicited once)."""

from __future__ import annotations

import csv
import itertools

import numpy as np
import pytest

from rmcore.io.tables import atomic_write_table
from rmeval.cli import main
from rmeval.judges.simulate import planted_weights, simulate_panel
from rmeval.reproduce.context import Context
from rmeval.reproduce.judges import judges_table
from rmeval.reproduce.recipe import load_reproduction
from rmeval.reproduce.table import build_cells
from tests.support import ROOT, data_source_flags

RECIPES = ROOT / "recipes" / "reproduce"
NEW = ["judgeprofile_table9_protocols.yaml", "judgeprofile_table11_by_source.yaml",
       "judgeprofile_table12_matched_items.yaml", "judgeprofile_table19_priority_reproducibility.yaml",
       "judgeprofile_table20_null_dispersion.yaml"]
JUDGES = ["qwen3.5-0.8b", "qwen3.5-4b", "qwen3.5-27b", "gemma-3-27b"]  # the first is left out of the main panel


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def _stable(table):
    """(judge, item, attribute) -> the direction both orders agree on (0 where they differ)."""
    wide = table.pivot_table(index=["judge", "item_id", "attribute"], columns="order", values="direction",
                             aggfunc="first")
    ab, ba = wide["AB"].to_numpy(), wide["BA"].to_numpy()
    return dict(zip(wide.index, np.where((ab == ba) & (ab != 0), ab, 0)))


def _opposite_agreement(table, judges, item_ids):
    """Per pair of ``judges``: on the items where both give opposite stable verdicts, the share of
    the jointly resolved stable attribute directions that agree; the mean over pairs and the
    pairs' values (a pair without such a cell has none)."""
    st = _stable(table)
    attrs = sorted(set(table["attribute"]) - {"overall"})
    per = []
    for j, k in itertools.combinations(sorted(judges), 2):
        agree = n = 0
        for i in item_ids:
            vj, vk = st[(j, i, "overall")], st[(k, i, "overall")]
            if vj == 0 or vk == 0 or vj == vk:
                continue
            for a in attrs:
                dj, dk = st[(j, i, a)], st[(k, i, a)]
                if dj and dk:
                    n += 1
                    agree += dj == dk
        if n:
            per.append(agree / n)
    return float(np.mean(per)), per


def test_the_panel_step_on_a_planted_panel(tmp_path):
    recipe = load_reproduction(RECIPES / "judgeprofile_table11_by_source.yaml")
    ctx = Context(recipe, tmp_path / "out", wandb_mode="disabled")
    weights = {name: w for name, w in zip(JUDGES, planted_weights(4, 6, seed=2).values())}
    items, table, _ = simulate_panel(90, weights, sources=("rm_bench", "hh_rlhf", "helpsteer2"), flip=0.15, seed=4)
    atomic_write_table(ctx.out / "data" / "items.jsonl", items)
    docs = {}
    for name in JUDGES:
        path = atomic_write_table(tmp_path / f"{name}.jsonl", table[table["judge"] == name])
        docs[name] = {"elicit": {"judgments": str(path)}}
    panel = judges_table(ctx, docs)
    assert set(panel) >= {"all", "main"} and "reweight" not in panel  # the table does not read the reweighting
    assert sorted(panel["main"]["judges"]) == sorted(JUDGES[1:]) and sorted(panel["all"]["judges"]) == sorted(JUDGES)
    cells, statements = build_cells(recipe, docs, panel, {})
    for source in ("rm_bench", "hh_rlhf", "helpsteer2"):
        ids = items.loc[items["source"] == source, "item_id"].tolist()
        mean, per = _opposite_agreement(table, JUDGES[1:], ids)
        assert cells[(source, "opposite_winner")].ours.estimate == pytest.approx(mean)
        assert cells[(source, "opposite_above")].ours.estimate == pytest.approx(np.mean(np.array(per) > 0.5))
        assert cells[(source, "items")].ours.estimate == len(ids)
    assert cells[("shp", "opposite_winner")].ours is None  # no item from that source
    # Table 9's 21-judge row: every pair's stable opposite-winner agreement, the lowest and highest
    t9 = load_reproduction(RECIPES / "judgeprofile_table9_protocols.yaml")
    cells9, _ = build_cells(t9, docs, panel, {})
    _, per = _opposite_agreement(table, JUDGES, items["item_id"].tolist())
    assert cells9[("all", "stable_opp_min")].ours.estimate == pytest.approx(min(per))
    assert cells9[("all", "stable_opp_max")].ours.estimate == pytest.approx(max(per))
    assert cells9[("qwen3.5-4b", "stable_rate")].ours.estimate == pytest.approx(
        panel["all"]["judges"]["qwen3.5-4b"]["stable_rate"])


def test_every_new_judgeprofile_recipe_runs_with_stand_ins_on_one_out(tmp_path, capsys, one_torch_thread, shared_data):
    out = tmp_path / "jp"
    only = ["--only", "qwen3.5-0.8b", "qwen3.5-4b", "qwen3.5-27b"]
    for name in NEW:
        assert main(["reproduce", str(RECIPES / name), "--stand-in", "--out", str(out), "--wandb-mode", "disabled",
                     *only, *data_source_flags(RECIPES / name, shared_data)]) == 0
        printed = capsys.readouterr().out
        assert " 0 failed" in printed and "STAND-IN RUN" in printed and "\n\n\n" not in printed
        with open(out / "figures.csv", newline="") as f:
            figs = {(r["row"], r["column"]): r for r in csv.DictReader(f)}
        for fig in load_reproduction(RECIPES / name).published:
            if fig.row is not None:
                assert figs[(fig.row, fig.column)]["published"] == str(fig.value)
    assert "3 cached" in printed  # the rows elicited once, by the first recipe
    # stand-in judges name one position in both orders: stable figures undefined, said so
    md = (out / "table.md").read_text()
    assert "undefined for tiny untrained stand-ins" in md or "computed no" in md


def test_tables_2_3_the_baselines_beside_the_reweighting_on_a_planted_panel(tmp_path, one_torch_thread):
    """The panel step's rubric prompting and LoRA SFT (a tiny stand-in judge: two steps) of the two
    named judges, on a planted panel: the rubric and base accuracies recomputed here from the
    judgments the rubric-prompted judge gave and the planted verdicts, on the held-out items."""
    from rmeval.judges.tables import load_judgments
    from rmeval.reproduce.judges import baselines_table
    from rmeval.reproduce.settings import analysis_settings

    recipe = load_reproduction(RECIPES / "judgeprofile_tables2_3_baselines.yaml")
    ctx = Context(recipe, tmp_path / "out", stand_in=True, wandb_mode="disabled")
    s = analysis_settings(recipe, stand_in=True)
    named = ["qwen3.5-27b", "qwen3.5-4b"]
    weights = dict(zip(named, planted_weights(2, len(s.attributes), seed=3).values()))
    items, table, _ = simulate_panel(48, weights, attributes=list(s.attributes), sources=("rm_bench", "hh_rlhf"),
                                     flip=0.1, seed=5)
    path = atomic_write_table(ctx.out / "data" / "items.jsonl", items)
    docs = {n: {"elicit": {"judgments": "-"}} for n in named}
    got = baselines_table(ctx, docs, table, path, s)
    assert sorted(got) == sorted(named)
    label = items.set_index("item_id")["label"].map({"A": 1, "B": -1})
    for name in named:
        b, rubric, base = docs[name]["baselines"], [], []
        for source in ("hh_rlhf", "rm_bench"):
            shard = next((ctx.out / "panel" / "baselines" / name / "baselines" / source / "rubric"
                          / "shards").glob("*.npz"))
            ab = load_judgments(shard).query("order == 'AB'").set_index("item_id")["direction"]
            rubric.append(float((ab == label[ab.index]).mean()))
            own = table[(table["judge"] == name) & (table["attribute"] == "overall") & (table["order"] == "AB")]
            planted = own.set_index("item_id")["direction"].loc[ab.index]  # the unadapted verdict on the same items
            base.append(float((planted == label[ab.index]).mean()))
        assert b["n_sources"] == 2 and b["rubric"] == pytest.approx(np.mean(rubric))
        assert b["base"] == pytest.approx(np.mean(base))
        assert b["reweight_minus_rubric"] == pytest.approx(b["reweight_k"] - b["rubric"])
        assert b["reweight_minus_lora"] == pytest.approx(b["reweight_budget"] - b["lora_sft"])
        assert 0 <= b["lora_sft"] <= 1 and b is got[name]
    cells, _ = build_cells(recipe, docs, None, {})
    assert cells[("qwen3.5-27b", "reweight_minus_rubric")].ours.estimate == pytest.approx(
        100 * docs["qwen3.5-27b"]["baselines"]["reweight_minus_rubric"])
    assert cells[("qwen3.5-27b", "reweight_minus_rubric")].published.value == -0.07
