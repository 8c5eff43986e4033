"""A reproduction recipe (``recipes/reproduce/*.yaml``): one published table, read strictly.

Top-level keys (every block goes through ``rmcore.settings.recipes.build_config``: an unknown key is an error
naming the key, the file and the allowed keys):

- ``reproduce``: the study (``STUDIES``), the table as the paper names it, its title, and the
  analysis that computes it (``ANALYSES``).
- ``data``: named data sets, each a data SPEC (``rmcore.data.loading``) with the prompt
  conditions it is scored under (audit), its size as the paper states it (what a dry run counts
  when the data is not on disk), and the inputs some conditions need (related tasks, paraphrases,
  the independent reference pool) and the same texts scored another way (``scoring_variants``:
  without the begin- or end-of-sequence marker, audit.json's ``scoring_variants``).
- ``models``: one row each: the Hub id (and the revision where the paper gives one), the scorer
  kind, the loader and head that read the reward, the dtype, the parameter count (what the dry run
  sizes GPUs by when the config is not on disk), the batch and token limits, the device map or an
  OpenAI-compatible endpoint. A model of the paper that has no public Hub id, or that matchrm
  cannot load, stays in the table as a row with ``not_reproducible: WHY`` (no Hub id needed): its
  cells show the published figures beside "not reproducible: WHY", so the layout is the paper's.
- ``human`` (ratings-only reference rows) and ``panel_rows`` (rows computed over the whole panel).
- ``columns``: the table's columns, each a dotted key into the row's result document.
- ``published``: the figures transcribed from the paper (``Figure``), with table, row, column,
  value and interval (and the paper's significance mark, e.g. ``***``), or a range stated over
  several rows.
- ``settings``: the analysis's settings (validated into its settings dataclass), ``stand_in``:
  the local data and settings of a ``--stand-in`` run, ``compute``: the dry run's GPU assumptions.
- ``data_sources`` (local folders and files named ``{NAME}`` in data specs, with how to fetch them:
  ``rmeval.reproduce.sources``), ``slurm`` (account, QoS, partition, time limit, extra ``#SBATCH``
  options: ``rmeval.reproduce.cluster``), ``costs`` (GPU work beyond the rows: a training sweep,
  prompt generation, PPO trainings: ``rmeval.reproduce.costing``).
- ``runs_of``: another recipe (beside this one) whose runs this table reads: its data, models,
  human rows, settings and stand-in are taken from it (``shared_runs``); give both one ``--out``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmcore.errors import ConfigError
from rmcore.settings.fields import bounded
from rmcore.settings.recipes import build_config, load_recipe
from rmeval.judges.settings import BaselineSettings
from rmeval.reproduce.cluster import (
    Compute,
    DataSource,
    Reasoning,
    ReproductionSlurmSettings,
    ServeSpec,
    check_placement,
)
from rmeval.reproduce.costing import COST_KINDS, ExtraCost
from rmeval.reproduce.settings import check_settings
from rmeval.reproduce.sources import check_sources
from rmeval.scoring.base import SCORERS

STUDIES = {
    "pairwise-misses": "What Pairwise Evaluation Misses: Reward Scores across Prompts",
    "reward-auditor": "Reward Auditor: Inference on Reward Modeling Suitability in Real-World Perturbed Scenarios",
    "judgeprofile": "JudgeProfile: Understanding and Steering Subjectivity in LLM Judges",
}
ANALYSES = ("audit", "pairwise", "suitability", "policy", "judges", "leaderboard")
AGGREGATES = ("range", "sum", "mean", "median", "min", "max", "max_abs", "median_abs")
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float8": 1, "int8": 1}
SERVED_ANALYSES = ("audit", "judges")  # the analyses that score a judge through an endpoint


@dataclass
class Study:
    """``reproduce:``: which published table this recipe regenerates."""

    study: str
    table: str
    title: str
    analysis: str


@dataclass
class DataSize:
    """A data set's size as the paper states it (counted from the data instead when it is on disk)."""

    prompts: int | None = bounded(None, ge=0)
    responses: int | None = bounded(None, ge=0)
    multi_turn_prompts: int | None = bounded(None, ge=0)
    items: int | None = bounded(None, ge=0)  # preference pairs (suitability, judges)
    mean_tokens: int | None = bounded(None, ge=0)  # mean tokens per scored text (an assumption unless counted)
    source: str = ""


@dataclass
class Variants:
    """Related tasks or paraphrases of every prompt: a file (``rmeval variants``' format), or what
    writes it when it is missing (``generator``: simulated | hf:MODEL | openai:MODEL)."""

    file: str | None = None
    generator: str | None = None
    n: int = bounded(3, ge=1)
    subtype: str | None = None


@dataclass
class PoolSource:
    """The independent reference pool: ``rmeval pool``'s pool.parquet, or what writes it (the
    pool recipe, or tiny ``tiny:SEED`` policies for a stand-in run)."""

    file: str | None = None
    config: str | None = None
    policies: list[str] = field(default_factory=list)
    n: int = bounded(3, ge=1)
    max_new_tokens: int = bounded(16, ge=1)


@dataclass
class DataEntry:
    spec: Any  # a data SPEC string or mapping
    conditions: list[str] = field(default_factory=list)
    size: DataSize | None = None
    max_prompts: int | None = bounded(None, ge=1)
    related: Variants | None = None
    paraphrase: Variants | None = None
    reference_pool: PoolSource | None = None
    # the same texts scored another way: {name: the markers dropped (bos, eos)}, audit.json's scoring_variants
    scoring_variants: dict[str, list[str]] = field(default_factory=dict)
    note: str = ""


@dataclass
class ModelSpec:
    """One released model (or the study's own checkpoint, ``local``) and how it is read."""

    name: str
    hub_id: str = ""  # owner/name; may be empty only for a not_reproducible row (no public Hub id)
    label: str = ""
    revision: str | None = None
    kind: str = "seq_classifier"
    loader: str | None = None  # rmeval.scoring.loaders: a kind or a named model; None: from the checkpoint
    head: str | None = None  # --reward-head: an index or a label; None: the model's one output
    head_name: str | None = None  # what the head is (e.g. helpfulness)
    reference: str | None = None  # the DPO reference model ("none": pi_ref = 1)
    # billions of parameters (the dry run's size when no config is on disk; 0: unknown)
    params_b: float = bounded(0.0, ge=0)
    active_params_b: float | None = bounded(None, gt=0)  # a mixture of experts: the parameters a token passes through
    dtype: str = "bfloat16"
    max_length: int | None = bounded(4096, ge=1)
    batch_size: int = bounded(8, ge=1)
    max_tokens: int | None = bounded(None, ge=1)
    trust_remote_code: bool = False
    device_map: str | None = None  # auto: one model over every visible GPU
    gpus: int | None = bounded(None, ge=1)  # GPUs of its task (None: from its memory; >1 with device_map auto)
    serve: ServeSpec | None = None  # a generative judge its task serves with vLLM (rmeval.reproduce.cluster)
    endpoint: str | None = None  # an OpenAI-compatible base_url (a server of its own; ${VARIABLE} from the environment)
    reasoning: Reasoning | None = None  # a judge that reasons before it answers, served (rmeval.reproduce.cluster)
    # its licence must be accepted on the Hub (None: the Hub, else rmeval.reproduce.hub's list)
    gated: bool | None = None
    guessed: str = ""  # why its Hub id is our reading (empty: the paper or its code names the repository)
    data: list[str] | None = None  # the data sets it is scored on; None: every one
    local: bool = False  # the study's own checkpoint: a path that a recipe trains, not a Hub id
    not_reproducible: str | None = None  # why the row cannot be reproduced (its cells say so)
    note: str = ""


@dataclass
class HumanRow:
    """A ratings-only reference row (``rmeval human`` on a data set: no model), with what
    ``rmeval human`` takes beside the data: the rated ``attribute`` (default: the settings'), the
    per-annotator ``annotations`` (a HelpSteer2 disagreements file or "hub": the rater
    reliabilities) with ``raters_per_rating``, borrowed ``reliabilities`` {label: R} (the
    reliability-corrected share under each)."""

    name: str
    data: str
    label: str = ""
    attribute: str | None = None
    annotations: str | None = None
    raters_per_rating: float = bounded(1.0, ge=1)
    reliabilities: dict[str, float] = field(default_factory=dict)
    note: str = ""


@dataclass
class PanelRow:
    """A row read from the panel's document (figures over all models: a Spearman, a mean)."""

    name: str
    label: str = ""
    note: str = ""


@dataclass
class Column:
    """A column: the dotted ``key`` of a figure in a row's result document for data set ``data``
    (``human_key`` for human rows); ``minus``: a second key subtracted (a difference without an
    interval); ``scale`` multiplies (100 for percent)."""

    name: str
    key: str = ""
    label: str = ""
    data: str | None = None
    human_key: str | None = None
    minus: str | None = None
    card: str | None = None  # subtract the row's model-card value ``model_cards[row][card]``
    rows: list[str] | None = None  # the rows it applies to (names, or "models"); None: every row
    mark_key: str | None = None  # dotted key of our cell's significance mark (e.g. by_code.EF.stars)
    scale: float = bounded(1.0, finite=True)
    digits: int = bounded(2, ge=0, le=12)
    note: str = ""


@dataclass
class Figure:
    """A published figure: one cell (``row``, ``value``, ``interval`` where the paper gives one) or
    a statement over several rows (``rows``, ``range`` [lo, hi] of the rows' values, or their
    ``sum`` / ``mean`` / ``median`` / ``min`` / ``max`` / ``max_abs`` / ``median_abs`` as ``value``:
    ``min`` for "all above x", ``max_abs`` for "within x of zero"; ``minus_column``: over each
    row's difference of two columns, "rises by 0.26"; ``expect_rows``: how many rows the paper's
    statement covers)."""

    table: str
    column: str
    source: str
    row: str | None = None
    rows: list[str] | None = None
    value: float | None = bounded(None, finite=True)
    interval: list[float] | None = bounded(None, finite=True)
    mark: str = ""  # the paper's significance mark beside the value (*, **, ***)
    range: list[float] | None = bounded(None, finite=True)
    aggregate: str | None = None  # range | sum | median | max_abs | median_abs (rows only)
    also_columns: list[str] | None = None  # a statement over the cells of several columns
    minus_column: str | None = None  # a statement over each row's column − minus_column (a change)
    expect_rows: int | None = bounded(None, ge=1)  # with also_columns: how many cells the paper's statement covers
    note: str = ""


@dataclass
class PolicyBlock:
    """The PPO table's policies: the ``rmtrain policy`` recipe that trains them, where
    ``rmtrain policy-eval`` writes each reward model's winrate.json (``<winrates>/<name>/``), and
    the prompts they train on (``data``: a data SPEC whose ``{NAME}`` are the recipe's data sources,
    so ``--data-source`` moves them too; it replaces the policy recipe's ``data``)."""

    recipe: str
    winrates: str
    judge: str = ""
    n_prompts: int = bounded(100, ge=1)
    # the policies' prompts: a data SPEC naming this recipe's data sources ({rm_bench}); None: the policy recipe's
    data: Any = None


@dataclass
class BaselinesBlock:
    """``baselines:`` of a JudgeProfile table (Tables 2 and 3): rubric prompting and LoRA SFT of the
    named judges against their reweighting (``rmeval.judges.baselines``), in the panel step, on the
    machine that runs it; ``settings`` are ``BaselineSettings``' (``rubric_k``, ``lora_budget``,
    ``lora_steps``, ...), ``stand_in`` those of a stand-in run over them."""

    judges: list[str]
    settings: dict[str, Any] = field(default_factory=dict)
    stand_in: dict[str, Any] = field(default_factory=dict)


@dataclass
class StandIn:
    """What a ``--stand-in`` run reads instead: local data (SPEC strings or ``{synthetic: SCHEMA,
    ...}``: a small file in the released schema), settings overrides and data-entry overrides."""

    data: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    entries: dict[str, Any] = field(default_factory=dict)  # data key -> DataEntry fields replaced
    note: str = ""


@dataclass
class ReproductionConfig:
    reproduce: Study
    data: dict[str, Any]
    columns: list[Any]
    description: str = ""
    models: list[Any] = field(default_factory=list)
    human: list[Any] = field(default_factory=list)
    panel_rows: list[Any] = field(default_factory=list)
    published: list[Any] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    policy: PolicyBlock | None = None
    baselines: BaselinesBlock | None = None  # a JudgeProfile table's rubric and LoRA SFT baselines
    stand_in: StandIn = field(default_factory=StandIn)
    compute: Compute = field(default_factory=Compute)
    slurm: ReproductionSlurmSettings = field(default_factory=ReproductionSlurmSettings)
    data_sources: dict[str, Any] = field(default_factory=dict)  # NAME -> DataSource (rmeval.reproduce.sources)
    costs: list[Any] = field(default_factory=list)  # ExtraCost: GPU work beyond the rows
    not_reproducible: list[str] = field(default_factory=list)
    # row -> {name: a score the model's card publishes}
    model_cards: dict[str, dict[str, float]] = field(default_factory=dict)
    seed: int = bounded(0, ge=0)  # data samples, suitability permutations, judge items
    output_dir: str = "outputs/reproduce"
    runs_of: str | None = None  # another recipe whose data, models and settings this table reads (shared_runs)
    path: str = ""

    @property
    def name(self) -> str:
        return Path(self.path).stem

    def model(self, name: str) -> ModelSpec:
        for m in self.models:
            if m.name == name:
                return m
        raise ConfigError(f"{self.path}: no model named {name!r} (models: {', '.join(m.name for m in self.models)})")

    def model_data(self, m: ModelSpec) -> list[str]:
        """The data sets model ``m`` is scored on."""
        return list(m.data) if m.data is not None else list(self.data)

    def row_names(self) -> list[str]:
        return [r.name for r in self.human] + [m.name for m in self.models] + [r.name for r in self.panel_rows]

    def applies(self, column: Column, row: str) -> bool:
        """Whether ``column`` has a cell in ``row`` (``Column.rows``)."""
        if column.rows is None:
            return True
        return row in column.rows or ("models" in column.rows and row in {m.name for m in self.models})

    def row_label(self, name: str) -> str:
        for r in (*self.human, *self.models, *self.panel_rows):
            if r.name == name:
                return r.label or r.name
        return name


def _items(cls: type, block: Any, where: str) -> list[Any]:
    if block is None:
        return []
    if not isinstance(block, list):
        raise ConfigError(f"{where}: expected a list of mappings")
    return [build_config(cls, item, f"{where}[{i}]") for i, item in enumerate(block)]


SHARED_RUNS = ("data", "models", "human", "settings", "stand_in", "compute", "seed", "policy", "model_cards")
# taken from the other recipe too, but the table's own entries (--data-source, --account, ...) point
# them elsewhere: where the data lies and how jobs are submitted do not change the rows
MERGED_RUNS = ("data_sources", "slurm")


def shared_runs(raw: dict[str, Any], path: str | os.PathLike) -> dict[str, Any]:
    """``runs_of: OTHER.yaml`` (beside this recipe): a table computed from another recipe's runs
    takes that recipe's data, models, human rows, settings and stand-in (``SHARED_RUNS``), so one
    OUT holds the rows of both; naming any of them here too is an error (the rows would differ)."""
    other = raw.pop("runs_of", None)
    if other is None:
        return raw
    src = Path(path).parent / str(other)
    given = sorted(set(raw) & set(SHARED_RUNS))
    if given:
        raise ConfigError(f"{path}: runs_of {other} takes {', '.join(given)} from that recipe; remove them here")
    base = load_recipe(src)
    if "runs_of" in base:
        raise ConfigError(f"{path}: runs_of {other}: that recipe takes its runs from another ({base['runs_of']})")
    merged = {k: {**(base.get(k) or {}), **(raw.get(k) or {})} for k in MERGED_RUNS if k in base or k in raw}
    return {**{k: base[k] for k in SHARED_RUNS if k in base}, **raw, **merged, "runs_of": str(other)}


def build_recipe(raw: dict[str, Any], path: str | os.PathLike) -> ReproductionConfig:
    """A ``ReproductionConfig`` from the YAML mapping of ``path`` (with ``runs_of``: the other recipe's runs),
    strictly; then ``validate_recipe``."""
    where = str(path)
    raw = shared_runs(dict(raw), path)
    lists = {"models": ModelSpec, "human": HumanRow, "panel_rows": PanelRow, "columns": Column, "published": Figure,
             "costs": ExtraCost}
    parsed = {k: _items(cls, raw.pop(k, None), f"{where}.{k}") for k, cls in lists.items()}
    data = raw.pop("data", None)
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{where}: data must map names to data entries ({{spec: SPEC, ...}})")
    entries = {str(k): build_config(DataEntry, {"spec": v} if isinstance(v, str) else v, f"{where}.data.{k}")
               for k, v in data.items()}
    sources = raw.pop("data_sources", None) or {}
    if not isinstance(sources, dict):
        raise ConfigError(f"{where}: data_sources must map names to {{path, fetch}}")
    parsed["data_sources"] = {str(k): build_config(DataSource, {"path": v} if isinstance(v, str) else v,
                                                   f"{where}.data_sources.{k}") for k, v in sources.items()}
    recipe = build_config(ReproductionConfig, {**raw, "data": entries, **parsed}, where)
    recipe.path = where
    validate_recipe(recipe)
    return recipe


def load_reproduction(path: str | os.PathLike, overrides: dict[str, Any] | None = None) -> ReproductionConfig:
    """The recipe at ``path``, with dotted ``overrides`` of its keys (``slurm.account``,
    ``data_sources.rm_bench.path``: what the command's flags set) applied first."""
    from rmcore.settings.recipes import set_dotted

    raw = load_recipe(path)
    if "reproduce" not in raw:
        raise ConfigError(f"{path}: not a reproduction recipe (no 'reproduce' block)")
    for k, v in (overrides or {}).items():
        set_dotted(raw, k, v)
    return build_recipe(raw, path)


def _unique(names: list[str], what: str, where: str) -> None:
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{where}: {what} names must be unique; repeated: {dup}")


def validate_recipe(r: ReproductionConfig) -> None:
    """Every cross-reference and value checked: one-line ConfigErrors naming the file."""
    where = r.path
    if r.reproduce.study not in STUDIES:
        raise ConfigError(f"{where}: reproduce.study must be one of {', '.join(STUDIES)}, got {r.reproduce.study!r}")
    if r.reproduce.analysis not in ANALYSES:
        raise ConfigError(f"{where}: reproduce.analysis must be one of {', '.join(ANALYSES)}, "
                          f"got {r.reproduce.analysis!r}")
    rows = r.row_names()
    _unique(rows, "row", where)
    _unique([c.name for c in r.columns], "column", where)
    for m in r.models:
        _validate_model(m, r, where)
    for h in r.human:
        if h.data not in r.data:
            raise ConfigError(f"{where}: human row {h.name}: unknown data {h.data!r} (data: {', '.join(r.data)})")
    for c in r.columns:
        if c.data is not None and c.data not in r.data:
            raise ConfigError(f"{where}: column {c.name}: unknown data {c.data!r} (data: {', '.join(r.data)})")
        if not c.key and not c.human_key:
            raise ConfigError(f"{where}: column {c.name}: needs a key")
        unknown = sorted(set(c.rows or []) - set(rows) - {"models"})
        if unknown:
            raise ConfigError(f"{where}: column {c.name}: unknown rows {unknown}")
    for f in r.published:
        _validate_figure(f, rows, {c.name for c in r.columns}, where)
        col = next(c for c in r.columns if c.name == f.column)
        if f.row is not None and not r.applies(col, f.row):
            raise ConfigError(f"{where}: published figure ({f.table}, {f.row}, {f.column}): the column has no cell "
                              "in that row (its rows)")
    for key in r.stand_in.data:
        if key not in r.data:  # (a null stand-in leaves a data set out of a stand-in run)
            raise ConfigError(f"{where}: stand_in.data names unknown data {key!r} (data: {', '.join(r.data)})")
    if r.baselines is not None:
        _validate_baselines(r, where)
    if r.reproduce.analysis == "policy" and r.policy is None:
        raise ConfigError(f"{where}: a policy table needs a policy block (recipe, winrates)")
    for e in r.costs:
        if e.kind not in COST_KINDS:
            raise ConfigError(f"{where}: costs {e.name}: kind must be one of {', '.join(COST_KINDS)}, got {e.kind!r}")
        if e.data is not None and e.data not in r.data:
            raise ConfigError(f"{where}: costs {e.name}: unknown data {e.data!r} (data: {', '.join(r.data)})")
    for key, e in r.data.items():
        for name, markers in e.scoring_variants.items():
            if r.reproduce.analysis != "audit" or not markers or not set(markers) <= {"bos", "eos"}:
                raise ConfigError(f"{where}: data.{key}.scoring_variants.{name}: an audit table's markers to drop, "
                                  f"a list of bos and/or eos (got {markers!r} in a {r.reproduce.analysis} table)")
    check_sources(r)
    check_settings(r)


def _validate_baselines(r: ReproductionConfig, where: str) -> None:
    """The baselines name local judges of a JudgeProfile table, with settings ``BaselineSettings`` reads."""
    from rmeval.reproduce.settings import strict_settings

    b = r.baselines
    if r.reproduce.analysis != "judges":
        raise ConfigError(f"{where}: baselines are a JudgeProfile (judges) table's, "
                          f"not a {r.reproduce.analysis} table's")
    for name in b.judges:
        m = next((x for x in r.models if x.name == name), None)
        if m is None or m.not_reproducible or m.serve or m.endpoint:
            raise ConfigError(f"{where}: baselines.judges: {name} is not a judge row loaded in its task (the "
                              "baselines prompt and fine-tune the local causal LM)")
    for part in ("settings", "stand_in"):
        values = {**b.settings, **(b.stand_in if part == "stand_in" else {})}
        strict_settings(BaselineSettings, {**values, "model": "-", "judge": "-"}, f"{where}: baselines.{part}")


def _validate_model(m: ModelSpec, r: ReproductionConfig, where: str) -> None:
    # torch: this module loads without it
    from rmeval.scoring.loaders import KNOWN_MODELS, LOADER_KINDS

    at = f"{where}: model {m.name}"
    if m.kind not in SCORERS:  # a scorer's name (rmeval.scoring.SCORERS)
        raise ConfigError(f"{at}: kind must be one of {', '.join(SCORERS.names())}, got {m.kind!r}")
    if m.loader is not None and m.loader not in LOADER_KINDS and m.loader not in KNOWN_MODELS:
        raise ConfigError(f"{at}: unknown loader {m.loader!r}; "
                          f"known: {', '.join(sorted([*LOADER_KINDS, *KNOWN_MODELS]))}")
    if m.kind != "seq_classifier" and (m.loader or m.head is not None):
        raise ConfigError(f"{at}: loader and head read a reward model's output; a {m.kind} has neither")
    if m.kind == "dpo_implicit" and not m.reference:
        raise ConfigError(f"{at}: a DPO model needs its reference ('none': pi_ref = 1)")
    if m.dtype not in DTYPE_BYTES:
        raise ConfigError(f"{at}: dtype must be one of {', '.join(DTYPE_BYTES)}, got {m.dtype!r}")
    if m.params_b <= 0 and not m.not_reproducible:  # (a row nothing runs may not know its size)
        raise ConfigError(f"{at}: params_b (billions of parameters) must be > 0")
    if m.device_map not in (None, "auto"):
        raise ConfigError(f"{at}: device_map must be auto or absent, got {m.device_map!r}")
    if (m.endpoint or m.serve) and m.kind != "generative_judge":
        raise ConfigError(f"{at}: an endpoint serves a generative judge, not a {m.kind}")
    if (m.endpoint or m.serve) and r.reproduce.analysis not in SERVED_ANALYSES:
        raise ConfigError(f"{at}: a {r.reproduce.analysis} table scores its judges in the task (device_map: auto), "
                          f"not through a server (endpoint, serve: {', '.join(SERVED_ANALYSES)} tables)")
    if m.reasoning and not (m.kind == "generative_judge" and r.reproduce.analysis == "judges"
                            and (m.serve or m.endpoint)):
        raise ConfigError(f"{at}: reasoning: is for a JudgeProfile judge behind a server (serve: or endpoint:), whose "
                          "reply is read after its reasoning; other judges are read at their first token")
    if m.serve and (m.device_map or m.gpus):
        raise ConfigError(f"{at}: serve: places the judge on its server's GPUs; device_map and gpus are for a model "
                          "loaded in the task")
    if m.dtype == "float8" and not (m.serve or m.endpoint):
        raise ConfigError(f"{at}: dtype float8 sizes a served checkpoint's weights; a model loaded in the task is "
                          "bfloat16, float16 or float32")
    if m.active_params_b is not None and m.active_params_b > m.params_b:
        raise ConfigError(f"{at}: active_params_b ({m.active_params_b:g}) exceeds params_b ({m.params_b:g})")
    for d in r.model_data(m):
        if d not in r.data:
            raise ConfigError(f"{at}: unknown data {d!r} (data: {', '.join(r.data)})")
    if not m.hub_id and not m.not_reproducible:
        raise ConfigError(f"{at}: needs a hub_id (or not_reproducible: why, for a model without a public one)")
    if m.hub_id and not m.local and "/" not in m.hub_id:
        raise ConfigError(f"{at}: hub_id must be owner/name (or set local: true for the study's own checkpoint)")
    if not m.not_reproducible:
        check_placement(m, weights_gb(m), r.compute, where)


def weights_gb(m: ModelSpec, params_b: float | None = None) -> float:
    """GB of weights a row holds: parameters x bytes per parameter, twice for a DPO model scored
    against its reference."""
    twice = m.kind == "dpo_implicit" and str(m.reference).lower() != "none"
    return (params_b if params_b is not None else m.params_b) * DTYPE_BYTES[m.dtype] * (2 if twice else 1)


def _validate_figure(f: Figure, rows: list[str], columns: set[str], where: str) -> None:
    at = f"{where}: published figure ({f.table}, {f.row or f.rows}, {f.column})"
    for c in [f.column, *(f.also_columns or []), *([f.minus_column] if f.minus_column else [])]:
        if c not in columns:
            raise ConfigError(f"{at}: unknown column {c!r}")
    if f.minus_column and (f.rows is None or f.also_columns):
        raise ConfigError(f"{at}: minus_column makes a statement over rows' differences: give rows, no also_columns")
    if f.also_columns and f.rows is None:
        raise ConfigError(f"{at}: also_columns makes a statement over rows: give rows")
    if (f.row is None) == (f.rows is None):
        raise ConfigError(f"{at}: give exactly one of row and rows")
    for name in [f.row] if f.row is not None else (f.rows or []):
        if name != "all" and name not in rows:
            raise ConfigError(f"{at}: unknown row {name!r}")
    if f.row is not None and (f.value is None or f.range is not None or f.aggregate is not None):
        raise ConfigError(f"{at}: a one-cell figure has a value (and an interval), no range or aggregate")
    if f.rows is not None:
        agg = f.aggregate or "range"
        if agg not in AGGREGATES:
            raise ConfigError(f"{at}: aggregate must be one of {', '.join(AGGREGATES)}")
        if agg == "range" and (f.range is None or len(f.range) != 2 or f.range[0] > f.range[1]):
            raise ConfigError(f"{at}: a range figure needs range: [lo, hi]")
        if agg != "range" and f.value is None:
            raise ConfigError(f"{at}: a {agg} figure needs a value")
    if f.mark and (f.row is None or set(f.mark) != {"*"} or len(f.mark) > 3):
        raise ConfigError(f"{at}: mark is a one-cell figure's significance stars (*, ** or ***), got {f.mark!r}")
    if f.interval is not None and (len(f.interval) != 2 or f.interval[0] > f.interval[1]):
        raise ConfigError(f"{at}: interval must be [lo, hi]")
    if not f.source:
        raise ConfigError(f"{at}: say where in the paper it is (source)")
