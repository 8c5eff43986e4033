"""rmcore.device.Placement as loaders use it: from_pretrained keyword arguments, moving a model,
the device map's rules, and where a model's inputs go. GPUs are simulated (torch.cuda patched)."""

from __future__ import annotations

import pytest
import torch

from rmcore.device import Placement, input_device
from rmcore.errors import ConfigError
from tests.test_device import _fake_gpus


def test_load_kwargs_follow_the_placement(monkeypatch):
    _fake_gpus(monkeypatch, 0)
    assert Placement().load_kwargs() == {"dtype": torch.float32, "trust_remote_code": False}
    p = Placement(dtype="bfloat16", attn_implementation="eager", trust_remote_code=True)
    assert p.load_kwargs() == {"dtype": torch.bfloat16, "trust_remote_code": True, "attn_implementation": "eager"}
    assert p.dtype_name == "bfloat16" and Placement().dtype_name == "float32"
    _fake_gpus(monkeypatch, 2)
    assert Placement(device_map="auto").load_kwargs() == {"dtype": torch.bfloat16, "trust_remote_code": False,
                                                          "device_map": "auto"}


def test_device_map_needs_gpus_and_no_named_device(monkeypatch):
    _fake_gpus(monkeypatch, 0)
    with pytest.raises(ConfigError, match="torch sees none"):
        Placement(device_map="auto").resolve()
    _fake_gpus(monkeypatch, 2)
    with pytest.raises(ConfigError, match="cannot be combined with device cpu"):
        Placement(device="cpu", device_map="auto").validate()


def test_place_moves_and_evaluates_unless_device_mapped(monkeypatch):
    _fake_gpus(monkeypatch, 0)
    model = torch.nn.Linear(2, 1).train()
    placed = Placement(device="cpu").place(model)
    assert placed is model and not model.training
    with pytest.raises(ConfigError, match="no CUDA GPU"):
        Placement(device="cuda").place(torch.nn.Linear(2, 1))


def test_input_device_is_the_input_embeddings():
    class Two(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head = torch.nn.Linear(2, 1)
            self.emb = torch.nn.Embedding(5, 2).to("meta")

        def get_input_embeddings(self) -> torch.nn.Module:
            return self.emb

    assert input_device(Two()) == torch.device("meta")  # not the first parameter's device
    assert input_device(torch.nn.Linear(2, 1)) == torch.device("cpu")
