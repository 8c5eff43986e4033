"""rmcore.models.modeling: the longest input a model reads, from its position embeddings and its tokenizer."""

from __future__ import annotations

import pytest


@pytest.mark.usefixtures("one_torch_thread")
def test_model_limit_from_position_embeddings_and_tokenizer(demo_ckpt):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rmcore.models.modeling import model_max_length, resolve_max_length

    model = AutoModelForSequenceClassification.from_pretrained(demo_ckpt)
    tok = AutoTokenizer.from_pretrained(demo_ckpt)
    assert model.config.max_position_embeddings == 512
    assert model_max_length(model, tok) == 512
    assert resolve_max_length(None, model, tok) == 512
    assert resolve_max_length(4096, model, tok) == 512  # never past what the model can read
    assert resolve_max_length(128, model, tok) == 128
