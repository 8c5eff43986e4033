"""rmcore.io: one table reader for every loader."""

from __future__ import annotations


def test_one_table_reader():
    import rmcore.data.generic as generic
    import rmcore.io as rio

    assert generic.read_records is rio.read_records
    assert not hasattr(generic, "_open_text")
