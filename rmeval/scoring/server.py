"""A reward model as a service: matchrm's scorer behind OpenRLHF's remote reward-model protocol.

``POST /get_reward`` with ``{"query": [...], "prompts": [...], "labels": [...]}`` answers
``{"rewards": [...], "scores": [...], "extra_logs": {}}`` (OpenRLHF 0.11, ``openrlhf/utils/agent.py``,
``SingleTurnAgentExecutor``); ``GET /health`` answers the model, its device and the counts.

What OpenRLHF sends. ``query`` = the policy's prompt tokens and response tokens decoded together
with special tokens kept; ``prompts`` = the prompt text as the dataset made it. A prompt longer
than ``--data.max_len`` minus the response budget is cut from the left *before* generation, so the
query then starts with the prompt's end, not with the prompt. The response therefore starts where
the prompt ends in the query: right after the prompt when the query starts with it; otherwise
at the last place such that the query up to there is the end of the prompt (at least
``MIN_MATCH`` characters of it, less up to ``HEAD_SLACK`` characters at the start that a cut
inside a multi-byte character may garble; candidates are found by the prompt's final
``ANCHOR_CHARS`` characters); failing that (a decoded prompt whose text differs from the
dataset's, e.g. spaces cleaned up by the tokenizer), after the first occurrence of the longest end
of the prompt the query holds (at least ``FALLBACK_MATCH`` characters). A cut that leaves fewer
than ``MIN_MATCH`` characters of the prompt cannot be told from the response and is a 400. Trailing
end-of-turn markers are removed. ``labels`` carries the dataset's ``--data.label_key`` column; the
prompt files ``rmtrain policy`` writes put there the conversation the reward model scores against
(JSON list of messages, without the rollout's style instruction). An empty label falls back to
the prompt text as one user turn.

Throughput. OpenRLHF sends one item per request, 16 rollouts x the rollout batch per step, each
as soon as its generation ends, with a 180 s client timeout. Request threads only parse and
check; one scoring thread owns the model: it takes the first waiting request and every request
waiting with it (with ``wait_ms`` > 0 also those that arrive within ``wait_ms`` milliseconds), up
to ``max_batch_tokens`` tokens / ``max_batch_items`` items, runs one forward over all of them and
answers each. Requests that arrive during a forward wait for the next one, so the batch grows with
the load by itself: an idle server answers a lone request at once (``wait_ms`` = 0, the default),
a busy one scores what piled up during its last forward. There is no lock around scoring in the
request threads, so parsing, network and the forward overlap. Each row of a forward sees only its
own tokens, so a reward does not depend on which requests shared its batch.

Scoring is ``SeqClassifierScorer``: the same text layout (``rmcore.models.formatting``) and forward pass
as ``rmeval audit`` and training, so a served reward equals the audited score of the same texts.
Bad requests get a 4xx with a one-line JSON message and the server keeps serving: a body that is
not a JSON object, fields of the wrong type or length (400), no Content-Length (411), a body over
``max_body_bytes`` (413, answered from the header, before the body), a body that stops arriving for
``request_timeout`` seconds (408), a request line or header ``http.server`` cannot read (400, 414,
431, 501, as JSON too). Every one counts in ``bad_requests`` (``/health``).

Long texts. A text far over ``max_length`` tokens is cut by characters, at a word break, before it
is tokenised (``rmcore.models.formatting.encode_example(cut_long=True)``), with the ids the whole text
would give: a 20 MB text is not tokenised whole, for tens of seconds in the scoring thread while
every other request waits, only for all but ``max_length`` of its tokens to be dropped.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout  # not the builtin before Python 3.11
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rmcore.errors import ConfigError
from rmcore.io.files import check_path, to_json
from rmcore.models.device import (
    PLACEMENT_GROUP,
    Placement,
    describe,
    dtype_name,
    resolve_device,
    resolve_dtype,
)
from rmcore.settings.fields import nested, option

log = logging.getLogger(__name__)

# End-of-turn markers OpenRLHF leaves in ``query`` (it decodes with skip_special_tokens=False).
END_MARKERS = ("<|eot_id|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>", "</s>", "<eos>", "<end_of_turn>")
ANCHOR_CHARS = 64  # the prompt's end looked for in a query that does not start with the prompt
HEAD_SLACK = 8  # characters at the start of a left-truncated query that may not match the prompt
MIN_MATCH = 8  # the least of the prompt's end a left-truncated query must hold
FALLBACK_MATCH = 16  # ... and one whose prompt text decodes differently
MAX_BODY_BYTES = 32 * 2**20
# After an early 413 the rest of the body is read and dropped, up to this much for up to this long:
# a client that sends its whole body before reading (urllib, requests) then finds the 413; a socket
# closed on unread data is reset, and the client would see a reset instead.
DRAIN_BYTES = 128 * 2**20
LINGER_S = 5.0


class RequestError(ValueError):
    """A bad request: its HTTP status and a one-line message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def check_reward_checkpoint(path: str | os.PathLike) -> None:
    """A reward model must be a sequence classifier with one label; say what to do otherwise."""
    from transformers import AutoConfig

    from rmcore.models.modeling import resolve_model_path

    # torch: --help stays cheap
    from rmcore.runtime.checkpoints import check_trained
    from rmeval.scoring.loaders import check_reward_path

    check_reward_path(path)  # "not found" in one line, not the Hub's repo-id error
    check_trained(path)  # a diverged run left no model; a collapsed one is said
    name = resolve_model_path(str(path))
    check_path(name, "reward model", kind="dir", hub_ok=True)  # a file, not a checkpoint directory
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


def response_start(query: str, prompt: str) -> int:
    """Where the response begins in an OpenRLHF query (see the module docstring)."""
    if query.startswith(prompt):
        return len(prompt)

    def is_prompt_end(end: int) -> bool:  # query[:end] is the prompt's end, less a garbled head
        # (a head longer than the prompt cannot be its end: not sliced, a 20 MB query would be copied)
        return any(MIN_MATCH <= end - skip <= len(prompt) and prompt.endswith(query[skip:end])
                   for skip in range(min(HEAD_SLACK, end) + 1))

    anchor = prompt[-ANCHOR_CHARS:]
    ends, i = [], query.find(anchor) if anchor else -1
    while i >= 0:
        ends.append(i + len(anchor))
        i = query.find(anchor, i + 1)
    for end in reversed(ends):  # the longest query head that is the prompt's end: a left-truncated prompt
        if is_prompt_end(end):
            return end
    for end in range(min(len(query), ANCHOR_CHARS + HEAD_SLACK), MIN_MATCH - 1, -1):  # a cut left < ANCHOR_CHARS
        if is_prompt_end(end):
            return end
    # the decoded prompt differs from the dataset's text: after the longest end of the prompt the
    # query holds (a suffix found implies every shorter one is, so bisect its length)
    lo, hi = 0, len(prompt)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if prompt[-mid:] in query else (lo, mid - 1)
    if lo >= min(len(prompt), FALLBACK_MATCH):
        return query.find(prompt[-lo:]) + lo
    raise ValueError("query does not start with its prompt, nor with the end of it (a left-truncated prompt)")


def split_query(query: str, prompt: str, end_markers: tuple[str, ...] = END_MARKERS) -> str:
    """The response part of an OpenRLHF query (prompt + response as decoded text)."""
    response = query[response_start(query, prompt):]
    changed = True
    while changed:  # a response may end in several markers (e.g. <|eot_id|><|end_of_text|>)
        changed = False
        stripped = response.rstrip()
        for m in end_markers:
            if stripped.endswith(m):
                response, changed = stripped[: -len(m)], True
    return response.strip()


def _check_messages(msgs: Any) -> list[dict[str, str]]:
    if not isinstance(msgs, list) or not msgs or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in msgs):
        raise ValueError("label must be a JSON list of {\"role\": str, \"content\": str} messages")
    return [{"role": m["role"], "content": m["content"]} for m in msgs]


def label_messages(label: Any, prompt: str) -> list[dict[str, str]]:
    """The conversation a response is scored against: the label's messages, or the prompt as one
    user turn when the label is empty."""
    if label is None or (isinstance(label, str) and not label.strip()):
        return [{"role": "user", "content": prompt}]
    if isinstance(label, list):
        return _check_messages(label)
    if isinstance(label, str):
        try:
            return _check_messages(json.loads(label))
        except json.JSONDecodeError:
            raise ValueError("label is not a JSON list of messages") from None
    raise ValueError("label must be a string (JSON list of messages) or a list of messages, "
                     f"got {type(label).__name__}")


def parse_request(payload: Any, end_markers: tuple[str, ...] = END_MARKERS) -> list[tuple[list[dict[str, str]], str]]:
    """(conversation, response) items of one /get_reward body; RequestError (400) naming the field
    and item otherwise."""
    if not isinstance(payload, dict):
        raise RequestError(f"request body must be a JSON object with 'query' and 'prompts', got {_kind(payload)}")
    queries, prompts = payload.get("query"), payload.get("prompts")
    for name, value in (("query", queries), ("prompts", prompts)):
        if not isinstance(value, list):
            raise RequestError(f"'{name}' must be a list of strings, got {_kind(value)}")
    if len(queries) != len(prompts):
        raise RequestError(f"'query' and 'prompts' must have the same length, got {len(queries)} and {len(prompts)}")
    labels = payload.get("labels")
    if labels is None:
        labels = [None] * len(queries)
    elif not isinstance(labels, list) or len(labels) != len(queries):
        raise RequestError(f"'labels' must be a list with one entry per query ({len(queries)}), got "
                           + (f"{len(labels)} entries" if isinstance(labels, list) else _kind(labels)))
    items = []
    for i, (q, p, lab) in enumerate(zip(queries, prompts, labels)):
        if not isinstance(q, str) or not isinstance(p, str):
            which = "query" if not isinstance(q, str) else "prompts"
            raise RequestError(f"item {i}: '{which}' entries must be strings, "
                               f"got {_kind(q if which == 'query' else p)}")
        try:
            items.append((label_messages(lab, p), split_query(q, p, end_markers)))
        except ValueError as e:
            raise RequestError(f"item {i}: {e}") from None
    return items


def _kind(v: Any) -> str:
    return "null" if v is None else {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
                                     int: "a number", float: "a number"}.get(type(v), type(v).__name__)


@dataclass
class _Pending:
    items: list[Any]
    future: Future = field(default_factory=Future)
    encoded: list[Any] | None = None


class RewardService:
    """Rewards for OpenRLHF-style requests: request threads call ``rewards``; one scoring thread
    batches what is waiting (see the module docstring). ``close`` stops the thread."""

    def __init__(self, scorer: Any, end_markers: tuple[str, ...] = END_MARKERS, *, max_batch_tokens: int = 32768,
                 max_batch_items: int = 256, wait_ms: float = 0.0, result_timeout: float = 600.0) -> None:
        self.scorer, self.end_markers = scorer, end_markers
        self.max_batch_tokens, self.max_batch_items = max_batch_tokens, max_batch_items
        self.wait_s, self.result_timeout = wait_ms / 1000.0, result_timeout
        # one forward per collected batch: the scorer's own batching must not split it again
        scorer.batch_size, scorer.max_tokens = max_batch_items, max_batch_tokens
        # a text far over max_length is cut by characters before it is tokenised (same ids): else a
        # 20 MB body holds the scoring thread, and every request waiting on it, for tens of seconds
        scorer.cut_long = True
        self.counts = {"requests": 0, "rewards": 0, "forwards": 0, "largest_forward": 0, "bad_requests": 0}
        self._counts_lock = threading.Lock()  # the counters only; scoring takes no lock
        self._queue: queue.Queue[_Pending | None] = queue.Queue()
        self._carry: _Pending | None = None
        self._thread = threading.Thread(target=self._loop, name="reward-scoring", daemon=True)
        self._thread.start()

    def rewards(self, payload: Any) -> list[float]:
        """The rewards of one /get_reward body; RequestError for a bad one (the HTTP handler counts it
        in ``bad_requests`` with every other reject)."""
        items = parse_request(payload, self.end_markers)
        if not items:
            return []
        pending = _Pending(items)
        self._queue.put(pending)
        try:
            return pending.future.result(timeout=self.result_timeout)
        except FutureTimeout:
            raise RequestError(f"no reward within {self.result_timeout:.0f} s: the server is overloaded", 503) from None

    def health(self) -> dict[str, Any]:
        with self._counts_lock:
            counts = dict(self.counts)
        return {"status": "ok" if self._thread.is_alive() else "scoring thread stopped",
                "model": getattr(self.scorer, "model_id", None), **describe(self.scorer.model),
                "max_length": getattr(self.scorer, "max_length", None), "waiting": self._queue.qsize(),
                **counts}

    def count_bad_request(self) -> None:
        """One more reject in ``bad_requests``: the HTTP handler's, for every request it refuses."""
        self._count(bad_requests=1)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    # the scoring thread: the only user of the model and its tokenizer
    def _next(self, timeout: float | None) -> _Pending | None:
        if self._carry is not None:
            p, self._carry = self._carry, None
            return p
        return self._queue.get(timeout=timeout) if timeout is None or timeout > 0 else self._queue.get_nowait()

    def _encode(self, p: _Pending) -> bool:
        if p.encoded is not None:  # carried over from the last collection
            return True
        try:
            p.encoded = self.scorer.encode(p.items)
            return True
        except Exception as e:  # a conversation the reward model's template rejects (e.g. roles out of order)
            p.future.set_exception(RequestError(f"the reward model cannot lay out this conversation: {e}"))
            return False

    def _collect(self, first: _Pending) -> list[_Pending]:
        batch, tokens, n = [], 0, 0
        if self._encode(first):
            batch, tokens, n = [first], sum(len(e) for e in first.encoded), len(first.items)
        deadline = time.monotonic() + self.wait_s
        while tokens < self.max_batch_tokens and n < self.max_batch_items:
            try:
                p = self._next(deadline - time.monotonic())
            except queue.Empty:
                break
            if p is None:
                self._queue.put(None)  # stop after answering this batch
                break
            if not self._encode(p):
                continue
            t = sum(len(e) for e in p.encoded)
            if batch and (tokens + t > self.max_batch_tokens or n + len(p.items) > self.max_batch_items):
                self._carry = p  # first in the next forward
                break
            batch.append(p)
            tokens, n = tokens + t, n + len(p.items)
        return batch

    def _loop(self) -> None:
        while True:
            first = self._next(None)
            if first is None:
                return
            batch = self._collect(first)
            if not batch:
                continue
            enc = [e for p in batch for e in p.encoded]
            convs = [m for p in batch for m, _ in p.items]
            try:
                scores = self.scorer.score_encodings(enc, convs)
            except Exception as e:  # e.g. out of GPU memory: answer these requests, keep serving
                log.exception("scoring failed for %d requests", len(batch))
                for p in batch:
                    p.future.set_exception(RequestError(f"scoring failed: {type(e).__name__}: {e}", 500))
                continue
            self._count(forwards=1, requests=len(batch), rewards=len(enc), largest_forward=len(enc))
            i = 0
            for p in batch:
                p.future.set_result([float(x) for x in scores[i:i + len(p.items)]])
                i += len(p.items)

    def _count(self, **add: int) -> None:
        with self._counts_lock:
            for k, v in add.items():
                self.counts[k] = max(self.counts[k], v) if k == "largest_forward" else self.counts[k] + v


class _RewardHandler(BaseHTTPRequestHandler):
    """POST /get_reward and GET /health of a ``RewardService``; ``make_server`` subclasses it with the
    service, the body limit and the request timeout. Every answer is JSON, and every reject (4xx, and
    ``http.server``'s own refusals) counts in the service's ``bad_requests``."""

    protocol_version = "HTTP/1.1"  # keep-alive for clients that reuse connections; 100-continue honoured
    service: RewardService
    max_body_bytes: int = MAX_BODY_BYTES
    timeout: float = 60.0  # socket timeout: a stalled body or an idle connection cannot hold a thread

    def do_GET(self) -> None:  # noqa: N802 -- http.server's name
        path = self.path.rstrip("/")
        if path == "/health":
            self._send(200, self.service.health())
        elif path == "/get_reward":
            self._reject(405, "POST a JSON object to /get_reward")
        else:
            self._reject(404, f"unknown path {self.path}; POST /get_reward, GET /health")

    def do_POST(self) -> None:  # noqa: N802
        if self.path.rstrip("/") != "/get_reward":
            self._reject(404, f"unknown path {self.path}; POST /get_reward, GET /health")
            return
        try:
            payload = json.loads(self._body())
        except RequestError as e:
            self._reject(e.status, str(e))
            if e.status == 413:
                self._drain()
            return
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            self._reject(400, f"request body is not JSON: {e}")
            return
        except TimeoutError:
            self._reject(408, f"request body not received within {self.timeout:g} s")
            return
        try:
            rewards = self.service.rewards(payload)
        except RequestError as e:  # 4xx: the request's fault; 500, 503: the server's, not counted as bad
            (self._reject if e.status < 500 else self._fail)(e.status, str(e))
            return
        except Exception as e:  # never drop the connection without an answer
            log.exception("reward request failed")
            self._fail(500, f"{type(e).__name__}: {e}")
            return
        self._send(200, {"rewards": rewards, "scores": rewards, "extra_logs": {}})

    def _length(self) -> int:
        raw = self.headers.get("Content-Length")
        if raw is None:
            raise RequestError("Content-Length header required", 411)
        try:
            n = int(raw)
        except ValueError:
            raise RequestError(f"Content-Length must be a number, got {raw!r}") from None
        if n < 0:
            raise RequestError(f"Content-Length must be >= 0, got {n}")
        return n

    def _body(self) -> bytes:
        n = self._length()
        if n > self.max_body_bytes:  # answered from the header at once: nothing of the body is read first
            raise RequestError(f"request body of {n} bytes is over the limit of {self.max_body_bytes} bytes "
                               "(--max-body-bytes); send fewer items per request", 413)
        body = self.rfile.read(n)
        if len(body) < n:
            raise RequestError(f"request body ended after {len(body)} of {n} bytes (Content-Length)")
        return body

    def _drain(self) -> None:
        """After an early 413: end the answer (FIN), then read and drop what the client still sends,
        up to ``DRAIN_BYTES`` and ``LINGER_S`` seconds, before the connection closes (see DRAIN_BYTES)."""
        try:
            self.connection.shutdown(socket.SHUT_WR)
            left, deadline = DRAIN_BYTES, time.monotonic() + min(LINGER_S, self.timeout)
            while left > 0 and (wait := deadline - time.monotonic()) > 0:
                self.connection.settimeout(wait)
                chunk = self.rfile.read1(min(left, 2**20))
                if not chunk:  # the client closed: it has read the 413 or given up
                    break
                left -= len(chunk)
        except OSError:  # timed out, or the client reset the connection: nothing more to do for it
            pass

    def handle_expect_100(self) -> bool:
        try:
            n = self._length()
        except RequestError as e:
            self._reject(e.status, str(e))
            return False
        if n > self.max_body_bytes:
            self._reject(413, f"request body of {n} bytes is over the limit of {self.max_body_bytes} bytes")
            return False
        return super().handle_expect_100()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """``http.server``'s own refusals (a request line it cannot read, an unknown method, a line or
        header too long): JSON like every other answer, not its HTML page."""
        if self.request_version == "HTTP/0.9":  # its default before the request line is read: no status line
            self.request_version = self.protocol_version
        self.close_connection = True
        self._reject(code, message or self.responses.get(code, ("bad request",))[0])

    def _reject(self, code: int, message: str) -> None:
        """A bad request: counted in ``bad_requests``, answered ``{"error": message}``."""
        self.service.count_bad_request()
        self._send(code, {"error": message})

    def _fail(self, code: int, message: str) -> None:
        """The server's own failure (a scoring error, overload): answered, not counted as a bad request."""
        self._send(code, {"error": message})

    def _send(self, code: int, obj: dict[str, Any]) -> None:
        data = to_json(obj, indent=None).encode()  # strict JSON: a NaN reward is null
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if code >= 400:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command != "HEAD":  # an answer to HEAD has the headers only
                self.wfile.write(data)
        except OSError:  # the client went away; nothing to answer
            self.close_connection = True

    def log_message(self, fmt: str, *args: Any) -> None:
        log.debug(fmt, *args)


class _RewardServer(ThreadingHTTPServer):
    """One daemon thread per connection, with a backlog for thousands of rollouts connecting at once."""

    daemon_threads = True
    request_queue_size = 1024  # thousands of rollouts connect at once; the default backlog is 5


def make_server(service: RewardService, host: str = "127.0.0.1", port: int = 5000, *,
                max_body_bytes: int = MAX_BODY_BYTES, request_timeout: float = 60.0) -> ThreadingHTTPServer:
    """A threaded HTTP server for ``service`` (one thread per connection; ``request_timeout`` bounds
    how long a connection may take to send its request)."""
    handler = type("Handler", (_RewardHandler,), {"service": service, "max_body_bytes": max_body_bytes,
                                                  "timeout": request_timeout})
    return _RewardServer((host, port), handler)


def load_reward_scorer(checkpoint: str, placement: Placement | None = None, *, max_length: int | None = None,
                       batch_size: int = 32) -> Any:
    """The checkpoint's ``SeqClassifierScorer`` placed by ``rmcore.models.device`` (``auto``: the GPU in
    bfloat16 where there is one, else the CPU in float32); ``max_length`` None: the length the
    checkpoint was trained with (``rmcore.runtime.checkpoints.scoring_max_length``), else the model's own limit."""
    # torch: --help stays cheap
    from rmcore.models.modeling import ModelSettings, load_reward_model
    from rmcore.runtime.checkpoints import scoring_max_length
    from rmeval.scoring.seq_classifier import SeqClassifierScorer

    placement = placement or Placement()
    placement.validate()
    check_reward_checkpoint(checkpoint)
    if placement.device_map == "auto":  # one model over every visible GPU: inputs go to its first layer
        import torch

        device, where = None, torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    else:
        where = resolve_device(placement.device)
        device = str(where)
    dtype = dtype_name(resolve_dtype(placement.dtype, where))
    extra = {"device_map": "auto"} if placement.device_map == "auto" else {}
    model, tok = load_reward_model(ModelSettings(checkpoint, dtype=dtype, trust_remote_code=placement.trust_remote_code,
                                                 attn_implementation=placement.attn_implementation, extra=extra))
    scorer = SeqClassifierScorer(model, tokenizer=tok, max_length=scoring_max_length(checkpoint, max_length),
                                 batch_size=batch_size, device=device, dtype=dtype)
    scorer.model_id = checkpoint
    scorer._owned = True  # loaded here for it: close() frees it, and its fingerprint is the checkpoint's
    return scorer


@dataclass
class ServerSettings:
    """How ``serve_reward`` serves a checkpoint (the flags of ``rmeval serve-reward``)."""

    host: str = option("127.0.0.1", help="bind address (default: this machine only)")
    port: int = option(5000, ge=0, le=65535, help="port to listen on")
    max_length: int | None = option(None, ge=1, help="tokens per text (default: the length the checkpoint was "
                                                 "trained with, else the model's own limit); the prompt is cut "
                                                 "from the left")
    # device (auto: cuda:LOCAL_RANK where CUDA is, else cpu), dtype (auto: bfloat16 on a GPU, float32 on
    # the CPU), kernel, the checkpoint's own modelling code, one model over every visible GPU
    placement: Placement = nested(Placement, group=PLACEMENT_GROUP)
    max_batch_tokens: int = option(32768, ge=1, help="tokens scored in one forward, over the requests waiting "
                                               "(default 32768)")
    max_batch_items: int = option(256, ge=1, help="texts scored in one forward (default 256)")
    batch_wait_ms: float = option(0.0, ge=0, help="how long the first waiting request waits for others to join its "
                                            "forward (default 0: a forward takes what is waiting; requests that "
                                            "arrive during it join the next)")
    max_body_bytes: int = option(MAX_BODY_BYTES, ge=1, help="larger request bodies get a 413")
    request_timeout: float = option(60.0, gt=0, help="seconds a client may take to send its request before a 408 "
                                               "(default 60)")


def serve_reward(checkpoint: str, settings: ServerSettings | None = None) -> None:
    """Serve until interrupted, as ``settings`` say (default its defaults)."""
    s = settings or ServerSettings()
    scorer = load_reward_scorer(checkpoint, s.placement, max_length=s.max_length)
    service = RewardService(scorer, max_batch_tokens=s.max_batch_tokens, max_batch_items=s.max_batch_items,
                            wait_ms=s.batch_wait_ms)
    server = make_server(service, s.host, s.port, max_body_bytes=s.max_body_bytes, request_timeout=s.request_timeout)
    h = service.health()
    print(f"serving {checkpoint} ({h['device']}, {h['dtype']}, max length {h['max_length']} tokens) on "
          f"http://{s.host}:{server.server_address[1]}/get_reward", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        service.close()
