"""The OpenAI-compatible pairwise judge of `rmtrain policy-eval` against a local server that answers
like one (127.0.0.1 only): verdicts parsed from the reply, a malformed reply left unresolved."""

from __future__ import annotations

import json

from rmeval.experiments.winrate import make_judge
from tests.support import JsonHandler, serving

REPLIES = {"first": "The first is deeper. [[A]]", "second": "[[B]]", "odd": "I cannot decide."}


class _Chat(JsonHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][0]["content"]
        content = next(v for k, v in REPLIES.items() if f"question-{k}" in prompt)
        self.send_json({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": content}}]})


def test_openai_judge_parses_verdicts_and_leaves_malformed_unresolved(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    with serving(_Chat) as url:
        judge = make_judge("openai:judge-model", base_url=f"{url}/v1")
        got = judge.judge([(f"question-{k}", "answer a", "answer b") for k in ("first", "second", "odd")])
    assert got[:2] == ["A", "B"]
    assert got[2] is None  # no verdict in the reply: unresolved, never a win for either side
