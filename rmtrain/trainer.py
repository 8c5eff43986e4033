"""The matched reward trainer: one `transformers.Trainer` for every arm.

Each step takes a batch of preference pairs, scores chosen and rejected texts in one forward
pass, and hands the two score vectors to the arm's loss. Held-out evaluation scores every
response of the held-out prompts once and reports pair accuracy, RMSE to the ratings and
score SD; the selection rule reads those figures.

Divergence (``DivergenceCallback``): at the end of every optimizer step the trainer asks whether
any loss of the step was NaN or infinite, or any trainable weight is, on any process (one
all-reduce of two flags under several processes, so every process stops at the same step). The
first such step ends training at once, without a save or an evaluation at that step, and is kept
in ``trainer.divergence`` ({step, what: loss | weights, loss}) for ``rmtrain.train`` to record."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

# (transformers prints "[INFO] Running in WANDB offline mode" when it imports its W&B integration:
# the commands send it to stderr, rmcore.console.quiet.quiet_libraries)
from transformers import Trainer, TrainerCallback
from transformers.modeling_outputs import SequenceClassifierOutput

from rmcore.models.batching import bucket_spans, length_buckets
from rmcore.models.formatting import Encoded, pad_batch
from rmcore.models.modeling import score_encoded
from rmcore.models.packed_encoder import packed_encoder_forward
from rmcore.models.prefix_scoring import classifier_scores, supports_prefix_scoring
from rmcore.models.shared_prompt import gather_rewards, pack_pairs, shared_prompt_forward
from rmtrain.arms import Arm


class PairCollator:
    """Pads chosen and rejected texts of a batch together (dynamic padding to the longest), or with
    ``shared_prompt`` packs each pair as ``[prompt][chosen][rejected]`` (rmcore.models.shared_prompt)."""

    def __init__(self, pad_id: int, shared_prompt: bool = False) -> None:
        self.pad_id = pad_id
        self.shared_prompt = shared_prompt

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        if self.shared_prompt:
            batch = pack_pairs([f["chosen_input_ids"] for f in features], [f["rejected_input_ids"] for f in features],
                               self.pad_id)
            for k in features[0]:
                if k.startswith("target_"):
                    batch[k] = torch.tensor([f[k] for f in features], dtype=torch.float32)
            return batch
        def enc(f: dict[str, Any], side: str) -> Encoded:
            return Encoded(f[f"{side}_input_ids"], f.get(f"{side}_token_type_ids"), False, False)

        texts = [enc(f, "chosen") for f in features] + [enc(f, "rejected") for f in features]
        batch = pad_batch(texts, self.pad_id)
        for k in features[0]:
            if k.startswith("target_"):
                batch[k] = torch.tensor([f[k] for f in features], dtype=torch.float32)
        return batch


@dataclass
class HeldoutSet:
    """All responses of the held-out prompts, encoded once, and the held-out pairs as indices."""

    keys: list[tuple[str, str]]  # (prompt_id, response_id) per encoded text
    encoded: list[Encoded]
    ratings: np.ndarray  # target-attribute rating per text (NaN where unrated)
    pair_index: np.ndarray  # (n_pairs, 2): chosen, rejected text indices

    def metrics(self, scores: np.ndarray) -> dict[str, float]:
        c, r = scores[self.pair_index[:, 0]], scores[self.pair_index[:, 1]]
        acc = float(np.mean((c > r) + 0.5 * (c == r))) if len(c) else float("nan")
        out = {"pair_accuracy": acc, "score_sd": float(np.std(scores, ddof=1)) if len(scores) > 1 else float("nan"),
               "score_mean": float(np.mean(scores)) if len(scores) else float("nan")}
        rated = ~np.isnan(self.ratings)
        if rated.sum() > 1:
            out["rmse"] = float(np.sqrt(np.mean((scores[rated] - self.ratings[rated]) ** 2)))
            # undefined for constant scores (a collapsed model): NaN, without numpy's divide warning
            constant = np.ptp(scores[rated]) == 0 or np.ptp(self.ratings[rated]) == 0
            out["pearson"] = float("nan") if constant else float(np.corrcoef(scores[rated], self.ratings[rated])[0, 1])
        return out


class MatchedRewardTrainer(Trainer):
    def __init__(self, *args: Any, arm: Arm, heldout: HeldoutSet | None = None, pad_id: int,
                 eval_batch_size: int = 64, packed_encoder: bool = True, **kwargs: Any) -> None:
        """``packed_encoder``: encoder classifiers run token-wise sublayers on real tokens only and the
        last layer for the pooled token only (rmcore.models.packed_encoder; same scores and gradients)."""
        super().__init__(*args, **kwargs)
        self.packed_encoder = packed_encoder
        self.arm = arm
        self.heldout = heldout
        self.pad_id = pad_id
        self.eval_bs = eval_batch_size
        self._sums = torch.zeros(4, dtype=torch.float64)  # pairs, correct, reward sum, reward sq-sum
        self.pairs_seen = 0  # on this rank, for the participation check
        # Padded tokens one more forward pass is worth (bucketed forward); GPUs want bigger buckets.
        self.bucket_overhead_tokens = 4096 if self.args.device.type == "cuda" else 128
        self._packed = False  # the packed encoder forward is installed (train())
        self._bad_loss: float | None = None  # this step's first non-finite loss on this process
        self.divergence: dict[str, Any] | None = None  # the step that stopped training (module doc)
        self.add_callback(DivergenceCallback(self))

    def train(self, *args: Any, **kwargs: Any) -> Any:
        # for the whole run, not per step: gradient checkpointing re-runs the layers in backward
        with packed_encoder_forward(self.model, self.packed_encoder) as packed:
            self._packed = packed
            try:
                return super().train(*args, **kwargs)
            finally:
                self._packed = False

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        targets = {k[len("target_"):]: inputs.pop(k) for k in list(inputs) if k.startswith("target_")}
        if "segment_ids" in inputs:  # shared-prompt rows (PairCollator(shared_prompt=True))
            r = self._shared_prompt_rewards(model, inputs).float()
            out = SequenceClassifierOutput(logits=r[:, None])
        else:
            out = self._bucketed_forward(model, inputs)
            r = out.logits[:, 0].float()
        n = r.shape[0] // 2
        r_c, r_r = r[:n], r[n:]
        loss = self.arm.loss(r_c, r_r, targets)
        if model.training and self._bad_loss is None and not bool(torch.isfinite(loss.detach())):
            self._bad_loss = float(loss.detach())
        with torch.no_grad():
            d = r.detach().double().cpu()
            self._sums += torch.tensor([n, float((r_c > r_r).sum() + 0.5 * (r_c == r_r).sum()), float(d.sum()),
                                        float((d**2).sum())], dtype=torch.float64)
        if model.training:
            self.pairs_seen += n
        return (loss, out) if return_outputs else loss

    def _bucketed_forward(self, model: Any, inputs: dict[str, torch.Tensor]) -> Any:
        """The batch's forward pass, run on length buckets of its texts, each cut to its own width.

        Same per-text scores as one padded forward (each row sees only its own tokens; right
        padding is removed, not moved), so the loss and its gradient are unchanged; only padded
        tokens are no longer computed. Buckets split the length-sorted texts where the padding
        saved outweighs the cost of another forward (``bucket_overhead_tokens``)."""
        if self._packed:  # the layers skip padding themselves: one forward, each distinct text once
            return self._distinct_forward(model, inputs)
        mask = inputs.get("attention_mask")
        # Single process only: under DDP (buffer broadcast) and ZeRO-3 (parameter gathering) every
        # forward is a collective, and ranks with different bucket counts would deadlock.
        if self.args.world_size > 1 or mask is None or mask.dim() != 2 or mask.shape[0] < 2:
            return model(**inputs)
        if not bool(mask[:, -1].eq(0).any()) or bool(mask[:, 0].eq(0).any()):  # nothing to trim / left-padded
            return model(**inputs)
        lengths = mask.sum(dim=1).tolist()
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        buckets = length_buckets([lengths[i] for i in order], self.bucket_overhead_tokens)
        if len(buckets) == 1 and buckets[0][1] == mask.shape[1]:
            return model(**inputs)
        logits, idx_all = [], []
        for start, stop, width in bucket_spans(buckets):
            idx = torch.tensor(order[start:stop], device=mask.device)
            sub = {k: (v.index_select(0, idx)[:, :width] if torch.is_tensor(v) and v.dim() == 2
                       and v.shape == mask.shape else v) for k, v in inputs.items()}
            logits.append(model(**sub).logits)
            idx_all.append(idx)
        perm = torch.cat(idx_all)
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(len(perm), device=perm.device)
        return SequenceClassifierOutput(logits=torch.cat(logits, dim=0).index_select(0, inv))  # batch order

    def _distinct_forward(self, model: Any, inputs: dict[str, torch.Tensor]) -> Any:
        """One forward over the batch's distinct texts (a response in two pairs of a prompt is the
        same text); rewards are copied back to every row. A repeated text shares one dropout draw."""
        ids = inputs["input_ids"]
        keys = [tuple(r) for r in ids.tolist()]
        if "token_type_ids" in inputs:  # the same tokens with another prompt/response split differ
            keys = [(k, tuple(t)) for k, t in zip(keys, inputs["token_type_ids"].tolist(), strict=True)]
        first: dict[Any, int] = {}  # text -> its place among the distinct texts
        rows = []  # the batch row each distinct text is taken from
        for i, k in enumerate(keys):
            if k not in first:
                first[k] = len(rows)
                rows.append(i)
        if len(rows) == len(keys):
            return model(**inputs)
        where = [first[k] for k in keys]
        pick = torch.tensor(rows, device=ids.device)
        sub = {k: (v.index_select(0, pick) if torch.is_tensor(v) and v.dim() >= 1 and v.shape[0] == len(keys) else v)
               for k, v in inputs.items()}
        logits = model(**sub).logits.index_select(0, torch.tensor(where, device=ids.device))
        return SequenceClassifierOutput(logits=logits)

    def _shared_prompt_rewards(self, model: Any, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Rewards of a shared-prompt batch (chosen then rejected), rows run in length buckets as in
        ``_bucketed_forward`` (one forward under DDP / ZeRO, where every forward is a collective)."""
        seg = inputs["segment_ids"]
        lengths = seg.ge(0).sum(dim=1).tolist()
        if self.args.world_size > 1 or len(lengths) < 2:
            return gather_rewards(shared_prompt_forward(model, inputs), inputs["reward_index"])
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        buckets = length_buckets([lengths[i] for i in order], self.bucket_overhead_tokens)
        width = seg.shape[1]
        parts, idx_all = [], []
        for start, stop, w in bucket_spans(buckets):
            idx = torch.tensor(order[start:stop], device=seg.device)
            sub = {k: inputs[k].index_select(0, idx)[:, :w] for k in ("input_ids", "position_ids", "segment_ids")}
            per_pos = shared_prompt_forward(model, sub)
            parts.append(torch.nn.functional.pad(per_pos, (0, width - w)))
            idx_all.append(idx)
        perm = torch.cat(idx_all)
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(len(perm), device=perm.device)
        per_pos = torch.cat(parts, dim=0).index_select(0, inv)  # batch row order
        return gather_rewards(per_pos, inputs["reward_index"])

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self._sums[0] > 0:
            # clone: on CPU .to() returns the same tensor, which zero_() below would wipe (NaN metrics)
            s = self._sums.clone().to(self.args.device)
            if self.args.world_size > 1:
                s = self.accelerator.reduce(s, reduction="sum")
            s = s.cpu()
            self._sums.zero_()
            n_texts = 2 * s[0]
            mean = s[2] / n_texts
            logs["pair_accuracy"] = float(s[1] / s[0])
            logs["reward_mean"] = float(mean)
            logs["reward_sd"] = float(torch.sqrt(torch.clamp(s[3] / n_texts - mean**2, min=0)))
        super().log(logs, start_time)

    def score_set(self, texts: HeldoutSet) -> np.ndarray:
        if getattr(self.data_collator, "shared_prompt", False) and supports_prefix_scoring(self.model):
            # a prompt's responses share its prefix, run once (same scores, rmcore.models.prefix_scoring)
            return classifier_scores(self.model, texts.encoded, [key[0] for key in texts.keys], pad_id=self.pad_id,
                                     batch_size=self.eval_bs)
        return score_encoded(self.model, texts.encoded, pad_id=self.pad_id, batch_size=self.eval_bs)

    def score_heldout(self) -> np.ndarray:
        """Scores of the evaluation set (the selection split when there is one)."""
        assert self.heldout is not None
        return self.score_set(self.heldout)

    def evaluate(self, eval_dataset: Any = None, ignore_keys: Any = None,
                 metric_key_prefix: str = "eval") -> dict[str, float]:
        if self.heldout is None:
            return {}
        scores = self.score_heldout()
        metrics = {f"{metric_key_prefix}_{k}": v for k, v in self.heldout.metrics(scores).items()}
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics


def finite_weights(model: Any) -> bool:
    """Whether every trainable weight of ``model`` is finite (the frozen ones cannot change; under
    ZeRO-3 a process holds an empty placeholder per weight, and the next loss shows a bad shard).
    A tensor's float32 sum is NaN or infinite whenever one of its elements is, and costs no copy of
    the tensor; a sum that overflows although every element is finite is checked element-wise."""
    params = [p.detach() for p in model.parameters() if p.requires_grad and p.numel()]
    if not params:
        return True
    sums = torch.stack([p.sum(dtype=torch.float32) for p in params])
    if bool(torch.isfinite(sums).all()):
        return True
    return all(bool(torch.isfinite(p).all()) for p, s in zip(params, sums.tolist()) if not math.isfinite(s))


class DivergenceCallback(TrainerCallback):
    """Stops training at the first step with a non-finite loss or weight (module doc)."""

    def __init__(self, trainer: MatchedRewardTrainer) -> None:
        self.trainer = trainer

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        t = self.trainer
        loss, t._bad_loss = t._bad_loss, None
        flags = torch.tensor([loss is not None, not finite_weights(t.model)], dtype=torch.float32,
                             device=args.device)
        if args.world_size > 1:  # every process stops at the same step
            flags = t.accelerator.reduce(flags, reduction="sum")
        bad_loss, bad_weights = (bool(x > 0) for x in flags.cpu().tolist())
        if not (bad_loss or bad_weights):
            return
        t.divergence = {"step": int(state.global_step), "what": "loss" if bad_loss else "weights",
                        "loss": loss if loss is not None and not math.isfinite(loss) else None}
        control.should_training_stop = True
        self.on_epoch_end(args, state, control)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.trainer.divergence is not None:  # the diverged weights are not saved, evaluated or audited
            control.should_save = control.should_evaluate = False
