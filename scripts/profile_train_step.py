"""Where one training step spends its time on CPU: torch.profiler over steady-state steps of the
matched trainer, grouped into matmuls, attention, other model ops, optimizer, data collation and
logging.

    python scripts/profile_train_step.py                       # the demo: MiniLM, batch 16, max length 128
    python scripts/profile_train_step.py --model qwen3 --data hh_rlhf --max-length 512   # the decoder benchmark

Model compute = matmuls + attention + other model ops (norms, activations, autograd); everything
else is overhead. The trainer is the benchmark's (scripts/bench_train_speed.py), so the step is
exactly the one timed there.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402

MATMUL = ("aten::mm", "aten::addmm")
# eager attention (BERT) multiplies with bmm; SDPA kernels are their own ops
ATTENTION = ("scaled_dot_product", "aten::_softmax", "aten::softmax", "aten::bmm", "aten::baddbmm")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--data", default="simulated", choices=["simulated", "rm_bench", "hh_rlhf"])
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3, help="profiled steps (after 2 warm-up steps)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--stacks", default="", help="comma-separated op names: print the Python stacks calling them")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import bench_train_speed as bench
    from bench_util import matmul_gflops
    from transformers import TrainerCallback
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    ns = argparse.Namespace(model=a.model, data=a.data, n_prompts=400, max_pairs=a.batch_size * (a.steps + 2),
                            steps=a.steps + 2, batch_size=a.batch_size, max_length=a.max_length, lr=1e-4, seed=1,
                            no_shared_prompt=False)
    print(f"machine fp32 matmul (512x512, {a.threads} thread(s)): {matmul_gflops():.0f} GFLOP/s")
    with tempfile.TemporaryDirectory() as tmp:
        if ns.model == "qwen3":
            from bench_util import build_qwen3, rating_set_texts

            from rmcore.data.loading import load_rating_set

            ns.model = build_qwen3(Path(tmp) / "qwen3",
                                   rating_set_texts(load_rating_set(bench.build_config(ns, tmp).data)))
        ns.model = bench.MODELS.get(ns.model, ns.model)
        cfg = bench.build_config(ns, tmp)
        prep = bench.prepare(cfg)
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                      schedule=torch.profiler.schedule(wait=1, warmup=1, active=a.steps),
                                      with_stack=bool(a.stacks))

        class Step(TrainerCallback):
            def on_step_end(self, *args: Any, **kwargs: Any) -> None:
                prof.step()

        trainer = bench.make_ours(cfg, prep)
        collate = trainer.data_collator

        def timed_collate(features: list[dict[str, Any]]) -> Any:
            with torch.profiler.record_function("collate"):
                return collate(features)

        trainer.data_collator = timed_collate
        log = trainer.log

        def timed_log(*args: Any, **kwargs: Any) -> None:
            with torch.profiler.record_function("log"):
                log(*args, **kwargs)

        trainer.log = timed_log  # type: ignore[method-assign]
        trainer.add_callback(Step())
        with prof:
            trainer.train()
    ev = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in ev)
    self_of = lambda keys: sum(e.self_cpu_time_total for e in ev if any(k in e.key for k in keys))  # noqa: E731
    total_of = lambda name: sum(e.cpu_time_total for e in ev if e.key.startswith(name))  # noqa: E731
    parts = {"matmuls": self_of(MATMUL), "attention": self_of(ATTENTION),
             "optimizer (step, incl. its kernels)": total_of("Optimizer.step"),
             "collation": total_of("collate"), "logging": total_of("log")}
    parts["other model ops (norms, activations, autograd, copies)"] = total - sum(parts.values())
    print(f"{a.model} {a.data} batch {a.batch_size} max length {a.max_length}: {a.steps} steps, "
          f"{total / 1e6 / a.steps:.2f} s CPU per step")
    for k, v in parts.items():
        print(f"  {k:58s} {v / 1e6 / a.steps:7.3f} s  {v / total:6.1%}")
    print(ev.table(sort_by="self_cpu_time_total", row_limit=15))
    for op in filter(None, a.stacks.split(",")):
        for e in prof.key_averages(group_by_stack_n=8):
            if e.key == op:
                print(f"{op}: {e.self_cpu_time_total / 1e3:.0f} ms, {e.count} calls, from:\n  " + "\n  ".join(e.stack))


if __name__ == "__main__":
    main()
