"""Policy responses to a rating set's prompts, on matchrm's generator backends, cached and resumable.

A policy is a model on a backend:

- ``hf``: a local path, a Hub id or a PEFT adapter directory, run by ``rmeval.backends.generators.HFGenerator``
  (batched ``generate``, left padding); an input longer than the model's positions less the token
  cap keeps its end and is counted;
- ``openai``: any OpenAI-compatible chat endpoint (OpenAI, a ``vllm serve`` or TGI server...) through
  ``rmeval.backends.generators.OpenAIGenerator``;
- ``vllm``: vLLM in the process, where it is installed (``rmeval.backends.vllm``), fed the same token
  ids as the ``hf`` backend;
- any other kind of ``rmeval.backends.spec`` that answers conversations (``generator``).

Every prompt's conversation (multi-turn kept) goes through the model's own chat template, with the
policy's ``chat_template_kwargs`` (e.g. ``enable_thinking: false`` for Qwen3); a tokenizer without
one gets the plain layout (``rmcore.models.formatting.plain_prompt``). A policy answers each prompt with
``n`` samples (``temperature``, ``top_p``, at most ``max_new_tokens`` new tokens) or greedily
(temperature 0, one response). Responses are kept as generated, without filtering; each carries its
new-token count and whether it stopped at the cap.

Caching and resumption: every response is stored in a SQLite cache (``rmcore.io.cache``) under the key
(policy fingerprint, sampling settings, conversation, sample index); the fingerprint of a local
model holds its files' sizes and times, so a retrained model is a new key. Prompts are generated in
fixed chunks of the prompt list, each seeded from the seed and its prompts' ids and committed
whole, so a rerun skips the stored chunks: an interrupted generation resumes where it stopped and
gives what an uninterrupted one would (same hardware and library versions). Nothing is loaded when
every response is cached.

Toy policies: a model ``tiny:SEED`` is a tiny causal LM built by ``rmcore.models.tiny`` (Qwen2 shape,
byte-level BPE tokenizer trained on the prompts' and responses' texts, chat template, weights from
SEED), saved once under the given build directory: CPU demos and tests, whose texts mean nothing.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from rmcore.console.progress import Progress
from rmcore.data.schema import PromptRecord
from rmcore.errors import ConfigError
from rmcore.io.cache import SqliteCache, content_key
from rmcore.models.device import Placement, dtype_name, resolve_device, resolve_dtype
from rmcore.models.tiny import PAD, tiny_causal_lm
from rmeval.backends.spec import make_backend
from rmeval.experiments.settings import TINY, PolicySpec, SamplingSettings
from rmeval.scoring.base import model_identity

RESPONSE_COLUMNS = ("text TEXT", "n_tokens INTEGER", "capped INTEGER")


def corpus(prompts: Sequence[PromptRecord]) -> list[str]:
    """The texts a toy model's tokenizer is trained on: every turn and every response."""
    return [m["content"] for p in prompts for m in p.messages] + [r.text for p in prompts for r in p.responses]


def resolve_model(model: str, *, texts: Sequence[str] | None = None, build_dir: str | os.PathLike | None = None) -> str:
    """``model`` as a loadable name: ``tiny:SEED`` is built once under ``build_dir/tiny-SEED`` from
    ``texts`` (see the module doc); ``pkg:`` models resolve to their package's path; anything else
    is returned as it is."""
    # torch: this module loads without it
    from rmcore.models.modeling import resolve_model_path

    if not model.startswith(TINY):
        return resolve_model_path(model)
    seed = int(model[len(TINY):])
    if build_dir is None or not texts:
        raise ConfigError(f"model {model}: a toy model needs texts and a directory to be built in")
    path = Path(build_dir) / f"tiny-{seed}"
    if not (path / "config.json").is_file():
        import shutil
        import tempfile

        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}."))
        # the shape of the policy demo's model (rmtrain.policy.tiny): wide initial embeddings, so the
        # untrained model is not uniform over its vocabulary
        tiny_causal_lm(tmp, list(texts), "qwen2", vocab_size=300, pad_token=PAD, seed=seed,
                       max_position_embeddings=1024, initializer_range=0.5)
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
    return str(path)


def load_generator(policy: PolicySpec, sampling: SamplingSettings, *, texts: Sequence[str] | None = None,
                   build_dir: str | os.PathLike | None = None) -> Any:
    """The generator backend of ``policy`` with ``sampling``'s settings, its model loaded (a local
    kind's where ``policy.device``/``dtype`` say)."""
    policy.validate()
    spec, placement = policy.backend_spec(), None
    if spec.backend.local:
        spec = replace(spec, value=resolve_model(policy.model, texts=texts, build_dir=build_dir))
        device = resolve_device(policy.device)
        placement = Placement(device=str(device), dtype=dtype_name(resolve_dtype(policy.dtype, device)),
                              trust_remote_code=policy.trust_remote_code)
    return make_backend("generator", spec, seed=sampling.seed, max_new_tokens=sampling.max_new_tokens,
                        temperature=sampling.temperature, top_p=None if sampling.greedy else sampling.top_p,
                        greedy=sampling.greedy, batch_size=sampling.batch_size,
                        chat_template_kwargs=policy.chat_template_kwargs, timeout=600.0, placement=placement,
                        dtype=policy.dtype, trust_remote_code=policy.trust_remote_code,
                        tensor_parallel_size=policy.tensor_parallel_size,
                        gpu_memory_utilization=policy.gpu_memory_utilization, max_model_len=policy.max_model_len)


def policy_fingerprint(policy: PolicySpec, model: str) -> str:
    """What identifies a policy's outputs: backend, the model's identity (a local model's files),
    endpoint and chat-template options."""
    return json.dumps({"backend": policy.backend, "model": model_identity(model), "base_url": policy.base_url,
                       "chat_template_kwargs": policy.chat_template_kwargs}, sort_keys=True)


def _chunk_seed(seed: int, prompt_ids: Sequence[str]) -> int:
    return zlib.crc32(("\x1f".join([str(seed), *prompt_ids])).encode())


def generate_responses(prompts: Sequence[PromptRecord], policy: PolicySpec, sampling: SamplingSettings, *,
                       cache: str | os.PathLike, build_dir: str | os.PathLike | None = None,
                       texts: Sequence[str] | None = None, progress: bool = False) -> pd.DataFrame:
    """One row per (prompt, sample): prompt_id, policy, sample, response, n_tokens, capped, n_words,
    in prompt order; ``attrs``: n_cached, n_generated, n_truncated (inputs cut to fit the model)."""
    sampling.validate()
    policy.validate()
    texts = list(texts) if texts is not None else corpus(prompts)
    local = policy.backend_spec().backend.local  # a model of this process: tiny:SEED built, pkg: resolved
    model = resolve_model(policy.model, texts=texts, build_dir=build_dir) if local else policy.model
    fp = policy_fingerprint(policy, model)
    n = sampling.n
    store = SqliteCache(cache, "responses", RESPONSE_COLUMNS)

    def keys_of(p: PromptRecord) -> list[str]:
        conv = json.dumps(p.messages, ensure_ascii=False, sort_keys=True)
        return [content_key(fp, sampling.key(), conv, str(i)) for i in range(n)]

    generator = None
    n_cached = n_generated = 0
    rows: list[dict[str, Any]] = []
    chunks = [list(prompts[i:i + sampling.chunk_prompts]) for i in range(0, len(prompts), sampling.chunk_prompts)]

    bar = Progress(f"generate {policy.name}", len(prompts), unit="prompt", enabled=progress)
    try:
        for chunk in chunks:
            keys = [keys_of(p) for p in chunk]
            found = store.get_many([k for ks in keys for k in ks])
            if not all(k in found for ks in keys for k in ks):
                if generator is None:
                    generator = load_generator(policy, sampling, texts=texts, build_dir=build_dir)
                outs = generator.sample([p.messages for p in chunk], n, sampling.max_new_tokens,
                                        seed=_chunk_seed(sampling.seed, [p.prompt_id for p in chunk]))
                new = []
                for ks, comps in zip(keys, outs):
                    if len(comps) != n:
                        raise ConfigError(f"policy {policy.name}: the backend returned {len(comps)} responses "
                                          f"for a prompt, not {n}")
                    # a key stored before (a chunk of another composition) keeps its response
                    new += [(k, c.text, c.n_tokens, int(c.capped)) for k, c in zip(ks, comps) if k not in found]
                store.put_many(new)  # the chunk is committed whole: a rerun resumes after it
                found.update({r[0]: tuple(r[1:]) for r in new})
                n_generated += len(new)
            else:
                n_cached += len(keys) * n
            for p, ks in zip(chunk, keys):
                for i, k in enumerate(ks):
                    text, n_tok, capped = found[k]
                    rows.append({"prompt_id": p.prompt_id, "policy": policy.name, "sample": i, "response": text,
                                 "n_tokens": n_tok, "capped": bool(capped), "n_words": len(text.split())})
            bar.update(len(chunk))
    finally:
        bar.close()
        store.close()
    n_truncated = int(getattr(generator, "n_truncated", 0))
    if generator is not None and hasattr(generator, "close"):
        generator.close()
    out = pd.DataFrame(rows, columns=["prompt_id", "policy", "sample", "response", "n_tokens", "capped", "n_words"])
    out.attrs.update(n_cached=n_cached, n_generated=n_generated, n_truncated=n_truncated)
    return out
