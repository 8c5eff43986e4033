"""Reward server throughput: N client threads at once vs the same requests one at a time.

Starts ``rmeval serve-reward`` (the command itself, in its own process, bound to 127.0.0.1 on a
free port) and sends OpenRLHF-style requests, one item each as OpenRLHF sends them (``query`` =
prompt + response, ``prompts``, ``labels`` = the conversation as JSON), made from the
(conversation, response) pairs of a data set (default: the demo's simulated set; any data spec,
e.g. RM-Bench chat), ``--rollouts-per-prompt`` consecutive requests per prompt (OpenRLHF sends
16): first one request at a time, then the same requests from ``--clients`` threads at once.
Prints rewards/s for both, their ratio, how many forwards the server ran, and the largest
difference between the rewards of every phase (batching must not change a reward).

Then the ceiling: the same texts through the same scorer in this process, without HTTP, one per
forward and in forwards of the server's mean concurrent batch (the first round's). The three are
timed in turn, ``--rounds`` times (server, model alone, server, model alone, ...), and the medians
reported: on a shared machine a ceiling timed once, after the server, can land in a busier or
quieter minute than the server's phases. Where the median ceiling still comes out below the
concurrent rate it bounds, a WARNING line says the load changed and the figures do not compare.
Concurrent serving cannot beat the batched figure, so on a machine where a batched forward is
little cheaper per text than a single one (a small encoder on a 2-core CPU) the ratio stays near
that of the two model-only figures plus the per-request HTTP time that concurrency hides; on a GPU a forward
of 16 texts costs about what one costs. A decoder reward model also encodes a prompt once for all of its
rollouts in a forward (``--model qwen3``: a Qwen3-architecture reward model built from a config with a score
head drawn at random, for throughput only: its rewards mean nothing).

    python scripts/bench_reward_server.py [--checkpoint DIR | --model qwen3] [--clients 16] [--requests 256]
                                          [--rollouts-per-prompt 1] [--max-length 128] [--batch-wait-ms 0]
                                          [--rounds 3]
                                          [--data rm_bench:../shared/data/rm-bench/chat_filtered.json]

Default checkpoint: the demo sweep's bradley_terry run at seed 1 (found in outputs/demo/summary.csv;
``bash scripts/demo.sh`` writes it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
# the demo's own rating set (recipes/demo.yaml), texts the demo checkpoint was trained on the like of
DEFAULT_DATA = json.dumps({"name": "simulated", "n_prompts": 400, "responses_per_prompt": 4, "human_share": 0.3,
                           "seed": 0})


def demo_checkpoint() -> str:
    from rmtrain.policy.config import SweepRuns, sweep_run_dir

    return sweep_run_dir(SweepRuns(sweep=str(ROOT / "outputs" / "demo"), arms=["bradley_terry"], seed=1,
                                   recipe="recipes/demo.yaml"), "bradley_terry")


def make_requests(spec: str, n: int, rollouts_per_prompt: int = 1) -> tuple[list[dict[str, Any]], list[Any]]:
    """``n`` one-item requests, ``rollouts_per_prompt`` consecutive ones per prompt (its responses in
    turn), and their (conversation, response) items."""
    from rmcore.data.loading import load_data
    from rmcore.models.formatting import plain_prompt

    rs = load_data(spec)
    k = rollouts_per_prompt
    pairs = []
    for p in rs.prompts:
        conv = [{"role": m["role"], "content": m["content"]} for m in p.messages]
        responses = [r.text for r in p.responses]
        if k > 1:  # k rollouts of this prompt, its responses in turn
            responses = [responses[i % len(responses)] for i in range(k)] if responses else []
        pairs += [(conv, r) for r in responses]
    out, items = [], []
    for i in range(n):
        conv, response = pairs[i % len(pairs)]
        text = plain_prompt(conv)
        out.append({"query": [f"{text} {response}"], "prompts": [text], "labels": [json.dumps(conv)]})
        items.append((conv, response))
    return out, items


def qwen3_checkpoint(spec: str) -> str:
    """A Qwen3-architecture reward model from a config (bench_util), its tokenizer trained on the
    data's texts and a score head drawn at random: for throughput only."""
    from bench_util import build_qwen3, rating_set_texts, reward_checkpoint

    from rmcore.data.loading import load_data

    out = Path(tempfile.mkdtemp(prefix="bench_reward_server_"))
    base = build_qwen3(out / "base", rating_set_texts(load_data(spec)))
    return reward_checkpoint(base, out / "reward_model")


class ModelAlone:
    """The served scorer without HTTP, in this process, loaded and its texts encoded once so that it
    can be timed between the server's phases: one text per forward, and ``batch`` per forward (the
    ceiling of concurrent serving on this machine)."""

    def __init__(self, args: argparse.Namespace, items: list[Any]) -> None:
        from rmcore.models.device import Placement
        from rmeval.scoring.server import load_reward_scorer

        self.scorer = load_reward_scorer(args.checkpoint, Placement(device=args.device, dtype=args.dtype),
                                         max_length=args.max_length)
        self.scorer.max_tokens = 2**30
        self.enc = self.scorer.encode(items)
        self.convs = [m for m, _ in items]
        self.scorer.batch_size = 8  # warm-up: first forwards allocate
        self.scorer.score_encodings(self.enc[:8], self.convs[:8])

    def _pass(self, batch: int) -> float:
        self.scorer.batch_size = batch  # one forward per call, as the server runs it
        t0 = time.perf_counter()
        for i in range(0, len(self.enc), batch):
            self.scorer.score_encodings(self.enc[i:i + batch], self.convs[i:i + batch])
        return len(self.enc) / (time.perf_counter() - t0)

    def rates(self, batch: int) -> tuple[float, float]:
        """Rewards/s with one text per forward and with ``batch`` texts per forward."""
        return self._pass(1), self._pass(max(batch, 1))

    def close(self) -> None:
        self.scorer.close()


class Round(NamedTuple):  # not a dataclass: the tests load this script without registering it as a module
    """One round's figures, in rewards/s except ``batch``; a round runs the server's two phases and
    then the model alone, so a change of the machine's load shows as rounds that disagree."""

    seq: float  # the server, one request at a time
    con: float  # the server, --clients threads at once
    batch: int  # the server's mean texts per forward in this round's concurrent phase
    one: float  # the model alone, one text per forward
    batched: float  # the model alone, in forwards of the first round's mean batch


def summary(rounds: list[Round]) -> list[str]:
    """The medians over the rounds and, where the model-alone ceiling is below the concurrent rate
    it bounds, a warning: the load changed between measurements and the figures are not comparable.
    Ratios are the median of each round's own ratio (a round's figures are measured close in time)."""
    med = statistics.median
    seq, con, one, bat = (med([getattr(r, k) for r in rounds]) for k in ("seq", "con", "one", "batched"))
    ratio, ceiling = med(r.con / r.seq for r in rounds), med(r.batched / r.seq for r in rounds)
    batch = rounds[0].batch
    lines = [f"medians over {len(rounds)} rounds: sequential {seq:.1f}, concurrent {con:.1f} rewards/s: "
             f"ratio concurrent/sequential {ratio:.2f}x",
             f"the model alone (no HTTP, this process): {one:.1f} rewards/s one text per forward, "
             f"{bat:.1f} in forwards "
             f"of {batch} (the server's mean concurrent batch): concurrent serving reaches {con / bat:.0%} of that "
             f"ceiling, and no server can exceed {ceiling:.2f}x over the sequential figure on this machine"]
    below = sum(r.batched < r.con for r in rounds)
    if bat < con:
        lines.append(f"WARNING: the model-alone ceiling ({bat:.1f} rewards/s) is below the measured concurrent rate "
                     f"({con:.1f}; in {below} of {len(rounds)} rounds): the machine's load changed between the "
                     f"measurements, so these figures do not bound each other; rerun on an idle machine")
    return lines


def post(url: str, body: dict[str, Any]) -> float:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:  # a new connection per request, as OpenRLHF's client
        return json.loads(r.read())["rewards"][0]


def serve(url: str, bodies: list[dict[str, Any]], clients: int) -> tuple[float, list[float]]:
    """(seconds, rewards) of every request sent from ``clients`` threads at once (1: one at a time)."""
    if clients == 1:
        t0 = time.perf_counter()
        rewards = [post(url, b) for b in bodies]
        return time.perf_counter() - t0, rewards
    out: list[float] = [0.0] * len(bodies)
    errors: list[BaseException] = []
    barrier = threading.Barrier(clients + 1)

    def client(k: int) -> None:
        barrier.wait()
        try:
            for i in range(k, len(bodies), clients):
                out[i] = post(url, bodies[i])
        except BaseException as e:  # raised in the main thread below, not lost with the thread
            errors.append(e)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0, out


def health(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(base + "/health", timeout=30) as r:
        return json.loads(r.read())


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "rmeval.cli", "serve-reward", "--checkpoint", args.checkpoint, "--host", "127.0.0.1",
           "--port", "0", "--max-length", str(args.max_length), "--device", args.device, "--dtype", args.dtype,
           "--batch-wait-ms", str(args.batch_wait_ms)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:  # "serving CKPT (device, dtype, max length N tokens) on http://127.0.0.1:PORT/get_reward"
        if line.startswith("serving "):
            return proc, line.split(" on ")[-1].strip().removesuffix("/get_reward")
    raise SystemExit(f"rmeval serve-reward exited with code {proc.wait()}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", help="reward model (default: the demo sweep's bradley_terry seed-1 run)")
    ap.add_argument("--model", choices=["qwen3"], help="instead of --checkpoint: a Qwen3-architecture reward model "
                                                        "built from a config, random head (throughput only)")
    ap.add_argument("--data", default=DEFAULT_DATA,
                    help="data SPEC (default: the demo's simulated set), e.g. "
                         "rm_bench:../shared/data/rm-bench/chat_filtered.json")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=256, help="requests per phase, one item each")
    ap.add_argument("--rollouts-per-prompt", type=int, default=1,
                    help="consecutive requests per prompt, its responses in turn (OpenRLHF sends 16)")
    ap.add_argument("--max-length", type=int, default=128, help="tokens per text (the demo trains at 128)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--batch-wait-ms", type=float, default=0.0, help="the server's --batch-wait-ms")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of (sequential, concurrent, model alone), alternated; medians reported")
    args = ap.parse_args(argv)
    if args.model and args.checkpoint:  # checked before the libraries load
        ap.error("--checkpoint and --model are alternatives")
    if args.rounds < 1 or args.requests < 1 or args.clients < 1:
        ap.error("--rounds, --requests and --clients must be at least 1")
    from rmcore.console.quiet import quiet_libraries

    quiet_libraries()
    if args.data == DEFAULT_DATA and args.rollouts_per_prompt > 4:  # distinct responses for every rollout
        k = args.rollouts_per_prompt  # (the simulated set's text material holds ~16 per prompt for 64 prompts)
        args.data = json.dumps({**json.loads(DEFAULT_DATA), "responses_per_prompt": k,
                                "n_prompts": max(-(-args.requests // k), 8)})
    args.checkpoint = args.checkpoint or (qwen3_checkpoint(args.data) if args.model else demo_checkpoint())
    bodies, items = make_requests(args.data, args.requests, args.rollouts_per_prompt)
    proc, base = start_server(args)
    url = base + "/get_reward"
    alone = None
    rounds: list[Round] = []
    diff = 0.0
    try:
        from bench_util import matmul_gflops

        h = health(base)
        print(f"machine: {os.cpu_count()} CPU cores, fp32 matmul {matmul_gflops():.0f} GFLOP/s now (a busy machine "
              f"shows less); server: {args.checkpoint} on {h['device']} ({h['dtype']}), max length {h['max_length']}")
        for b in bodies[:8]:  # warm-up: first forwards allocate
            post(url, b)
        alone = ModelAlone(args, items)
        reference: list[float] | None = None
        n = len(bodies)
        # server and model alone alternate, round after round, so that a change of load on a shared
        # machine hits both alike (a ceiling timed once after the server runs can come out below them)
        for k in range(args.rounds):
            h0 = health(base)
            t_seq, sequential = serve(url, bodies, 1)
            h1 = health(base)
            t_con, concurrent = serve(url, bodies, args.clients)
            h2 = health(base)
            reference = reference or sequential
            diff = max(diff, *(abs(a - b) for phase in (sequential, concurrent) for a, b in zip(reference, phase)))
            batch = max(1, round(n / max(h2["forwards"] - h1["forwards"], 1)))
            one, batched = alone.rates(rounds[0].batch if rounds else batch)
            rounds.append(Round(n / t_seq, n / t_con, batch, one, batched))
            print(f"round {k + 1}: sequential {n / t_seq:.1f} rewards/s ({h1['forwards'] - h0['forwards']} forwards), "
                  f"concurrent ({args.clients} clients) {n / t_con:.1f} ({h2['forwards'] - h1['forwards']} forwards, "
                  f"largest {h2['largest_forward']} texts); model alone {one:.1f} one per forward, {batched:.1f} in "
                  f"forwards of {rounds[0].batch}", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if alone is not None:
            alone.close()
    print(f"{len(bodies)} requests per phase, one item each")
    for line in summary(rounds):
        print(line)
    print(f"largest |reward difference| from the first sequential phase, over every phase: {diff:.2e}")
    if args.model:
        shutil.rmtree(Path(args.checkpoint).parent, ignore_errors=True)


if __name__ == "__main__":
    main()
