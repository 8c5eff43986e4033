"""The leaderboard experiment: its prompt mixes by hand, the helpfulness judge (local tiny model and
an endpoint's log-probabilities), and ``rmeval leaderboard`` end to end on the toy recipe (shrunk),
its figures recomputed from the tables it writes with scipy."""

from __future__ import annotations

import json
import math
from http.server import HTTPServer

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from rmcore.data.schema import PromptRecord, Response
from rmeval.backends.logprobs import LogprobEndpointBackend
from rmeval.cli import main
from rmeval.experiments.comparisons import QUESTION, HelpfulnessJudge, HelpfulnessQuestion
from rmeval.experiments.leaderboard import MIX_NAMES, balanced_halves, prompt_mixes
from rmeval.experiments.settings import JudgeSpec
from tests.support import ROOT, JsonHandler, serving


def _prompt(i, text):
    return PromptRecord(f"p{i}", [{"role": "user", "content": text}], [Response("a", "x"), Response("b", "y")])


def test_mixes_split_at_the_median_and_into_balanced_topic_halves():
    bread = ["bake bread with flour and yeast", "bread flour yeast oven", "sourdough bread starter flour",
             "yeast bread oven rise"]
    sea = ["sea waves ocean tide", "ocean tide and sea salt", "waves of the sea at the ocean shore", "sea ocean"]
    texts = bread + sea
    masks, table = prompt_mixes([_prompt(i, t) for i, t in enumerate(texts)], n_clusters=2, seed=0)
    words = np.array([len(t.split()) for t in texts])
    assert table["words"].tolist() == words.tolist()
    assert masks[0].tolist() == (words > np.median(words)).tolist() and (masks[1] == ~masks[0]).all()
    topic = masks[2]
    assert (masks[3] == ~topic).all()
    assert topic[:4].all() != topic[4:].any() and len(set(topic[:4])) == 1 and len(set(topic[4:])) == 1
    assert list(MIX_NAMES) == ["long", "short", "topic_a", "topic_b"]
    # the largest cluster first, each to the half with fewer prompts: 5 | 3 + 2, then 2 -> the first half
    assert balanced_halves(np.array([2, 5, 3, 2])).tolist() == [1, 0, 1, 0]
    assert balanced_halves(np.array([4, 4, 1])).tolist() == [0, 1, 0]


def test_local_judge_question_and_truncation(tmp_path):
    from rmeval.experiments.responses import resolve_model

    texts = ["Which response is more helpful", "bread", "sea", "A", "B"]
    path = resolve_model("tiny:5", texts=texts, build_dir=tmp_path)
    judge = HelpfulnessJudge(JudgeSpec(model=path, max_length=200), cache=tmp_path / "j.sqlite")
    msgs = [[{"role": "user", "content": "bread " * 400}], [{"role": "user", "content": "sea?"}]]
    p_xy, p_yx = judge.both_orders(msgs, ["bread is baked", "waves"], ["no", "tides"])
    assert ((0 < p_xy) & (p_xy < 1)).all() and ((0 < p_yx) & (p_yx < 1)).all()
    assert judge.n_truncated == 2 and judge.n_asked == 4  # the long prompt in both orders
    # the probability of A, renormalised over A and B, from the model's own next-token logits
    backend = judge.backend
    ids = HelpfulnessQuestion(200).encode(backend, [(msgs[1], "waves", "tides")])[0].prefix
    assert len(ids) <= 200 and QUESTION in backend.tokenizer.decode(ids)
    import torch

    with torch.inference_mode():
        logits = backend.model(input_ids=torch.tensor([ids])).logits[0, -1]
    la, lb = (torch.logsumexp(logits[backend.letter_ids(("A", "B"))[i]], 0) for i in range(2))
    assert p_xy[1] == pytest.approx(float(torch.sigmoid(la - lb)), abs=1e-5)
    judge.close()
    again = HelpfulnessJudge(JudgeSpec(model=path, max_length=200), cache=tmp_path / "j.sqlite")
    q_xy, _ = again.both_orders(msgs, ["bread is baked", "waves"], ["no", "tides"])
    assert again.n_asked == 0 and again.backend is None and q_xy.tolist() == p_xy.tolist()


class _Logprobs(JsonHandler):
    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 20
        if "none" in body["messages"][0]["content"]:
            top = [{"token": "The", "logprob": -0.1, "bytes": None}]
        else:
            top = [{"token": "A", "logprob": math.log(0.6), "bytes": None},
                   {"token": " A", "logprob": math.log(0.1), "bytes": None},
                   {"token": "B", "logprob": math.log(0.2), "bytes": None},
                   {"token": "Sure", "logprob": math.log(0.1), "bytes": None}]
        content = [{"token": top[0]["token"], "logprob": top[0]["logprob"], "bytes": None, "top_logprobs": top}]
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "length", "logprobs": {"content": content},
                              "message": {"role": "assistant", "content": top[0]["token"]}}]}
        self.send_json(reply)


def test_endpoint_judge_reads_first_token_logprobs(tmp_path):
    with serving(_Logprobs, HTTPServer) as url:
        spec = JudgeSpec(model="judge-70b", backend="openai_logprobs",
                         base_url=f"{url}/v1")
        judge = HelpfulnessJudge(spec, cache=tmp_path / "j.sqlite")
        p = judge.p_a([([{"role": "user", "content": "q"}], "x", "y"),
                       ([{"role": "user", "content": "none"}], "x", "y")])
    assert p[0] == pytest.approx(0.7 / 0.9) and np.isnan(p[1])  # "A" and " A" summed; neither letter: missing
    assert isinstance(judge.backend, LogprobEndpointBackend) and judge.backend.n_malformed == 1


def test_leaderboard_command_toy(tmp_path, capfd, minilm_ckpt):
    out = tmp_path / "lb"
    assert main(["leaderboard", "--config", str(ROOT / "recipes" / "leaderboard_toy.yaml"), "--out", str(out),
                 "--data", "simulated:n_prompts=12,responses_per_prompt=2,seed=1",
                 "--set", f"reward_models.minilm={minilm_ckpt}", "--set", "generation.max_new_tokens=4",
                 "--set", "n_boot=50", "--set", "n_assignments=6", "--set", "progress=false",
                 "--wandb-mode", "disabled"]) == 0
    # stdout (the file descriptor: the tiny models' tokenizer training writes there) holds the result alone
    notice, pair, line = capfd.readouterr().out.splitlines()
    assert notice.startswith("TOY RUN") and pair.startswith("minilm vs tiny-judge: tau raw")
    assert line.startswith("leaderboard: 4 policies")
    res = json.loads((out / "leaderboard.json").read_text())
    assert res["notice"].startswith("TOY RUN") and (out / "leaderboard.png").stat().st_size > 0
    n = res["meta"]["n_prompts"]
    mixes = pd.read_parquet(out / "mixes.parquet")
    assert len(mixes) == n and sum(res["mix_sizes"].values()) == 2 * n
    assert len(res["assignments"]) == 6 and all(len(set(a)) > 1 for a in res["assignments"])
    scores = pd.read_parquet(out / "scores.parquet")
    judg = pd.read_parquet(out / "judgments.parquet")
    assert len(scores) == 4 * n and len(judg) == 3 * n and "tiny-2" not in set(judg["policy"])
    # recompute the first assignment's taus from the written tables with scipy
    names, anchor = res["policies"], res["anchor"]
    s = scores.pivot(index="policy", columns="prompt_id", values="score").loc[names]
    c = s - s.loc[anchor]
    jv = [0.5 if p == anchor else judg.loc[judg["policy"] == p, "p_better"].mean() for p in names]
    r = res["reward_models"]["minilm"]["tiny-judge"]
    assert r["judge_value"] == pytest.approx(jv)
    in_mix = {m: set(mixes.loc[(mixes["length_mix"] == m) | (mixes["topic_mix"] == m), "prompt_id"]) for m in MIX_NAMES}
    for a, assignment in enumerate(res["assignments"][:2]):
        raw = [s.loc[p, sorted(in_mix[m])].mean() for p, m in zip(names, assignment)]
        cen = [c.loc[p, sorted(in_mix[m])].mean() for p, m in zip(names, assignment)]
        for got, x in ((r["raw"]["tau_vs_judge_by_assignment"][a], raw),
                       (r["centred"]["tau_vs_judge_by_assignment"][a], cen)):
            want = kendalltau(x, jv).statistic
            assert (np.isnan(got) and np.isnan(want)) or got == pytest.approx(want, abs=1e-12)
    assert "TOY RUN" in (out / "leaderboard.md").read_text()
