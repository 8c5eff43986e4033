"""`rmeval pairwise` on real RM-Bench rows and `rmeval variants`, against independent references:
pairwise accuracy recomputed in the test from plain-transformers scores, the 3x3 style matrix by
hand, and the variants file read back by the FileGenerator."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from rmcore.data.loading import load_rating_set
from rmcore.models.formatting import encode_example
from rmeval.backends.generators import FileGenerator
from rmeval.cli import main
from tests.support import longest_rm_bench_rows

RM_BENCH = Path("rm-bench") / "chat_filtered.json"  # under ../shared/data


def test_pairwise_rm_bench_matches_plain_transformers(tmp_path, minilm_ckpt, shared_data):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    out = tmp_path / "pw"
    rm_bench = shared_data / RM_BENCH
    spec = f"rm_bench:{rm_bench},limit=5"
    assert main(["pairwise", "--checkpoint", str(minilm_ckpt), "--data", spec, "--out", str(out), "--max-length", "128",
                 "--n-boot", "200", "--wandb-mode", "disabled"]) == 0
    res = json.loads((out / "pairwise.json").read_text())

    # Independent reference: plain transformers, one text at a time, no padding.
    model = AutoModelForSequenceClassification.from_pretrained(minilm_ckpt).eval()
    tok = AutoTokenizer.from_pretrained(minilm_ckpt)
    rs = load_rating_set({"name": "rm_bench", "path": str(rm_bench), "limit": 5})
    score = {}
    with torch.no_grad():
        for p in rs.prompts:
            for r in p.responses:
                e = encode_example(tok, p.messages, r.text, 128)
                kw = {"input_ids": torch.tensor([e.input_ids])}
                if e.token_type_ids is not None:
                    kw["token_type_ids"] = torch.tensor([e.token_type_ids])
                score[(p.prompt_id, r.response_id)] = model(**kw).logits[0, 0].item()
    matrix = np.zeros((3, 3))
    wins = []
    for q in rs.preferences:
        m = q.meta_dict()
        w = float(score[(q.prompt_id, q.chosen_id)] > score[(q.prompt_id, q.rejected_id)])
        matrix[m["chosen_style"], m["rejected_style"]] += w / 5
        wins.append(w)
    assert len(wins) == 45
    assert res["accuracy"]["estimate"] == pytest.approx(np.mean(wins), abs=1e-9)
    got = np.array(res["rmbench"]["matrix"])
    assert got == pytest.approx(matrix, abs=1e-9)
    # RM-Bench: hard = chosen less styled than rejected (upper triangle), easy = lower, normal = diagonal
    assert res["rmbench"]["hard"]["estimate"] == pytest.approx(np.mean(matrix[np.triu_indices(3, 1)]), abs=1e-9)
    assert res["rmbench"]["easy"]["estimate"] == pytest.approx(np.mean(matrix[np.tril_indices(3, -1)]), abs=1e-9)
    assert res["rmbench"]["normal"]["estimate"] == pytest.approx(np.mean(np.diag(matrix)), abs=1e-9)


def test_variants_command_writes_a_file_generator_jsonl(tmp_path):
    spec = "simulated:n_prompts=12,seed=4"
    out = tmp_path / "para.jsonl"
    assert main(["variants", "--data", spec, "--task", "paraphrase", "--n", "2", "--out", str(out)]) == 0
    rs = load_rating_set({"name": "simulated", "n_prompts": 12, "seed": 4})
    got = FileGenerator(out).generate(rs.prompts, "paraphrase")
    assert set(got) == {p.prompt_id for p in rs.prompts}
    assert all(len(v) == 2 and len(set(v)) == 2 for v in got.values())
    assert main(["variants", "--data", spec, "--task", "related", "--generator", "hf", "--out", str(out)]) == 2


# -- texts longer than the model's position limit; options pairwise cannot use -------------------------------

@pytest.mark.usefixtures("one_torch_thread")
def test_pairwise_on_longest_rm_bench_rows_without_max_length(tmp_path, demo_ckpt, capsys, shared_data):
    data = longest_rm_bench_rows(shared_data, tmp_path)
    out = tmp_path / "pw"
    rc = main(["pairwise", "--checkpoint", str(demo_ckpt), "--data", f"rm_bench:{data}", "--out", str(out),
               "--n-boot", "20", "--wandb-mode", "disabled"])
    assert rc == 0, capsys.readouterr().err
    res = json.loads((out / "pairwise.json").read_text())
    assert res["truncation"]["n"] == 12  # 2 prompts x 6 responses
    assert res["truncation"]["prompt_truncated"] + res["truncation"]["response_truncated"] > 0
    assert set(res["by_section"]) == {"chat", "safety"}
    assert "12 texts had their prompt cut; " in capsys.readouterr().out


@pytest.mark.usefixtures("one_torch_thread")
def test_audit_of_texts_longer_than_the_model_warns_of_no_indexing_error(tmp_path, demo_ckpt, capsys, caplog,
                                                                         shared_data):
    """Texts are cut to the scoring length, so transformers' "Token indices sequence length is longer
    than the specified maximum ... will result in indexing errors" (raised by counting a response's
    tokens) is not said: the truncation counts say what was cut. (transformers' logger writes to the
    stderr it found at import, which pytest's capture may not be: its records are read instead.)"""
    data = longest_rm_bench_rows(shared_data, tmp_path)
    with caplog.at_level(logging.WARNING):
        assert main(["audit", "--checkpoint", str(demo_ckpt), "--data", f"rm_bench:{data}", "--out",
                     str(tmp_path / "a"), "--conditions", "original", "--n-boot", "20", "--wandb-mode", "disabled",
                     "--no-progress"]) == 0
    assert "texts had their prompt cut" in capsys.readouterr().out
    assert not [r.getMessage() for r in caplog.records if "Token indices" in r.getMessage()]


@pytest.mark.usefixtures("one_torch_thread")
def test_pairwise_on_longest_hh_rlhf_rows(tmp_path, demo_ckpt, shared_data):
    hh = shared_data / "hh-rlhf" / "harmless-base_test.jsonl.gz"
    rows = [json.loads(line) for line in gzip.open(hh, "rt")]
    rows = [r for r in rows if r["chosen"].rsplit("Assistant:", 1)[-1].strip()]
    rows = sorted(rows, key=lambda r: -len(r["chosen"]))[:2]
    path = tmp_path / "harmless-base_test.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    out = tmp_path / "pw"
    rc = main(["pairwise", "--checkpoint", str(demo_ckpt), "--data", f"hh_rlhf:{path}", "--out", str(out),
               "--n-boot", "20", "--wandb-mode", "disabled"])
    assert rc == 0
    res = json.loads((out / "pairwise.json").read_text())
    assert res["truncation"]["n"] == 4 and res["truncation"]["prompt_truncated"] > 0


@pytest.mark.parametrize("flag", [["--attribute", "helpfulness"], ["--n-boot-regression", "10"]])
def test_pairwise_refuses_options_it_cannot_use(flag, capsys):
    with pytest.raises(SystemExit) as e:
        main(["pairwise", "--checkpoint", "x", "--data", "simulated", "--out", "o", *flag])
    assert e.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err
