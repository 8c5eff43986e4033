"""The stand-ins: every model kind a recipe names becomes a tiny local model of that kind which the
real loaders read (classifier, multi-output classifier, remote-code multi-head model, value head,
generative judge, DPO pair), through the same scorer settings a real run builds; synthetic data in
the released schemas loads through the real loaders; and the served judge (an OpenAI-compatible
endpoint) is read as the expected digit of its first token's log-probabilities."""

from __future__ import annotations

import json
import math
from http.server import HTTPServer

import numpy as np
import pytest

from rmcore.data.loading import load_data
from rmeval.reproduce.context import Context
from rmeval.reproduce.recipe import ModelSpec
from rmeval.reproduce.standins import stand_in_spec
from rmeval.scoring import load_scorer
from tests.support import JsonHandler, serving

MODELS = [
    ModelSpec(name="clf", hub_id="o/clf", params_b=8),
    ModelSpec(name="multi", hub_id="o/multi", loader="classifier", head="3", params_b=7),
    ModelSpec(name="named", hub_id="o/named", loader="classifier", head="helpfulness", params_b=7),
    ModelSpec(name="armo", hub_id="RLHFlow/ArmoRM-Llama3-8B-v0.1", loader="armorm", head="0", trust_remote_code=True,
              params_b=8),
    ModelSpec(name="gated", hub_id="o/gated", loader="remote_code", params_b=8, trust_remote_code=True),
    ModelSpec(name="starling", hub_id="Nexusflow/Starling-RM-34B", loader="starling-rm-34b", params_b=34),
    ModelSpec(name="vh", hub_id="o/vh", loader="value_head", params_b=8),
    ModelSpec(name="nemotron", hub_id="nvidia/Llama-3.1-Nemotron-70B-Reward-HF", loader="nemotron-70b-reward",
              params_b=70),
    ModelSpec(name="judge", hub_id="o/judge", kind="generative_judge", params_b=70),
    ModelSpec(name="dpo", hub_id="o/dpo", kind="dpo_implicit", reference="o/ref", params_b=7),
    ModelSpec(name="dpo-noref", hub_id="o/dpo2", kind="dpo_implicit", reference="none", params_b=7),
]


class _Recipe:
    path = "test"
    stand_in = None


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_each_kind_has_a_tiny_stand_in_the_real_loader_scores(tmp_path, model, one_torch_thread):
    ctx = Context(_Recipe(), tmp_path, stand_in=True)
    info = ctx.stand_in_info(model)
    assert info["what"] and (tmp_path / "stand_ins" / model.name / "stand_in.json").is_file()
    scorer = load_scorer(ctx.scorer_settings(model))
    try:
        items = [([{"role": "user", "content": "How do I bake bread?"}], "Mix flour and water, then bake it."),
                 ([{"role": "user", "content": "Tell me a joke."}], "No.")]
        scores = scorer.score(items)
    finally:
        scorer.close()
    assert scores.shape == (2,) and np.isfinite(scores).all()
    if model.kind == "generative_judge":
        assert ((1 <= scores) & (scores <= 5)).all()  # the expected digit
    if model.kind == "seq_classifier":
        assert scorer.describe()["loader"] in ("classifier", "remote_code", "value_head", "lm_logit")
    again = ctx.stand_in_info(model)  # built once
    assert again == info


@pytest.mark.parametrize("schema, n", [("helpsteer2", 2), ("helpsteer", 4), ("rewardbench", 2), ("rewardbench2", 4)])
def test_synthetic_data_in_the_released_schemas_loads_through_the_real_loaders(tmp_path, schema, n):
    spec = stand_in_spec("d", {"synthetic": schema, "n_prompts": 6, "seed": 1}, tmp_path)
    rs = load_data(spec)
    assert len(rs.prompts) == 6 and all(len(p.responses) == n for p in rs.prompts)
    if schema.startswith("rewardbench"):
        assert rs.preferences


def test_synthetic_helpsteer2_preferences_and_rm_bench_folders(tmp_path, shared_data):
    spec = stand_in_spec("d", {"synthetic": "helpsteer2", "n_prompts": 6, "seed": 1, "preferences": True}, tmp_path)
    rs = load_data(spec)
    assert spec["preference_path"] and len(rs.preferences) == 6
    spec = stand_in_spec("r", {"synthetic": "rm_bench", "subsets": ["chat", "math"], "limit_per_file": 3,
                               "dir": str(shared_data / "rm-bench")}, tmp_path)
    rs = load_data(spec)
    chat = json.loads((shared_data / "rm-bench" / "chat_filtered.json").read_text())[:3]
    assert len(rs.prompts) == 6 and rs.prompts[0].messages[0]["content"] == chat[0]["prompt"]  # real rows, in place


def test_a_synthetic_rm_bench_reads_no_folder_by_default(tmp_path, monkeypatch):
    # the repository's test layout beside the working directory: read only when `dir` names it
    real = tmp_path / "shared" / "data" / "rm-bench"
    real.mkdir(parents=True)
    (real / "chat_filtered.json").write_text(json.dumps([{"id": "real-0", "subset": "chat", "prompt": "real prompt",
                                                           "chosen": ["a"] * 3, "rejected": ["b"] * 3}]))
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    spec = stand_in_spec("r", {"synthetic": "rm_bench", "subsets": ["chat"], "limit_per_file": 2}, tmp_path / "out")
    rows = json.loads((tmp_path / "out" / "r.rm_bench" / "chat_filtered.json").read_text())
    assert [r["id"] for r in rows] == ["chat-0", "chat-1"] and load_data(spec).prompts  # simulated, not the folder
    stand_in_spec("d", {"synthetic": "rm_bench", "subsets": ["chat"], "dir": str(real)}, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "d.rm_bench" / "chat_filtered.json").read_text())[0]["id"] == "real-0"


class _Logprobs(JsonHandler):
    digits: dict[str, float] = {}

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][-1]["content"]
        top = [] if "no digit" in text else [{"token": f" {d}", "logprob": lp, "bytes": None}
                                             for d, lp in _Logprobs.digits.items()]
        top.append({"token": "The", "logprob": -0.1, "bytes": None})
        self.send_json({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "length",
                                     "message": {"role": "assistant", "content": "4"},
                                     "logprobs": {"content": [{"token": "4", "logprob": -0.5, "bytes": None,
                                                               "top_logprobs": top}]}}]})


def test_a_served_judge_is_read_as_the_expected_digit(monkeypatch):
    from rmeval.reproduce.endpoint_judge import EndpointJudgeScorer

    monkeypatch.setenv("OPENAI_API_KEY", "test")
    _Logprobs.digits = {"3": math.log(0.2), "4": math.log(0.5), "5": math.log(0.1)}
    with serving(_Logprobs, HTTPServer) as url:
        s = EndpointJudgeScorer("judge-70b", base_url=f"{url}/v1", concurrency=2)
        got = s.score([([{"role": "user", "content": "q"}], "an answer"),
                       ([{"role": "user", "content": "q"}], "no digit here")])
    p = np.array([0.2, 0.5, 0.1]) / 0.8  # the digits' probabilities renormalised over the digits listed
    assert got[0] == pytest.approx(float(p @ np.array([3, 4, 5])))
    assert math.isnan(got[1]) and s.n_malformed == 1
