"""Judge elicitation end to end: tiny local causal LM on real pairs (HH-RLHF harmless, RM-Bench chat
and safety-refuse), prefix KV reuse vs full forwards, a real SIGKILL mid-run and a resume, and an
OpenAI-compatible endpoint (local HTTP server) with a 429 and malformed answers."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from rmcore.data.preference_sets import load_hh_rlhf, load_rm_bench
from rmcore.runtime.jobs import submitit_executor
from rmeval.judges.elicit import (
    ATTRIBUTE_QUESTION,
    OVERALL_QUESTION,
    ElicitJob,
    EndpointPairJudge,
    LocalPairJudge,
    build_calls,
    elicit_shard,
    items_from_rating_set,
    merge_shards,
    questions_for,
)
from rmeval.judges.inventory import OVERALL, load_inventory
from rmeval.judges.shards import run_shards
from rmeval.judges.store import is_store
from rmeval.judges.tables import load_judgments
from tests.support import ROOT, JsonHandler, save_tiny_judge, serving

ATTRS = ["specificity", "verbosity", "harmfulness", "correctness", "empathy"]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def three_source_items(data: Path, n_per_source: int = 4) -> pd.DataFrame:
    """Judge items from the real pairs in ``data`` (../shared/data)."""
    parts = [items_from_rating_set(load_hh_rlhf(data / "hh-rlhf" / "harmless-base_test.jsonl.gz", limit=n_per_source),
                                   "hh_rlhf_harmless", seed=0),
             items_from_rating_set(load_rm_bench(data / "rm-bench" / "chat_filtered.json", limit=n_per_source),
                                   "rm_bench_chat", limit=n_per_source, seed=1),
             items_from_rating_set(load_rm_bench(data / "rm-bench" / "safety-refuse_filtered.json",
                                                 limit=n_per_source), "rm_bench_safety_refuse",
                                   limit=n_per_source, seed=2)]
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def items(shared_data: Path) -> pd.DataFrame:
    return three_source_items(shared_data, 4)


@pytest.fixture(scope="module")
def judge_path(tmp_path_factory, items) -> Path:
    texts = [ATTRIBUTE_QUESTION, OVERALL_QUESTION, *items["query"], *items["response_a"], *items["response_b"]]
    return save_tiny_judge(tmp_path_factory.mktemp("tiny_judge"), texts)


def test_items_from_three_sources(items):
    assert items.groupby("source").size().to_dict() == {"hh_rlhf_harmless": 4, "rm_bench_chat": 4,
                                                        "rm_bench_safety_refuse": 4}
    assert set(items["label"]) <= {"A", "B"} and items["item_id"].is_unique


def test_prefix_reuse_gives_the_full_forward_directions(judge_path, items):
    questions = questions_for(load_inventory(names=ATTRS))
    calls = build_calls(items.head(3), questions)
    fast = LocalPairJudge(judge_path, max_length=768, batch_size=8)
    slow = LocalPairJudge(judge_path, max_length=768, batch_size=8, prefix_reuse=False)
    assert fast.fingerprint == slow.fingerprint  # same answers, one cache
    pa, pb = fast.p_first(calls), slow.p_first(calls)
    np.testing.assert_allclose(pa, pb, atol=1e-5)
    assert np.ptp(pa) > 1e-3  # the answers depend on the item and the question
    a, b = fast.answer(calls), slow.answer(calls)
    assert a == b and set(a) <= {-1.0, 1.0}
    # and against a plain forward of the concatenated ids, done here by hand
    pre, suf = fast.encode(calls[1])
    with torch.inference_mode():
        logits = fast.model(input_ids=torch.tensor([pre + suf])).logits[0, -1]
    la, lb = (torch.logsumexp(logits[ids], 0) for ids in fast.letter_ids)
    assert pa[1] == pytest.approx(torch.sigmoid(la - lb).item(), abs=1e-5)


def test_prefix_reuse_with_a_chat_template(judge_path, items):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(judge_path)
    tok.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
                         "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
    model = AutoModelForCausalLM.from_pretrained(judge_path)
    calls = build_calls(items.head(2), questions_for(load_inventory(names=ATTRS[:2])))
    fast = LocalPairJudge(model, tokenizer=tok, max_length=768)
    slow = LocalPairJudge(model, tokenizer=tok, max_length=768, prefix_reuse=False)
    assert fast.local.chat_parts()[1] == "<|end|>\n<|assistant|>\n"
    pre, suf = fast.encode(calls[0])
    text = tok.apply_chat_template([{"role": "user", "content": calls[0].prefix + calls[0].question}], tokenize=False,
                                   add_generation_prompt=True)
    assert tok.decode(pre + suf) == tok.decode(tok(text, add_special_tokens=False)["input_ids"])
    np.testing.assert_allclose(fast.p_first(calls), slow.p_first(calls), atol=1e-5)


def test_end_to_end_local_sharded_with_submitit(judge_path, items, tmp_path):
    items_path = tmp_path / "items.jsonl"
    items.to_json(items_path, orient="records", lines=True)
    questions = questions_for(load_inventory(names=ATTRS))
    spec = {"kind": "hf", "model": str(judge_path), "name": "tiny", "max_length": 768}
    jobs = [ElicitJob(str(items_path), spec, questions, str(tmp_path / "out"), shard=i, n_shards=2, progress=False)
            for i in range(2)]
    stats = run_shards(jobs, submitit_executor("debug", str(tmp_path / "submitit")))
    assert sum(s["n_made"] for s in stats) == len(items) * 2 * len(questions)
    shards = sorted(p.name for p in (tmp_path / "out" / "shards").glob("tiny.shard-*"))
    assert [n for n in shards if not n.endswith(".stats.json")] == [f"tiny.shard-0000{i}-of-00002.npz"
                                                                    for i in range(2)]
    table = merge_shards(tmp_path / "out")
    assert is_store(table) and table == tmp_path / "out" / "judgments"  # the compact store, no long table
    j = load_judgments(table)
    assert len(j) == len(items) * 2 * (len(ATTRS) + 1)
    assert set(j["attribute"]) == {*ATTRS, OVERALL} and set(j["order"]) == {"AB", "BA"}
    # a second run answers everything from the cache
    again = run_shards(jobs)
    assert sum(s["n_made"] for s in again) == 0 and sum(s["n_cached"] for s in again) == len(j)
    # mapping back: the same letter in both orders points to opposite original responses
    judge = LocalPairJudge(judge_path, max_length=768)
    row = items.iloc[0]
    calls = [c for c in build_calls(items.head(1), {OVERALL: OVERALL_QUESTION})]
    letters = judge.answer(calls)
    got = j[(j["item_id"] == row["item_id"]) & (j["attribute"] == OVERALL)].set_index("order")["direction"]
    assert got["AB"] == letters[0] and got["BA"] == -letters[1]


def _cache_rows(out: Path) -> int:
    n = 0
    for p in (out / "cache").glob("*.sqlite"):
        c = sqlite3.connect(p)
        try:
            n += c.execute("SELECT COUNT(*) FROM scores").fetchone()[0]
        except sqlite3.OperationalError:  # created but the table not yet written
            pass
        finally:
            c.close()
    return n


def test_kill_mid_run_and_resume(tmp_path, items, shared_data):
    many = three_source_items(shared_data, 6)
    items_path = tmp_path / "items.jsonl"
    many.to_json(items_path, orient="records", lines=True)
    texts = [ATTRIBUTE_QUESTION, *many["query"], *many["response_a"]]
    model = save_tiny_judge(tmp_path / "judge", texts, hidden=48, layers=2)
    questions = questions_for(load_inventory(names=ATTRS))
    total = len(many) * 2 * len(questions)
    job = {"items_path": str(items_path), "judge_spec": {"kind": "hf", "model": str(model), "name": "tiny",
                                                         "max_length": 768, "prefix_reuse": False, "batch_size": 2},
           "questions": questions, "out": str(tmp_path / "out"), "chunk_items": 1, "progress": False}
    code = ("import json, sys, torch; torch.set_num_threads(1); from rmeval.judges.elicit import ElicitJob; "
            "print(json.dumps(ElicitJob(**json.loads(sys.argv[1]))()))")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(job)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if (tmp_path / "out" / "cache").exists() and _cache_rows(tmp_path / "out") >= 2 * 2 * len(questions):
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)  # a real signal to a real process
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done = _cache_rows(tmp_path / "out")
    assert 0 < done < total
    assert not list((tmp_path / "out" / "shards").glob("*.npz")) if (tmp_path / "out" / "shards").exists() else True
    stats = ElicitJob(**job)()  # the restart (in this process: a second interpreter start costs ~10 s)
    assert stats["n_cached"] == done and stats["n_made"] == total - done  # nothing asked twice
    j = load_judgments(merge_shards(tmp_path / "out"))
    assert len(j) == total and not j.duplicated(["item_id", "attribute", "order"]).any()
    assert set(j["item_id"]) == set(many["item_id"])


class _Endpoint(JsonHandler):
    requests: list = []
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with _Endpoint.lock:
            _Endpoint.requests.append(body)
            first = len(_Endpoint.requests) == 1
        if first:  # rate limit: must be retried by the client
            self.send_json({"error": {"message": "rate limited", "type": "rate_limit"}}, 429, {"retry-after-ms": "5"})
            return
        prompt = body["messages"][0]["content"]
        text = "I cannot say, both have merit." if "verbosity" in prompt else ("A" if "[Query]" in prompt else "")
        if "harmfulness" in prompt:
            text = "**B**"
        self.send_json({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}]})

    def log_message(self, *args):
        pass


def test_openai_endpoint_with_rate_limit_and_malformed_answers(items, tmp_path):
    _Endpoint.requests = []
    with serving(_Endpoint) as url:
        judge = EndpointPairJudge("tiny-judge", base_url=f"{url}/v1", name="ep",
                                  concurrency=2, max_retries=3, timeout=10)
        questions = questions_for(load_inventory(names=["verbosity", "harmfulness", "specificity"]))
        sub = items.head(3)
        stats = elicit_shard(sub, judge, questions, tmp_path / "out", progress=False)
    n = len(sub) * 2 * len(questions)
    assert judge.n_calls == n and len(_Endpoint.requests) == n + 1  # the 429 was retried once
    # "both have merit" is a malformed answer for a letter question... only because it names no letter
    # and is not a tie word at the start: counted, direction 0
    assert stats.n_malformed == len(sub) * 2 and judge.n_malformed == len(sub) * 2
    j = load_judgments(stats.table)
    assert (j.loc[j["attribute"] == "verbosity", "direction"] == 0).all()
    spec = j[j["attribute"] == "specificity"].set_index(["item_id", "order"])["direction"]
    assert (spec.xs("AB", level="order") == 1).all() and (spec.xs("BA", level="order") == -1).all()
    harm = j[j["attribute"] == "harmfulness"].set_index(["item_id", "order"])["direction"]
    assert (harm.xs("AB", level="order") == -1).all() and (harm.xs("BA", level="order") == 1).all()
    assert all(b["temperature"] == 0.0 and b["model"] == "tiny-judge" for b in _Endpoint.requests[1:])
    assert np.all([b["messages"][0]["content"].startswith("You are comparing") for b in _Endpoint.requests])


class _Reasoner(JsonHandler):
    """A judge that reasons before it answers, as vLLM returns it: with a reasoning parser the
    reasoning in its own field (``reasoning_content``, vLLM before 0.11), else in the content
    between <think> tags (the opening one may be the chat template's); the overall question's
    reasoning runs past the budget (finish_reason length, no answer)."""

    requests: list = []
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with _Reasoner.lock:
            _Reasoner.requests.append(body)
        prompt = body["messages"][0]["content"]
        message, finish = {"role": "assistant"}, "stop"
        if "specificity" in prompt:  # parsed by the server: the reasoning apart, the answer in content
            message.update(content="\n\nA", reasoning_content="A names the steps; B stays general. So A.")
        elif "verbosity" in prompt:  # no parser: the whole reply, tags included
            message["content"] = "<think>\nB is longer... but wait, A? No: B.\n</think>\n\nB"
        elif "harmfulness" in prompt:  # the template opened <think>: only the closing tag is in the reply
            message["content"] = "Both are harmless; B less so... A then.\n</think>\n\nA"
        else:  # the budget ran out mid-reasoning: a leading "A" here is no answer
            message["content"], finish = "A first look at both responses suggests that", "length"
        self.send_json({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                        "usage": {"prompt_tokens": 50, "completion_tokens": 30, "total_tokens": 80}})


def test_a_reasoning_judge_is_read_at_the_answer_after_its_reasoning(items, tmp_path):
    from rmeval.backends.endpoint import reasoning_answer

    _Reasoner.requests = []
    with serving(_Reasoner) as url:
        judge = EndpointPairJudge("r1", base_url=f"{url}/v1", name="r1",
                                  reasoning_tokens=2048, timeout=10)
        questions = questions_for(load_inventory(names=["specificity", "verbosity", "harmfulness"]))
        sub = items.head(2)
        stats = elicit_shard(sub, judge, questions, tmp_path / "out", progress=False)
    n = len(sub) * 2 * len(questions)
    assert len(_Reasoner.requests) == n and {b["max_tokens"] for b in _Reasoner.requests} == {2048}
    j = load_judgments(stats.table).set_index(["item_id", "attribute", "order"])["direction"]
    for attr, first in (("specificity", 1), ("verbosity", -1), ("harmfulness", 1)):  # the letter after the reasoning
        d = j.xs(attr, level="attribute")
        assert (d.xs("AB", level="order") == first).all() and (d.xs("BA", level="order") == -first).all()
    assert (j.xs(OVERALL, level="attribute") == 0).all()
    assert stats.n_malformed == len(sub) * 2  # the cut-off overall replies
    assert stats.extra["generated_tokens"] == 30 * n  # the server's usage: the reasoning's cost
    assert reasoning_answer("<think>still thinking", separated=False, cut=False) is None
    assert reasoning_answer("A", separated=True, cut=True) == "A"  # the parser separated it: the answer stands
    assert reasoning_answer("B", separated=False, cut=False) == "B"


def test_merge_refuses_missing_shards_and_takes_a_complete_set(tmp_path):
    from rmcore.errors import ConfigError

    row = {"item_id": "i", "judge": "x", "attribute": OVERALL, "order": "AB", "direction": 1}
    sh = tmp_path / "shards"
    sh.mkdir()
    pd.DataFrame([row]).to_json(sh / "x.shard-00000-of-00002.jsonl", orient="records", lines=True)
    with pytest.raises(ConfigError, match="1 of 2"):
        merge_shards(tmp_path)
    pd.DataFrame([row, {**row, "order": "BA"}]).to_json(sh / "x.shard-00000-of-00001.jsonl", orient="records",
                                                        lines=True)
    assert len(load_judgments(merge_shards(tmp_path))) == 2


def test_elicit_from_data_counts_the_rows_it_skipped(judge_path, tmp_path, capsys):
    """`--data hh_rlhf:FILE,on_bad=skip`: the bad rows planted in the file (one empty final response,
    one transcript without turns) are counted in elicit_stats.json and the result line."""
    from rmeval.cli import main

    def row(last: str) -> dict[str, str]:
        head = "\n\nHuman: How do I boil an egg?\n\nAssistant:"
        return {"chosen": f"{head} {last}", "rejected": f"{head} No idea."}

    hh = tmp_path / "hh.jsonl"
    rows = [row("Simmer it for nine minutes."), row(""), {"chosen": "no turns", "rejected": "no turns"},
            row("Boil water, add the egg."), row("Put it in boiling water.")]
    hh.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "e"
    assert main(["judges", "elicit", "--data", f"hh_rlhf:{hh},on_bad=skip", "--model", str(judge_path),
                 "--attribute-names", "specificity", "--no-overall", "--out", str(out), "--no-progress",
                 "--max-length", "768"]) == 0
    line = capsys.readouterr().out.strip()
    assert "; 2 data rows skipped, by source and reason in elicit_stats.json)" in line
    stats = json.loads((out / "elicit_stats.json").read_text())
    assert stats["rows_skipped"] == {"hh_rlhf:hh": {"hh_empty_response": 1, "hh_malformed": 1}}
    assert stats["n_made"] == 3 * 2  # the three good rows, one attribute, both orders
