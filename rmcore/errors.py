"""Errors that point a user at the exact place in their input."""

from __future__ import annotations

from typing import Any


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
        self.message, self.file, self.row, self.field = message, file, row, field

    def skippable(self) -> DataError:
        """The same error, saying that ``on_bad: skip`` would drop and count the row instead."""
        if SKIP_HINT in self.message:
            return self
        return DataError(self.message + SKIP_HINT, file=self.file, row=self.row, field=self.field)


SKIP_HINT = " (on_bad: skip drops such rows and counts them)"


class PathNotFoundError(DataError, FileNotFoundError):
    """A path the user gave does not exist (a DataError for the CLI, a FileNotFoundError for callers)."""


class ConfigError(ValueError):
    """Bad configuration (unknown arm, attribute, option...). ``key``: the dotted recipe key (or the
    flag) the message is about, where one is, and ``reason``: the message without it, so a command
    can name the ``--set KEY=VALUE`` that set the key instead of the recipe file
    (``rmcore.settings.recipes.blame_override``)."""

    def __init__(self, message: str, *, key: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.key, self.reason = key, message if reason is None else reason

    @classmethod
    def at(cls, key: str, reason: str) -> ConfigError:
        """``KEY: reason``, the key kept apart."""
        return cls(f"{key}: {reason}", key=key, reason=reason)


def invalid_json(e: Any, line: int | None = None) -> str:
    """``json.JSONDecodeError`` as one line with its position: ``invalid JSON (Unterminated string
    starting at: line 3 column 17)``. Its ``msg`` alone stops before the position; ``line``: the
    line in the file when the text decoded was one line of it (jsonl)."""
    return f"invalid JSON ({e.msg}: line {e.lineno if line is None else line} column {e.colno})"
