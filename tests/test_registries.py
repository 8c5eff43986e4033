"""The six registries all stand on rmcore.settings.registry.Registry: each public lookup keeps its wording and
suggests the closest name, and each public register function refuses a second registration."""

from __future__ import annotations

from typing import Any

import pytest

from rmcore.errors import ConfigError
from rmcore.settings.registry import Registry


def _lookups() -> list[tuple[Any, str]]:
    """(a call with a typo, the message it must end with), one per registry, through its public path."""
    from rmcore.data.loading import load_rating_set
    from rmeval.conditions import check_condition_names
    from rmeval.perturbations import perturb_prompt
    from rmeval.perturbations.suite import parse_spec
    from rmeval.scoring import make_scorer
    from rmeval.scoring.loaders import choose_loader
    from rmtrain.arms import make_arm

    return [
        (lambda: make_arm("bradly_terry"), "unknown arm 'bradly_terry'; known arms: binarized, bradley_terry, "
                                           "bt_margin, gap_only, regression, shuffled_mean "
                                           "(did you mean 'bradley_terry'?)"),
        (lambda: make_scorer("seq_clasifier"), "unknown scorer 'seq_clasifier'; known: dpo_implicit, "
                                               "generative_judge, seq_classifier (did you mean 'seq_classifier'?)"),
        (lambda: choose_loader("ckpt", {}, "armorn"), "--loader armorn: unknown; known: armorm, classifier, "
                                                      "lm_logit, nemotron-70b-reward, remote_code, "
                                                      "starling-rm-34b, ultrarm, value_head "
                                                      "(did you mean 'armorm'?)"),
        (lambda: load_rating_set("simulatd"), "unknown rating set 'simulatd'; known: generic, helpsteer, helpsteer2, "
                                              "hh_rlhf, reward_auditor, rewardbench, rewardbench2, rm_bench, shp, "
                                              "simulated (did you mean 'simulated'?)"),
        (lambda: check_condition_names(["orignal"]), "unknown condition 'orignal'; known: original, generic, "
                                                     "prompt_only, random, overlap, embedding, length, related, "
                                                     "paraphrase, last_turn, fixed_reply_random, "
                                                     "fixed_reply_related (did you mean 'original'?)"),
        (lambda: parse_spec("SLX"), "unknown perturbation 'SLX'; codes: EF, PH, IU, IW, CN, ST, LE, SP, LC, SLC "
                                    "(stylized ones optionally @rule/@lm/@file/@rmbench/@auditor) "
                                    "(did you mean 'SLC'?)"),
        (lambda: perturb_prompt("PHH", "text", 0), "unknown controlled perturbation 'PHH'; expected one of "
                                                  "('EF', 'PH', 'IU', 'IW', 'CN') (did you mean 'PH'?)"),
    ]


@pytest.mark.parametrize("k", range(7))
def test_an_unknown_name_keeps_its_wording_and_suggests_the_closest(k: int) -> None:
    call, message = _lookups()[k]
    with pytest.raises(ValueError) as e:  # ConfigError is a ValueError; perturb_prompt's stays a plain one
        call()
    assert str(e.value) == message


def test_the_six_are_registries() -> None:
    from rmcore.data.loading import LOADERS
    from rmeval.conditions import CONDITIONS
    from rmeval.perturbations import PROMPT_PERTURBATIONS
    from rmeval.scoring import SCORERS
    from rmeval.scoring.loaders import LOADER_KINDS
    from rmtrain.arms import ARMS

    regs = [ARMS, SCORERS, LOADER_KINDS, LOADERS, CONDITIONS, PROMPT_PERTURBATIONS]
    assert all(isinstance(r, Registry) for r in regs)
    assert [r.kind for r in regs] == ["arm", "scorer", "reward-model loader", "rating set", "condition",
                                      "controlled perturbation"]
    assert ARMS.names() == ["bradley_terry", "bt_margin", "gap_only", "regression", "shuffled_mean", "binarized"]
    # the automatic choice's order
    assert LOADER_KINDS.names() == ["value_head", "remote_code", "classifier", "lm_logit"]
    assert PROMPT_PERTURBATIONS.names() == ["EF", "PH", "IU", "IW", "CN"]


def test_a_second_registration_is_refused_unless_replace() -> None:
    from rmcore.data.loading import LOADERS, register_loader
    from rmeval.scoring import SCORERS, register_scorer
    from rmeval.scoring.loaders import LOADER_KINDS, register_reward_loader
    from rmtrain.arms import ARMS, register_arm

    with pytest.raises(ConfigError, match="arm 'regression' is already registered"):
        register_arm(ARMS["regression"])
    with pytest.raises(ConfigError, match="scorer 'seq_classifier' is already registered"):
        register_scorer("seq_classifier", "x:Y")
    with pytest.raises(ConfigError, match="reward-model loader 'classifier' is already registered"):
        register_reward_loader("classifier", "x")
    with pytest.raises(ConfigError, match="rating set 'simulated' is already registered"):
        register_loader("simulated")(lambda spec: None)
    # a replacement by the same object changes nothing
    register_arm(ARMS["regression"], replace=True)
    register_scorer("seq_classifier", SCORERS["seq_classifier"], replace=True)
    register_reward_loader("classifier", LOADER_KINDS["classifier"], replace=True)
    register_loader("simulated", replace=True)(LOADERS["simulated"])
    assert list(ARMS)[3] == "regression" and list(LOADER_KINDS)[2] == "classifier"


def test_a_registered_perturbation_is_a_controlled_code_everywhere() -> None:
    from rmcore.data.schema import PromptRecord
    from rmeval.perturbations import PROMPT_PERTURBATIONS, perturb_prompt, register_perturbation
    from rmeval.perturbations.controlled import GROUPS
    from rmeval.perturbations.suite import parse_spec
    from rmtrain.policy.config import EnvironmentSettings
    from rmtrain.policy.environment import environment_rows

    with pytest.raises(ConfigError, match="not a stylized code"):
        register_perturbation("ST", lambda text, rng: text)
    with pytest.raises(ConfigError, match="letters, digits or _"):
        register_perturbation("EF@x", lambda text, rng: text)
    try:
        register_perturbation("QQ", lambda text, rng, *, mark="?": text + mark, options=("mark",))
        assert GROUPS["QQ"] == "controlled" and parse_spec("QQ") == ("QQ", None)
        assert perturb_prompt("QQ", "Why", 0, mark="!") == "Why!"
        with pytest.raises(ValueError, match=r"takes options \['mark'\], got \['rate'\]"):
            perturb_prompt("QQ", "Why", 0, rate=0.1)
        with pytest.raises(ConfigError, match="'QQ' is already registered"):
            register_perturbation("QQ", lambda text, rng: text)
        prompts = [PromptRecord("p0", [{"role": "user", "content": "Why"}], [])]
        settings = EnvironmentSettings(controlled=["QQ"], controlled_fraction=1.0, stylized_fraction=0.0)
        rows = environment_rows(prompts, "perturbed", settings)  # the policy's perturbed environment
        assert rows[0]["perturbation"] == "QQ" and rows[0]["reward_messages"][-1]["content"] == "Why?"
    finally:
        PROMPT_PERTURBATIONS.pop("QQ", None)
        GROUPS.pop("QQ", None)
    assert "QQ" not in PROMPT_PERTURBATIONS and "QQ" not in GROUPS


def test_a_registered_response_perturbation_is_a_stylized_code_everywhere() -> None:
    """Stylized codes have the registry controlled ones have: a registered code joins the suite (by
    rule, by a model rewriter, from a file), the rewriters and the policy's perturbed environment."""
    from rmcore.data.schema import PromptRecord
    from rmeval.perturbations import RESPONSE_PERTURBATIONS, register_response_perturbation
    from rmeval.perturbations.controlled import GROUPS
    from rmeval.perturbations.rewriters import LMRewriter, RewriteRequest, RuleRewriter
    from rmeval.perturbations.suite import Item, Pair, build_suite, parse_spec
    from rmtrain.policy.config import EnvironmentSettings
    from rmtrain.policy.environment import environment_rows

    with pytest.raises(ConfigError, match="not a controlled code"):
        register_response_perturbation("EF", "Emphasise it.")
    try:
        register_response_perturbation("UP", "Rewrite the text in capitals.", rule=lambda text, rng: text.upper(),
                                       rollout="Answer in capitals.")
        register_response_perturbation("WH", "Whisper the text.")
        assert GROUPS["UP"] == GROUPS["WH"] == "stylized"
        assert parse_spec("UP") == ("UP", "rule") and parse_spec("WH") == ("WH", "lm")  # the default source
        with pytest.raises(ConfigError, match="only ST, SP, UP have a rule-based rewriter"):
            parse_spec("WH@rule")
        with pytest.raises(ConfigError, match="'UP' is already registered"):
            register_response_perturbation("UP", "again")
        assert "UP" in RuleRewriter().codes and "WH" not in RuleRewriter().codes
        item = Item("i0", "p0", Pair.of([{"role": "user", "content": "Hi"}], "yes.", "no."), "a", "b")
        [twins] = build_suite(["UP"], [item], seed=0)
        assert twins.group == "stylized" and twins.twins[0].perturbed.chosen == "YES."

        class Echo:  # a generator backend: completes an instruction with its first line
            def complete(self, instructions, n, max_new_tokens=None):
                return [[text.splitlines()[0]] for text in instructions]

        assert LMRewriter(Echo()).rewrite("WH", [RewriteRequest("i0", "chosen", "yes.")]) == ["Whisper the text."]
        prompts = [PromptRecord("p0", [{"role": "user", "content": "Why"}], [])]
        settings = EnvironmentSettings(controlled=[], stylized=["UP"], controlled_fraction=0.0, stylized_fraction=1.0)
        rows = environment_rows(prompts, "perturbed", settings)  # the policy's perturbed environment
        assert rows[0]["style"] == "UP" and rows[0]["messages"][-1]["content"] == "Why\n\nAnswer in capitals."
        with pytest.raises(ConfigError, match="environments.stylized: unknown code 'WH'"):  # it has no rollout
            environment_rows(prompts, "perturbed", EnvironmentSettings(stylized=["WH"]))
    finally:
        for code in ("UP", "WH"):
            RESPONSE_PERTURBATIONS.pop(code, None)
            GROUPS.pop(code, None)
    assert "UP" not in RESPONSE_PERTURBATIONS and "UP" not in GROUPS
