"""Raw against centred filtering (rmtrain.filtering): the filter keys, the kept sets and their
Jaccard overlap by hand, the learning-rate rule, trl's preference rows, and ``rmtrain
filter-experiment`` end to end on the toy recipe (shrunk)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rmcore.data.schema import PromptRecord, RatingSet, Response
from rmtrain.cli import main
from rmtrain.filtering import choose_learning_rate, dpo_rows, filter_keys, kept, select_pairs
from tests.support import ROOT


def test_filter_keys_by_hand():
    scores = pd.DataFrame({"prompt_id": ["a", "a", "a", "b", "b"], "response_id": ["1", "2", "3", "1", "2"],
                           "score": [1.0, 2.0, 6.0, 0.5, -1.0]})
    pairs = pd.DataFrame({"prompt_id": ["a", "a", "b"], "chosen_id": ["2", "3", "1"], "rejected_id": ["1", "1", "2"]})
    k = filter_keys(pairs, scores)
    assert k["raw_key"].tolist() == [2.0, 6.0, 0.5]
    # centred on the prompt's other responses: 2 - (1 + 6) / 2, 6 - (1 + 2) / 2, and the margin 0.5 - (-1)
    assert k["centred_key"].tolist() == [-1.5, 4.5, 1.5]
    # an unscored response takes no part in its prompt's mean; one scored response has no sibling
    scores = pd.DataFrame({"prompt_id": ["c"] * 3 + ["d"] * 2, "response_id": ["1", "2", "3", "1", "2"],
                           "score": [1.0, np.nan, 4.0, 2.0, np.nan]})
    pairs = pd.DataFrame({"prompt_id": ["c", "d"], "chosen_id": ["3", "1"], "rejected_id": ["1", "2"]})
    assert filter_keys(pairs, scores)["centred_key"].tolist()[0] == 3.0
    assert np.isnan(filter_keys(pairs, scores)["centred_key"].tolist()[1])


def test_kept_sets_and_jaccard_by_hand():
    assert kept(np.array([0.1, 0.5, np.nan, 0.5, 0.2]), 2).tolist() == [False, True, False, True, False]
    assert kept(np.array([np.nan, 1.0]), 2).tolist() == [True, True]  # NaN last, yet kept when room remains
    keyed = pd.DataFrame({"prompt_id": list("abcdefghij"), "raw_key": np.arange(10.0),
                          "centred_key": [9, 8, 0, 1, 2, 3, 4, 5, 7, 6.0], "gap": 1.0})
    out, info = select_pairs(keyed, 0.3, seed=0)
    assert info["n_kept"] == 3 and out["kept_random"].sum() == 3
    # raw keeps rows 7, 8, 9; centred keeps rows 0, 1, 8: one shared of five
    assert np.flatnonzero(out["kept_raw"]).tolist() == [7, 8, 9]
    assert np.flatnonzero(out["kept_centred"]).tolist() == [0, 1, 8]
    assert info["jaccard_raw_centred"] == pytest.approx(1 / 5)
    r = set(np.flatnonzero(out["kept_random"]))
    assert info["jaccard_random_raw"] == pytest.approx(len(r & {7, 8, 9}) / len(r | {7, 8, 9}))


def test_learning_rate_rule():
    runs = {1e-6: {"heldout_accuracy": 0.6, "heldout_loss": 0.65}, 2e-6: {"heldout_accuracy": 0.7, "heldout_loss": 0.7},
            5e-6: {"heldout_accuracy": 0.7, "heldout_loss": 0.6}}
    assert choose_learning_rate(runs) == 5e-6  # best accuracy, then the lower loss
    runs[5e-6]["heldout_loss"] = 0.7
    assert choose_learning_rate(runs) == 2e-6  # then the lower rate


def test_preference_rows_follow_the_tokenizer():
    rs = RatingSet([PromptRecord("a", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
                                       {"role": "user", "content": "more"}],
                                 [Response("1", "good"), Response("2", "bad")])])
    pairs = pd.DataFrame({"prompt_id": ["a"], "chosen_id": ["1"], "rejected_id": ["2"]})

    class Chat:
        chat_template = "{{ x }}"

    row = dpo_rows(pairs, rs, Chat(), {"enable_thinking": False})[0]
    assert row["prompt"] == rs.prompts[0].messages and row["chosen"] == [{"role": "assistant", "content": "good"}]
    assert row["chat_template_kwargs"] == {"enable_thinking": False}
    row = dpo_rows(pairs, rs, object())[0]
    assert row == {"prompt": "User: hi\n\nAssistant: yo\n\nUser: more\n\nAssistant:", "chosen": " good",
                   "rejected": " bad"}


def _planted_scores(real):
    """``score_pool`` with the model's scores replaced by planted ones: four responses per prompt,
    2, 1, 2, 2 on every other prompt and 3, 2, 3, 3 on the rest. A response's leave-one-out centred
    score is then exactly 1/3 (2 - 5/3, 3 - 8/3) or -1 (1 - 6/3, 2 - 9/3), where the float formula
    s - (sum - s) / 3 gives 0.33333333333333326 and 0.3333333333333335."""
    def planted(*args, **kw):
        scored = real(*args, **kw)
        position = scored.groupby("prompt_id").cumcount().to_numpy()
        high = np.where(pd.factorize(scored["prompt_id"])[0] % 2 == 0, 2.0, 3.0)
        return scored.assign(score=np.where(position == 1, high - 1, high))
    return planted


def test_filter_experiment_toy(tmp_path, capfd, monkeypatch, one_torch_thread, minilm_ckpt):
    import rmtrain.filtering

    monkeypatch.setattr(rmtrain.filtering, "score_pool", _planted_scores(rmtrain.filtering.score_pool))
    out = tmp_path / "f"
    args = ["filter-experiment", "--config", str(ROOT / "recipes" / "filtering_toy.yaml"), "--out", str(out),
            "--data", "simulated:n_prompts=20,responses_per_prompt=4,seed=3", "--set", f"reward_model={minilm_ckpt}",
            "--set", "variants=[{name: lora16, judge: tiny-judge-b, lora: {r: 16, alpha: 32, dropout: 0.0}}]",
            "--set", "dpo.learning_rates=[1.0e-3]", "--set", "evaluation.n_prompts=4", "--set", "max_train_pairs=24",
            "--set", "evaluation.max_new_tokens=4", "--set", "n_boot=50", "--set", "progress=false",
            "--wandb-mode", "disabled"]
    assert main(args) == 0
    # stdout (the file descriptor: the tiny judges' tokenizer training writes there) holds the result alone
    notice, filters, variant, line = capfd.readouterr().out.splitlines()
    assert notice.startswith("TOY RUN") and filters.startswith("filters: ") and "Jaccard raw vs centred" in filters
    assert variant.startswith("lora16: learning rate") and line.startswith("filter-experiment (")
    res = json.loads((out / "filtering.json").read_text())
    f = pd.read_parquet(out / "filters.parquet")
    raw, cen = set(f.index[f["kept_raw"]]), set(f.index[f["kept_centred"]])
    assert len(raw) == len(cen) == round(0.3 * len(f)) == res["filter"]["n_kept"]
    assert res["filter"]["jaccard_raw_centred"] == pytest.approx(len(raw & cen) / len(raw | cen))
    # the kept sets are the top keys recomputed from the written scores
    scores = pd.read_parquet(out / "scores.parquet")
    by = scores.set_index(["prompt_id", "response_id"])["score"]
    assert f["raw_key"].tolist() == [by[(p, c)] for p, c in zip(f["prompt_id"], f["chosen_id"])]
    # the centred keys are the exact values, so equal keys tie and the cut keeps them in input order
    top = scores.groupby("prompt_id")["score"].max()
    exact = np.where(f["raw_key"].to_numpy() == top.reindex(f["prompt_id"]).to_numpy(), 1 / 3, -1.0)
    assert f["centred_key"].tolist() == exact.tolist()
    assert f["kept_centred"].tolist() == kept(exact, res["filter"]["n_kept"]).tolist()
    v = res["variants"]["lora16"]
    assert v["learning_rate"] == 1e-3 and set(v["arms"]) == {"random", "raw", "centred"}
    assert (out / "lora16" / "raw" / "model" / "adapter_config.json").is_file()
    assert 0 <= v["arms"]["raw"]["heldout_accuracy"] <= 1
    j = pd.read_parquet(out / "lora16" / "judgments.parquet")
    assert len(j) == 3 * 4
    hv = j[(j["x"] == "raw") & (j["y"] == "base")]
    assert v["comparisons"]["raw_vs_base"]["win_rate"]["estimate"] == pytest.approx(
        ((hv["p_x_first"] + 1 - hv["p_y_first"]) / 2).mean())
    assert "TOY RUN" in (out / "filtering.md").read_text()
    # a rerun trains nothing: every run's metrics are there
    stamp = (out / "lora16" / "raw" / "metrics.json").stat().st_mtime_ns
    assert main(args) == 0
    assert (out / "lora16" / "raw" / "metrics.json").stat().st_mtime_ns == stamp
