"""The importer of Reward Auditor's perturbed RM-Bench files, on small files written here in their
layout, and the ``CODE@auditor`` perturbations they feed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmcore.data.registry import load_data
from rmcore.errors import ConfigError, DataError
from rmeval.cli import main
from rmeval.perturbations.suite import build_suite, default_specs, preference_items

PROMPT_CODES = ["EF", "PH", "IU", "IW", "CN"]
CONTENT = ["LE", "SP", "ST", "LC", "SLC"]  # response versions 1..5 by content


def prompt_row(i: int, task: str) -> dict:
    base = f"What is item {i} of {task}?"
    return {"id": i, "subset": "alpacaeval", "prompt": [base, f'"""{base}"""', base.replace("?", " ?"),
                                                         f"{base} @user{i}", f"{base} https://t.co/x{i}",
                                                         base.replace("item", "itme")],
            "chosen": f"Item {i} is a red apple.", "rejected": f"Item {i} is a blue stone."}


def response_row(i: int, task: str) -> dict:
    base = f"What is item {i} of {task}?"
    return {"id": i, "subset": "alpacaeval", "prompt": base,
            "chosen": [f"Item {i} is a red apple."] + [f"{c} chosen {i}" for c in CONTENT],
            "rejected": [f"Item {i} is a blue stone."] + [f"{c} rejected {i}" for c in CONTENT]}


def write_files(root: Path, n: int = 4) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for task in ("chat", "safety-refuse"):
        (root / f"{task}_filtered_prompt_disturbance.json").write_text(json.dumps([prompt_row(i, task) for i in range(n)]))
        (root / f"{task}_filtered_response_disturbance.json").write_text(
            json.dumps([response_row(i, task) for i in range(n)]))
    (root / "math_filtered_prompt_disturbance.json").write_text(json.dumps([prompt_row(i, "math") for i in range(n)]))
    return root


def test_layout_is_read_as_published(tmp_path):
    root = write_files(tmp_path / "ra")
    rs = load_data(f"reward_auditor:{root}")
    assert rs.name == "reward_auditor-chat+math+safety-refuse" and len(rs) == 12
    chat0 = rs.by_id()["chat-0"]  # ids repeat across tasks
    assert chat0.messages == [{"role": "user", "content": "What is item 0 of chat?"}]
    assert [r.text for r in chat0.responses] == ["Item 0 is a red apple.", "Item 0 is a blue stone."]
    pert = chat0.meta["perturbed"]
    assert [pert[c]["prompt"] for c in PROMPT_CODES] == prompt_row(0, "chat")["prompt"][1:]
    assert {c: pert[c]["chosen"] for c in CONTENT} == {c: f"{c} chosen 0" for c in CONTENT}
    assert chat0.meta["domain"] == "chat" and rs.by_id()["math-1"].meta["domain"] == "math"
    assert set(rs.by_id()["math-1"].meta["perturbed"]) == set(PROMPT_CODES)  # no response file for math
    assert [(q.chosen_id, q.rejected_id) for q in rs.preferences[:1]] == [("chat-0:chosen", "chat-0:rejected")]
    # the released script's names for the response columns, in file order
    script = load_data({"name": "reward_auditor", "path": str(root), "task": "chat", "labels": "script"})
    assert script.by_id()["chat-2"].meta["perturbed"]["ST"]["rejected"] == "LE rejected 2"
    one = load_data(f"reward_auditor:{root / 'chat_filtered_response_disturbance.json'}")
    assert len(one) == 4 and set(one.prompts[0].meta["perturbed"]) == set(CONTENT)


def test_auditor_perturbations_are_the_files_versions(tmp_path):
    rs = load_data(f"reward_auditor:{write_files(tmp_path / 'ra')},task=chat")
    assert default_specs(rs) == [f"{c}@auditor" for c in PROMPT_CODES + ["ST", "LE", "SP", "LC", "SLC"]]
    items, _ = preference_items(rs)
    ef, sp, ph = build_suite(["EF@auditor", "SP@auditor", "PH@auditor"], items, rating_set=rs)
    for t, i in zip(ef.twins, range(4)):
        assert t.perturbed.messages[-1] == ("user", prompt_row(i, "chat")["prompt"][1])
        assert (t.perturbed.chosen, t.perturbed.rejected) == (t.original.chosen, t.original.rejected)
    assert [(t.perturbed.chosen, t.perturbed.rejected) for t in sp.twins][1] == ("SP chosen 1", "SP rejected 1")
    assert ph.counts() == {"n_items": 4, "n_changed": 4, "n_unchanged": 0, "n_failed": 0}
    with pytest.raises(ConfigError, match="needs Reward Auditor's perturbed files"):
        build_suite(["EF@auditor"], items, rating_set=load_data("simulated:n_prompts=4"))


def test_bad_files_name_file_row_field(tmp_path):
    root = write_files(tmp_path / "ra")
    rows = [prompt_row(i, "chat") for i in range(4)]
    rows[2]["prompt"] = rows[2]["prompt"][:4]
    f = root / "chat_filtered_prompt_disturbance.json"
    f.write_text(json.dumps(rows))
    with pytest.raises(DataError, match=r"chat_filtered_prompt_disturbance.json, row 3, field 'prompt': expected a "
                                        r"list of 6 versions"):
        load_data(f"reward_auditor:{root},task=chat")
    rs = load_data(f"reward_auditor:{root},task=chat,on_bad=skip")
    assert len(rs) == 3 and rs.skipped["reward_auditor_malformed"] == 1
    rows = [response_row(i, "chat") for i in range(4)]
    rows[1]["chosen"][0] = "something else"
    f.write_text(json.dumps([prompt_row(i, "chat") for i in range(4)]))
    (root / "chat_filtered_response_disturbance.json").write_text(json.dumps(rows))
    with pytest.raises(DataError, match=r"row 2, field 'chosen\[0\]': differs from the prompt file's original"):
        load_data(f"reward_auditor:{root},task=chat")
    with pytest.raises(ConfigError, match=r"no files for task\(s\) \['code'\]"):
        load_data(f"reward_auditor:{root},task=code")
    with pytest.raises(FileNotFoundError, match="not found"):
        load_data(f"reward_auditor:{tmp_path / 'nowhere'}")
    (tmp_path / "other").mkdir()
    with pytest.raises(DataError, match="no Reward Auditor files"):
        load_data(f"reward_auditor:{tmp_path / 'other'}")


def test_an_empty_version_is_a_failed_twin(tmp_path):
    root = write_files(tmp_path / "ra")
    rows = [response_row(i, "chat") for i in range(4)]
    rows[0]["chosen"][5] = ""
    (root / "chat_filtered_response_disturbance.json").write_text(json.dumps(rows))
    rs = load_data(f"reward_auditor:{root},task=chat")
    items, _ = preference_items(rs)
    (slc,) = build_suite(["SLC@auditor"], items, rating_set=rs)
    assert slc.counts()["n_failed"] == 1 and slc.twins[0].perturbed is None


def tiny_classifier(path: Path) -> Path:
    from rmcore.tiny import save_tiny, tiny_model, train_tokenizer

    tok = train_tokenizer(["What is item of chat math? Item is a red apple blue stone chosen rejected"],
                          word_level=True, pad_token="[PAD]", unk_token="[UNK]")
    return save_tiny(path, tiny_model(tok, "llama", head="classifier", num_labels=1), tok)


def test_suitability_command_on_the_files(tmp_path):
    root = write_files(tmp_path / "ra", n=6)
    out = tmp_path / "suit"
    assert main(["suitability", "--checkpoint", str(tiny_classifier(tmp_path / "rm")), "--data", f"reward_auditor:{root}",
                 "--out", str(out), "--max-length", "64", "--n-permutations", "500", "--wandb-mode", "disabled"]) == 0
    doc = json.loads((out / "suitability.json").read_text())
    assert list(doc["perturbations"]) == [f"{c}@auditor" for c in PROMPT_CODES + ["ST", "LE", "SP", "LC", "SLC"]]
    assert doc["perturbations"]["EF@auditor"]["n"] == 18 and doc["perturbations"]["ST@auditor"]["n"] == 12
    assert set(doc["subsets"]) == {"chat", "math", "safety-refuse"}
    assert set(doc["summary"]["subsets"]["math"]) == {f"{c}@auditor" for c in PROMPT_CODES}
    assert (out / "suitability_subsets.png").is_file()
