"""On a CUDA GPU (skipped without one; `pytest -m gpu`, run by scripts/gpu_check.sh): `auto` puts
evaluation models on the GPU in bfloat16 and the scores stay close to float32 on the CPU; a device
map gives the same scores as one device; the judge and DPO scorers follow the same placement."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rmcore.models.device import Placement
from rmcore.models.tiny import CHAT_TEMPLATE, EOS, PAD, tiny_causal_lm, tiny_model, train_tokenizer

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

TEXTS = ["how do I boil an egg", "put it in water for nine minutes", "no idea at all", "the sky is blue",
         "Rayleigh scattering of sunlight by the air", "a longer answer with several clauses, and a list"] * 4
ITEMS = [([{"role": "user", "content": TEXTS[i]}], TEXTS[(i + 1) % 6] + " " * (i % 3) + TEXTS[(i + 2) % 6])
         for i in range(24)]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu-rm")
    tok = train_tokenizer(TEXTS, 300, chat_template=CHAT_TEMPLATE, eos_token=EOS, pad_token=PAD)
    tiny_model(tok, "qwen2", head="classifier", num_labels=1, hidden_size=64, intermediate_size=128,
               max_position_embeddings=256).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_auto_is_the_gpu_in_bfloat16_close_to_float32(classifier):
    from rmeval.scoring.seq_classifier import SeqClassifierScorer

    gpu = SeqClassifierScorer(classifier, max_length=128)
    assert gpu.describe()["device"].startswith("cuda") and gpu.describe()["dtype"] in ("bfloat16", "float16")
    cpu = SeqClassifierScorer(classifier, max_length=128, placement=Placement(device="cpu", dtype="float32"))
    a, b = gpu.score(ITEMS), cpu.score(ITEMS)
    assert np.max(np.abs(a - b)) < 0.05 * np.std(b)


def test_device_map_scores_like_one_device(classifier):
    from rmeval.scoring.seq_classifier import SeqClassifierScorer

    one = SeqClassifierScorer(classifier, max_length=128, placement=Placement(device="cuda:0", dtype="float32"))
    spread = SeqClassifierScorer(classifier, max_length=128, placement=Placement(dtype="float32", device_map="auto"))
    np.testing.assert_allclose(spread.score(ITEMS), one.score(ITEMS), atol=1e-4)


def test_judge_and_dpo_scorers_follow_the_placement(tmp_path):
    from rmeval.scoring.dpo import DPOImplicitScorer
    from rmeval.scoring.judge import GenerativeJudgeScorer

    lm = tiny_causal_lm(tmp_path / "lm", TEXTS)
    for scorer_cls, kwargs in ((GenerativeJudgeScorer, {"model": lm}), (DPOImplicitScorer, {"policy": lm,
                                                                                               "reference": lm})):
        gpu = scorer_cls(**kwargs, placement=Placement(device="cuda", dtype="float32"))
        cpu = scorer_cls(**kwargs, placement=Placement(device="cpu", dtype="float32"))
        assert gpu.describe()["device"].startswith("cuda") and cpu.describe()["device"] == "cpu"
        np.testing.assert_allclose(gpu.score(ITEMS), cpu.score(ITEMS), atol=1e-3)
