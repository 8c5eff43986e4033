"""Where a model runs and in which precision, decided once for every command that loads one.

``device``: ``auto`` is the GPU where torch sees one (``cuda:LOCAL_RANK`` under a multi-process
launcher, so each process takes its own), else the CPU; ``cpu``, ``cuda`` and ``cuda:N`` ask for
that device, and one that is not there is an error, never a silent fall-back to the CPU (a 1.7B
audit must not crawl on a node's CPU unnoticed). ``mps`` is accepted where torch has it.

``dtype``: ``auto`` is bfloat16 on a GPU that computes in it (compute capability 8.0 and later),
float16 on an older GPU, and float32 on the CPU, where half precision is slow and bfloat16 rounding
is not needed; ``float32``, ``bfloat16`` and ``float16`` are taken as given.

``device_map``: ``auto`` spreads one model over every visible GPU (accelerate's big-model
inference) for a model larger than one GPU; the model then decides where its inputs go (its first
layer's device, ``input_device``). It needs CUDA GPUs, so it is an error without them, and it
cannot be combined with one named device (``--device cpu`` or ``cuda:N``).

Every command that loads a model for evaluation builds one ``Placement`` (from its flags, which
its fields declare, listed under ``PLACEMENT_GROUP`` in a command's help, or a recipe's keys of
the same names), passes
``Placement.load_kwargs()`` to ``from_pretrained`` and ``Placement.place`` the loaded model, and
records ``describe(model)`` in its report.

torch is imported inside the functions that use it: every command's flags include the placement's
fields, so its ``--help`` reads this module and must not load torch."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmcore.errors import ConfigError
from rmcore.settings.fields import option

if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda", "cuda:N", "mps")
DTYPES = ("auto", "float32", "bfloat16", "float16")
PLACEMENT_GROUP = "where the model runs"  # the argument group of the placement flags in --help
_TORCH_DTYPES = ("float32", "bfloat16", "float16")  # torch's names of the dtypes asked for by name


@dataclass
class Placement:
    """How a model is loaded: device, precision, attention kernel, remote code, device map."""

    device: str = option("auto", metavar="auto|cpu|cuda|cuda:N",
                         help="default auto: this process's GPU where there is one, else the CPU; a device that is "
                              "not there is an error")
    dtype: str = option("auto", choices=DTYPES, help="default auto: bfloat16 on a GPU that computes in it, float16 "
                                                     "on an older one, float32 on the CPU")
    # None: transformers' default (sdpa where supported)
    attn_implementation: str | None = option(None, metavar="KERNEL", help="attention kernel: eager, sdpa, "
                                             "flash_attention_2 ... (default: transformers' choice)")
    trust_remote_code: bool = option(False, help="run the modelling code a checkpoint ships (models whose config "
                                                 "has auto_map)")
    # "auto": one model across every visible GPU
    device_map: str | None = option(None, choices=["auto"], help="auto: spread one model over every visible GPU (a "
                                                                 "model larger than one GPU)")

    def validate(self) -> None:
        check_device_name(self.device)
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, got '{self.dtype}'")
        if self.device_map not in (None, "auto"):
            raise ConfigError(f"device_map must be auto or unset, got '{self.device_map}'")
        if self.device_map and self.device not in ("auto", "cuda"):
            raise ConfigError(f"device_map auto spreads the model over every visible GPU; it cannot be combined "
                              f"with device {self.device} (use device auto)")

    def resolve(self) -> tuple[torch.device, torch.dtype]:
        """(device, dtype) this placement means on this machine; an unavailable device is an error.
        With ``device_map`` the device is the first GPU (where the inputs of most models go)."""
        import torch  # torch: --help stays cheap

        self.validate()
        if self.device_map and not torch.cuda.is_available():
            raise ConfigError("device_map auto spreads a model over the CUDA GPUs, but torch sees none on this "
                              f"machine (torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); "
                              "leave --device-map unset")
        device = resolve_device("cuda" if self.device_map else self.device)
        return device, resolve_dtype(self.dtype, device)

    @property
    def dtype_name(self) -> str:
        """The dtype actually used, as a name ("float32" for auto on the CPU): part of a scorer's identity."""
        return dtype_name(self.resolve()[1])

    def load_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``from_pretrained`` for this placement (dtype, attention kernel,
        remote code, device map); the model is then moved by ``place``."""
        _, dtype = self.resolve()
        kwargs: dict[str, Any] = {"dtype": dtype, "trust_remote_code": self.trust_remote_code}
        if self.attn_implementation:
            kwargs["attn_implementation"] = self.attn_implementation
        if self.device_map:
            kwargs["device_map"] = self.device_map
        return kwargs

    def place(self, model: Any) -> Any:
        """``model`` on this placement's device (a model loaded with a device map stays where it was
        put), in eval mode."""
        device, _ = self.resolve()
        if not self.device_map:
            model.to(device)
        return model.eval()


def check_device_name(name: str) -> None:
    if name in ("auto", "cpu", "cuda", "mps"):
        return
    head, _, index = name.partition(":")
    if head != "cuda" or not index.isdigit():
        raise ConfigError(f"device must be auto, cpu, cuda, cuda:N or mps, got '{name}'")


def resolve_device(name: str = "auto") -> torch.device:
    """The torch device for ``name`` (see the module docstring); an unavailable one is an error."""
    import torch  # torch: --help stays cheap

    check_device_name(name)
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        return torch.device("cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "mps":
        if not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
            raise ConfigError("device mps is not available on this machine")
        return torch.device("mps")
    if not torch.cuda.is_available():
        raise ConfigError(f"device {name} asked for, but torch sees no CUDA GPU on this machine "
                          f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); use --device cpu")
    dev = torch.device(name) if ":" in name else torch.device("cuda", torch.cuda.current_device())
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError(f"device {name} asked for, but this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    return dev


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """The torch dtype for ``name`` on ``device`` (``auto``: see the module docstring)."""
    import torch  # torch: --help stays cheap

    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if name not in _TORCH_DTYPES:
        raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, got '{name}'")
    return getattr(torch, name)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def input_device(model: Any) -> torch.device:
    """Where a model's inputs go: its input embeddings' device (the first of several under a device
    map), else its first parameter's."""
    import torch  # torch: --help stays cheap

    get = getattr(model, "get_input_embeddings", None)
    emb = get() if callable(get) else None
    weight = getattr(emb, "weight", None)
    if isinstance(weight, torch.Tensor):
        return weight.device
    return next(model.parameters()).device


def describe(model: Any) -> dict[str, Any]:
    """Where a loaded model runs, as recorded in reports: device(s), dtype, attention kernel."""
    params = list(model.parameters())
    devices = sorted({str(p.device) for p in params})
    cfg = getattr(model, "config", None)
    return {"device": devices[0] if len(devices) == 1 else devices,
            "dtype": dtype_name(params[0].dtype) if params else None,
            "attn_implementation": getattr(cfg, "_attn_implementation", None)}
