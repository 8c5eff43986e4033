"""Every reproduction recipe but Table 1 (which the default suite runs) end to end with --stand-in,
and Table 1's rows as a submitit job array (the same tasks as SLURM's, as local processes): heavy,
`pytest -m heavy`. Each run computes every row it can, writes the paper-layout table with the
stand-in banner, and carries every published figure into figures.csv."""

from __future__ import annotations

import csv
import json

import pytest

from rmeval.cli import main
from rmeval.reproduce.recipe import load_reproduction
from tests.support import ROOT, data_source_flags

RECIPES = sorted(p for p in (ROOT / "recipes" / "reproduce").glob("*.yaml") if "table1_helpsteer2" not in p.name)


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.mark.heavy
@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_every_recipe_runs_with_stand_ins(tmp_path, path, capsys, one_torch_thread, shared_data):
    out = tmp_path / "out"
    recipe = load_reproduction(path)
    flags = data_source_flags(path, shared_data)  # the repository's copies, named explicitly
    assert main(["reproduce", str(path), "--stand-in", "--out", str(out), "--wandb-mode", "disabled", *flags]) == 0
    assert " 0 failed" in capsys.readouterr().out
    assert "STAND-IN RUN" in (out / "table.md").read_text()
    with open(out / "figures.csv", newline="") as f:
        figs = {(r["row"], r["column"]): r for r in csv.DictReader(f)}
    for fig in recipe.published:
        if fig.row is not None:
            assert figs[(fig.row, fig.column)]["published"] == str(fig.value)
    runnable = [m.name for m in recipe.models if not m.not_reproducible] + [h.name for h in recipe.human]
    assert all((out / "rows" / r / "done.json").is_file() for r in runnable)


@pytest.mark.heavy
def test_rows_run_as_a_submitit_job_array(tmp_path, capsys):
    recipe = ROOT / "recipes" / "reproduce" / "pairwise_misses_table1_helpsteer2_audit.yaml"
    out = tmp_path / "array"
    assert main(["reproduce", str(recipe), "--stand-in", "--out", str(out), "--wandb-mode", "disabled",
                 "--executor", "submitit-local", "--only", "human-hs2-validation", "tulu-3-8b-rm"]) == 0
    assert "2 rows computed" in capsys.readouterr().out
    assert list((out / "submitit").glob("*_submitted.pkl"))  # one task per row, through submitit
    rec = json.loads((out / "rows" / "tulu-3-8b-rm" / "done.json").read_text())
    assert rec["stand_in"] and rec["documents"] == {"hs2": "rows/tulu-3-8b-rm/hs2/audit.json"}
    assert main(["reproduce", str(recipe), "--stand-in", "--out", str(out), "--wandb-mode", "disabled",
                 "--executor", "submitit-local", "--only", "tulu-3-8b-rm"]) == 0
    assert "0 rows computed, 1 cached" in capsys.readouterr().out
