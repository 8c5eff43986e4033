"""Errors that point a user at the exact place in their input."""

from __future__ import annotations


class DataError(ValueError):
    """Bad input data. The message names the file, row and field."""

    def __init__(self, message: str, *, file: str | None = None, row: int | None = None,
                 field: str | None = None) -> None:
        where = []
        if file is not None:
            where.append(f"file {file}")
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)
        self.file, self.row, self.field = file, row, field


class ConfigError(ValueError):
    """Bad configuration (unknown arm, attribute, option...)."""
