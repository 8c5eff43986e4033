"""rmcore.models.device: auto picks what the machine has, an unavailable device is an error (never a
silent CPU fall-back), and dtypes follow the stated rule. GPU presence is simulated by
monkeypatching torch.cuda, so these run on any machine."""

from __future__ import annotations

import pytest
import torch

from rmcore.errors import ConfigError
from rmcore.models.device import Placement, describe, input_device, resolve_device, resolve_dtype


def _fake_gpus(monkeypatch: pytest.MonkeyPatch, n: int, bf16: bool = True) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: bf16)


def test_auto_is_the_cpu_in_float32_without_a_gpu(monkeypatch):
    _fake_gpus(monkeypatch, 0)
    dev = resolve_device("auto")
    assert dev == torch.device("cpu")
    assert resolve_dtype("auto", dev) is torch.float32


@pytest.mark.parametrize("name", ["cuda", "cuda:0", "cuda:3"])
def test_asking_for_a_missing_gpu_is_an_error(monkeypatch, name):
    _fake_gpus(monkeypatch, 0)
    with pytest.raises(ConfigError, match="no CUDA GPU"):
        resolve_device(name)


def test_auto_takes_the_local_rank_gpu_in_bfloat16(monkeypatch):
    _fake_gpus(monkeypatch, 4)
    monkeypatch.setenv("LOCAL_RANK", "2")
    dev = resolve_device("auto")
    assert dev == torch.device("cuda", 2)
    assert resolve_dtype("auto", dev) is torch.bfloat16
    _fake_gpus(monkeypatch, 4, bf16=False)  # pre-Ampere: float16
    assert resolve_dtype("auto", dev) is torch.float16


def test_a_gpu_index_past_the_last_is_an_error(monkeypatch):
    _fake_gpus(monkeypatch, 2)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ConfigError, match="has 2 CUDA GPU"):
        resolve_device("cuda:2")


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "tpu", ""])
def test_a_malformed_device_name_is_an_error(name):
    with pytest.raises(ConfigError, match="device must be"):
        resolve_device(name)


def test_explicit_dtypes_are_taken_as_given_and_bad_ones_refused():
    cpu = torch.device("cpu")
    assert resolve_dtype("bfloat16", cpu) is torch.bfloat16
    assert resolve_dtype("float16", cpu) is torch.float16
    with pytest.raises(ConfigError, match="dtype must be"):
        resolve_dtype("fp8", cpu)
    with pytest.raises(ConfigError, match="dtype must be"):
        Placement(dtype="half").validate()
    with pytest.raises(ConfigError, match="device_map"):
        Placement(device_map="balanced").validate()


def test_describe_reports_device_dtype_and_kernel():
    model = torch.nn.Linear(2, 1).to(torch.bfloat16)
    model.config = type("C", (), {"_attn_implementation": "sdpa"})()
    assert describe(model) == {"device": "cpu", "dtype": "bfloat16", "attn_implementation": "sdpa"}


# -- Placement as loaders use it: from_pretrained keyword arguments, moving a model, the device map's
# rules, and where a model's inputs go (GPUs simulated: torch.cuda patched)

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
