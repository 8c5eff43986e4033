"""Prompt variants: related-task subtypes recorded in the variants file, and paraphrase validity by
a judge -- p(Yes) against a plain forward pass of the judge model, the counts against hand counts
on a planted file, invalid paraphrases left out of the condition and counted in the audit."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest
import torch
from scipy.special import softmax

from rmcore.data.loading import load_rating_set
from rmcore.data.schema import PromptRecord, Response
from rmcore.errors import DataError
from rmcore.models.tiny import tiny_causal_lm
from rmeval.audit.variants import (
    VALIDITY_QUESTION,
    VALIDITY_TEMPLATE,
    ValidityQuestion,
    judge_validity,
    variant_counts,
)
from rmeval.backends import JudgeBackend, Question
from rmeval.backends.generators import RELATED_SUBTYPES, FileGenerator, HFGenerator, instruction
from rmeval.cli import main
from rmeval.conditions import paraphrase, related

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SPEC = "simulated:n_prompts=10,seed=2"


def _rs():
    return load_rating_set({"name": "simulated", "n_prompts": 10, "seed": 2})


@pytest.mark.parametrize("subtype", list(RELATED_SUBTYPES))
def test_related_subtypes_are_written_and_recorded(tmp_path, subtype):
    out = tmp_path / f"{subtype}.jsonl"
    assert main(["variants", "--data", SPEC, "--task", "related", "--subtype", subtype, "--n", "2",
                 "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 20 and {r["subtype"] for r in rows} == {subtype}
    summary = json.loads((tmp_path / f"{subtype}.jsonl.summary.json").read_text())
    assert summary["subtype"] == subtype and summary["instruction"] == RELATED_SUBTYPES[subtype]
    rs = _rs()
    originals = {p.prompt_id: p.last_user_text for p in rs.prompts}
    for r in rows:
        if subtype == "contains":  # the related task contains the original request
            assert r["text"].startswith(originals[r["prompt_id"]]) and len(r["text"]) > len(originals[r["prompt_id"]])
        else:
            assert originals[r["prompt_id"]] not in r["text"]
    items = related(rs, related_file=out, n_variants=4)  # the condition reads the file's two per prompt
    assert len(items) == 20 * len(rs.prompts[0].responses)
    assert FileGenerator(out).subtype == subtype


def test_subtype_instructions_and_bad_files(tmp_path):
    assert instruction("related") == RELATED_SUBTYPES["different"]
    assert "sub-question" in instruction("related", "sub_question") and "contains" in instruction("related", "contains")
    rs = _rs()
    lm = tiny_causal_lm(tmp_path / "lm", [*RELATED_SUBTYPES.values(), "bread"] * 3, vocab_size=300)
    assert "contains the following request" in HFGenerator(lm).instruction(rs.prompts[0], "related", "contains")
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"prompt_id": "sim-0000", "text": "a", "subtype": "contains"}\n'
                     '{"prompt_id": "sim-0000", "variant": 1, "text": "b", "subtype": "sub_question"}\n')
    with pytest.raises(DataError, match="several subtypes"):
        FileGenerator(mixed)
    one = tmp_path / "one.jsonl"
    one.write_text('{"prompt_id": "sim-0000", "text": "a", "subtype": "contains"}\n')
    with pytest.raises(DataError, match="not paraphrases"):
        paraphrase(rs, paraphrase_file=one)
    one.write_text('{"prompt_id": "sim-0000", "text": "a", "subtype": "other"}\n')
    with pytest.raises(DataError, match=r"row 1.*subtype"):
        FileGenerator(one)
    # one-line errors, exit 2: a subtype for paraphrases, a validity judge for related tasks
    assert main(["variants", "--data", SPEC, "--task", "paraphrase", "--subtype", "contains",
                 "--out", str(tmp_path / "x.jsonl")]) == 2
    assert main(["variants", "--data", SPEC, "--task", "related", "--validity-judge", "hf:x",
                 "--out", str(tmp_path / "x.jsonl")]) == 2
    assert not (tmp_path / "x.jsonl").exists()


class PlantedJudge(JudgeBackend):
    """Says No to a rewriting that contains 'CHANGED', and nothing readable to one with 'GARBLED'."""

    def letter_scores(self, question: Question, items: Sequence[tuple[str, str]]) -> torch.Tensor:
        rows = [[float("nan")] * 2 if "GARBLED" in r else [-5.0, 0.0] if "CHANGED" in r else [0.0, -2.0]
                for _, r in items]
        return torch.tensor(rows)


def test_validity_verdicts_and_counts_by_hand(tmp_path, minilm_ckpt):
    pairs = [("q", "same"), ("q", "CHANGED"), ("q", "GARBLED")]
    v = judge_validity(PlantedJudge(), pairs)
    assert v[0] == (True, pytest.approx(1 / (1 + np.exp(-2.0))))  # p(Yes) = softmax over (Yes, No)
    assert v[1] == (False, pytest.approx(1 / (1 + np.exp(5.0))))
    assert v[2] == (False, None)  # unreadable: not valid
    rs = _rs()
    ps = rs.prompts
    # planted: prompts 0-1 lose both their paraphrases, prompt 2 keeps one of two, 3-9 keep their one: 13 judged
    rows = []
    for i, p in enumerate(ps):
        verdicts = [False, False] if i < 2 else [True, False] if i == 2 else [True]
        for j, ok in enumerate(verdicts):
            rows.append({"prompt_id": p.prompt_id, "variant": j, "text": f"reworded {j}", "valid": ok,
                         "p_valid": 0.9 if ok else 0.1})
    f = tmp_path / "para.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    c = variant_counts(f, rs)["validity"]
    assert (c["n_judged"], c["n_valid"], c["n_invalid"], c["n_unreadable"]) == (13, 8, 5, 0)
    assert (c["n_prompts_with_valid"], c["n_prompts_without_valid"]) == (8, 2)
    words = [sum(len(m["content"].split()) for m in p.messages if m["role"] == "user") for p in ps]
    assert c["dropped_prompts"]["median_words"] == np.median(words[:2])
    assert c["kept_prompts"]["median_words"] == np.median(words[2:])
    assert c["dropped_prompts"]["share_multi_turn"] == np.mean([not p.single_turn for p in ps[:2]])
    # the condition reads the valid paraphrases only: prompts 0 and 1 drop out
    items = paraphrase(rs, paraphrase_file=f)
    assert {it.prompt_id for it in items} == {p.prompt_id for p in ps[2:]}
    assert FileGenerator(f).n_invalid == 5 and {it.variant for it in items} == {0}
    # ... and the audit's paraphrase section carries the counts
    out = tmp_path / "audit"
    assert main(["audit", "--checkpoint", str(minilm_ckpt), "--data", SPEC, "--conditions",
                 "original,paraphrase", "--paraphrase-file", str(f), "--n-boot", "20", "--n-boot-regression", "20",
                 "--out", str(out), "--wandb-mode", "disabled", "--no-progress"]) == 0
    audit = json.loads((out / "audit.json").read_text())
    assert audit["paraphrase"]["variants"]["validity"] == c
    assert "8 of 13" in (out / "audit.md").read_text()


def test_validity_judge_reads_the_model_yes_no_probability(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    judge = tiny_causal_lm(tmp_path / "vj", [VALIDITY_TEMPLATE, VALIDITY_QUESTION, "Yes No Yes. No."] * 5,
                           vocab_size=300, max_position_embeddings=512, seed=5)
    out = tmp_path / "para.jsonl"
    assert main(["variants", "--data", SPEC, "--task", "paraphrase", "--n", "2", "--validity-judge", f"hf:{judge}",
                 "--threshold", "0.5", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    tok = AutoTokenizer.from_pretrained(judge)
    model = AutoModelForCausalLM.from_pretrained(judge).eval()
    originals = {p.prompt_id: p.last_user_text for p in _rs().prompts}
    yes = [tok.convert_tokens_to_ids(t) for t in ("Yes", "ĠYes") if t in tok.get_vocab()]
    no = [tok.convert_tokens_to_ids(t) for t in ("No", "ĠNo") if t in tok.get_vocab()]
    for r in rows[:4]:
        text = tok.apply_chat_template([{"role": "user", "content": ValidityQuestion().text(
            (originals[r["prompt_id"]], r["text"]))}], tokenize=False, add_generation_prompt=True)
        with torch.no_grad():
            z = model(input_ids=torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])).logits[0, -1].double()
        s = [torch.logsumexp(z[ids], 0).item() for ids in (yes, no)]
        assert r["p_valid"] == pytest.approx(softmax(s)[0], abs=1e-5)
        assert r["valid"] == (r["p_valid"] >= 0.5)
    summary = json.loads((tmp_path / "para.jsonl.summary.json").read_text())
    assert summary["validity"]["n_valid"] == sum(r["valid"] for r in rows)
    assert summary["validity_judge"] == f"hf:{judge}"


def _long_prompt(words: int) -> PromptRecord:
    text = " ".join(f"step{i % 37} of the long request" for i in range(words))
    return PromptRecord("long", [{"role": "user", "content": text}], [Response("r0", "an answer", {"score": 3.0})])


def test_long_requests_are_cut_to_the_generator_positions_and_counted(tmp_path):
    rs = _rs()
    texts = [m["content"] for p in rs.prompts for m in p.messages] + list(RELATED_SUBTYPES.values())
    path = tiny_causal_lm(tmp_path / "gen", texts, vocab_size=300, seed=3)  # 256 positions
    gen = HFGenerator(str(path), max_new_tokens=8, batch_size=2)
    prompts = [rs.prompts[0], _long_prompt(400)]  # the long one is far past 256 positions
    template = instruction("paraphrase")
    fitted = [gen.fit_request(template, p.last_user_text) for p in prompts]
    assert gen.n_truncated == 1 and fitted[0] == prompts[0].last_user_text
    assert prompts[1].last_user_text.startswith(fitted[1].strip()) and len(fitted[1]) < len(prompts[1].last_user_text)
    n_in = len(gen.tokenizer(gen.wrap(template.format(prompt=fitted[1])), add_special_tokens=False)["input_ids"])
    assert n_in + gen.max_new_tokens <= 256
    out = gen.generate(prompts, "paraphrase", n=2)  # would raise an index error without the cut
    assert set(out) == {prompts[0].prompt_id, "long"} and gen.n_truncated == 2


def test_the_simulated_generator_refuses_other_prompts(tmp_path):
    from rmcore.data.schema import RatingSet
    from rmcore.errors import ConfigError
    from rmeval.audit.settings import PromptVariantSettings
    from rmeval.audit.variants import write_prompt_variants

    with pytest.raises(ConfigError, match="simulated set only; prompt 'long'"):
        write_prompt_variants(RatingSet([_long_prompt(5)]), PromptVariantSettings(task="paraphrase"),
                              tmp_path / "v.jsonl")
    assert not (tmp_path / "v.jsonl").exists()


def test_a_long_original_is_cut_to_the_judge_positions_and_counted(tmp_path):
    from dataclasses import replace

    from rmcore.data.schema import RatingSet
    from rmeval.audit.settings import PromptVariantSettings
    from rmeval.audit.variants import write_prompt_variants

    judge = tiny_causal_lm(tmp_path / "vj", [VALIDITY_TEMPLATE, VALIDITY_QUESTION, "Yes No"] * 5, vocab_size=300)
    long, short = _long_prompt(400), replace(_long_prompt(3), prompt_id="short")  # 256 positions
    src = tmp_path / "written.jsonl"
    src.write_text("".join(json.dumps({"prompt_id": p.prompt_id, "variant": 0, "text": "in other words"}) + "\n"
                           for p in (long, short)))
    summary = write_prompt_variants(RatingSet([long, short]), PromptVariantSettings(
        task="paraphrase", generator=f"file:{src}", validity_judge=f"hf:{judge}"), tmp_path / "judged.jsonl")
    assert summary["n_judge_prompts_cut"] == 1 and summary["validity"]["n_judged"] == 2
    rows = [json.loads(line) for line in (tmp_path / "judged.jsonl").read_text().splitlines()]
    assert all(0 <= r["p_valid"] <= 1 for r in rows)
