"""Controlled prompt perturbations: seeded, reproducible, and each does what its code says."""

import re

import numpy as np
import pytest

from rmeval.perturbations.controlled import (
    CONTROLLED_CODES,
    EMPHASIS_STYLES,
    STYLE_INSTRUCTIONS,
    STYLIZED_CODES,
    item_seed,
    perturb_prompt,
)

TEXT = "Write a short poem about the sea, please. Keep it to 4 lines: no rhymes!"


@pytest.mark.parametrize("code", CONTROLLED_CODES)
def test_seeded_reproducible_and_changes(code):
    a = perturb_prompt(code, TEXT, 7)
    assert a == perturb_prompt(code, TEXT, 7)
    assert a == perturb_prompt(code, TEXT, np.random.default_rng(7))
    assert a != TEXT
    others = {perturb_prompt(code, TEXT, s) for s in range(20)}
    assert len(others) > 1  # the seed matters


def test_each_code_does_what_it_says():
    ef = perturb_prompt("EF", TEXT, 1)
    assert any(ef == o + TEXT + c for o, c in EMPHASIS_STYLES)
    ph = perturb_prompt("PH", TEXT, 1)
    assert ph.replace(" ", "") == TEXT.replace(" ", "") and ph != TEXT
    assert re.search(r" [.,:!]|[.,:!]  ", ph)
    iu = perturb_prompt("IU", TEXT, 1)
    assert iu.startswith(TEXT + " @") and re.fullmatch(r"@[A-Za-z]\w{4,14}", iu[len(TEXT) + 1:])
    iw = perturb_prompt("IW", TEXT, 1)
    assert iw.startswith(TEXT + " https://www.")
    cn = perturb_prompt("CN", TEXT, 1, rate=0.1)
    assert cn != TEXT and abs(len(cn) - len(TEXT)) <= len(TEXT) * 0.3
    # non-letters are untouched by character noise
    assert [c for c in cn if not c.isalpha()] == [c for c in TEXT if not c.isalpha()]


def test_punctuation_inside_tokens_left_alone():
    assert "3.14" in perturb_prompt("PH", "Pi is 3.14, roughly. See e.g. this.", 0, rate=1.0)


def test_options_and_errors():
    assert perturb_prompt("EF", " hi ", 0, style=("<", ">")) == " <hi> "
    with pytest.raises(ValueError, match="unknown controlled perturbation 'XX'"):
        perturb_prompt("XX", TEXT, 0)
    with pytest.raises(ValueError, match="takes options"):
        perturb_prompt("IU", TEXT, 0, rate=0.1)
    assert item_seed(1, "CN", "a") == item_seed(1, "CN", "a") != item_seed(1, "CN", "b")


def test_style_instructions_cover_stylized_codes():
    assert set(STYLE_INSTRUCTIONS) == set(STYLIZED_CODES)
    assert all(len(STYLE_INSTRUCTIONS[c]) > 20 for c in STYLIZED_CODES)
