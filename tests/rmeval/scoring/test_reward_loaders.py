"""Released reward-model shapes, each built here as a tiny model of that shape, scored through
`rmeval pairwise` and checked against the reward computed by hand from the model's own weights:
a multi-head classifier (--reward-head), a remote-code model saved with its code (ArmoRM-style
gated attribute rewards; --trust-remote-code), and decoder backbones with a value head saved
beside them (UltraRM, Starling, OpenRLHF layouts: the value_head loader, with a named model's chat
template). Also: what is not a reward model is refused with one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from rmcore.models.formatting import encode_example
from rmcore.models.tiny import EOS, PAD, tiny_causal_lm, tiny_model, train_tokenizer
from rmcore.models.tiny_rewards import save_gated_remote_code, save_value_head
from rmeval.cli import main

TEXTS = ["how do I boil an egg", "put it in water for nine minutes", "no idea", "The sky is blue because of "
         "Rayleigh scattering.", "Paris is the capital of France.", "I refuse to answer that question.",
         "Here is a detailed, step by step answer with code."] * 3


def _tokenizer(chat: bool = True):
    from rmcore.models.tiny import CHAT_TEMPLATE

    return train_tokenizer(TEXTS, 300, chat_template=CHAT_TEMPLATE if chat else None, eos_token=EOS, pad_token=PAD)


def _rewardbench_file(path: Path) -> Path:
    """Three RewardBench (v1) rows in the released schema."""
    rows = [{"id": i, "prompt": p, "chosen": c, "rejected": r, "subset": s, "chosen_model": "a", "rejected_model": "b"}
            for i, (p, c, r, s) in enumerate([
                ("how do I boil an egg", "put it in water for nine minutes", "no idea", "alpacaeval-easy"),
                ("why is the sky blue", "The sky is blue because of Rayleigh scattering.", "no idea", "llmbar-natural"),
                ("capital of France?", "Paris is the capital of France.", "I refuse to answer that question.",
                 "refusals-dangerous")])]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _pairwise(ckpt: Path, data: Path, out: Path, *extra: str) -> int:
    return main(["pairwise", "--checkpoint", str(ckpt), "--data", f"rewardbench:{data}", "--out", str(out),
                 "--max-length", "64", "--n-boot", "50", "--wandb-mode", "disabled", *extra])


def _scores(out: Path) -> dict[str, float]:
    df = pd.read_parquet(out / "scores.parquet")
    return dict(zip(df["response_id"], df["score"]))


def _items(data: Path) -> dict[str, tuple[list, str]]:
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    out = {}
    for r in rows:
        msgs = [{"role": "user", "content": r["prompt"]}]
        out[f"rb-{r['id']}:chosen"], out[f"rb-{r['id']}:rejected"] = (msgs, r["chosen"]), (msgs, r["rejected"])
    return out


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


# -- a multi-output classifier ------------------------------------------------------------------------

def test_multi_head_classifier_needs_and_reads_its_reward_head(tmp_path, capsys):
    tok = _tokenizer()
    model = tiny_model(tok, "llama", head="classifier", num_labels=3, max_position_embeddings=128,
                       id2label={0: "helpfulness", 1: "safety", 2: "verbosity"},
                       label2id={"helpfulness": 0, "safety": 1, "verbosity": 2})
    ckpt = tmp_path / "multi"
    model.save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    data = _rewardbench_file(tmp_path / "rb.jsonl")
    capsys.readouterr()  # the saving's progress bars
    assert _pairwise(ckpt, data, tmp_path / "none") == 2
    line = _one_error_line(capsys)
    assert "has 3 outputs" in line and "--reward-head" in line

    assert _pairwise(ckpt, data, tmp_path / "safety", "--reward-head", "safety") == 0
    by_name = _scores(tmp_path / "safety")
    assert _pairwise(ckpt, data, tmp_path / "one", "--reward-head", "1") == 0
    assert _scores(tmp_path / "one") == pytest.approx(by_name, abs=1e-6)
    # by hand: the plain transformers forward's logit 1 at the same token ids
    model.eval()
    for rid, (msgs, resp) in _items(data).items():
        enc = encode_example(tok, msgs, resp, 64)
        with torch.no_grad():
            ref = model(input_ids=torch.tensor([enc.input_ids])).logits[0, 1].item()
        assert by_name[rid] == pytest.approx(ref, abs=1e-5)
    meta = json.loads((tmp_path / "safety" / "pairwise.json").read_text())["meta"]
    assert meta["placement"]["loader"] == "classifier" and meta["placement"]["reward_head"] == "safety"
    assert meta["placement"]["device"] == "cpu" and meta["placement"]["dtype"] == "float32"


def test_prefix_scoring_reads_the_chosen_head(tmp_path):
    """The shared-prompt path of a decoder classifier reads the same column as the plain path."""
    from rmeval.scoring.seq_classifier import SeqClassifierScorer

    tok = _tokenizer()
    model = tiny_model(tok, "qwen2", head="classifier", num_labels=2, max_position_embeddings=128)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    msgs = [{"role": "user", "content": "how do I boil an egg, please tell me in detail now"}]
    items = [(msgs, t) for t in TEXTS[:6]]
    shared = SeqClassifierScorer(tmp_path, reward_head="1", max_length=128).score(items)
    plain = SeqClassifierScorer(tmp_path, reward_head="1", max_length=128, shared_prompt=False).score(items)
    head0 = SeqClassifierScorer(tmp_path, reward_head="0", max_length=128).score(items)
    np.testing.assert_allclose(shared, plain, atol=1e-5)
    assert np.max(np.abs(shared - head0)) > 1e-3


# -- a model shipping its own code --------------------------------------------------------------------

def _save_remote_code_model(path: Path):
    tok = _tokenizer()
    return save_gated_remote_code(path, tok), tok


def test_remote_code_model_needs_trust_and_reads_its_gated_score(tmp_path, capsys):
    ckpt = tmp_path / "gated"
    model, tok = _save_remote_code_model(ckpt)
    cfg = json.loads((ckpt / "config.json").read_text())
    assert "AutoModelForSequenceClassification" in cfg["auto_map"] and (ckpt / "modeling_gated_rm.py").is_file()
    data = _rewardbench_file(tmp_path / "rb.jsonl")
    capsys.readouterr()  # the saving's progress bars
    assert _pairwise(ckpt, data, tmp_path / "refused") == 2
    line = _one_error_line(capsys)
    assert "ships its own modelling code" in line and "--trust-remote-code" in line

    assert _pairwise(ckpt, data, tmp_path / "score", "--trust-remote-code") == 0
    assert _pairwise(ckpt, data, tmp_path / "attr2", "--trust-remote-code", "--reward-head", "2") == 0
    got, attr2 = _scores(tmp_path / "score"), _scores(tmp_path / "attr2")
    sd = model.state_dict()
    w, g, gb = sd["regression_layer.weight"], sd["gating.weight"], sd["gating.bias"]
    for rid, (msgs, resp) in _items(data).items():
        ids = encode_example(tok, msgs, resp, 64).input_ids
        with torch.no_grad():  # by hand: the gated mixture of attribute rewards at the last token
            x = model.model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1]
        rewards = w @ x
        mix = torch.softmax(g @ x + gb, dim=0)
        assert got[rid] == pytest.approx(float((rewards * mix).sum()), abs=1e-5)
        assert attr2[rid] == pytest.approx(float(rewards[2]), abs=1e-5)
    meta = json.loads((tmp_path / "score" / "pairwise.json").read_text())["meta"]["placement"]
    assert meta["loader"] == "remote_code" and meta["reward_head"] is None


# -- a backbone with a value head beside it -------------------------------------------------------------

@pytest.mark.parametrize("layout", ["ultrarm", "starling", "openrlhf"])
def test_value_head_checkpoints_score_at_the_last_token(tmp_path, layout):

    tok = _tokenizer(chat=layout != "ultrarm")
    ckpt = tmp_path / ("UltraRM-13b" if layout == "ultrarm" else f"{layout}-rm")
    mean, std = (0.5, 2.0) if layout == "openrlhf" else (0.0, 1.0)
    backbone, head = save_value_head(ckpt, tok, layout=layout, normalize=(mean, std) if layout == "openrlhf" else None)
    data = _rewardbench_file(tmp_path / "rb.jsonl")
    assert _pairwise(ckpt, data, tmp_path / "out") == 0
    got = _scores(tmp_path / "out")
    for rid, (msgs, resp) in _items(data).items():
        if layout == "ultrarm":  # the named model's chat template: every turn then a blank line
            text = f"User: {msgs[0]['content']}\n\nAssistant: {resp}\n\n"
            ids = tok(text, add_special_tokens=False)["input_ids"][-64:]
        else:
            ids = encode_example(tok, msgs, resp, 64).input_ids
        with torch.no_grad():
            h = backbone(input_ids=torch.tensor([ids])).last_hidden_state[0, -1]
        assert got[rid] == pytest.approx((float(head[0] @ h) - mean) / std, abs=1e-5)
    meta = json.loads((tmp_path / "out" / "pairwise.json").read_text())["meta"]["placement"]
    assert meta["loader"] == "value_head"
    assert meta.get("known_model") == ("ultrarm" if layout == "ultrarm" else None)


# -- what is not a reward model ---------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["pairwise", "suitability"])
def test_a_causal_lm_is_refused_with_one_line(tmp_path, capsys, command):
    ckpt = tiny_causal_lm(tmp_path / "lm", TEXTS)
    data = _rewardbench_file(tmp_path / "rb.jsonl")
    extra = ["--perturbations", "EF", "--n-permutations", "100"] if command == "suitability" else ["--n-boot", "50"]
    capsys.readouterr()  # the saving's progress bars
    rc = main([command, "--checkpoint", str(ckpt), "--data", f"rewardbench:{data}", "--out", str(tmp_path / "o"),
               "--wandb-mode", "disabled", *extra])
    assert rc == 2
    line = _one_error_line(capsys)
    assert "is not a reward model" in line and "causal LM" in line
    assert "--scorer generative_judge" in line and "dpo_implicit" in line and "--loader" in line
    assert not (tmp_path / "o" / "scores.parquet").exists()


def test_a_classifier_without_its_head_weights_is_refused(tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    tok = _tokenizer()
    tiny_model(tok, "qwen2", head="classifier", num_labels=1, max_position_embeddings=128).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    weights = load_file(str(tmp_path / "model.safetensors"))
    save_file({k: v for k, v in weights.items() if not k.startswith("score.")}, str(tmp_path / "model.safetensors"))
    data = _rewardbench_file(tmp_path / "rb.jsonl")
    capsys.readouterr()  # the saving's progress bars
    assert _pairwise(tmp_path, data, tmp_path / "o") == 2
    line = _one_error_line(capsys)
    assert "is not a reward model" in line and "score.weight" in line


def test_training_still_loads_a_base_model_with_a_fresh_head(tmp_path):
    """Only evaluation refuses a fresh head: `rmtrain train` starts from one."""
    from rmcore.models.modeling import load_reward_model

    ckpt = tiny_causal_lm(tmp_path / "lm", TEXTS)
    model, _ = load_reward_model(ckpt, for_training=True)
    assert model.config.num_labels == 1 and hasattr(model, "score")


def test_an_unknown_loader_or_head_is_one_line(tmp_path, capsys, minilm_ckpt):
    data = _rewardbench_file(tmp_path / "rb.jsonl")
    capsys.readouterr()
    assert _pairwise(minilm_ckpt, data, tmp_path / "a", "--loader", "nope") == 2
    assert "--loader nope: unknown; known:" in _one_error_line(capsys)
    assert _pairwise(minilm_ckpt, data, tmp_path / "b", "--reward-head", "5") == 2
    assert "--reward-head 5" in _one_error_line(capsys)
    assert main(["pairwise", "--checkpoint", str(minilm_ckpt), "--data", f"rewardbench:{data}", "--out",
                 str(tmp_path / "c"), "--scorer", "generative_judge", "--reward-head", "1"]) == 2
    assert "--reward-head and --loader" in _one_error_line(capsys)
