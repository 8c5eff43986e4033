"""Where a reproduction's rows run on a cluster: each model's placement (GPUs in its task, a vLLM
server the task starts, or an external endpoint), each task's time limit, the SLURM settings of the
job array, and the task scripts the array runs.

Placement (``placement``), from the weights W (GB) = parameters x bytes per parameter of the dtype
(x 2 for a DPO model scored against its reference) and the recipe's ``compute`` block (G GB per GPU,
u = ``gpu_memory_utilization``, k = ``kv_cache_share``, N = ``gpus_per_node``):

- loaded in the task (transformers): memory M = W x ``overhead`` + 1 GB and GPUs = max(``gpus`` of
  the model entry, ceil(M / G)); more than one GPU is ``device_map: auto`` (one model over the
  task's GPUs, one layer after another), which ``rmtrain check`` asks for.
- served by the task (``serve:``, vLLM's OpenAI-compatible server on the task's own GPUs): vLLM takes
  u of each GPU and keeps at least k of that for the KV cache, so one GPU holds at most
  B = G u (1 - k) GB of weights and the tensor-parallel size is the smallest power of two >= W / B
  (a power of two divides the attention heads of the served models). Above N it spans nodes:
  TP = N and pipeline-parallel size PP = ceil(W / (B N)); such a server is started on its own
  (vLLM over Ray, docs/reproduce.md) and the model names its ``endpoint``.
- an external endpoint (``endpoint:``, a URL or ``${VARIABLE}``; ``--endpoint ROW=URL``): no GPU in
  the task.

Time limit of a task (``task_minutes``), in minutes: download D = W x 1000 / ``download_mb_s`` / 60
(a checkpoint's files on the Hub are about its weights; none for the study's own checkpoints and
for external endpoints), load L = W / ``load_gb_s`` / 60 (+ ``server_start_min`` for a vLLM server:
its CUDA graphs and compilation), compute C = the FLOPs' seconds on one GPU
(``rmeval.reproduce.costing``) / P / 60 with P the GPUs that compute in parallel (TP for a server, 1 under
``device_map: auto``): timeout = max(60, D + L + ``time_slack`` x C + 30) rounded up to half hours (tasks of
similar size share an array).
``slurm.timeout_min`` (``--timeout-min``) replaces it for every
task. The task's GPU hours are what it holds: GPUs x (D + L + C) / 60."""

from __future__ import annotations

import math
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError
from rmcore.settings.fields import bounded

VLLM_DTYPES = ("bfloat16", "float16", "float32")  # --dtype values; float8 checkpoints carry their own config
PROMPT_MARGIN = 512  # tokens a served judge's context holds beyond the model's max_length: its rating prompt


@dataclass
class Compute:
    """The dry run's assumptions about the cluster: GPU memory and throughput, node size, the
    bandwidths that set download and load times, and the slack on compute time."""

    gpu_memory_gb: float = bounded(80.0, gt=0)
    gpu_tflops: float = bounded(150.0, gt=0)  # effective bf16 throughput of one GPU on prompts (prefill, training)
    decode_tflops: float = bounded(40.0, gt=0)  # effective throughput on generated tokens (memory-bound decode)
    overhead: float = bounded(1.25, ge=1)  # memory beyond the weights of a model loaded by transformers
    gpus_per_node: int = bounded(8, ge=1)
    gpu_memory_utilization: float = bounded(0.9, gt=0, le=1)  # vLLM's share of each GPU
    kv_cache_share: float = bounded(0.3, ge=0, lt=1)  # of that share, kept for the KV cache
    download_mb_s: float = bounded(100.0, gt=0)  # Hub download per task, MB/s (a shared link; measure yours)
    load_gb_s: float = bounded(1.0, gt=0)  # checkpoint read from disk into GPU memory, GB/s
    server_start_min: float = bounded(5.0, ge=0)  # a vLLM server's start beyond reading its weights
    time_slack: float = bounded(3.0, ge=1)  # the time limit's factor on the compute estimate


@dataclass
class ServeSpec:
    """``serve:`` of a generative judge: the task starts ``vllm serve`` on its own GPUs, waits for
    its health, scores through it and stops it (``task_script``)."""

    tensor_parallel_size: int | None = bounded(None, ge=1)  # None: from the weights (module docstring)
    pipeline_parallel_size: int | None = bounded(None, ge=1)  # None: 1, or the nodes a larger model needs
    max_model_len: int | None = bounded(None, ge=1)  # None: the model's max_length + PROMPT_MARGIN
    startup_timeout_min: float | None = bounded(None, gt=0)  # None: download + load + start-up, doubled
    extra_args: list[str] = field(default_factory=list)  # more `vllm serve` flags, as written


@dataclass
class Reasoning:
    """``reasoning:`` of a generative judge that reasons before it answers (DeepSeek-R1): its reply
    budget, the letter read after the reasoning (``rmeval.backends.endpoint.reasoning_answer``), the
    reasoning parser of the vLLM server that holds it, and the tokens it generates per call in the
    GPU-hour estimate."""

    max_tokens: int = bounded(4096, ge=1)  # reply budget per call: the reasoning and the answer
    parser: str | None = None  # vLLM's --reasoning-parser (deepseek_r1); None: the reply's <think>...</think> is read
    mean_tokens: int | None = bounded(None, ge=1)  # generated per call (GPU hours); None: max_tokens, an upper bound
    concurrency: int = bounded(256, ge=1)  # requests in flight: long replies need many at once to keep a server busy


@dataclass
class ReproductionSlurmSettings:
    """``slurm:`` of a recipe (the flags --partition, --account, --qos, --timeout-min, --sbatch,
    --setup, --cpus-per-task, --array-parallelism override it): how the job arrays are submitted."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    timeout_min: int | None = bounded(None, ge=1)  # None: each task's own (module docstring)
    cpus_per_task: int = bounded(8, ge=1)
    array_parallelism: int = bounded(16, ge=1)
    setup: list[str] = field(default_factory=list)  # shell lines before each task (module load, the venv)
    additional_parameters: dict[str, Any] = field(default_factory=dict)  # any other #SBATCH flag


@dataclass
class DataSource:
    """``data_sources.NAME``: a folder or file a data spec names as ``{NAME}``, and how to fetch it."""

    path: str
    fetch: str = ""  # the commands that put it at ``path``
    note: str = ""


def resolve_endpoint(url: str, where: str) -> str:
    """``url`` with ``${VARIABLE}`` (or ``$VARIABLE``) read from the environment; an unset one is a
    one-line ConfigError saying what to export."""
    def value(mt: re.Match) -> str:
        name = mt.group(1) or mt.group(2)
        if not os.environ.get(name):
            raise ConfigError(f"{where}: its endpoint {url} needs {name}: export {name}=http://HOST:PORT/v1 (a "
                              "server of it: docs/reproduce.md, 'Running on a cluster'), or give --endpoint ROW=URL")
        return os.environ[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, url)


def next_power_of_two(n: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1.0))))


def serve_parallel(weights_gb: float, c: Compute, serve: ServeSpec) -> tuple[int, int]:
    """(tensor-parallel, pipeline-parallel size) of a vLLM server for ``weights_gb`` of weights."""
    per_gpu = c.gpu_memory_gb * c.gpu_memory_utilization * (1 - c.kv_cache_share)
    need = weights_gb / per_gpu
    tp = serve.tensor_parallel_size or min(next_power_of_two(need), c.gpus_per_node)
    pp = serve.pipeline_parallel_size or max(1, math.ceil(need / tp))
    return tp, pp


def placement(m: Any, weights_gb: float, c: Compute, endpoint: str | None) -> dict[str, Any]:
    """How model ``m`` runs: ``mode`` (in-task, served, external), its GPUs per task, and for a
    server the tensor- and pipeline-parallel sizes and nodes."""
    if endpoint:
        tp, pp = serve_parallel(weights_gb, c, m.serve or ServeSpec()) if m.serve else (0, 0)
        return {"mode": "external", "gpus": 0, "endpoint": endpoint, "tp": tp, "pp": pp, "nodes": pp}
    if m.serve is not None:
        tp, pp = serve_parallel(weights_gb, c, m.serve)
        return {"mode": "served", "gpus": tp * pp, "tp": tp, "pp": pp, "nodes": pp}
    mem = weights_gb * c.overhead + 1.0
    need = max(1, math.ceil(mem / c.gpu_memory_gb))
    return {"mode": "in-task", "gpus": max(m.gpus or 1, need), "gpus_needed": need, "memory_gb": round(mem, 1)}


def check_placement(m: Any, weights_gb: float, c: Compute, where: str) -> None:
    """A model's placement is runnable as the recipe states it (``rmtrain check``): enough GPUs,
    ``device_map: auto`` over more than one, a multi-node server named by its endpoint."""
    at = f"{where}: model {m.name}"
    p = placement(m, weights_gb, c, m.endpoint)
    if p["mode"] == "in-task":
        if p["gpus"] > 1 and m.device_map != "auto":
            raise ConfigError(f"{at}: it needs {p['gpus']} GPUs ({p['memory_gb']} GB): set device_map: auto "
                              "(and gpus), or serve: for a generative judge")
        if p["gpus"] > c.gpus_per_node:
            raise ConfigError(f"{at}: {p['gpus']} GPUs is more than one node's {c.gpus_per_node} "
                              "(compute.gpus_per_node)")
    elif p["mode"] == "served" and p["nodes"] > 1:
        raise ConfigError(f"{at}: its server needs {p['nodes']} nodes (tensor parallel {p['tp']} x pipeline parallel "
                          f"{p['pp']}): a job array task cannot start it; serve it with vLLM over Ray and give its "
                          "endpoint (a URL or ${VARIABLE}), docs/reproduce.md 'Running on a cluster'")


def task_minutes(*, weights_gb: float, download: bool, served: bool, gpu_seconds: float, parallel: int,
                 c: Compute) -> dict[str, float]:
    """Download, load and compute minutes of one task and its time limit (module docstring);
    ``gpu_seconds``: its compute on one GPU (``rmeval.reproduce.costing.gpu_seconds``)."""
    d = weights_gb * 1000 / c.download_mb_s / 60 if download else 0.0
    load = weights_gb / c.load_gb_s / 60 + (c.server_start_min if served else 0.0)
    comp = gpu_seconds / max(parallel, 1) / 60
    limit = max(60, 30 * math.ceil((d + load + c.time_slack * comp + 30) / 30))  # in half hours: fewer arrays
    return {"download_min": round(d, 1), "load_min": round(load, 1), "compute_min": round(comp, 1),
            "timeout_min": limit}


PORT_VAR = "$PORT"  # the task's port, chosen when it starts (a free loopback port)


def _shell(cmd: list[str]) -> str:
    """``cmd`` as a shell line, the task's ``$PORT`` left to the shell."""
    return " ".join('"$PORT"' if a == PORT_VAR else shlex.quote(a) for a in cmd)


def vllm_command(m: Any, tp: int, pp: int, *, port: str = PORT_VAR, host: str = "127.0.0.1",
                 ray: bool = False) -> list[str]:
    """``vllm serve`` of judge ``m`` (served under its Hub id, prefix caching on: the judges' prompts
    share their item across questions; a reasoning judge's ``--reasoning-parser`` and its reply
    budget in the context length)."""
    s = m.serve or ServeSpec()
    cmd = ["vllm", "serve", m.hub_id, "--served-model-name", m.hub_id, "--host", host, "--port", port,
           "--tensor-parallel-size", str(tp)]
    if pp > 1:
        cmd += ["--pipeline-parallel-size", str(pp)]
    if ray:
        cmd += ["--distributed-executor-backend", "ray"]
    if m.revision:
        cmd += ["--revision", m.revision]
    if m.dtype in VLLM_DTYPES:
        cmd += ["--dtype", m.dtype]
    reasoning = getattr(m, "reasoning", None)
    if s.max_model_len or m.max_length:  # the text's max_length + the judge's prompt around it (+ its reasoning)
        cmd += ["--max-model-len", str(s.max_model_len or m.max_length + PROMPT_MARGIN
                                       + (reasoning.max_tokens if reasoning else 0))]
    if m.trust_remote_code:
        cmd.append("--trust-remote-code")
    if reasoning and reasoning.parser:  # the reasoning in its own field, the answer in content
        cmd += ["--reasoning-parser", reasoning.parser]
    return [*cmd, "--enable-prefix-caching", *s.extra_args]


def ray_server_lines(m: Any, tp: int, pp: int) -> list[str]:
    """The commands of a multi-node server for ``m`` (vLLM over a Ray cluster of ``pp`` nodes)."""
    var = re.findall(r"\$\{?(\w+)", m.endpoint or "")
    where = f"export {var[0]}=http://HEAD_IP:8000/v1" if var else f"--endpoint {m.name}=http://HEAD_IP:8000/v1"
    return [f"# {pp} nodes with {tp} GPUs each (e.g. one SLURM job: salloc --nodes {pp} --gpus-per-node {tp}); "
            "the same",
            "# vLLM and model cache on every node. On the head node:", "ray start --head --port 6379",
            "# on each of the other nodes:", "ray start --address HEAD_IP:6379 --block &",
            "# then, on the head node, once `ray status` lists every GPU:",
            shlex.join(vllm_command(m, tp, pp, port="8000", host="0.0.0.0", ray=True)),
            "# wait until curl -sf http://HEAD_IP:8000/health answers, then, where rmeval reproduce runs:", where]


def worker_command(recipe: str, out: str | os.PathLike, row: str, *, stand_in: bool, wandb_mode: str | None,
                   overrides: dict[str, Any] | None = None, endpoint: str | None = None) -> list[str]:
    """``python -m rmeval.reproduce.worker`` for one row, with the driver's recipe overrides."""
    import json

    cmd = [sys.executable, "-m", "rmeval.reproduce.worker", str(Path(recipe).resolve()), str(Path(out).resolve()), row]
    if stand_in:
        cmd.append("--stand-in")
    if wandb_mode:
        cmd += ["--wandb-mode", wandb_mode]
    for k, v in (overrides or {}).items():
        cmd += ["--set", f"{k}={json.dumps(v)}"]
    if endpoint:
        cmd += ["--endpoint", endpoint]
    return cmd


def task_script(row: str, worker: list[str], *, server: dict[str, Any] | None = None, log: str | None = None) -> str:
    """The bash script of one array task: the worker, or, for a judge the task serves, ``vllm
    serve`` on a free loopback port in its own process group, a wait for ``/health`` and ``/v1/models``
    (``rmeval.reproduce.serve wait``: the server's log tail if it exits or times out), the worker
    against it, and on exit (any exit: the trap) the server stopped, TERM then KILL after 60 s."""
    py = shlex.quote(sys.executable)
    head = ["#!/usr/bin/env bash", f"# matchrm reproduce: row {row}, one task of the job array", "set -euo pipefail",
            f"cd {shlex.quote(os.getcwd())}"]
    if server is None:
        return "\n".join([*head, "exec " + shlex.join(worker), ""])
    url, model = "http://127.0.0.1:$PORT", shlex.quote(server["model"])
    lines = [*head, f"# the task serves {server['model']} itself: vLLM, tensor parallel {server['tp']} on its GPUs",
             "set -m  # the server in its own process group: the trap stops its engine processes too",
             f"PORT=$({py} -m rmeval.reproduce.serve free-port)", f"LOG={shlex.quote(log or 'vllm.log')}",
             'mkdir -p "$(dirname "$LOG")"',
             _shell(server["command"]) + ' >>"$LOG" 2>&1 &',
             "SERVER=$!",
             "stop_server() {",
             '  kill -TERM -- "-$SERVER" 2>/dev/null || return 0',
             '  ( sleep 60; kill -KILL -- "-$SERVER" 2>/dev/null ) >/dev/null 2>&1 &',
             "  local killer=$!",
             '  wait "$SERVER" 2>/dev/null || true',
             '  kill -- "-$killer" 2>/dev/null || true',
             "}",
             "trap stop_server EXIT",
             f'{py} -m rmeval.reproduce.serve wait "{url}" --model {model} --pid "$SERVER" '
             f'--timeout-min {server["startup_min"]:g} --log "$LOG"',
             shlex.join(worker) + f' --endpoint "{url}/v1"', ""]
    return "\n".join(lines)


def executor_params(s: ReproductionSlurmSettings, *, name: str, gpus: int, mem_gb: int,
                    timeout_min: int) -> dict[str, Any]:
    """submitit's parameters of one job array (``rmcore.runtime.jobs.submitit_executor``)."""
    params: dict[str, Any] = {"name": name, "timeout_min": s.timeout_min or timeout_min, "gpus_per_node": gpus,
                              "cpus_per_task": s.cpus_per_task, "mem_gb": mem_gb, "nodes": 1,
                              "slurm_array_parallelism": s.array_parallelism}
    for key in ("partition", "account", "qos"):
        if getattr(s, key):
            params[f"slurm_{key}"] = getattr(s, key)
    if s.setup:
        params["slurm_setup"] = list(s.setup)
    if s.additional_parameters:
        params["slurm_additional_parameters"] = dict(s.additional_parameters)
    return params


def sbatch_text(params: dict[str, Any], folder: str | os.PathLike, n_tasks: int) -> str:
    """The sbatch script submitit writes for a job array of ``n_tasks`` with ``params`` (its own
    renderer, so the dry run prints what would be submitted)."""
    try:
        from submitit.slurm.slurm import _make_sbatch_string
    except ImportError:
        raise ConfigError("--executor slurm needs submitit: pip install 'matchrm[slurm]'") from None
    names = {"name": "job_name", "timeout_min": "time", "cpus_per_task": "cpus_per_task",
             "gpus_per_node": "gpus_per_node", "nodes": "nodes"}
    kw: dict[str, Any] = {names[k]: v for k, v in params.items() if k in names}
    kw["mem"] = f"{params['mem_gb']}GB"
    kw.update({k.removeprefix("slurm_"): v for k, v in params.items() if k.startswith("slurm_")})
    folder = Path(folder).resolve()
    command = f"{shlex.quote(sys.executable)} -u -m submitit.core._submit {shlex.quote(str(folder))}"
    return _make_sbatch_string(command=command, folder=folder, map_count=n_tasks, **kw)


def task_memory_gb(weights_gb: float) -> int:
    """Host memory of a task: 1.5 x the weights it reads, at least 16 GB, in steps of 16 GB (so
    tasks of similar models share one array)."""
    return int(16 * math.ceil(max(16.0, weights_gb * 1.5) / 16))
