"""The suitability commands as a newcomer meets them: every numeric flag checked (one line, exit 2,
no traceback, nothing written), ``--help`` writes nothing, reports titled by arm and seed."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from rmeval.cli import main


@pytest.fixture
def pairs(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(1, 1, 20)
    rows = [{"item_id": f"i{k}", "perturbation": c, "m_original": expit(x[k]), "m_perturbed": expit(x[k] - 0.2)}
            for c in ("EF", "ST") for k in range(20)]
    f = tmp_path / "pairs.csv"
    pd.DataFrame(rows).to_csv(f, index=False)
    return f


@pytest.mark.parametrize("flags,message", [
    (["--margin", "nan"], r"--margin: nan is out of range; allowed: a finite number >= 0$"),
    (["--margin", "inf"], r"--margin: inf is out of range; allowed: a finite number >= 0$"),
    (["--margin", "-0.2"], r"--margin: -0.2 is out of range; allowed: a finite number >= 0$"),
    (["--q", "1.5"], r"--q: 1.5 is out of range; allowed: a finite number in \(0, 1\)$"),
    (["--eta", "nan"], r"--eta: nan is out of range; allowed: a finite number in \(0, 1\)$"),
    (["--alpha", "0"], r"--alpha: 0.0 is out of range; allowed: a finite number in \(0, 1\)$"),
    (["--n-permutations", "0"], r"--n-permutations: 0 is out of range; allowed: an integer >= 1$"),
    (["--seed", "-1"], r"--seed: -1 is out of range; allowed: an integer >= 0$"),
    (["--null-share", "controlled=0"],
     r"--null-share: 0.0 \(in \{'controlled': 0.0\}\) is out of range; allowed: a finite number in \(0, 1\]$"),
    (["--null-share", "controlled=nan"], r"--null-share: nan \(in \{'controlled': nan\}\) is out of range"),
    (["--null-share", "controlled"], "--null-share entries look like GROUP=Q"),
    (["--null-share", "stylised=0.5"], "names group"),
    (["--weighting", "fixed"], "weighting fixed needs the null shares"),
    (["--weighting", "equal", "--null-share", "controlled=0.5"], "only with weighting fixed"),
])
def test_stats_flags_are_checked(pairs, tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    rc = main(["suitability-stats", "--pairs", str(pairs), "--out", str(out), "--wandb-mode", "disabled", *flags])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("rmeval: error: ") and len(err.strip().splitlines()) == 1
    assert re.search(message, err.strip()), err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("flags,message", [
    (["--max-items", "-3"], "--max-items: -3 is out of range; allowed: an integer >= 1"),
    (["--max-prompts", "0"], "--max-prompts: 0 is out of range; allowed: an integer >= 1"),
    (["--batch-size", "0"], "--batch-size: 0 is out of range; allowed: an integer >= 1"),
    (["--beta", "nan"], "--beta: nan is out of range; allowed: a finite number > 0"),
    (["--judge-explain-tokens", "0"], "--judge-explain-tokens: 0 is out of range; allowed: an integer >= 1"),
    (["--margin", "nan"], "--margin: nan is out of range; allowed: a finite number >= 0"),
])
def test_model_flags_are_checked_before_anything_loads(tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    rc = main(["suitability", "--checkpoint", str(tmp_path / "no-such-model"), "--data", "simulated:n_prompts=4",
               "--out", str(out), "--wandb-mode", "disabled", *flags])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_help_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for cmd in ("suitability", "suitability-stats"):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
    assert list(tmp_path.iterdir()) == []


def _tiny_run(root):
    """A tiny llama reward model saved as run bt_margin, seed 2."""
    from rmcore.models.tiny import save_tiny, tiny_model, train_tokenizer
    from rmcore.runtime.checkpoints import SUMMARY_FILE

    tok = train_tokenizer(["How do I bake bread? Mix flour and water. Just buy bread."], word_level=True,
                          pad_token="[PAD]", unk_token="[UNK]")
    run = root / "runs" / "seed2"
    save_tiny(run, tiny_model(tok, "llama", head="classifier", num_labels=1), tok)
    (run / SUMMARY_FILE).write_text(json.dumps({"arm": "bt_margin", "seed": 2}))
    return run


def _suitability(run, out, *extra):
    return main(["suitability", "--checkpoint", str(run), "--data", "simulated:n_prompts=6,seed=1", "--out", str(out),
                 "--perturbations", "EF", "IU", "--n-permutations", "200", "--no-robustness",
                 "--wandb-mode", "disabled", *extra])


def test_report_titled_by_arm_and_seed(tmp_path):
    run = _tiny_run(tmp_path)
    out = tmp_path / "suit"
    assert _suitability(run, out) == 0
    assert (out / "suitability.md").read_text().startswith("# Suitability of bt_margin seed 2\n")
    assert "structure" not in json.loads((out / "suitability.json").read_text())


def test_no_progress_silences_the_scoring_count(tmp_path, capsys):
    """The scoring count goes to stderr (a closing line off a terminal) unless --no-progress."""
    run = _tiny_run(tmp_path)
    assert _suitability(run, tmp_path / "a") == 0
    assert "scoring suitability pairs:" in capsys.readouterr().err
    assert _suitability(run, tmp_path / "b", "--no-progress") == 0
    err = capsys.readouterr().err
    assert not re.search(r"^\S[^:\n]*: [\d,]+ of [\d,]+ \w+|: done in ", err, re.M), err
