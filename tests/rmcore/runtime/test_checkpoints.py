"""rmcore.runtime.checkpoints: what --checkpoint names, a local run or a Hub model."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmcore.errors import DataError


def test_hub_like_checkpoint_still_goes_to_the_hub(monkeypatch):
    import huggingface_hub

    from rmcore.runtime.checkpoints import find_checkpoints

    # the Hub is asked once whether the repository exists (no network here: it says yes)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, repo, **kw: object())
    assert find_checkpoints("Qwen/Qwen3-0.6B") == [("Qwen3-0.6B", Path("Qwen/Qwen3-0.6B"))]
    with pytest.raises(DataError, match="not found"):
        find_checkpoints("outputs/demo/bt_margin/seed1")


def test_owner_name_whose_owner_is_a_local_folder_is_a_missing_local_path(tmp_path, monkeypatch):
    from rmcore.errors import PathNotFoundError
    from rmcore.io.files import check_path, looks_local

    monkeypatch.chdir(tmp_path)
    assert not looks_local("outputs/rm") and not looks_local("Qwen/Qwen3-0.6B")  # no outputs/ here: a Hub id
    (tmp_path / "outputs").mkdir()
    assert looks_local("outputs/rm") and not looks_local("Qwen/Qwen3-0.6B")
    with pytest.raises(PathNotFoundError, match="not found"):
        check_path("outputs/rm", "reward model", kind="dir", hub_ok=True)
    assert check_path("Qwen/Qwen3-0.6B", "reward model", kind="dir", hub_ok=True) == Path("Qwen/Qwen3-0.6B")
