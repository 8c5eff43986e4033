"""Fixtures every test folder may use: one torch thread, and the real data in ../shared/data."""

from __future__ import annotations

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
