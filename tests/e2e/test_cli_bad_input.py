"""Every user-given path is checked first: a bad one ends an `rmeval` or `rmtrain` command with one
line naming what is wrong, exit code 2 and no traceback."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rmeval.cli import main as rmeval_main
from rmtrain.cli import main as rmtrain_main


def _bad_inputs(tmp: Path, ckpt: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (argv, expected fragment of the one-line error)."""
    d = tmp / "adir"
    d.mkdir(exist_ok=True)
    (tmp / "empty_dir").mkdir(exist_ok=True)
    (tmp / "empty.csv").write_text("")
    (tmp / "header.csv").write_text("prompt_id,response_id,condition,variant,donor_prompt_id,score\n")
    ratings = pd.DataFrame({"prompt_id": [0, 0, 1, 1], "response_id": [0, 1, 2, 3],
                            "helpfulness": [1.0, np.nan, 2.0, 3.0]})
    ratings.to_csv(tmp / "nan_ratings.csv", index=False)
    good = ratings.assign(helpfulness=[1.0, 2.0, 2.0, 3.0])
    good.to_csv(tmp / "ratings.csv", index=False)
    scores = pd.DataFrame({"prompt_id": [0, 0, 1, 1, 1], "response_id": [0, 1, 2, 3, 3], "condition": "original",
                           "variant": 0, "score": [0.1, 0.2, 0.3, 0.4, 0.5]})
    scores.to_csv(tmp / "dup_scores.csv", index=False)
    scores.iloc[:4].to_csv(tmp / "scores.csv", index=False)
    pd.DataFrame({"question": ["q", "q"], "answer": ["a", "b"], "score": [1, 2]}).to_csv(tmp / "g.csv", index=False)
    pd.DataFrame({"question": ["q", "q"], "answer": ["a", "b"], "score": [1, "x"]}).to_csv(tmp / "g2.csv", index=False)
    (tmp / "empty.jsonl").write_text("")
    (tmp / "cut.json").write_text('[{"id": 1, "prompt": "q",\n  "chosen": ["a')  # cut inside a string
    (tmp / "recipe_dir").mkdir(exist_ok=True)
    gen = '{"name": "generic", "path": "%s", "columns": {"prompt": "question", "response": "answer", ' \
          '"ratings": {"%s": "helpfulness"}}}'
    out = ["--out", str(tmp / "out"), "--wandb-mode", "disabled"]
    audit = ["audit", "--checkpoint", str(ckpt), *out]
    stats = ["stats", *out]
    return {
        "checkpoint absolute missing": (["audit", "--checkpoint", "/no/such/ckpt", "--data", "simulated", *out],
                                        "--checkpoint: not found"),
        "checkpoint relative missing": (["audit", "--checkpoint", "./outputs/demo/bt_margin/seed1", "--data",
                                         "simulated", *out], "--checkpoint: not found"),
        "checkpoint is a file": (["pairwise", "--checkpoint", str(tmp / "scores.csv"), "--data", "simulated", *out],
                                 "is a file, expected a directory"),
        "data file is a directory": ([*audit, "--data", gen % (d, "score")], "is a directory"),
        "data file missing": ([*audit, "--data", f"hh_rlhf:{tmp / 'nope.jsonl'}"], "not found"),
        "data file empty": ([*audit, "--data", f"hh_rlhf:{tmp / 'empty.jsonl'}"], "is empty"),
        "scores is a directory": ([*stats, "--scores", str(d), "--ratings", str(tmp / "ratings.csv")],
                                  "is a directory"),
        "scores empty file": ([*stats, "--scores", str(tmp / "empty.csv"), "--ratings", str(tmp / "ratings.csv")],
                              "is empty"),
        "scores header only": ([*stats, "--scores", str(tmp / "header.csv"), "--ratings", str(tmp / "ratings.csv")],
                               "has no rows"),
        "ratings NaN": ([*stats, "--scores", str(tmp / "scores.csv"), "--ratings", str(tmp / "nan_ratings.csv")],
                        f"file {tmp / 'nan_ratings.csv'}, row 3, field 'helpfulness': rating is not a finite number"),
        "scores duplicate key": ([*stats, "--scores", str(tmp / "dup_scores.csv"), "--ratings",
                                  str(tmp / "ratings.csv")],
                                 f"file {tmp / 'dup_scores.csv'}, row 6, field 'variant': duplicate"),
        "stats attribute missing": ([*stats, "--scores", str(tmp / "scores.csv"), "--ratings",
                                     str(tmp / "ratings.csv"), "--attribute", "correctness"],
                                    "has columns ['prompt_id', 'response_id', 'helpfulness']"),
        "mapping names a missing column": ([*audit, "--data", gen % (tmp / "g.csv", "rating")],
                                           "this row has columns ['answer', 'question', 'score']"),
        "bad rating says skip": ([*audit, "--data", gen % (tmp / "g2.csv", "score")], "on_bad: skip"),
        "config is a directory": (["train", "--config", str(tmp / "recipe_dir")], "recipe: is a directory"),
        "config missing": (["train", "--config", str(tmp / "nope.yaml")], "recipe: not found"),
        "preferences is a directory": ([*stats, "--scores", str(tmp / "scores.csv"), "--ratings",
                                        str(tmp / "ratings.csv"), "--preferences", str(d)], "is a directory"),
        "data file truncated": ([*audit, "--data", f"rm_bench:{tmp / 'cut.json'}"],
                                f"file {tmp / 'cut.json'}: invalid JSON (Unterminated string starting at: line 2 "
                                "column 14)"),
        "rm_bench folder without files": (["pairwise", "--checkpoint", str(ckpt), "--data",
                                           f"rm_bench:{tmp / 'empty_dir'}", *out],
                                          "rm_bench: no files matching *.json found in the folder "
                                          f"{tmp / 'empty_dir'}"),
    }


CASES = ["checkpoint absolute missing", "checkpoint relative missing", "checkpoint is a file",
         "data file is a directory", "data file missing", "data file empty", "scores is a directory",
         "scores empty file", "scores header only", "ratings NaN", "scores duplicate key", "stats attribute missing",
         "mapping names a missing column", "bad rating says skip", "config is a directory", "config missing",
         "preferences is a directory", "data file truncated", "rm_bench folder without files"]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line(case, tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")  # enough for the checks that come before any model is loaded
    argv, expected = _bad_inputs(tmp_path, ckpt)[case]
    main = rmtrain_main if argv[0] == "train" else rmeval_main
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("INFO", "WARNING"))]
    assert rc == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err and "np.int64" not in err and "np.float64" not in err
    assert expected in lines[0], lines[0]


# -- issue 33 item 4: no setting that silently does nothing, and the crashes left ------------------
# Each case goes through the real main in a folder of its own: exit 2, one line, no traceback, and
# nothing written (no output folder, cache, items table or W&B run; the folder holds what it held).

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
LIBRARY_LINE = ("INFO", "WARNING", "[INFO]", "[WARNING]")  # a library's own log line (issue 33 item 5)


def _recipe(tmp: Path, name: str, change) -> str:
    import yaml

    raw = yaml.safe_load((RECIPES / "demo.yaml").read_text(encoding="utf-8"))
    change(raw)
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return str(path)


def _idle_cases(tmp: Path, ckpt: Path) -> dict[str, tuple[str, list[str], str]]:
    """name -> (program, argv, expected fragment of the one-line error)."""
    demo, out = str(RECIPES / "demo.yaml"), str(tmp / "out")
    train = ["train", "--config", demo, "--out", out, "--wandb-mode", "disabled"]
    sweep = ["sweep", "--config", demo, "--dry-run", "--out", out]
    score = ["--checkpoint", str(ckpt), "--data", "simulated:n_prompts=4", "--out", out, "--wandb-mode", "disabled"]
    big = ["--checkpoint", str(ckpt), "--data", "simulated:n_prompts=50", "--out", out, "--wandb-mode", "offline",
           "--n-boot", "1000000000000"]
    elicit = ["judges", "elicit", "--out", out, "--data", "simulated:n_prompts=4"]
    idle = _recipe(tmp, "idle", lambda r: r["audit"].update(n_boot=300))
    idle_suit = _recipe(tmp, "idle_suit", lambda r: r.update(audit={"enabled": True, "suitability": {"q": 0.1}}))
    no_seeds = _recipe(tmp, "no_seeds", lambda r: r["sweep"].update(seeds=[]))
    limit = _recipe(tmp, "limit",
                    lambda r: r.update(data={"name": "rm_bench", "path": str(tmp / "x.json"), "limit": 0}))
    typo = _recipe(tmp, "typo", lambda r: r["training"].update(learning_rat=1e-4))
    arm = _recipe(tmp, "arm", lambda r: r.update(arm="bt_margin", arm_options={"foo": 1}))
    return {
        "audit key while audit is off, by --set": (
            "rmtrain", [*train, "--set", "audit.n_boot=100"],
            f"rmtrain: error: --set audit.n_boot=100: has no effect while {demo}.audit.enabled is false"),
        "audit key while audit is off, in the recipe": (
            "rmtrain", ["check", idle],
            f"rmtrain: error: {idle}.audit.n_boot: has no effect while {idle}.audit.enabled "
            "is false (set it true, or leave n_boot out)"),
        "suitability key while its step is off": (
            "rmtrain", ["check", idle_suit], f"{idle_suit}.audit.suitability.q: has no effect while "
                                             f"{idle_suit}.audit.suitability.enabled is false"),
        "--beta with the default scorer": (
            "rmeval", ["pairwise", *score, "--beta", "0.5"],
            "rmeval: error: --beta has an effect only with --scorer dpo_implicit; --scorer is seq_classifier"),
        "--reference with the default scorer": (
            "rmeval", ["audit", *score, "--reference", "none"],
            "rmeval: error: --reference has an effect only with --scorer dpo_implicit; --scorer is seq_classifier"),
        "--judge-style with the default scorer": (
            "rmeval", ["suitability", *score, "--judge-style", "explain"],
            "rmeval: error: --judge-style has an effect only with --scorer generative_judge; --scorer is "
            "seq_classifier"),
        "--judge-style in audit --suitability": (
            "rmeval", ["audit", *score, "--suitability", "--judge-style", "explain"],
            "--judge-style has an effect only with --scorer generative_judge"),
        "--concurrency with a local judge": (
            "rmeval", [*elicit, "--model", str(ckpt), "--concurrency", "3"],
            "rmeval: error: --concurrency has an effect only with --endpoint, which is not given"),
        "empty seeds, rmtrain check": (
            "rmtrain", ["check", no_seeds],
            f"rmtrain: error: {no_seeds}.sweep.seeds: empty; allowed: a list of one or more integers >= 0"),
        "empty seeds, rmtrain sweep": (
            "rmtrain", ["sweep", "--config", no_seeds, "--dry-run", "--out", out], f"{no_seeds}.sweep.seeds: empty"),
        "empty seeds by --set": ("rmtrain", [*sweep, "--set", "sweep.seeds=[]"],
                                 "rmtrain: error: --set sweep.seeds=[]: empty; allowed: a list of one or more"),
        "n_boot beyond memory, audit": (
            "rmeval", ["audit", *big], "rmeval: error: --n-boot 1000000000000 over 50 prompts (200 responses): the "
                                       "bootstrap needs about 11.4 PiB of memory; this machine has "),
        "n_boot beyond memory, pairwise": (
            "rmeval", ["pairwise", *big], "rmeval: error: --n-boot 1000000000000 over 47 prompts: the bootstrap needs "
                                          "about 342 TiB of memory; this machine has "),
        "n_boot beyond memory, stats": (
            "rmeval", ["stats", "--scores", str(tmp / "scores.csv"), "--ratings", str(tmp / "ratings.csv"), "--out",
                       out, "--wandb-mode", "offline", "--n-boot", "1000000000000"],
            "rmeval: error: --n-boot 1000000000000 over 2 prompts (4 responses): the bootstrap needs about"),
        "data limit 0": ("rmeval", ["audit", *big[:2], "--data", f"rm_bench:{tmp / 'cut.json'},limit=0", *big[4:8]],
                         "rmeval: error: data spec 'rm_bench': limit: 0 is out of range; allowed: an integer >= 1"),
        "data limit -1": ("rmeval", ["pairwise", *big[:2], "--data", f"hh_rlhf:{tmp / 'empty.jsonl'},limit=-1",
                                     *big[4:8]],
                          "rmeval: error: data spec 'hh_rlhf': limit: -1 is out of range; allowed: an integer >= 1"),
        "data limit 0 in a recipe": ("rmtrain", ["check", limit], "data spec 'rm_bench': limit: 0 is out of range"),
        "elicit with a judge model that is not there": (
            "rmeval", [*elicit, "--model", str(tmp / "no_model")], "--model: not found"),
        "a --set key typo": (
            "rmtrain", [*train, "--set", "trainng.learning_rate=1e-5"],
            "rmtrain: error: --set trainng.learning_rate=1e-5: unknown key(s) ['trainng'] (did you mean 'training'?); "
            "allowed: ['arm', "),
        "a recipe key typo": (
            "rmtrain", ["check", typo], f"rmtrain: error: {typo}.training: unknown key(s) ['learning_rat'] (did you "
                                        "mean 'learning_rate'?); allowed: ['bf16', "),
        "a wrong arm option, by --set": (
            "rmtrain", [*train, "--set", "arm=bt_margin", "--set", "arm_options.margin_orientaton=label"],
            "rmtrain: error: --set arm_options.margin_orientaton=label: arm 'bt_margin': unknown key(s) "
            "['margin_orientaton'] (did you mean 'margin_orientation'?); allowed: ['margin_orientation']"),
        "a wrong arm option, in the recipe": (
            "rmtrain", ["check", arm],
            "rmtrain: error: arm 'bt_margin': arm_options: unknown key(s) ['foo']; allowed: ['margin_orientation']"),
        "a --set value out of range names the --set": (
            "rmtrain", [*train, "--set", "training.learning_rate=nan"],
            "rmtrain: error: --set training.learning_rate=nan: nan is out of range; allowed: a finite number > 0"),
        "null for a number": ("rmtrain", [*train, "--set", "training.learning_rate=null"],
                              "rmtrain: error: --set training.learning_rate=null: expected float, got null"),
        "an experiment's --set key typo": (
            "rmeval", ["pool", "--config", str(RECIPES / "pool_toy.yaml"), "--out", out, "--set", "sampling.k=3"],
            "rmeval: error: --set sampling.k=3: unknown key(s) ['k']; allowed: ['batch_size', "),
    }


IDLE_CASES = ["audit key while audit is off, by --set", "audit key while audit is off, in the recipe",
              "suitability key while its step is off", "--beta with the default scorer",
              "--reference with the default scorer", "--judge-style with the default scorer",
              "--judge-style in audit --suitability", "--concurrency with a local judge", "empty seeds, rmtrain check",
              "empty seeds, rmtrain sweep", "empty seeds by --set", "n_boot beyond memory, audit",
              "n_boot beyond memory, pairwise", "n_boot beyond memory, stats", "data limit 0", "data limit -1",
              "data limit 0 in a recipe", "elicit with a judge model that is not there", "a --set key typo",
              "a recipe key typo", "a wrong arm option, by --set", "a wrong arm option, in the recipe",
              "a --set value out of range names the --set", "null for a number", "an experiment's --set key typo"]


def _files(folder: Path) -> set[Path]:
    return set(folder.rglob("*"))


@pytest.mark.parametrize("case", IDLE_CASES)
def test_a_setting_that_would_do_nothing_is_refused_and_nothing_written(case, tmp_path, capsys, monkeypatch):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")  # enough for the checks that come before any model is loaded
    _bad_inputs(tmp_path, ckpt)  # the small tables and files the cases name
    program, argv, expected = _idle_cases(tmp_path, ckpt)[case]
    monkeypatch.chdir(tmp_path)  # a stray file (wandb/, a cache) would land here
    before = _files(tmp_path)
    rc = (rmtrain_main if program == "rmtrain" else rmeval_main)(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(LIBRARY_LINE)]
    assert rc == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert expected in lines[0], lines[0]
    assert _files(tmp_path) == before, sorted(map(str, _files(tmp_path) - before))


@pytest.mark.parametrize("program,argv,expected", [
    ("rmtrain", ["train", "--config", "r.yaml", "--seed", "abc"],
     "rmtrain train: error: argument --seed: invalid int value: 'abc' (see rmtrain train --help)"),
    ("rmtrain", ["train"], "rmtrain train: error: the following arguments are required: --config (see rmtrain train "
                           "--help)"),
    ("rmeval", ["audit", "--checkpoint", "c", "--data", "d", "--out", "o", "--n-boot", "abc"],
     "rmeval audit: error: argument --n-boot: invalid int value: 'abc' (see rmeval audit --help)"),
    ("rmeval", ["judges", "elicit", "--out", "o", "--n-shards", "x"],
     "rmeval judges elicit: error: argument --n-shards: invalid int value: 'x' (see rmeval judges elicit --help)"),
])
def test_a_flag_that_does_not_parse_is_one_line_with_a_help_hint(program, argv, expected, tmp_path, capsys,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        (rmtrain_main if program == "rmtrain" else rmeval_main)(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err == expected + "\n", err
    assert list(tmp_path.iterdir()) == []


def test_sweep_search_null_removes_the_grid(tmp_path, capsys):
    """--set sweep.search=null: no search stage, as sweep.search={} (the recipe's grid kept before)."""
    demo = str(RECIPES / "demo.yaml")
    for value in ("null", "{}"):
        rc = rmtrain_main(["sweep", "--config", demo, "--dry-run", "--out", str(tmp_path / value),
                           "--set", f"sweep.search={value}"])
        out = capsys.readouterr().out
        assert rc == 0 and "0 search runs + 12 seed runs" in out, out
