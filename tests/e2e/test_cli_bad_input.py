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
                                          f"rm_bench: no files matching *.json found in the folder {tmp / 'empty_dir'}"),
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
