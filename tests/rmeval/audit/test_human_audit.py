"""The human audit as one library function (rmeval.audit.human.human_audit) and the rank share with a
missing rating: ranks over the rated rows only, checked against the hand ICC(1) formula."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import rankdata

from rmcore.errors import ConfigError
from rmeval.audit.human import compute_human, human_audit
from rmeval.audit.settings import HumanSettings
from rmeval.cli import main
from tests.support import hand_icc


def _ratings(n_prompts: int = 40, k: int = 3, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    u = rng.normal(size=n_prompts)
    rows = [{"prompt_id": f"p{i}", "response_id": f"p{i}r{j}", "helpfulness": float(np.round(2 + u[i] + rng.normal())),
             "verbosity": float(rng.integers(0, 5)), "single_turn": i % 4 != 0, "response_words": 10 + j,
             "prompt_words": 5 + i} for i in range(n_prompts) for j in range(k)]
    return pd.DataFrame(rows)


def test_rank_share_with_a_missing_rating_ranks_the_rated_rows():
    t = _ratings()
    t.loc[[4, 17, 30], "helpfulness"] = np.nan  # three responses without a rating
    res = compute_human(t, n_boot=200, seed=1)
    ranks = res["attributes"]["helpfulness"]["share"]["ranks"]
    rated = t["helpfulness"].notna().to_numpy()
    expected = hand_icc(rankdata(t.loc[rated, "helpfulness"]), t.loc[rated, "prompt_id"])
    assert ranks["estimate"] == pytest.approx(expected, abs=1e-12)
    assert np.isfinite(ranks["ci95"]).all()
    st = t["single_turn"].to_numpy(bool) & rated
    expected_st = hand_icc(rankdata(t.loc[st, "helpfulness"]), t.loc[st, "prompt_id"])
    assert res["attributes"]["helpfulness"]["share"]["ranks_single_turn"]["estimate"] == pytest.approx(expected_st)
    # the raw share leaves the same rows out
    raw = hand_icc(t.loc[rated, "helpfulness"], t.loc[rated, "prompt_id"])
    assert res["attributes"]["helpfulness"]["share"]["all"]["estimate"] == pytest.approx(raw)


def test_main_attribute_follows_pick_attribute():
    t = _ratings(n_prompts=12)
    assert compute_human(t, n_boot=50)["meta"]["main_attribute"] == "helpfulness"
    assert compute_human(t[[c for c in t.columns if c != "helpfulness"]], n_boot=50)["meta"]["main_attribute"] == \
        "verbosity"
    assert compute_human(t, n_boot=50, main_attribute="verbosity")["meta"]["main_attribute"] == "verbosity"


def test_human_audit_is_the_commands_pipeline(tmp_path: Path, capsys):
    spec = "simulated:n_prompts=60,human_share=0.3,seed=2"
    res = human_audit(spec, HumanSettings(attribute="helpfulness", n_boot=300, seed=3,
                                          reliabilities={"borrowed": 0.5}), tmp_path / "lib")
    assert json.loads((tmp_path / "lib" / "human.json").read_text()) == json.loads(json.dumps(res))
    assert res["meta"]["data"] == spec and res["meta"]["n_boot"] == 300 and res["meta"]["seed"] == 3
    obs = res["attributes"]["helpfulness"]["share"]["all"]["estimate"]
    assert res["share_corrected"]["borrowed:borrowed"]["estimate"] == pytest.approx(obs / 0.5)
    # the command calls the same function: the same document
    assert main(["human", "--data", spec, "--attribute", "helpfulness", "--n-boot", "300", "--seed", "3",
                 "--human-reliability", "borrowed=0.5", "--out", str(tmp_path / "cli")]) == 0
    cli = json.loads((tmp_path / "cli" / "human.json").read_text())
    cli["meta"].pop("seconds"), res["meta"].pop("seconds")
    assert cli == json.loads(json.dumps(res))
    assert "helpfulness share" in capsys.readouterr().out


@pytest.mark.parametrize("kwargs, message", [({"raters_per_rating": 0.0}, "--raters-per-rating"),
                                             ({"n_boot": 0}, "--n-boot"),
                                             ({"reliabilities": {"x": 1.5}},
                                              r"--human-reliability: 1.5 \(in \{'x': 1.5\}\) is out of range"),
                                             ({"raters_per_rating": float("nan")}, "--raters-per-rating")])
def test_bad_settings_are_configuration_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        HumanSettings(**kwargs)


def test_bad_flag_is_one_line_on_the_command_line(tmp_path: Path, capsys):
    assert main(["human", "--data", "simulated:n_prompts=20", "--human-reliability", "r=0",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rmeval: error:") and "\n" not in err
    assert "--human-reliability: 0.0 (in {'r': 0.0}) is out of range" in err
    assert not (tmp_path / "o").exists()
