"""What a reproduction needs from the Hugging Face Hub besides the weights: licences and tokens, and
which Hub ids are pinned, unpinned or guessed.

A model is gated (its licence must be accepted on its Hub page, and the download needs a token:
``HF_TOKEN`` or the one ``hf auth login`` stores) when its model entry says ``gated: true``; else
when the Hub says so (``huggingface_hub.model_info(id).gated``: False, "auto" or "manual"), asked
only where the Hub is reachable (not with ``HF_HUB_OFFLINE``; one failed call stops the asking);
else when its id is in ``KNOWN_GATED``, kept by hand from the Hub pages of the owners whose models
the recipes load (``gated: false`` in a model entry overrides it).

A real run stops before anything is written (one line, exit 2) when a gated model of the rows it
runs is not in the local Hub cache and no token is set (``check_access``).

A Hub id is *unpinned* without ``revision`` (the run loads the repository's current revision: the
papers name no revision: What Pairwise Evaluation Misses' inventory table, which listed them, was
lost in the text extraction, and Reward Auditor's scripts name local folders), and *guessed* when
the model entry says why in ``guessed`` (the paper names the model, not its repository)."""

from __future__ import annotations

import functools
import os
from typing import Any

from rmcore.errors import ConfigError

# (Hub id prefix, the licence it gates on); checked against the owners' Hub pages
KNOWN_GATED = (
    ("meta-llama/", "Meta's Llama community licence"),
    ("google/gemma-", "Google's Gemma terms of use"),
    ("mistralai/", "Mistral AI's terms (contact details shared)"),
)


def listed_gated(hub_id: str) -> str | None:
    return next((why for prefix, why in KNOWN_GATED if hub_id.startswith(prefix)), None)


def hub_offline() -> bool:
    return any(os.environ.get(v, "0") not in ("0", "", "false", "False")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def downloaded_ids(m: Any, *, served_externally: bool = False) -> list[str]:
    """The Hub ids a row downloads: its model (unless the study's own or served elsewhere) and a
    DPO model's reference."""
    if m.not_reproducible or m.local or served_externally:
        return []
    ids = [m.hub_id]
    if m.kind == "dpo_implicit" and m.reference and str(m.reference).lower() != "none":
        ids.append(str(m.reference))
    return ids


def gated_models(models: list[Any], *, ask_hub: bool | None = None,
                 external: set[str] = frozenset()) -> dict[str, str]:
    """{Hub id: why it is gated} over the ids ``models`` download (module docstring)."""
    ask = (not hub_offline()) if ask_hub is None else ask_hub
    out: dict[str, str] = {}
    for m in models:
        for hub_id in downloaded_ids(m, served_externally=m.name in external):
            if hub_id in out:
                continue
            said = m.gated if hub_id == m.hub_id else None
            if said is not None:
                if said:
                    out[hub_id] = "the recipe: gated"
                continue
            answer = _hub_gated(hub_id) if ask else None
            if answer is None:
                ask = False  # the Hub cannot say (unreachable): the list from here on
                why = listed_gated(hub_id)
                if why:
                    out[hub_id] = f"{why} (known gated owner)"
            elif answer:
                out[hub_id] = f"the Hub: gated ({answer})"
    return out


@functools.cache
def _hub_gated(hub_id: str) -> str | bool | None:
    """The Hub's ``gated`` field of ``hub_id`` (False, "auto", "manual"); None when it cannot say."""
    try:
        from huggingface_hub import HfApi

        return HfApi().model_info(hub_id, timeout=5).gated or False
    except Exception:  # the network, a missing repository: the list decides
        return None


def has_token() -> bool:
    try:
        from huggingface_hub import get_token

        return bool(get_token())
    except ImportError:
        return bool(os.environ.get("HF_TOKEN"))


def in_cache(hub_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(hub_id, "config.json"), str)
    except Exception:
        return False


def check_access(models: list[Any], *, external: set[str] = frozenset()) -> None:
    """A one-line ConfigError when a gated model to download has no token to download it with."""
    gated = {k: v for k, v in gated_models(models, external=external).items() if not in_cache(k)}
    if not gated or has_token():
        return
    first = next(iter(gated))
    more = f" (and {len(gated) - 1} more: {', '.join(list(gated)[1:])})" if len(gated) > 1 else ""
    raise ConfigError(f"{first}{more} is gated ({gated[first]}): accept its licence at https://huggingface.co/"
                      f"{first} and set HF_TOKEN (or run `hf auth login`); nothing was written")


def pinning(models: list[Any]) -> dict[str, list[str]]:
    """{unpinned: [...], guessed: ["id: why", ...]} over the models that run."""
    run = [m for m in models if not m.not_reproducible and not m.local]
    return {"unpinned": [m.hub_id for m in run if not m.revision],
            "guessed": [f"{m.hub_id}: {m.guessed}" for m in run if m.guessed]}
