"""A reproduction on a cluster: the task script of a judge the recipe serves starts ``vllm serve``
(here a fake ``vllm`` on PATH: a small OpenAI-protocol server on a loopback port, written by the
test), waits for its health, scores through it and stops it; tensor-parallel sizes, nodes and task
time limits follow from the models' sizes by the stated formulas (checked against values worked by
hand); the dry run with ``--executor slurm`` prints the sbatch scripts with account, QoS and time
and the server's start; multi-GPU placement comes from the recipe; gated models, missing data and
guessed or unpinned Hub ids are named before anything runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from rmeval.cli import main
from rmeval.reproduce.cluster import Compute, ServeSpec, serve_parallel, task_minutes
from rmeval.reproduce.recipe import ModelSpec, build_recipe, load_reproduction
from tests.support import ROOT

RECIPES = ROOT / "recipes" / "reproduce"
TABLE9 = RECIPES / "pairwise_misses_table9_eighteen_scorers.yaml"
JP = RECIPES / "judgeprofile_reweighting.yaml"
RA = RECIPES / "reward_auditor_table1_rmbench_chat.yaml"

# The fake server: /health answers 503 for its first 1.5 s (the engine "loads"), then 200;
# /v1/models lists the served name; /v1/chat/completions answers the rating prompt's first token
# with one digit, 1 + (words of the rated response) mod 5, as its only top log-probability. Every
# request is logged (path, time) to $FAKE_VLLM_LOG, its pid and argv to $FAKE_VLLM_LOG.pid.
FAKE_VLLM = '''
import json, os, re, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

argv = sys.argv[1:]
assert argv[0] == "serve", argv
model = argv[argv.index("--served-model-name") + 1]
host, port = argv[argv.index("--host") + 1], int(argv[argv.index("--port") + 1])
log = os.environ["FAKE_VLLM_LOG"]
with open(log + ".pid", "w") as f:
    json.dump({"pid": os.getpid(), "argv": argv}, f)
if os.environ.get("FAKE_VLLM_MODE") == "crash":
    print("fake vllm: CUDA out of memory", flush=True)
    sys.exit(3)
start = time.monotonic()

def note(path):
    with open(log, "a") as f:
        f.write(json.dumps({"path": path, "t": time.time()}) + "\\n")

class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        note(self.path)
        if self.path == "/health":
            self.send(200 if time.monotonic() - start > 1.5 else 503, {})
        elif self.path == "/v1/models":
            self.send(200, {"object": "list", "data": [{"id": model, "object": "model"}]})
        else:
            self.send(404, {})
    def do_POST(self):
        note(self.path)
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = req["messages"][-1]["content"]
        if text.startswith("You are comparing two responses"):  # a JudgeProfile call: a reasoning judge
            with open(log + ".max_tokens", "a") as f:
                f.write(str(req["max_tokens"]) + "\\n")
            a, b = re.search(r"\\[Response A\\]\\n(.*)\\n\\n\\[Response B\\]\\n(.*)\\n\\nQuestion", text, re.S).groups()
            letter = "A" if len(a) >= len(b) else "B"  # the longer one shown
            thought = "Response A runs longer than B... or does it? Compare again."
            parsed = "--reasoning-parser" in argv  # vLLM separates the reasoning only with a parser
            message = ({"role": "assistant", "content": "\\n\\n" + letter, "reasoning": thought} if parsed
                       else {"role": "assistant", "content": thought + "\\n</think>\\n\\n" + letter})
            self.send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": model,
                            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                            "usage": {"prompt_tokens": 9, "completion_tokens": 25, "total_tokens": 34}})
            return
        resp = re.search(r"\\[Response\\]\\n(.*)\\n\\nAnswer with a single digit", text, re.S).group(1)
        digit = str(1 + len(resp.split()) % 5)
        top = [{"token": digit, "logprob": 0.0, "bytes": None}]
        self.send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": model,
                        "choices": [{"index": 0, "finish_reason": "length",
                                     "message": {"role": "assistant", "content": digit},
                                     "logprobs": {"content": [{"token": digit, "logprob": 0.0, "bytes": None,
                                                               "top_logprobs": top}]}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

ThreadingHTTPServer((host, port), H).serve_forever()
'''


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def served_recipe(tmp_path: Path, **serve) -> Path:
    raw = {
        "reproduce": {"study": "pairwise-misses", "table": "Table 9", "title": "a served judge", "analysis": "audit"},
        "data": {"sim": {"spec": {"name": "simulated", "n_prompts": 6, "seed": 3}, "conditions": ["original"]}},
        "models": [{"name": "judge-70b", "hub_id": "example/judge-70B", "kind": "generative_judge", "params_b": 70.6,
                    "serve": serve, "gated": False}],
        "columns": [{"name": "share", "data": "sim", "key": "share.original"}],
        "published": [{"table": "Table 9", "row": "judge-70b", "column": "share", "value": 0.3, "source": "test"}],
        "settings": {"n_boot": 50, "n_boot_regression": 50},
        "stand_in": {"data": {"sim": {"name": "simulated", "n_prompts": 6}}},
    }
    path = tmp_path / "served.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def fake_vllm_env(tmp_path: Path, mode: str = "") -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text(f"#!{sys.executable}\n" + textwrap.dedent(FAKE_VLLM))
    exe.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_VLLM_LOG": str(tmp_path / "vllm"),
           "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    if mode:
        env["FAKE_VLLM_MODE"] = mode
    return env


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_the_task_starts_its_vllm_server_waits_for_health_scores_through_it_and_stops_it(tmp_path, capsys):
    recipe, out = served_recipe(tmp_path), tmp_path / "out"
    assert main(["reproduce", str(recipe), "--dry-run", "--executor", "slurm", "--account", "lab", "--out",
                 str(out)]) == 0
    printed = capsys.readouterr().out
    script = out / "tasks" / "judge-70b.sh"
    assert "vllm serve example/judge-70B" in printed and script.is_file()
    env = fake_vllm_env(tmp_path)
    res = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    started = json.loads((tmp_path / "vllm.pid").read_text())
    argv = started["argv"]
    # 70.6B in bfloat16 = 141.2 GB; one 80 GB GPU holds 80 x 0.9 x 0.7 = 50.4 GB of weights: 2.8 -> 4
    assert argv[argv.index("--tensor-parallel-size") + 1] == "4"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    log = [json.loads(x) for x in (tmp_path / "vllm").read_text().splitlines()]
    first_ok = next(i for i, e in enumerate(log) if e["path"] == "/v1/models")
    chats = [i for i, e in enumerate(log) if e["path"] == "/v1/chat/completions"]
    assert sum(e["path"] == "/health" for e in log[:first_ok]) >= 2  # polled while it answered 503
    assert chats and min(chats) > first_ok  # used only once healthy and listing the model
    # the judgments are the server's: 1 + (words of the response) mod 5 for every text
    from rmcore.data.loading import load_data

    rs = load_data({"name": "simulated", "n_prompts": 6, "seed": 3}, None, 0)
    want = {r.response_id: 1 + len(r.text.split()) % 5 for p in rs.prompts for r in p.responses}
    scores = pd.read_parquet(out / "rows" / "judge-70b" / "sim" / "scores.parquet")
    got = scores[scores["condition"] == "original"].set_index("response_id")["score"]
    assert len(got) == len(want) and all(got[k] == pytest.approx(v) for k, v in want.items())
    assert (out / "rows" / "judge-70b" / "done.json").is_file()
    deadline = time.monotonic() + 10
    while not gone(started["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(started["pid"])  # the trap stopped the server


def test_a_local_run_serves_the_judge_through_its_task_script_and_builds_the_table(tmp_path, capsys, monkeypatch):
    env = fake_vllm_env(tmp_path)
    for k in ("PATH", "FAKE_VLLM_LOG", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(k, env[k])
    out = tmp_path / "local"
    assert main(["reproduce", str(served_recipe(tmp_path)), "--out", str(out), "--wandb-mode", "disabled"]) == 0
    assert "1 rows computed, 0 cached, 0 failed" in capsys.readouterr().out
    assert (out / "table.md").is_file() and (out / "tasks" / "judge-70b.sh").is_file()
    rec = json.loads((out / "rows" / "judge-70b" / "done.json").read_text())
    assert "endpoint http://127.0.0.1:" in rec["how"]
    assert gone(json.loads((tmp_path / "vllm.pid").read_text())["pid"])


def test_a_server_that_dies_while_loading_fails_the_task_with_its_log_and_no_row(tmp_path):
    recipe, out = served_recipe(tmp_path, startup_timeout_min=2), tmp_path / "out"
    assert main(["reproduce", str(recipe), "--dry-run", "--executor", "slurm", "--out", str(out)]) == 0
    res = subprocess.run(["bash", str(out / "tasks" / "judge-70b.sh")], env=fake_vllm_env(tmp_path, "crash"),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0
    assert "exited before" in res.stderr and "CUDA out of memory" in res.stderr  # its log's tail
    assert not (out / "rows" / "judge-70b" / "done.json").exists()


def reasoning_recipe(tmp_path: Path, parser: str | None) -> Path:
    from rmeval.reproduce.standins import stand_in_spec

    spec = stand_in_spec("rb", {"synthetic": "rewardbench", "n_prompts": 3, "seed": 2}, tmp_path / "data")
    raw = {
        "reproduce": {"study": "judgeprofile", "table": "Reweighting", "title": "a reasoning judge",
                      "analysis": "judges"},
        "data": {"rb": {"spec": spec}},
        "models": [{"name": "r1", "hub_id": "example/reasoner-8B", "kind": "generative_judge", "params_b": 8.0,
                    "max_length": 1024, "serve": {}, "gated": False,
                    "reasoning": {"max_tokens": 300, **({"parser": parser} if parser else {})}}],
        "panel_rows": [{"name": "all"}],
        "columns": [{"name": "acc", "key": "reweight.base_accuracy", "rows": ["r1"]}],
        "settings": {"attributes": ["specificity", "verbosity"]},
    }
    path = tmp_path / "reasoning.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.parametrize("parser", ["deepseek_r1", None])
def test_a_reasoning_judge_is_served_with_its_parser_and_read_after_its_reasoning(tmp_path, parser):
    """The served judge's `vllm serve` line (the task's) started as is against the fake vLLM, which
    separates the reasoning only when given --reasoning-parser (else <think>...</think> in the reply);
    the elicitation reads the letter after it, with the recipe's reply budget."""
    from rmcore.runtime.jobs import wait_for_health
    from rmeval.judges.tables import load_judgments
    from rmeval.reproduce.cluster import PORT_VAR
    from rmeval.reproduce.context import Context
    from rmeval.reproduce.judges import elicit_judge
    from rmeval.reproduce.plan import plan_recipe
    from rmeval.reproduce.serve import free_port

    recipe = load_reproduction(reasoning_recipe(tmp_path, parser))
    row = next(r for r in plan_recipe(recipe, tmp_path / "plan")["rows"] if r["row"] == "r1")
    cmd = row["server"]["command"]
    assert cmd[cmd.index("--max-model-len") + 1] == str(1024 + 512 + 300)  # the text, its prompt, the reasoning
    assert ("--reasoning-parser" in cmd) == bool(parser) and (
        not parser or cmd[cmd.index("--reasoning-parser") + 1] == parser)
    # 3 items x 2 orders x (2 attributes + overall) calls, each generating the whole reply budget
    assert row["texts_total"] == 18 and row["generated_m"] == pytest.approx(18 * 300 / 1e6, abs=5e-4)
    port = str(free_port())
    env = fake_vllm_env(tmp_path)
    server = subprocess.Popen([a if a != PORT_VAR else port for a in cmd], env=env)
    try:
        wait_for_health(f"http://127.0.0.1:{port}/health", lambda: server.poll() is None, 30, "fake vllm")
        ctx = Context(recipe, tmp_path / "out", endpoints={"r1": f"http://127.0.0.1:{port}/v1"})
        elicit_judge(ctx, recipe.model("r1"))
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert set((tmp_path / "vllm.max_tokens").read_text().split()) == {"300"}
    stats = json.loads((tmp_path / "out" / "rows" / "r1" / "elicit_stats.json").read_text())
    assert stats["n_made"] == 18 and stats["n_malformed"] == 0 and stats["generated_tokens"] == 18 * 25
    items = pd.read_json(tmp_path / "out" / "data" / "items.jsonl", lines=True).set_index("item_id")
    want = {i: 1 if len(r.response_a) >= len(r.response_b) else -1 for i, r in items.iterrows()}
    j = load_judgments(stats["judgments"])
    assert len(j) == 18 and all(d == want[i] for i, d in zip(j["item_id"], j["direction"]))


@pytest.mark.parametrize("params_b, dtype, gpu_gb, tp, pp", [
    (8.03, "bfloat16", 80, 1, 1),     # 16.1 GB / 50.4 GB -> 1
    (27.2, "bfloat16", 80, 2, 1),     # 54.4 / 50.4 = 1.08 -> 2
    (70.6, "bfloat16", 80, 4, 1),     # 141.2 / 50.4 = 2.8 -> 4
    (70.6, "bfloat16", 141, 2, 1),    # 141.2 / (141 x 0.63 = 88.8) = 1.59 -> 2
    (671.0, "float8", 80, 8, 2),      # 671 / 50.4 = 13.3 GPUs: 8 per node, 2 nodes
    (671.0, "float8", 141, 8, 1),     # 671 / 88.8 = 7.6 -> 8: one H200 node
    (1000.0, "float8", 80, 8, 3),     # 1000 / 50.4 = 19.8: 3 nodes of 8
])
def test_tensor_and_pipeline_parallel_sizes_follow_the_weights(params_b, dtype, gpu_gb, tp, pp):
    bytes_per = {"bfloat16": 2, "float8": 1}[dtype]
    assert serve_parallel(params_b * bytes_per, Compute(gpu_memory_gb=gpu_gb), ServeSpec()) == (tp, pp)


def test_a_task_time_limit_counts_download_load_and_compute():
    c = Compute()  # 100 MB/s, 1 GB/s, 5 min server start, 3 x compute + 30 min, half hours
    m = task_minutes(weights_gb=141.2, download=True, served=True, gpu_seconds=4 * 600.0, parallel=4, c=c)
    # download 141,200 MB / 100 MB/s = 1,412 s = 23.5 min; load 141.2 s = 2.35 min + 5; compute 10 min
    assert m["download_min"] == pytest.approx(23.5, abs=0.05) and m["load_min"] == pytest.approx(7.4, abs=0.05)
    assert m["compute_min"] == pytest.approx(10.0)
    assert m["timeout_min"] == 120  # 23.5 + 7.35 + 3 x 10 + 30 = 90.9 min, rounded up to half hours
    assert task_minutes(weights_gb=141.2, download=True, served=True, gpu_seconds=4 * 600.0, parallel=4,
                        c=Compute(download_mb_s=1000))["download_min"] == pytest.approx(2.4, abs=0.05)


def test_dry_run_on_slurm_prints_account_qos_time_the_server_start_and_the_gpu_hour_formula(tmp_path, capsys,
                                                                                        no_network):
    out = tmp_path / "t9"
    assert main(["reproduce", str(TABLE9), "--dry-run", "--executor", "slurm", "--account", "lab-a", "--qos", "high",
                 "--partition", "gpu", "--sbatch", "constraint=h100", "--timeout-min", "240", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("#SBATCH --account=lab-a") == text.count("#!/bin/bash") > 1
    assert text.count("#SBATCH --qos=high") == text.count("#SBATCH --time=240") == text.count("#!/bin/bash")
    assert "#SBATCH --constraint=h100" in text and "#SBATCH --partition=gpu" in text
    assert "vllm serve meta-llama/Llama-3.1-70B-Instruct" in text and "--tensor-parallel-size 4" in text
    assert "trap stop_server EXIT" in text and "rmeval.reproduce.serve wait" in text
    assert "compute = 2 x N_active x (prompt tokens / 150 TFLOP/s" in text and "GPU hours in all:" in text
    plan = json.loads((out / "plan.json").read_text())
    judge = next(r for r in plan["rows"] if r["row"] == "judge-llama-3.1-70b")
    assert judge["gpus"] == 4 and judge["slurm"]["gpus"] == 4 and judge["placement"]["mode"] == "served"
    assert not any((out / "rows").glob("*/done.json"))


def test_a_model_over_several_gpus_takes_its_placement_from_the_recipe(tmp_path):
    from rmeval.reproduce.context import Context
    from rmeval.reproduce.plan import plan_recipe

    r = load_reproduction(RA)
    star = r.model("starling-rm-34b")
    assert star.device_map == "auto" and star.gpus == 2
    rows = {x["row"]: x for x in plan_recipe(r, tmp_path)["rows"]}
    # 34.4B x 2 bytes x 1.25 + 1 = 87 GB: two 80 GB GPUs, one model over both
    assert rows["starling-rm-34b"]["gpus"] == rows["starling-rm-34b"]["slurm"]["gpus"] == 2
    assert Context(r, tmp_path).scorer_settings(star).placement.device_map == "auto"
    raw = yaml.safe_load(RA.read_text())
    raw["models"][0].pop("device_map")
    with pytest.raises(Exception, match="needs 2 GPUs.*device_map: auto"):
        build_recipe(raw, tmp_path / "bad.yaml")


def test_gated_models_are_listed_and_a_run_without_a_token_stops_before_writing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no stored token, an empty cache
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert main(["reproduce", str(TABLE9), "--dry-run", "--out", str(tmp_path / "plan")]) == 0
    gated = json.loads((tmp_path / "plan" / "plan.json").read_text())["gated"]
    assert set(gated) == {"meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"}
    capsys.readouterr()
    out = tmp_path / "run"
    assert main(["reproduce", str(TABLE9), "--out", str(out), "--only", "judge-llama-3.1-8b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "meta-llama/Llama-3.1-8B-Instruct" in err[0] and "HF_TOKEN" in err[0]
    assert not out.exists()


def test_the_hub_decides_where_it_answers_and_the_list_where_it_cannot(monkeypatch):
    from rmeval.reproduce import hub

    hub._hub_gated.cache_clear()
    answers = {"someone/licensed-7B": "manual", "meta-llama/Llama-3.1-8B-Instruct": None}
    monkeypatch.setattr(hub, "_hub_gated", lambda i: answers[i])
    models = [ModelSpec(name="a", hub_id="someone/licensed-7B", params_b=7),
              ModelSpec(name="b", hub_id="meta-llama/Llama-3.1-8B-Instruct", params_b=8),
              ModelSpec(name="c", hub_id="google/gemma-2-9b-it", params_b=9, gated=False)]
    got = hub.gated_models(models, ask_hub=True)
    assert got["someone/licensed-7B"] == "the Hub: gated (manual)"
    assert "known gated owner" in got["meta-llama/Llama-3.1-8B-Instruct"]  # the Hub did not answer: the list
    assert "google/gemma-2-9b-it" not in got  # the recipe's gated: false


def test_missing_data_is_one_line_naming_what_to_fetch_and_no_recipe_reads_shared_data(tmp_path, capsys, shared_data):
    for path in RECIPES.glob("*.yaml"):
        assert "shared/data" not in path.read_text(), path.name
    out = tmp_path / "jp"
    assert main(["reproduce", str(JP), "--stand-in", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "data.rm_bench" in err[0] and "git clone https://github.com/THU-KEG/RM-Bench" in err[0]
    assert not out.exists()
    # the tests' copies, passed explicitly: the data check passes and the tasks get the same path
    assert main(["reproduce", str(JP), "--stand-in", "--dry-run", "--executor", "slurm", "--out", str(out),
                 "--data-source", f"rm_bench={shared_data / 'rm-bench'}",
                 "--data-source", f"hh_rlhf={shared_data / 'hh-rlhf' / 'harmless-base_test.jsonl.gz'}"]) == 0
    plan = json.loads((out / "plan.json").read_text())
    assert plan["data"]["rm_bench"]["source"] == "counted from the data on disk"
    script = (out / "tasks" / "qwen3.5-4b.sh").read_text()
    assert f"data_sources.rm_bench.path=\"{shared_data / 'rm-bench'}\"" in script


def test_unpinned_and_guessed_hub_ids_and_the_served_deepseek_judges(tmp_path, capsys, no_network):
    assert main(["reproduce", str(JP), "--dry-run", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    plan = json.loads((tmp_path / "plan.json").read_text())
    guessed = {g.split(":")[0] for g in plan["pinning"]["guessed"]}
    assert {"Qwen/Qwen3.5-0.8B", "Qwen/Qwen3.5-27B", "google/gemma-4-31b-it", "deepseek-ai/DeepSeek-V4"} <= guessed
    assert "deepseek-ai/DeepSeek-R1" in plan["pinning"]["unpinned"]
    r1 = next(r for r in plan["rows"] if r["row"] == "deepseek-r1")
    assert r1["placement"]["mode"] == "external" and (r1["placement"]["tp"], r1["placement"]["pp"]) == (8, 2)
    assert "ray start --head" in text and "--pipeline-parallel-size 2" in text and "DEEPSEEK_R1_ENDPOINT" in text
    # GPU hours at the 37B active parameters, from the row's own tokens (prompt at 150, reply at 40 TFLOP/s)
    want = 2 * 37e9 * (r1["tokens_m"] * 1e6 / 150e12 + r1["generated_m"] * 1e6 / 40e12) / 3600
    assert r1["gpu_hours"] == pytest.approx(want, rel=0.01)
    # items: RM-Bench chat 129 + HH-RLHF, RewardBench, SHP capped at 1,000 + HelpSteer2's 480 (RewardBench 2 capped);
    # each asked 96 attributes and the overall question in both orders
    assert r1["texts_total"] == (129 + 1000 + 480 + 1000 + 1000 + 1000) * 2 * 97
    # R1 reasons first: its reply budget, 4,096 tokens per call (an upper bound), with vLLM's parser
    assert r1["generated_m"] == pytest.approx(r1["texts_total"] * 4096 / 1e6, abs=1e-3)
    assert "--max-model-len 12800 --reasoning-parser deepseek_r1" in text  # 8,192 + 512 + 4,096
    v4 = next(r for r in plan["rows"] if r["row"] == "deepseek-v4")
    assert v4["generated_m"] == pytest.approx(v4["texts_total"] * 4 / 1e6, abs=1e-3)  # 4 reply tokens per call
    assert {r["head"] for r in plan["rows"]
            if r["kind"] == "generative_judge" and "NOT" not in r["note"]} == {"answer letters"}


def test_a_generative_rm_of_a_suitability_table_is_read_at_its_verdict_letter(tmp_path, no_network):
    assert main(["reproduce", str(RA), "--dry-run", "--out", str(tmp_path)]) == 0
    rows = {r["row"]: r for r in json.loads((tmp_path / "plan.json").read_text())["rows"]}
    assert rows["qwen3-8b"]["head"] == "verdict letter A/B" and rows["skywork-v2-qwen3-8b"]["head"] == "its one output"


def test_a_table_of_another_recipes_runs_says_so_in_its_dry_run(tmp_path, capsys, no_network):
    base = RECIPES / "pairwise_misses_table9_eighteen_scorers.yaml"
    assert main(["reproduce", str(base), "--dry-run", "--out", str(tmp_path / "t9")]) == 0
    base_text = capsys.readouterr().out
    assert main(["reproduce", str(RECIPES / "pairwise_misses_table5_judge_digits.yaml"), "--dry-run", "--out",
                 str(tmp_path / "t5")]) == 0
    text = capsys.readouterr().out
    assert "The rows of pairwise_misses_table9_eighteen_scorers.yaml (runs_of)" in text
    assert ("the rows, are the runs of pairwise_misses_table9_eighteen_scorers.yaml: counted there, "
            "not in addition") in text
    assert "runs_of" not in base_text and "\n\n\n" not in text and "\n\n\n" not in base_text  # no blank-line runs
    hours = [json.loads((tmp_path / d / "plan.json").read_text())["gpu_hours"] for d in ("t9", "t5")]
    assert hours[0] == hours[1] > 0  # the same rows: the same hours, which a total counts once


def test_the_costs_beyond_the_rows_are_in_the_total(tmp_path, no_network):
    from rmeval.reproduce.plan import plan_recipe

    plan = plan_recipe(load_reproduction(RECIPES / "pairwise_misses_table1_helpsteer2_audit.yaml"), tmp_path)
    sweep = next(c for c in plan["costs"] if c["kind"] == "sweep")
    assert sweep["runs"] == 84  # 2 models x (6 arms x 3 learning rates + 6 arms x 4 more seeds)
    assert plan["gpu_hours"] == pytest.approx(plan["rows_gpu_hours"] + sum(c["gpu_hours"] for c in plan["costs"]),
                                              abs=0.02)
    ppo = plan_recipe(load_reproduction(RECIPES / "reward_auditor_ppo_winrates.yaml"), tmp_path / "ppo")
    assert next(c for c in ppo["costs"] if c["kind"] == "ppo")["trainings"] == 10  # 5 servable x clean, perturbed
