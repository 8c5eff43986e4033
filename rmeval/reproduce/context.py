"""One run of a recipe: where it writes, what it reads (the recipe's data, or the stand-ins'), how
each model is loaded and placed, and the inputs some conditions need (related tasks, paraphrases,
the reference pool), prepared once per data set under ``OUT/data/``.

Layout of OUT: ``run.json`` (the recipe, stand-in or not), ``plan.json``/``plan.md`` (the dry
run), ``rows/<row>/`` (each model's or human row's outputs; ``done.json`` once finished: a
finished row is never scored again), ``panel/`` (the panel step), ``stand_ins/`` and
``stand_in_data/`` (a stand-in run's tiny models and local files), ``table.md``, ``table.csv`` and
``figures.csv``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmcore.data.loading import load_data
from rmcore.errors import ConfigError
from rmcore.io.files import atomic_write_json
from rmcore.runtime.wandb_log import DEFAULT_PROJECT
from rmcore.settings.recipes import build_config
from rmeval.audit.settings import PromptVariantSettings
from rmeval.audit.variants import write_prompt_variants
from rmeval.experiments.pool import build_pool
from rmeval.experiments.settings import PoolConfig, PoolSampling
from rmeval.reproduce.cluster import resolve_endpoint
from rmeval.reproduce.recipe import DataEntry, ModelSpec
from rmeval.reproduce.sources import missing, substitute
from rmeval.reproduce.standins import STANDIN_MAX_LENGTH, stand_in_model, stand_in_spec, template_variants
from rmeval.scoring import ScorerSettings


@dataclass
class Context:
    recipe: Any
    out: Path
    stand_in: bool = False
    wandb_mode: str | None = None
    wandb_project: str = DEFAULT_PROJECT
    overrides: dict[str, Any] = field(default_factory=dict)  # dotted recipe keys the command set (each task gets them)
    endpoints: dict[str, str] = field(default_factory=dict)  # row -> a server's URL given for it (--endpoint)
    _sets: dict[str, Any] = field(default_factory=dict)
    _specs: dict[str, Any] = field(default_factory=dict)

    @property
    def wandb(self) -> dict[str, Any]:
        return {"wandb_project": self.wandb_project, "wandb_mode": self.wandb_mode}

    def row_dir(self, name: str) -> Path:
        return self.out / "rows" / name

    def done_path(self, row: str) -> Path:
        """The record of a finished row: a row with one is never scored again."""
        return self.row_dir(row) / "done.json"

    # -- data ---------------------------------------------------------------------------------------
    def data_keys(self) -> list[str]:
        """The recipe's data sets; a stand-in run leaves out those whose stand-in is null."""
        if not self.stand_in:
            return list(self.recipe.data)
        return [k for k in self.recipe.data if self.recipe.stand_in.data.get(k, "") is not None]

    def model_data(self, m: Any) -> list[str]:
        keys = self.data_keys()
        return [k for k in self.recipe.model_data(m) if k in keys]

    def entry(self, key: str) -> Any:
        """The data entry, with a stand-in run's replacements (``stand_in.entries``)."""
        e = self.recipe.data[key]
        over = self.recipe.stand_in.entries.get(key) if self.stand_in else None
        if not over:
            return e
        raw = {**{f: getattr(e, f) for f in e.__dataclass_fields__}, **over}
        for f in ("size", "related", "paraphrase", "reference_pool"):
            if raw.get(f) is None:  # build_config would make a default block of a None
                raw.pop(f, None)
            elif hasattr(raw[f], "__dataclass_fields__"):
                raw[f] = {k: getattr(raw[f], k) for k in raw[f].__dataclass_fields__}
        return build_config(DataEntry, raw, f"{self.recipe.path}: stand_in.entries.{key}")

    def spec(self, key: str) -> Any:
        """The data SPEC read for ``key`` (a stand-in run's local or synthetic data)."""
        if key not in self._specs:
            sources = self.recipe.data_sources
            spec = substitute(self.entry(key).spec, sources)
            if self.stand_in:
                if key not in self.recipe.stand_in.data:
                    raise ConfigError(f"{self.recipe.path}: stand_in.data has no local data for {key!r}")
                spec = stand_in_spec(key, substitute(self.recipe.stand_in.data[key], sources),
                                     self.out / "stand_in_data")
            self._specs[key] = spec
        return self._specs[key]

    def annotations(self, row: Any) -> str | None:
        """A human row's per-annotator ratings: the recipe's (a file or "hub"), or in a stand-in run
        the file its synthetic HelpSteer2 data wrote (``annotations: true``), else none."""
        if not row.annotations or not self.stand_in:
            return row.annotations
        spec = self.spec(row.data)
        path = Path(spec["path"]).with_suffix(".disagreements.jsonl") if isinstance(spec, dict) and spec.get("path") \
            else None
        return str(path) if path is not None and path.is_file() else None

    def rating_set(self, key: str) -> Any:
        if key not in self._sets:
            self._sets[key] = load_data(self.spec(key), self.entry(key).max_prompts, self.recipe.seed)
        return self._sets[key]

    def condition_inputs(self, key: str) -> dict[str, Any]:
        """related_file, paraphrase_file and reference_pool of data set ``key``, written first where
        the recipe says how (variants by ``rmeval variants``' library, the pool by ``rmeval pool``'s)."""
        e, out = self.entry(key), {}
        for task in ("related", "paraphrase"):
            v = getattr(e, task)
            if v is not None and task in e.conditions:
                out[f"{task}_file"] = str(self._variants(key, task, v))
        if e.reference_pool is not None:
            out["reference_pool"] = str(self._pool(key, e.reference_pool))
        return out

    def _variants(self, key: str, task: str, v: Any) -> Path:
        if v.file and Path(v.file).is_file():
            return Path(v.file)
        path = Path(v.file) if v.file else self.out / "data" / f"{key}.{task}.jsonl"
        if path.is_file():
            return path
        if not v.generator:
            raise ConfigError(f"{self.recipe.path}: data.{key}.{task}: {path} is missing and no generator writes it "
                              f"(`rmeval variants --task {task}` does)")
        if v.generator == "stand-in":
            return template_variants(self.rating_set(key), task, v.n, path, v.subtype)

        write_prompt_variants(self.rating_set(key), PromptVariantSettings(task=task, generator=v.generator, n=v.n,
                                                                   subtype=v.subtype, seed=self.recipe.seed), path)
        return path

    def _pool(self, key: str, p: Any) -> Path:
        if p.file and Path(p.file).is_file():
            return Path(p.file)
        out = self.out / "data" / f"{key}.pool"
        if (out / "pool.parquet").is_file():
            return out / "pool.parquet"
        if not p.policies:
            raise ConfigError(f"{self.recipe.path}: data.{key}.reference_pool: {p.file} is missing; "
                              f"`rmeval pool --config {p.config}` writes it")

        cfg = PoolConfig(data=self.spec(key), policies=[{"name": f"policy-{i}", "model": m} for i, m in
                                                        enumerate(p.policies)],
                         sampling=PoolSampling(n=p.n, max_new_tokens=p.max_new_tokens, batch_size=8),
                         max_prompts=self.entry(key).max_prompts, seed=self.recipe.seed, output_dir=str(out),
                         toy=self.stand_in, progress=False)
        cfg.validate()
        build_pool(cfg, out=out, wandb_mode="disabled")
        return out / "pool.parquet"

    # -- models -------------------------------------------------------------------------------------
    def stand_in_info(self, m: Any) -> dict[str, Any]:
        return stand_in_model(m, self.out / "stand_ins")

    def model_path(self, m: Any) -> str:
        """The local stand-in, the study's own checkpoint (a sweep's run folder: ``sweep_run_dir``),
        the snapshot of a pinned revision (the only download, in a real run), or the Hub id."""
        if self.stand_in:
            return self.stand_in_info(m)["path"]
        if m.local:
            return str(sweep_run_dir(m.hub_id))
        if m.revision and not m.local:
            from huggingface_hub import snapshot_download

            return snapshot_download(m.hub_id, revision=m.revision)
        return os.path.expanduser(m.hub_id)

    def raw_spec(self, key: str) -> Any:
        """The data spec as the recipe writes it (``{NAME}`` of its data sources unreplaced)."""
        return self.recipe.stand_in.data.get(key) if self.stand_in else self.entry(key).spec

    def data_fetch(self, key: str) -> str | None:
        """What to fetch for data set ``key`` when a local path it reads is missing (else None)."""
        raw = self.raw_spec(key)
        why = missing(self.recipe, substitute(raw, self.recipe.data_sources), raw)
        return f"data.{key}: {why}" if why else None

    def endpoint(self, m: Any) -> str | None:
        """The server a judge is scored through: one given for its row (``--endpoint``, or the
        task's own server), else the recipe's (``${VARIABLE}`` read from the environment)."""
        if self.stand_in:
            return None
        url = self.endpoints.get(m.name) or m.endpoint
        return resolve_endpoint(url, f"{self.recipe.path}: model {m.name}") if url else None

    def external(self, m: Any) -> bool:
        """Whether a server outside the task holds model ``m`` (so the task neither downloads nor loads it)."""
        return not self.stand_in and bool(self.endpoints.get(m.name) or m.endpoint)

    def max_length(self, m: Any) -> int | None:
        return STANDIN_MAX_LENGTH if self.stand_in else m.max_length

    def placement(self, m: Any) -> dict[str, Any]:
        trust = m.trust_remote_code or (self.stand_in and self.stand_in_info(m)["trust_remote_code"])
        if self.stand_in:  # the CPU in float32
            return {"device": "auto", "dtype": "auto", "trust_remote_code": trust, "device_map": None}
        return {"device": "auto", "dtype": m.dtype, "trust_remote_code": trust, "device_map": m.device_map}

    def scorer_settings(self, m: Any) -> Any:
        ref = m.reference
        if self.stand_in and m.kind == "dpo_implicit":
            ref = self.stand_in_info(m)["reference"]
        values = {"model": self.model_path(m), "kind": m.kind, "reference": ref, "batch_size": m.batch_size,
                  "max_length": self.max_length(m), "max_tokens": None if self.stand_in else m.max_tokens,
                  "placement": self.placement(m), "reward_head": m.head, "loader": m.loader}
        return build_config(ScorerSettings, values, f"{self.recipe.path}: model {m.name}")

    def endpoint_scorer(self, m: Any) -> Any:
        # torch: this module loads without it
        from rmeval.reproduce.endpoint_judge import EndpointJudgeScorer

        return EndpointJudgeScorer(m.hub_id, base_url=self.endpoint(m))

    def reward_stand_in(self, name: str) -> str:
        """A tiny one-output reward model named ``name`` (the leaderboard experiment's reward models)."""
        return self.stand_in_info(ModelSpec(name=name, hub_id=f"stand-in/{name}", params_b=0.001))["path"]

    def judge_stand_in(self) -> str:
        """A tiny judge for a stand-in run's pairwise verdicts (the policy table's win rates)."""
        return self.stand_in_info(ModelSpec(name="_judge", hub_id="stand-in/judge", kind="generative_judge",
                                            params_b=0.001))["path"]


def sweep_run_dir(path: str | os.PathLike) -> Path:
    """A study checkpoint named as a sweep's seed folder ``ROOT/<model>/<arm>/seed<k>``: that folder,
    or, when the sweep trained that seed as its selected search run (``rmtrain sweep`` reuses the
    search run of the chosen setting for the search seed), the run folder its ``ROOT/summary.csv``
    names for the model, arm and seed. Any other path is returned as given."""
    p = Path(os.path.expanduser(str(path)))
    if p.exists() or len(p.parts) < 4 or not p.name.startswith("seed") or not p.name[4:].isdigit():
        return p
    summary = p.parents[2] / "summary.csv"
    if not summary.is_file():
        return p
    import pandas as pd

    df = pd.read_csv(summary)
    hit = df[(df["model"].astype(str).str.split("/").str[-1] == p.parent.parent.name) & (df["arm"] == p.parent.name)
             & (df["seed"].astype(str) == p.name[4:])]
    return Path(hit.iloc[0]["run_dir"]) if len(hit) == 1 and isinstance(hit.iloc[0]["run_dir"], str) else p


def check_run_kind(out: Path, recipe: Any, stand_in: bool) -> None:
    """OUT holds one kind of run: a stand-in run never mixes with a real one (their rows differ)."""
    path = out / "run.json"
    if path.is_file():
        prev = json.loads(path.read_text())
        if bool(prev.get("stand_in")) != stand_in:
            what = "a stand-in" if prev.get("stand_in") else "a real"
            raise ConfigError(f"{out} holds {what} run of {prev.get('recipe')}; write this one elsewhere")
        return
    atomic_write_json(path, {"recipe": str(recipe.path), "stand_in": stand_in, "table": recipe.reproduce.table})
