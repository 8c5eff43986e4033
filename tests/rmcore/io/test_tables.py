"""rmcore.io.tables: one table reader for every loader."""

from __future__ import annotations


def test_one_table_reader():
    import rmcore.data.generic as generic
    import rmcore.io.tables as rio

    assert generic.read_records is rio.read_records
    assert not hasattr(generic, "_open_text")


def test_a_truncated_json_file_is_named_with_line_and_column(tmp_path):
    """The decoder's message keeps its position: file, line and column (counted here by hand)."""
    import pytest

    from rmcore.errors import DataError
    from rmcore.io.tables import read_records

    f = tmp_path / "cut.json"
    f.write_text('[{"a": 1},\n {"b": "trunc')  # the string opens at line 2, column 8
    with pytest.raises(DataError) as e:
        read_records(f)
    assert str(e.value) == f"file {f}: invalid JSON (Unterminated string starting at: line 2 column 8)"
    g = tmp_path / "cut.jsonl"
    g.write_text('{"a": 1}\n{"a": 2}\n{"b": \n')  # line 3 ends after the colon: a value expected at column 7
    with pytest.raises(DataError) as e:
        read_records(g)
    assert str(e.value) == f"file {g}, row 3: invalid JSON (Expecting value: line 3 column 7)"


def test_json_is_strict_in_files_and_printed_results(tmp_path):
    """NaN and infinities (Python, numpy scalars, inside arrays, at any depth) are written as null:
    a strict reader (RFC 8259: no NaN, Infinity) reads every file the tools write."""
    import math

    import numpy as np

    from rmcore.io.files import atomic_write_json, to_json
    from tests.support import strict_json

    doc = {"a": float("nan"), "b": [float("inf"), np.float32("nan"), np.array([1.5, -np.inf])],
           "c": {"d": (np.float64(2.5), np.int64(3), -math.inf)}, "e": "NaN", "f": True, "g": None}
    want = {"a": None, "b": [None, None, [1.5, None]], "c": {"d": [2.5, 3, None]}, "e": "NaN", "f": True, "g": None}
    assert strict_json(to_json(doc)) == want
    assert strict_json(to_json(doc, indent=None)) == want and "\n" not in to_json(doc, indent=None)
    assert strict_json(atomic_write_json(tmp_path / "x.json", doc).read_text()) == want
