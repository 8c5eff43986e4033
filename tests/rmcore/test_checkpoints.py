"""rmcore.checkpoints: what --checkpoint names, a local run or a Hub model."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmcore.errors import DataError


def test_hub_like_checkpoint_still_goes_to_the_hub(monkeypatch):
    import huggingface_hub

    from rmcore.checkpoints import find_checkpoints

    # the Hub is asked once whether the repository exists (no network here: it says yes)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, repo, **kw: object())
    assert find_checkpoints("Qwen/Qwen3-0.6B") == [("Qwen3-0.6B", Path("Qwen/Qwen3-0.6B"))]
    with pytest.raises(DataError, match="not found"):
        find_checkpoints("outputs/demo/bt_margin/seed1")
