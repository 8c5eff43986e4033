"""A reward model as a service: matchrm's scorer behind OpenRLHF's remote reward-model protocol.

``POST /get_reward`` with ``{"query": [...], "prompts": [...], "labels": [...]}`` answers
``{"rewards": [...], "scores": [...]}`` (OpenRLHF 0.11, ``openrlhf/utils/agent.py``). OpenRLHF sends
``query`` = the decoded prompt + response tokens (special tokens kept) and ``prompts`` = the prompt
text as the policy saw it, so the response is ``query[len(prompt):]`` with trailing end-of-turn
markers removed. ``labels`` carries what the dataset's ``--data.label_key`` column holds; the prompt
files ``rmtrain policy`` writes put there the conversation the reward model should score against
(JSON list of messages, without the rollout's style instruction). An empty label falls back to the
prompt text as one user turn.

Scoring is ``SeqClassifierScorer``: the same text layout (``rmcore.formatting``) and forward pass
as ``rmeval audit`` and training, so a served reward equals the audited score of the same texts.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rmcore.errors import ConfigError
from rmeval.scoring.seq_classifier import SeqClassifierScorer

log = logging.getLogger(__name__)

# End-of-turn markers OpenRLHF leaves in ``query`` (it decodes with skip_special_tokens=False).
END_MARKERS = ("<|eot_id|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>", "</s>", "<eos>", "<end_of_turn>")


def check_reward_checkpoint(path: str | os.PathLike) -> None:
    """A reward model must be a sequence classifier with one label; say what to do otherwise."""
    from transformers import AutoConfig

    from rmcore.modeling import resolve_model_path

    name = resolve_model_path(str(path))
    try:
        cfg = AutoConfig.from_pretrained(name)
    except (OSError, ValueError) as e:
        raise ConfigError(f"reward model {path}: cannot read its config.json ({e}); pass a checkpoint written "
                          "by `rmtrain train` or any AutoModelForSequenceClassification with one label") from None
    archs = list(getattr(cfg, "architectures", None) or [])
    n = getattr(cfg, "num_labels", None)
    if not any(a.endswith("ForSequenceClassification") for a in archs) or n != 1:
        raise ConfigError(f"reward model {path} is not a one-label sequence classifier (architectures={archs}, "
                          f"num_labels={n}); pass a checkpoint written by `rmtrain train` or any "
                          "AutoModelForSequenceClassification with num_labels=1")


def split_query(query: str, prompt: str, end_markers: tuple[str, ...] = END_MARKERS) -> str:
    """The response part of an OpenRLHF query (prompt + response as decoded text)."""
    if not query.startswith(prompt):
        raise ValueError("query does not start with its prompt")
    response = query[len(prompt):]
    changed = True
    while changed:  # a response may end in several markers (e.g. <|eot_id|><|end_of_text|>)
        changed = False
        stripped = response.rstrip()
        for m in end_markers:
            if stripped.endswith(m):
                response, changed = stripped[: -len(m)], True
    return response.strip()


def label_messages(label: Any, prompt: str) -> list[dict[str, str]]:
    if isinstance(label, list):
        return label
    if isinstance(label, str) and label.strip():
        try:
            msgs = json.loads(label)
        except json.JSONDecodeError:
            raise ValueError("label is not a JSON list of messages") from None
        if isinstance(msgs, list) and all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs):
            return msgs
        raise ValueError("label must be a JSON list of {role, content} messages")
    return [{"role": "user", "content": prompt}]


class RewardService:
    """Rewards for OpenRLHF-style requests from one scorer (thread-safe: one request scores at a time)."""

    def __init__(self, scorer: SeqClassifierScorer, end_markers: tuple[str, ...] = END_MARKERS) -> None:
        self.scorer, self.end_markers = scorer, end_markers
        self.lock = threading.Lock()
        self.n_requests = 0

    def rewards(self, payload: dict[str, Any]) -> list[float]:
        queries, prompts = payload.get("query"), payload.get("prompts")
        if not isinstance(queries, list) or not isinstance(prompts, list) or len(queries) != len(prompts):
            raise ValueError("request needs 'query' and 'prompts', lists of the same length")
        labels = payload.get("labels") or [None] * len(queries)
        if len(labels) != len(queries):
            raise ValueError("'labels' must have one entry per query")
        items = []
        for i, (q, p, lab) in enumerate(zip(queries, prompts, labels)):
            try:
                items.append((label_messages(lab, p), split_query(q, p, self.end_markers)))
            except ValueError as e:
                raise ValueError(f"item {i}: {e}") from None
        with self.lock:
            self.n_requests += 1
            return [float(x) for x in self.scorer.score(items)]


def make_server(service: RewardService, host: str = "127.0.0.1", port: int = 5000) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 -- http.server's name
            if self.path.rstrip("/") != "/get_reward":
                self._send(404, {"error": f"unknown path {self.path}; POST /get_reward"})
                return
            try:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                rewards = service.rewards(json.loads(body))
            except (ValueError, json.JSONDecodeError) as e:
                self._send(400, {"error": str(e)})
                return
            self._send(200, {"rewards": rewards, "scores": rewards, "extra_logs": {}})

        def _send(self, code: int, obj: dict[str, Any]) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, fmt: str, *args: Any) -> None:
            log.debug(fmt, *args)

    return ThreadingHTTPServer((host, port), Handler)


def serve_reward(checkpoint: str, *, host: str = "127.0.0.1", port: int = 5000, max_length: int = 2048,
                 batch_size: int = 32, device: str | None = None, dtype: str = "float32") -> None:
    """Serve until interrupted."""
    check_reward_checkpoint(checkpoint)
    service = RewardService(SeqClassifierScorer(checkpoint, max_length=max_length, batch_size=batch_size,
                                                device=device, dtype=dtype))
    server = make_server(service, host, port)
    log.info("serving %s on http://%s:%d/get_reward", checkpoint, host, server.server_address[1])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
