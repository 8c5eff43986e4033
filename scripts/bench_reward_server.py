"""Reward server throughput: N client threads at once vs the same requests one at a time.

Starts ``rmeval serve-reward`` (the command itself, in its own process, bound to 127.0.0.1 on a
free port) and sends OpenRLHF-style requests, one item each as OpenRLHF sends them (``query`` =
prompt + response, ``prompts``, ``labels`` = the conversation as JSON), made from the
(conversation, response) pairs of a data set (default: the demo's simulated set; any data spec,
e.g. RM-Bench chat): first one request at a time, then the same requests from ``--clients``
threads at once. Prints rewards/s for both, their ratio, how many forwards the server ran, and the
largest difference between the two sets of rewards (batching must not change a reward).

    python scripts/bench_reward_server.py [--checkpoint DIR] [--clients 16] [--requests 256] [--max-length 128]
                                          [--data rm_bench:../shared/data/rm-bench/chat_filtered.json]

Default checkpoint: the demo sweep's bradley_terry run at seed 1 (found in outputs/demo/summary.csv;
``bash scripts/demo.sh`` writes it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# the demo's own rating set (recipes/demo.yaml), texts the demo checkpoint was trained on the like of
DEFAULT_DATA = json.dumps({"name": "simulated", "n_prompts": 400, "responses_per_prompt": 4, "human_share": 0.3,
                           "seed": 0})


def demo_checkpoint() -> str:
    from rmtrain.policy.config import SweepRuns, sweep_run_dir

    return sweep_run_dir(SweepRuns(sweep=str(ROOT / "outputs" / "demo"), arms=["bradley_terry"], seed=1,
                                   recipe="recipes/demo.yaml"), "bradley_terry")


def make_requests(spec: str, n: int) -> list[dict[str, Any]]:
    """``n`` one-item requests over the data set's (conversation, response) pairs, in order."""
    from rmcore.data.registry import load_data
    from rmcore.formatting import plain_prompt

    rs = load_data(spec)
    pairs = [([{"role": m["role"], "content": m["content"]} for m in p.messages], r.text)
             for p in rs.prompts for r in p.responses]
    out = []
    for i in range(n):
        conv, response = pairs[i % len(pairs)]
        text = plain_prompt(conv)
        out.append({"query": [f"{text} {response}"], "prompts": [text], "labels": [json.dumps(conv)]})
    return out


def post(url: str, body: dict[str, Any]) -> float:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:  # a new connection per request, as OpenRLHF's client
        return json.loads(r.read())["rewards"][0]


def health(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(base + "/health", timeout=30) as r:
        return json.loads(r.read())


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "rmeval.cli", "serve-reward", "--checkpoint", args.checkpoint, "--host", "127.0.0.1",
           "--port", "0", "--max-length", str(args.max_length), "--device", args.device, "--dtype", args.dtype]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:  # "serving CKPT (device, dtype) on http://127.0.0.1:PORT/get_reward"
        if line.startswith("serving "):
            return proc, line.split(" on ")[-1].strip().removesuffix("/get_reward")
    raise SystemExit(f"rmeval serve-reward exited with code {proc.wait()}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", help="reward model (default: the demo sweep's bradley_terry seed-1 run)")
    ap.add_argument("--data", default=DEFAULT_DATA,
                    help="data SPEC (default: the demo's simulated set), e.g. "
                         "rm_bench:../shared/data/rm-bench/chat_filtered.json")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=256, help="requests per phase, one item each")
    ap.add_argument("--max-length", type=int, default=128, help="tokens per text (the demo trains at 128)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    args = ap.parse_args(argv)
    args.checkpoint = args.checkpoint or demo_checkpoint()
    bodies = make_requests(args.data, args.requests)
    proc, base = start_server(args)
    url = base + "/get_reward"
    try:
        from bench_util import matmul_gflops

        h0 = health(base)
        print(f"machine: {os.cpu_count()} CPU cores, fp32 matmul {matmul_gflops():.0f} GFLOP/s now (a busy machine "
              f"shows less); server: {args.checkpoint} on {h0['device']} ({h0['dtype']}), max length {h0['max_length']}")
        for b in bodies[:8]:  # warm-up: first forwards allocate
            post(url, b)
        t0 = time.perf_counter()
        sequential = [post(url, b) for b in bodies]
        t_seq = time.perf_counter() - t0
        h1 = health(base)
        concurrent: list[float | None] = [None] * len(bodies)
        barrier = threading.Barrier(args.clients + 1)

        def client(k: int) -> None:
            barrier.wait()
            for i in range(k, len(bodies), args.clients):
                concurrent[i] = post(url, bodies[i])

        threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
        for t in threads:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        t_con = time.perf_counter() - t0
        h2 = health(base)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    n = len(bodies)
    diff = max(abs(a - b) for a, b in zip(sequential, concurrent))
    print(f"sequential: {n} requests in {t_seq:.1f} s: {n / t_seq:.1f} rewards/s "
          f"({h1['forwards'] - h0['forwards'] - 8} forwards)")
    print(f"concurrent ({args.clients} clients): {n} requests in {t_con:.1f} s: {n / t_con:.1f} rewards/s "
          f"({h2['forwards'] - h1['forwards']} forwards, largest {h2['largest_forward']} texts)")
    print(f"ratio concurrent/sequential: {t_seq / t_con:.2f}x")
    print(f"largest |reward difference| between the two: {diff:.2e}")


if __name__ == "__main__":
    main()
