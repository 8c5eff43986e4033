"""Baselines for reweighting under the same label budget (JudgeProfile, Sec. 4.4-4.5):

- rubric prompting: the judge is asked for its overall verdict with the same k attributes named as
  criteria (the top-k by absolute weight of the full reweighting fit), read in both orders;
- LoRA SFT: the local judge is fine-tuned with LoRA (peft) on the same training labels -- each item
  in both orders, the loss the cross-entropy of the reference letter against the other letter at
  the answer position, i.e. the quantity the verdict is read from -- and its stable verdict is
  scored on the same held-out items. The adapter is saved as a judge checkpoint that can itself be
  profiled (``rmeval judges elicit --model ADAPTER_DIR``).

Both are read like the unadapted judge's base accuracy (``rmeval.judges.reweight``): ``accuracy``
is the verdict read in order AB with an unparsed or unresolved verdict counted as an error (the
paper's rule), ``accuracy_stable`` the stable verdict with an unresolved one counted as one half.

torch and the elicitation (``rmeval.judges.elicit``, which loads torch) are imported where they are
used: ``rmeval judges reweight`` reads ``BaselineSettings`` here to build its flags.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rmcore.errors import ConfigError

from .inventory import OVERALL, Attribute, load_inventory
from .panel import build_panel
from .reweight import single_read_accuracy, source_split, verdict_accuracy
from .settings import BaselineSettings
from .store import load_store
from .tables import load_judgments

if TYPE_CHECKING:
    from .elicit import LocalPairJudge, PairJudge


def stable_verdicts(table: pd.DataFrame) -> pd.Series:
    """item_id -> stable overall verdict (+1/-1, 0 when the orders disagree or a read is unresolved)."""
    t = table[table["attribute"] == OVERALL].pivot_table(index="item_id", columns="order", values="direction")
    return pd.Series(np.where((t["AB"] == t["BA"]) & (t["AB"] != 0), t["AB"], 0), index=t.index)


def single_read_verdicts(table: pd.DataFrame) -> pd.Series:
    """item_id -> the overall verdict read in order AB (+1/-1, 0 unresolved or unparsed)."""
    t = table[(table["attribute"] == OVERALL) & (table["order"] == "AB")]
    return pd.Series(t["direction"].to_numpy(int), index=t["item_id"].to_numpy())


def _accuracy(table: pd.DataFrame, items: pd.DataFrame) -> dict[str, float]:
    """{accuracy: one order, unparsed = error; accuracy_stable: stable verdict, unresolved = 1/2}."""
    y = np.where(items["label"].to_numpy() == "A", 1, -1)
    single = single_read_verdicts(table).reindex(items["item_id"]).fillna(0).to_numpy(int)
    stable = stable_verdicts(table).reindex(items["item_id"]).fillna(0).to_numpy(int)
    return {"accuracy": single_read_accuracy(single, y), "accuracy_stable": verdict_accuracy(stable, y)}


def rubric_accuracy(judge: PairJudge, test_items: pd.DataFrame, criteria: list[Attribute], out: str | os.PathLike,
                    *, progress: bool = False) -> dict[str, Any]:
    """Held-out accuracy of the judge prompted with ``criteria`` as its rubric."""
    # torch (rmeval.judges.elicit loads it): --help stays cheap
    from .elicit import elicit_shard, rubric_question

    name = f"{judge.name}+rubric{len(criteria)}"
    stats = elicit_shard(test_items, judge, {OVERALL: rubric_question(criteria)}, out, name=name, progress=progress)
    table = load_judgments(stats.table)
    return {**_accuracy(table, test_items), "k": len(criteria),
            "attributes": [a.name for a in criteria], "n_test": int(len(test_items)), "judge": name}


def _sft_examples(judge: LocalPairJudge, items: pd.DataFrame) -> list[tuple[list[int], int]]:
    """(token ids, target: 0 for letter A, 1 for B) for every item in both orders."""
    # torch (rmeval.judges.elicit loads it): --help stays cheap
    from .elicit import OVERALL_QUESTION, Call, item_prefix

    out = []
    for row in items.itertuples(index=False):
        for order in ("AB", "BA"):
            pre, suf = judge.encode(Call(row.item_id, OVERALL, order, item_prefix(row, order), OVERALL_QUESTION))
            first_is_preferred = (row.label == "A") == (order == "AB")
            out.append((pre + suf, 0 if first_is_preferred else 1))
    return out


def lora_sft(model: str | os.PathLike, train_items: pd.DataFrame, out: str | os.PathLike, *, steps: int = 200,
             lr: float = 2e-4, batch_size: int = 8, r: int = 16, alpha: int = 32, max_length: int = 4096,
             seed: int = 0, device: str | None = None, dtype: str = "float32") -> dict[str, Any]:
    """Fine-tune a LoRA adapter of the causal judge ``model`` on the labels of ``train_items``
    (A/B only); saves the adapter and tokenizer to ``out`` (a loadable judge checkpoint)."""
    import torch
    from peft import LoraConfig, get_peft_model

    # torch (rmeval.judges.elicit loads it): --help stays cheap
    from .elicit import LocalPairJudge

    t0 = time.perf_counter()
    train_items = train_items[train_items["label"].isin(["A", "B"])]
    base = LocalPairJudge(model, max_length=max_length, device=device, dtype=dtype)
    examples = _sft_examples(base, train_items)
    torch.manual_seed(seed)
    peft_model = get_peft_model(base.model, LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0,
                                                       target_modules="all-linear", task_type="CAUSAL_LM"))
    peft_model.train()
    opt = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=lr)
    rng = np.random.default_rng(seed)
    letters = base.letter_ids
    losses: list[float] = []
    for _ in range(steps):
        batch = [examples[i] for i in rng.choice(len(examples), size=min(batch_size, len(examples)), replace=False)]
        width = max(len(ids) for ids, _ in batch)
        ids = torch.full((len(batch), width), base.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (seq, _) in enumerate(batch):  # left padding: the answer position is the last column
            ids[row, width - len(seq):] = torch.tensor(seq)
            mask[row, width - len(seq):] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = peft_model(input_ids=ids.to(base.device), attention_mask=mask.to(base.device),
                            position_ids=pos.to(base.device)).logits[:, -1].float()
        two = torch.stack([torch.logsumexp(logits[:, letters[0]], -1), torch.logsumexp(logits[:, letters[1]], -1)], -1)
        loss = torch.nn.functional.cross_entropy(two, torch.tensor([t for _, t in batch], device=two.device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = Path(out)
    peft_model.save_pretrained(out)
    base.tokenizer.save_pretrained(out)
    k = max(1, len(losses) // 10)
    return {"checkpoint": str(out), "n_train": int(len(train_items)), "steps": steps, "lr": lr, "r": r,
            "loss_first": float(np.mean(losses[:k])), "loss_last": float(np.mean(losses[-k:])),
            "seconds": round(time.perf_counter() - t0, 2)}


def lora_sft_accuracy(model: str | os.PathLike, train_items: pd.DataFrame, test_items: pd.DataFrame,
                      out: str | os.PathLike, *, progress: bool = False, **kwargs: Any) -> dict[str, Any]:
    """Train the LoRA judge on ``train_items`` and score its stable verdict on ``test_items``."""
    # torch (rmeval.judges.elicit loads it): --help stays cheap
    from .elicit import OVERALL_QUESTION, LocalPairJudge, elicit_shard

    out = Path(out)
    info = lora_sft(model, train_items, out / "adapter", **kwargs)
    judge = LocalPairJudge(out / "adapter", max_length=kwargs.get("max_length", 4096),
                           device=kwargs.get("device"), name="lora_sft")
    try:
        stats = elicit_shard(test_items, judge, {OVERALL: OVERALL_QUESTION}, out / "eval", progress=progress)
    finally:
        judge.close()
    table = load_judgments(stats.table)
    return {**info, **_accuracy(table, test_items), "n_test": int(len(test_items))}


def run_baselines(settings: BaselineSettings, res: dict[str, Any], items: pd.DataFrame,
                  judgments: str | os.PathLike, out: str | os.PathLike) -> None:
    """Rubric prompting and LoRA SFT of ``settings.model``, per source, on that source's split and
    training labels (the reweighting's own split); each source's figures go to
    ``res["judges"][judge]["sources"][source]["baselines"]``, their files under ``out``."""
    # torch (rmeval.judges.elicit loads it): --help stays cheap
    from .elicit import LocalPairJudge

    if settings.judge not in res["judges"]:
        raise ConfigError(f"--baseline-judge '{settings.judge}' is not a judge in {judgments}")
    panel = build_panel(load_store(judgments), res["meta"]["attributes"])
    splits = source_split(items, panel, settings.seed)
    inv = {a.name: a for a in load_inventory(settings.attributes_file, extend=bool(settings.attributes_file))}
    judge = LocalPairJudge(settings.model, max_length=settings.max_length, batch_size=settings.batch_size,
                           device=settings.device) if "rubric" in settings.kinds else None
    out = Path(out)
    for source, sp in splits.items():
        r = res["judges"][settings.judge]["sources"][source]
        pos = np.array(panel.items)
        test = items.set_index("item_id").loc[pos[sp["idx"][sp["test"]]]].reset_index()
        train_ids = pos[sp["idx"][sp["train"]]]
        rng = np.random.default_rng([settings.seed, 17])
        if settings.lora_budget and settings.lora_budget < len(train_ids):
            train_ids = rng.choice(train_ids, size=settings.lora_budget, replace=False)
        train = items.set_index("item_id").loc[train_ids].reset_index()
        base: dict[str, Any] = {}
        if judge is not None and r.get("weights"):
            k = settings.rubric_k
            top = r["top_k"].get(str(k), r["top_k"]["all"])["attributes"][:k]
            missing = [a for a in top if a not in inv]
            if missing:
                raise ConfigError(f"rubric criteria {missing} are not in the attribute inventory (--attributes)")
            base["rubric"] = rubric_accuracy(judge, test, [inv[a] for a in top], out / source / "rubric")
        if "lora" in settings.kinds:
            base["lora_sft"] = lora_sft_accuracy(settings.model, train, test, out / source / "lora",
                                                 steps=settings.lora_steps, lr=settings.lora_lr,
                                                 max_length=settings.max_length, batch_size=settings.lora_batch_size,
                                                 device=settings.device, seed=settings.seed,
                                                 dtype=settings.lora_dtype)
            base["lora_sft"]["budget"] = int(len(train))
        r["baselines"] = base
    if judge is not None:
        judge.close()
