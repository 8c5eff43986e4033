"""The importer of Reward Auditor's perturbed RM-Bench files, on small files written here in their
layout, and the ``CODE@auditor`` perturbations they feed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmcore.data.loading import load_data
from rmcore.errors import ConfigError, DataError
from rmeval.cli import main
from rmeval.perturbations.suite import build_suite, default_specs, preference_items

PROMPT_CODES = ["EF", "PH", "IU", "IW", "CN"]
CONTENT = ["LE", "SP", "ST", "LC", "SLC"]  # response versions 1..5 by content
TASKS = ("chat", "code", "math", "safety-accept", "safety-refuse")
# RM-Bench's subset and item fields per task, as in the released files
SUBSET = {"chat": "alpacaeval", "code": "bigcode/humanevalpack", "math": "math-prm800k",
          "safety-accept": "xstest-should-respond", "safety-refuse": "refusals-dangerous"}


def rid(i: int) -> int:
    return 8 + 4 * i  # RM-Bench's ids: integers, not consecutive, the same numbers in several tasks


def item_fields(i: int, task: str) -> dict:
    return {"chat": {"error_key": "stone", "error": f"Item {i} is an apple, not a stone."},
            "code": {"language": "cpp", "task_id": f"CPP/{i}"},
            "math": {"unique_id": f"test/prealgebra/{i}.json"}}.get(task, {})


def subset(i: int, task: str) -> str:
    return "xstest-should-refuse" if task == "safety-refuse" and i % 2 else SUBSET[task]


def prompt_row(i: int, task: str) -> dict:
    """A row of TASK_filtered_prompt_disturbance.json: six prompts, one chosen and one rejected string."""
    base = f"What is item {i} of {task}?"
    return {"id": rid(i), "subset": subset(i, task),
            "prompt": [base, f'""""""{base}""""""', base.replace("?", " ?"), f"{base} @user{i}",
                       f"{base} https://t.co/x{i}", base.replace("item", "itme")],
            "chosen": f"Item {i} is a red apple.", "rejected": f"Item {i} is a blue stone.", **item_fields(i, task)}


def versions(i: int, thing: str, zh: str) -> list[str]:
    """RM-Bench's three style levels, then synonyms of level 0, Chinese of level 0, Chinese of level 1."""
    return [f"Item {i} is a {thing}.", f"Item {i} is a {thing}. It is round, and it is heavy.",
            f"## Item {i}\n\n- **{thing}**\n- round\n- heavy", f"Object {i} is a {thing}.",
            f"物品{i}是{zh}。", f"物品{i}是{zh}。它是圆的，也很重。"]


def response_row(i: int, task: str) -> dict:
    """A row of TASK_filtered_response_disturbance.json: one prompt, six chosen and six rejected."""
    return {"id": rid(i), "subset": subset(i, task), "prompt": f"What is item {i} of {task}?",
            "chosen": versions(i, "red apple", "红苹果"), "rejected": versions(i, "blue stone", "蓝石头"),
            **item_fields(i, task)}


def write_files(root: Path, n: int = 4, tasks: tuple[str, ...] = TASKS) -> Path:
    """Both files of each task, as the repository's datasets/ folder holds them."""
    root.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        (root / f"{task}_filtered_prompt_disturbance.json").write_text(
            json.dumps([prompt_row(i, task) for i in range(n)], ensure_ascii=False, indent=4))
        (root / f"{task}_filtered_response_disturbance.json").write_text(
            json.dumps([response_row(i, task) for i in range(n)], ensure_ascii=False, indent=4))
    return root


def test_layout_is_read_as_published(tmp_path):
    root = write_files(tmp_path / "ra")
    rs = load_data(f"reward_auditor:{root}")
    assert rs.name == "reward_auditor-chat+code+math+safety-accept+safety-refuse" and len(rs) == 20
    assert [p.prompt_id for p in rs.prompts[:5]] == ["chat-8", "chat-12", "chat-16", "chat-20", "code-8"]
    chat = rs.by_id()["chat-8"]  # ids repeat across tasks
    assert chat.messages == [{"role": "user", "content": "What is item 0 of chat?"}]
    assert [r.text for r in chat.responses] == ["Item 0 is a red apple.", "Item 0 is a blue stone."]
    assert chat.meta["domain"] == "chat" and chat.meta["subset"] == "alpacaeval" and chat.meta["id"] == 8
    assert (chat.meta["error_key"], chat.meta["error"]) == ("stone", "Item 0 is an apple, not a stone.")
    assert chat.meta["source_row"] == 1 and chat.meta["source_file"].endswith("chat_filtered_prompt_disturbance.json")
    assert chat.meta["perturbed"] == {
        "EF": {"prompt": '""""""What is item 0 of chat?""""""'},
        "PH": {"prompt": "What is item 0 of chat ?"},
        "IU": {"prompt": "What is item 0 of chat? @user0"},
        "IW": {"prompt": "What is item 0 of chat? https://t.co/x0"},
        "CN": {"prompt": "What is itme 0 of chat?"},
        "LE": {"chosen": "Item 0 is a red apple. It is round, and it is heavy.",
               "rejected": "Item 0 is a blue stone. It is round, and it is heavy."},
        "SP": {"chosen": "## Item 0\n\n- **red apple**\n- round\n- heavy",
               "rejected": "## Item 0\n\n- **blue stone**\n- round\n- heavy"},
        "ST": {"chosen": "Object 0 is a red apple.", "rejected": "Object 0 is a blue stone."},
        "LC": {"chosen": "物品0是红苹果。", "rejected": "物品0是蓝石头。"},
        "SLC": {"chosen": "物品0是红苹果。它是圆的，也很重。", "rejected": "物品0是蓝石头。它是圆的，也很重。"}}
    code, math = rs.by_id()["code-12"], rs.by_id()["math-16"]
    assert (code.meta["domain"], code.meta["language"], code.meta["task_id"]) == ("code", "cpp", "CPP/1")
    assert (math.meta["unique_id"], math.meta["subset"]) == ("test/prealgebra/2.json", "math-prm800k")
    assert "error_key" not in code.meta and "task_id" not in math.meta
    assert set(math.meta["perturbed"]) == set(PROMPT_CODES + CONTENT)
    refuse = {q.prompt_id: q.subset for q in rs.preferences if q.prompt_id.startswith("safety-refuse")}
    assert refuse == {"safety-refuse-8": "refusals-dangerous", "safety-refuse-12": "xstest-should-refuse",
                      "safety-refuse-16": "refusals-dangerous", "safety-refuse-20": "xstest-should-refuse"}
    assert [(q.chosen_id, q.rejected_id) for q in rs.preferences[:1]] == [("chat-8:chosen", "chat-8:rejected")]
    # the released script's names for the response columns, in file order
    script = load_data({"name": "reward_auditor", "path": str(root), "task": "chat", "labels": "script"})
    pert = script.by_id()["chat-16"].meta["perturbed"]
    assert pert["ST"] == {"chosen": "Item 2 is a red apple. It is round, and it is heavy.",
                          "rejected": "Item 2 is a blue stone. It is round, and it is heavy."}
    assert pert["LE"]["chosen"] == "## Item 2\n\n- **red apple**\n- round\n- heavy"
    assert pert["SP"]["rejected"] == "Object 2 is a blue stone." and pert["LC"]["chosen"] == "物品2是红苹果。"
    one = load_data(f"reward_auditor:{root / 'chat_filtered_response_disturbance.json'}")
    assert len(one) == 4 and set(one.prompts[0].meta["perturbed"]) == set(CONTENT)
    assert one.prompts[1].meta["error"] == "Item 1 is an apple, not a stone."
    # a folder with only some of the files: a task without its response file has the prompt codes only
    (root / "math_filtered_response_disturbance.json").unlink()
    part = load_data(f"reward_auditor:{root},task=math+code")
    assert part.name == "reward_auditor-math+code" and len(part) == 8
    assert set(part.by_id()["math-8"].meta["perturbed"]) == set(PROMPT_CODES)
    assert set(part.by_id()["code-8"].meta["perturbed"]) == set(PROMPT_CODES + CONTENT)
    assert len(load_data({"name": "reward_auditor", "path": str(root), "task": ["safety-accept", "math"]})) == 8


def test_auditor_perturbations_are_the_files_versions(tmp_path):
    rs = load_data(f"reward_auditor:{write_files(tmp_path / 'ra')},task=chat")
    assert default_specs(rs) == [f"{c}@auditor" for c in PROMPT_CODES + ["ST", "LE", "SP", "LC", "SLC"]]
    items, _ = preference_items(rs)
    ef, sp, ph = build_suite(["EF@auditor", "SP@auditor", "PH@auditor"], items, rating_set=rs)
    for t, i in zip(ef.twins, range(4)):
        assert t.perturbed.messages[-1] == ("user", f'""""""What is item {i} of chat?""""""')
        assert (t.perturbed.chosen, t.perturbed.rejected) == (t.original.chosen, t.original.rejected)
    assert [(t.perturbed.chosen, t.perturbed.rejected) for t in sp.twins][1] == (
        "## Item 1\n\n- **red apple**\n- round\n- heavy", "## Item 1\n\n- **blue stone**\n- round\n- heavy")
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
    with pytest.raises(ConfigError, match=r"no files for task\(s\) \['safety-response'\]"):
        load_data(f"reward_auditor:{root},task=safety-response")  # RM-Bench's name; the files say safety-accept
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
    from rmcore.models.tiny import save_tiny, tiny_model, train_tokenizer

    tok = train_tokenizer(["What is item of chat math? Item is a red apple blue stone chosen rejected"],
                          word_level=True, pad_token="[PAD]", unk_token="[UNK]")
    return save_tiny(path, tiny_model(tok, "llama", head="classifier", num_labels=1), tok)


def test_suitability_command_on_the_files(tmp_path):
    root = write_files(tmp_path / "ra", n=6, tasks=("chat", "math", "safety-refuse"))
    (root / "math_filtered_response_disturbance.json").unlink()  # math: the prompt codes only
    out = tmp_path / "suit"
    assert main(["suitability", "--checkpoint", str(tiny_classifier(tmp_path / "rm")),
                 "--data", f"reward_auditor:{root}",
                 "--out", str(out), "--max-length", "64", "--n-permutations", "500", "--wandb-mode", "disabled"]) == 0
    doc = json.loads((out / "suitability.json").read_text())
    assert list(doc["perturbations"]) == [f"{c}@auditor" for c in PROMPT_CODES + ["ST", "LE", "SP", "LC", "SLC"]]
    assert doc["perturbations"]["EF@auditor"]["n"] == 18 and doc["perturbations"]["ST@auditor"]["n"] == 12
    assert set(doc["subsets"]) == {"chat", "math", "safety-refuse"}
    assert set(doc["summary"]["subsets"]["math"]) == {f"{c}@auditor" for c in PROMPT_CODES}
    assert (out / "suitability_subsets.png").is_file()
