"""The reward server (rmeval.scoring.server) as OpenRLHF uses it: many clients at once, one item per
request, left-truncated prompts, and every malformed request of a careless client.

Material built here: a tiny Qwen2 one-label classifier and its byte-level BPE tokenizer with a chat
template (rmcore.models.tiny), trained on the simulated set plus texts with multi-byte characters, so a
left cut can fall inside a character. References are rmeval's scorer loaded independently from
the saved checkpoint; queries are made the way OpenRLHF makes them (``SingleTurnAgentExecutor``:
prompt tokens cut from the left, prompt + response ids decoded with special tokens kept)."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NON_ASCII = ["Ça coûte 12 € — déjà payé ? Très bien.", "東京の天気は晴れです。明日は雨でしょう。",
             "Größe, Maß und Fuß: ß ist kein Doppel-s.", "emoji 🙂🚀 and ümlauts ö ä"]


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import torch
    from transformers import AutoTokenizer

    from rmcore.data.loading import load_rating_set
    from rmcore.models.tiny import CHAT_TEMPLATE, EOS, PAD, save_tiny, tiny_model, train_tokenizer

    torch.set_num_threads(1)
    rs = load_rating_set({"name": "simulated", "n_prompts": 40, "responses_per_prompt": 2, "seed": 0})
    convs = [[{"role": m["role"], "content": m["content"]} for m in p.messages] for p in rs.prompts]
    responses = [p.responses[0].text for p in rs.prompts]
    texts = [m["content"] for c in convs for m in c] + responses + NON_ASCII * 5
    tok = train_tokenizer(texts, 400, chat_template=CHAT_TEMPLATE, eos_token=EOS, pad_token=PAD)
    root = tmp_path_factory.mktemp("reward_server")
    rm = tiny_model(tok, "qwen2", head="classifier", num_labels=1, max_position_embeddings=1024, seed=3)
    ckpt = save_tiny(root / "rm", rm, tok)
    return {"ckpt": ckpt, "tok": AutoTokenizer.from_pretrained(ckpt), "convs": convs, "responses": responses}


@pytest.fixture(scope="module")
def reference(material: dict[str, Any]) -> Any:
    from rmeval.scoring.seq_classifier import SeqClassifierScorer

    return SeqClassifierScorer(str(material["ckpt"]), max_length=512)


@pytest.fixture(scope="module")
def server(material: dict[str, Any]) -> Iterator[dict[str, Any]]:
    from rmcore.models.device import Placement
    from rmeval.scoring.server import RewardService, load_reward_scorer, make_server

    scorer = load_reward_scorer(str(material["ckpt"]), Placement(device="cpu", dtype="auto"), max_length=512)
    service = RewardService(scorer, wait_ms=20.0)
    srv = make_server(service, "127.0.0.1", 0, max_body_bytes=200_000, request_timeout=1.0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield {"url": f"http://127.0.0.1:{srv.server_address[1]}", "port": srv.server_address[1], "service": service}
    srv.shutdown()
    srv.server_close()
    service.close()


def post(url: str, body: bytes | Any, timeout: float = 60.0) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url + "/get_reward", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def openrlhf_query(tok: Any, conv: list[dict[str, str]], response: str, keep: int | None = None) -> tuple[str, str]:
    """(query, prompt) as OpenRLHF's SingleTurnAgentExecutor makes them; ``keep``: the prompt's
    last ``keep`` tokens only (its left truncation)."""
    prompt = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    if keep is not None:
        ids = ids[-keep:]
    resp = tok(response + tok.eos_token, add_special_tokens=False)["input_ids"]
    return tok.decode(ids + resp, skip_special_tokens=False), prompt


def request_of(tok: Any, conv: list[dict[str, str]], response: str, keep: int | None = None) -> dict[str, Any]:
    q, p = openrlhf_query(tok, conv, response, keep)
    return {"query": [q], "prompts": [p], "labels": [json.dumps(conv)]}


def test_health(server: dict[str, Any]) -> None:
    with urllib.request.urlopen(server["url"] + "/health", timeout=10) as r:
        h = json.loads(r.read())
    assert h["status"] == "ok" and h["device"] == "cpu" and h["dtype"] == "float32"  # auto on a CPU


def test_64_concurrent_requests_equal_sequential_and_share_forwards(server: dict[str, Any], material: dict[str, Any],
                                                                   reference: Any) -> None:
    tok, convs, resps = material["tok"], material["convs"], material["responses"]
    # 16 rollouts of 4 prompts, one item per request, as OpenRLHF sends them
    jobs = [(convs[i % 4], f"{resps[(i * 7) % len(resps)]} {i}") for i in range(64)]
    bodies = [request_of(tok, c, r) for c, r in jobs]
    ref = reference.score(jobs)
    sequential = [post(server["url"], b)[1]["rewards"][0] for b in bodies]
    before = dict(server["service"].counts)
    got: list[float | None] = [None] * 64
    barrier = threading.Barrier(64)

    def client(i: int) -> None:
        barrier.wait()
        code, out = post(server["url"], bodies[i])
        assert code == 200, out
        got[i] = out["rewards"][0]

    threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = server["service"].counts
    np.testing.assert_allclose(sequential, ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(got, sequential, rtol=0, atol=1e-6)
    assert after["requests"] - before["requests"] == 64
    assert after["forwards"] - before["forwards"] < 64 and after["largest_forward"] > 1  # batched across clients


@pytest.mark.parametrize("text", NON_ASCII)
def test_left_truncated_prompts_score_their_response(server: dict[str, Any], material: dict[str, Any],
                                                     reference: Any, text: str) -> None:
    """Every cut point of a long multi-turn prompt, including cuts inside a multi-byte character:
    the response found is the response generated, and the reward is its score."""
    from rmeval.scoring.server import split_query

    tok = material["tok"]
    conv = [{"role": "user", "content": " ".join([text] * 3)}, {"role": "assistant", "content": text},
            {"role": "user", "content": text[::-1] + " " + text}]
    response = ("Sure: " + text[: len(text) // 2]).strip()  # the server strips the response
    n = len(tok(tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True),
                add_special_tokens=False)["input_ids"])
    for keep in range(16, n + 1):  # OpenRLHF keeps max_len - max_new_tokens tokens, hundreds in practice
        q, p = openrlhf_query(tok, conv, response, keep)
        assert split_query(q, p) == response, keep
    code, out = post(server["url"], request_of(tok, conv, response, keep=n // 3))
    assert code == 200, out
    assert out["rewards"][0] == pytest.approx(float(reference.score([(conv, response)])[0]), abs=1e-6)


def test_prompt_text_that_decodes_differently_falls_back_to_the_prompt_end() -> None:
    from rmeval.scoring.server import split_query

    prompt = "<|user|>Hello ,  world . How are you ?<|endoftext|><|assistant|>"
    query = "<|user|>Hello, world. How are you ?<|endoftext|><|assistant|>Fine, thanks.<|endoftext|>"
    assert split_query(query, prompt) == "Fine, thanks."
    with pytest.raises(ValueError, match="does not start with its prompt"):
        split_query("something else entirely", prompt)


MALFORMED = [
    ("JSON array", b"[]", 400, "must be a JSON object"),
    ("JSON string", b'"query"', 400, "must be a JSON object"),
    ("JSON null", b"null", 400, "must be a JSON object"),
    ("not JSON", b"{query: [", 400, "not JSON"),
    ("not UTF-8", b'{"query": ["\xff\xfe"]}', 400, "not JSON"),
    ("integer query items", {"query": [1, 2], "prompts": ["a", "b"]}, 400, "item 0: 'query' entries must be strings"),
    ("null prompts", {"query": ["a"], "prompts": None}, 400, "'prompts' must be a list"),
    ("null prompt item", {"query": ["a"], "prompts": [None]}, 400, "item 0: 'prompts' entries must be strings"),
    ("query a string", {"query": "a", "prompts": ["a"]}, 400, "'query' must be a list"),
    ("label list of integers", {"query": ["pa"], "prompts": ["p"], "labels": [[1, 2]]}, 400, "item 0: label must be"),
    ("integer label", {"query": ["pa"], "prompts": ["p"], "labels": [7]}, 400, "item 0: label must be"),
    ("label not JSON", {"query": ["pa"], "prompts": ["p"], "labels": ["[{"]}, 400, "label is not a JSON list"),
    ("mismatched lengths", {"query": ["pa", "pb"], "prompts": ["p"]}, 400, "same length"),
    ("mismatched labels", {"query": ["pa"], "prompts": ["p"], "labels": ["", ""]}, 400, "one entry per query"),
    ("query without its prompt", {"query": ["xyz"], "prompts": ["prompt"]}, 400, "does not start with its prompt"),
    ("oversized body", b'{"query": ["' + b"x" * 300_000 + b'"]}', 413, "over the limit"),
]


@pytest.mark.parametrize("name,body,status,message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_request_gets_4xx_and_the_server_keeps_serving(server: dict[str, Any], material: dict[str, Any],
                                                                 name: str, body: Any, status: int,
                                                                 message: str) -> None:
    code, out = post(server["url"], body)
    assert code == status and message in out["error"], out
    ok = request_of(material["tok"], material["convs"][0], "fine")
    assert post(server["url"], ok)[0] == 200


def raw_exchange(port: int, head: bytes, body: bytes = b"", wait: float = 5.0) -> tuple[int, float]:
    """Status of a hand-written HTTP request and the seconds until the answer came."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        t0 = time.monotonic()
        s.sendall(head + body)
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        return int(data.split(b" ", 2)[1]), time.monotonic() - t0


def test_stalled_body_times_out_and_lengthless_post_is_refused(server: dict[str, Any],
                                                               material: dict[str, Any]) -> None:
    port = server["port"]
    # Content-Length larger than what is sent: 408 after the 1 s request timeout, not a held thread
    code, seconds = raw_exchange(port, b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", b'{"q')
    assert code == 408 and 0.5 < seconds < 4.0
    code, _ = raw_exchange(port, b"POST /get_reward HTTP/1.1\r\nHost: x\r\n\r\n")
    assert code == 411
    code, _ = raw_exchange(port, b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: 10**9\r\n\r\n")
    assert code == 400
    # a client that announces an oversized body and waits for 100-continue is refused before sending it
    code, _ = raw_exchange(port, b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: 900000\r\n"
                                 b"Expect: 100-continue\r\n\r\n")
    assert code == 413
    code, _ = raw_exchange(port, b"GET /get_reward HTTP/1.1\r\nHost: x\r\n\r\n")
    assert code == 405
    code, _ = raw_exchange(port, b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
    assert code == 404
    assert post(server["url"], request_of(material["tok"], material["convs"][1], "still here"))[0] == 200


def test_empty_request_and_missing_labels(server: dict[str, Any], material: dict[str, Any], reference: Any) -> None:
    assert post(server["url"], {"query": [], "prompts": []}) == (200, {"rewards": [], "scores": [], "extra_logs": {}})
    tok, conv = material["tok"], [{"role": "user", "content": "What is a tide?"}]
    q, p = openrlhf_query(tok, conv, "The sea rises.")
    code, out = post(server["url"], {"query": [q], "prompts": [p]})  # no labels: the prompt text as one user turn
    assert code == 200
    ref = reference.score([([{"role": "user", "content": p}], "The sea rises.")])
    assert out["rewards"][0] == pytest.approx(float(ref[0]), abs=1e-6)


def test_missing_checkpoint_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from rmeval.cli import main

    assert main(["serve-reward", "--checkpoint", str(tmp_path / "outputs" / "demo" / "nothing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rmeval: error:") and "not found" in err and len(err.splitlines()) == 1


# -- long texts, an early 413, every reject counted and in JSON, the model's own max length -----------

def long_text(material: dict[str, Any], n: int, seed: int = 0) -> str:
    """``n`` characters of the simulated responses' words and the multi-byte sentences, shuffled."""
    rng = np.random.default_rng(seed)
    words = " ".join(material["responses"] + NON_ASCII).split()
    out = " ".join(words[i] for i in rng.integers(0, len(words), n // 3))
    return out[:n]


@pytest.fixture(scope="module")
def whole(material: dict[str, Any]) -> Any:
    """The server's scorer as it was before the character cut: every text tokenised whole."""
    from rmcore.models.device import Placement
    from rmeval.scoring.server import load_reward_scorer

    return load_reward_scorer(str(material["ckpt"]), Placement(device="cpu", dtype="auto"), max_length=512)


@pytest.fixture(scope="module")
def patient_server(server: dict[str, Any]) -> Iterator[int]:
    """A second front to the same service with the default 32 MiB body limit and a 30 s request
    timeout: an answer that waited on a timeout or on the body would come late enough to see."""
    from rmeval.scoring.server import make_server

    srv = make_server(server["service"], "127.0.0.1", 0, request_timeout=30.0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def test_long_texts_are_cut_by_characters_with_the_same_rewards(server: dict[str, Any], material: dict[str, Any],
                                                               whole: Any, patient_server: int,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the character bound (8 x (512 + 64) characters here) a text is tokenised whole as
    before; over it, cut at a word break first. Either way the reward is, bit for bit, that of the
    whole text tokenised: the response keeps its start, the prompt (the label's conversation) its end."""
    from rmcore.models import formatting

    tok, cuts = material["tok"], []
    piece = formatting._piece
    monkeypatch.setattr(formatting, "_piece", lambda *a: cuts.append(a[2]) or piece(*a))
    short, long = long_text(material, 4000, seed=1), long_text(material, 150_000, seed=2)
    cases = {"under the bound": ([{"role": "user", "content": short}], short),
             "response over it": ([{"role": "user", "content": "Tell me."}], long),
             "prompt over it": ([{"role": "user", "content": long}, {"role": "assistant", "content": "Yes."},
                                 {"role": "user", "content": short}], "Fine."),
             "both": ([{"role": "user", "content": long}], long[::-1].strip())}  # the server strips a response
    for name, (conv, response) in cases.items():
        cuts.clear()
        code, out = post(f"http://127.0.0.1:{patient_server}", request_of(tok, conv, response))
        assert code == 200, out
        assert out["rewards"][0] == float(whole.score([(conv, response)])[0]), name
        assert whole.encode([(conv, response)]) == server["service"].scorer.encode([(conv, response)]), name
        assert sorted(set(cuts)) == {"under the bound": [], "response over it": ["start"],
                                     "prompt over it": ["end"], "both": ["end", "start"]}[name], name


def test_a_20_mb_body_does_not_hold_the_server(server: dict[str, Any], material: dict[str, Any], whole: Any,
                                               patient_server: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 20 MB response (under the 32 MiB body limit) and a small request sent while it is served:
    neither waits on a whole-text tokenisation (33-43 s before, the small one blocked behind it)."""
    from rmcore.models import formatting

    tok, conv, seen = material["tok"], [{"role": "user", "content": "Tell me."}], []
    ids = formatting._ids
    monkeypatch.setattr(formatting, "_ids", lambda t, s: seen.append(len(s)) or ids(t, s))
    head = long_text(material, 100_000, seed=3)
    # 20 MB, the same 100 kB start; the query made without tokenising it here (what OpenRLHF's decode gives)
    prompt = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
    big = {"query": [prompt + head * 200 + tok.eos_token], "prompts": [prompt], "labels": [json.dumps(conv)]}
    url, answers = f"http://127.0.0.1:{patient_server}", {}

    def send(name: str, body: dict[str, Any]) -> None:
        t0 = time.monotonic()
        answers[name] = (*post(url, body, timeout=60.0), time.monotonic() - t0)

    t = threading.Thread(target=send, args=("big", big))
    t.start()
    time.sleep(0.2)  # the big body is on its way
    send("small", request_of(tok, conv, "The sea rises."))
    t.join(timeout=70)
    (code, out, big_s), (small_code, _, small_s) = answers["big"], answers["small"]
    assert code == 200 and small_code == 200, out
    assert max(seen) < 100_000  # never more than a piece of the 20 MB tokenised
    assert out["rewards"][0] == float(whole.score([(conv, head)])[0])  # its start decides, as before
    assert small_s < 15 and big_s < 30, (small_s, big_s)  # loose: a shared machine; the old code took 33+ s


def raw_answer(port: int, data: bytes, wait: float = 5.0) -> tuple[int, dict[str, str], bytes, float]:
    """Status, headers and body of what the server answers to ``data`` sent on a raw connection, read
    to the end of the answer, and the seconds until it came."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        t0 = time.monotonic()
        s.sendall(data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
        while len(body) < int(headers.get("content-length", 0)):
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
        return int(lines[0].split(" ", 2)[1]), headers, body, time.monotonic() - t0


def test_content_length_over_the_limit_is_answered_at_once(patient_server: int, server: dict[str, Any],
                                                           material: dict[str, Any]) -> None:
    """A 10 GB Content-Length: the 413 comes from the header, not after reading (or waiting 30 s for)
    the body; a client that sends its whole (over-limit) body before reading still gets the 413."""
    head = (b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 10000000000\r\n\r\n")
    code, headers, body, seconds = raw_answer(patient_server, head + b'{"query": [', wait=10.0)
    assert code == 413 and seconds < 5, seconds
    assert headers["content-type"] == "application/json" and "over the limit" in json.loads(body)["error"]
    code, out = post(server["url"], b'{"query": ["' + b"x" * 2_000_000 + b'"]}')  # urllib: body first, then the answer
    assert code == 413 and "over the limit" in out["error"]
    assert post(server["url"], request_of(material["tok"], material["convs"][2], "still here"))[0] == 200


GARBAGE = [(b"\x00\x01garbage\r\n\r\n", 400, "Bad request syntax"),
           (b"PUT /get_reward HTTP/1.1\r\nHost: x\r\n\r\n", 501, "Unsupported method"),
           (b"GET /health HTTP/7.0\r\nHost: x\r\n\r\n", 505, "Invalid HTTP version")]


@pytest.mark.parametrize("data,status,message", GARBAGE, ids=["garbage request line", "PUT", "HTTP/7.0"])
def test_what_http_server_refuses_is_answered_in_json(server: dict[str, Any], data: bytes, status: int,
                                                      message: str) -> None:
    code, headers, body, _ = raw_answer(server["port"], data)
    assert code == status and headers["content-type"] == "application/json"
    assert message in json.loads(body)["error"]


def test_every_reject_counts_in_bad_requests(server: dict[str, Any], material: dict[str, Any]) -> None:
    port, url = server["port"], server["url"]

    def bad_requests() -> int:
        with urllib.request.urlopen(url + "/health", timeout=10) as r:
            return json.loads(r.read())["bad_requests"]

    before = bad_requests()
    answers = [post(url, b"{query: [")[0],  # not JSON
               post(url, {"query": "a", "prompts": ["a"]})[0],  # a field of the wrong type
               raw_answer(port, b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")[0],
               raw_answer(port, b"GET /get_reward HTTP/1.1\r\nHost: x\r\n\r\n")[0],
               raw_answer(port, b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")[0],  # 1 s
               raw_answer(port, b"POST /get_reward HTTP/1.1\r\nHost: x\r\n\r\n")[0],
               raw_answer(port, b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: 900000\r\n\r\n")[0],
               raw_answer(port, GARBAGE[0][0])[0], raw_answer(port, GARBAGE[1][0])[0]]
    assert answers == [400, 400, 404, 405, 408, 411, 413, 400, 501]
    assert post(url, request_of(material["tok"], material["convs"][3], "good"))[0] == 200  # not counted
    assert bad_requests() - before == len(answers)


def test_max_length_defaults_to_the_models_own_limit(material: dict[str, Any], capsys: pytest.CaptureFixture,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    from rmcore.models.device import Placement
    from rmeval.cli import main
    from rmeval.scoring.server import load_reward_scorer

    with caplog.at_level(logging.WARNING, logger="rmcore.models.modeling"):
        scorer = load_reward_scorer(str(material["ckpt"]), Placement(device="cpu"))
    # the tiny model's position embeddings, taken as they are: not 2048 clamped to them with a warning
    assert scorer.max_length == 1024 and "exceeds the model's limit" not in caplog.text
    with pytest.raises(SystemExit):
        main(["serve-reward", "--help"])
    assert "trained with, else the model's own limit" in " ".join(capsys.readouterr().out.split())


def _serve(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], int]:
    """``rmeval serve-reward`` through the real main, in a thread: its /health, then stopped
    (the server it makes is kept to shut it down); returns (/health, the command's exit code)."""
    from rmeval.cli import main
    from rmeval.scoring import server as srv

    made: list[Any] = []
    rc: list[int] = []
    with monkeypatch.context() as m:
        real = srv.make_server
        m.setattr(srv, "make_server", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
        thread = threading.Thread(target=lambda: rc.append(main(argv)), daemon=True)
        thread.start()
        deadline = time.monotonic() + 120
        while not made and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert made, "the server did not start"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{made[0].server_address[1]}/health", timeout=30) as r:
                health = json.loads(r.read())
        finally:
            made[0].shutdown()
            thread.join(timeout=60)
    return health, rc[0]


def test_max_length_defaults_to_the_training_length_and_is_said(material: dict[str, Any], tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture,
                                                                  caplog: pytest.LogCaptureFixture,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint trained by rmtrain (its run config) is served at its training length, which the
    startup line and /health give; a --max-length that differs from it is said on stderr."""
    run = tmp_path / "run"
    run.mkdir()
    for f in Path(material["ckpt"]).iterdir():
        (run / f.name).symlink_to(f)
    (run / "matchrm_config.json").write_text(json.dumps({"arm": "bradley_terry", "seed": 1,
                                                         "training": {"max_length": 64}, "wandb": {}}))
    health, rc = _serve(["serve-reward", "--checkpoint", str(run), "--port", "0", "--device", "cpu"], monkeypatch)
    assert rc == 0 and health["max_length"] == 64
    assert f"serving {run} (cpu, float32, max length 64 tokens) on http://127.0.0.1:" in capsys.readouterr().out
    with caplog.at_level(logging.WARNING, logger="rmcore.runtime.checkpoints"):
        health, rc = _serve(["serve-reward", "--checkpoint", str(run), "--port", "0", "--device", "cpu",
                             "--max-length", "100"], monkeypatch)
    assert rc == 0 and health["max_length"] == 100
    assert [r.getMessage() for r in caplog.records if r.name == "rmcore.runtime.checkpoints"] == [
        f"max_length 100: {run} was trained with max_length 64; scoring at 100 tokens"]
