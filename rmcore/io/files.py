"""Files: the check every user-given path goes through first, the check of a checkpoint's
safetensors files before a model is built from them, atomic writes (a crash never leaves a
half-written output behind) and strict JSON (``to_json``: no NaN or Infinity, in files and in the
commands' printed results). No pandas here: the settings and command-line modules read these
checks, and their ``--help`` loads no table library (``rmcore.io.tables`` reads and writes tables).
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from rmcore.errors import DataError, PathNotFoundError

# the file names a table reader reads (rmcore.io.tables), and a local path is known by
TABLE_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".csv", ".parquet")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def looks_like_hub_id(source: str | os.PathLike) -> bool:
    """'owner/name' that is not an existing path: a Hugging Face Hub repository id."""
    s = str(source)
    return not Path(s).exists() and bool(_HUB_ID.match(s))


def looks_local(source: str | os.PathLike) -> bool:
    """Written as a local path: starts with / . ~, or has a path separator and is not 'owner/name',
    or is 'owner/name' whose owner is a directory here (``outputs/rm`` beside ``outputs/``: a
    missing run, not a Hub repository)."""
    s = str(source)
    if s.startswith(("/", ".", "~")) or ((os.sep in s or "/" in s) and not _HUB_ID.match(s)):
        return True
    return bool(_HUB_ID.match(s)) and Path(s.split("/", 1)[0]).is_dir()


def is_hub_id(source: str | os.PathLike) -> bool:
    """True when `source` names a Hub repository rather than a local file.

    A path that exists, or that ends with a table suffix, is local even if it looks like
    "owner/name"; so a missing local file gives a file-not-found error, not a Hub download."""
    s = str(source)
    if looks_local(s) or s.lower().endswith(TABLE_SUFFIXES):
        return False
    return looks_like_hub_id(s)


def check_path(path: str | os.PathLike, what: str, *, kind: str = "file", hub_ok: bool = False) -> Path:
    """``path`` as given by a user, checked before anything reads it: a one-line DataError saying
    it is not found, is a directory (``kind="file"``), not a directory (``kind="dir"``) or is an
    empty file. ``kind="any"`` accepts a file or a directory. With ``hub_ok`` a missing path that
    is a valid-looking Hub id ('owner/name') is let through for the Hub to resolve."""
    p = Path(os.path.expanduser(str(path)))
    if not p.exists():
        if hub_ok and not looks_local(path) and looks_like_hub_id(path):
            return p
        raise PathNotFoundError(f"{what}: not found" + (" (not a local path, nor a Hub id owner/name)" if hub_ok
                                                         else ""), file=str(path))
    if kind == "file" and p.is_dir():
        raise DataError(f"{what}: is a directory, expected a file", file=str(path))
    if kind == "dir" and not p.is_dir():
        raise DataError(f"{what}: is a file, expected a directory", file=str(path))
    if p.is_file() and p.stat().st_size == 0:
        raise DataError(f"{what}: is empty", file=str(path))
    return p


def _safetensors_problem(f: Path) -> str | None:
    """What is wrong with safetensors file ``f`` (None: nothing seen): its 8-byte little-endian
    header length, the JSON header of that length, and the byte range of every tensor it names."""
    size = f.stat().st_size
    with open(f, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return "empty" if size == 0 else f"{size} bytes, shorter than a header"
        n = int.from_bytes(head, "little")
        if 8 + n > size:
            return f"its header says {n} bytes, the file holds {size - 8} after it"
        try:
            header = json.loads(fh.read(n))
            end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return "its header is not a safetensors header"
    return f"cut short: its tensors need {8 + n + end} bytes, it holds {size}" if 8 + n + end > size else None


def check_safetensors(path: str | os.PathLike) -> None:
    """Every ``*.safetensors`` file of the checkpoint directory ``path`` whole, checked from its
    header before any model is built: an empty, cut or garbled file is a one-line DataError naming
    it (safetensors' own error names no file). Anything but a local directory passes (a Hub id)."""
    p = Path(os.path.expanduser(str(path)))
    for f in sorted(p.glob("*.safetensors")) if p.is_dir() else ():
        why = _safetensors_problem(f)
        if why is not None:
            raise DataError(f"not a readable safetensors file ({why}); save or download the checkpoint again",
                            file=str(f))


def current_umask() -> int:
    """The process's file-creation mask, read without changing it where Linux says it
    (/proc/self/status), else by setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """``text`` written to a temporary file beside ``path``, then renamed over it. The file gets the
    mode an ordinary ``open`` would give (0644 under umask 022), not the temporary file's 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_save_figure(fig: Any, path: str | os.PathLike, dpi: int = 110) -> Path:
    """A matplotlib figure written then renamed (never a half-written image), then closed."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def finite_json(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float (Python or numpy, in dicts, lists, tuples and
    arrays at any depth) replaced by None: what strict JSON can hold. A record that had such a
    value says why beside it (a ``status``, a ``reason``)."""
    import numpy as np

    if isinstance(obj, float):  # np.float64 too
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return finite_json(obj.tolist())
    if isinstance(obj, np.generic):
        return finite_json(obj.item())
    return obj


def is_finite(value: Any) -> bool:
    """Whether ``value`` is a finite number; None (how strict JSON holds a figure that was not
    finite, ``finite_json``) and non-numbers are not."""
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def to_json(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON text of ``obj`` (RFC 8259: no NaN or Infinity, which Python's json writes by
    default and other readers refuse): non-finite floats become null (``finite_json``). Every JSON
    file the tools write (``atomic_write_json``) and every JSON result a command prints goes
    through here."""
    return json.dumps(finite_json(obj), indent=indent, default=_json_default, allow_nan=False)


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, to_json(obj) + "\n")
