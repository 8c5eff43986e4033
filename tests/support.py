"""Read back an offline W&B run (`run-<id>.wandb`) without a server.

The file is a LevelDB-log stream: a 7-byte file header ("W&B" magic, version), then 32 KiB blocks
of records, each with a 7-byte header (crc32 4, length 2, type 1; FULL=1, FIRST=2, MIDDLE=3,
LAST=4) carrying serialized `wandb_internal_pb2.Record` protobufs."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]  # the repository root
BLOCK = 32 * 1024
HEADER = 7


def _payloads(data: bytes) -> list[bytes]:
    out, buf, pos = [], b"", HEADER  # skip the file header
    while pos + HEADER <= len(data):
        block_left = BLOCK - (pos % BLOCK)
        if block_left < HEADER:  # trailer padding of a block
            pos += block_left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        chunk = data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        if kind == 0 and length == 0:
            pos += BLOCK - (pos % BLOCK) if pos % BLOCK else 0
            continue
        if kind == 1:
            out.append(chunk)
        elif kind == 2:
            buf = chunk
        elif kind == 3:
            buf += chunk
        elif kind == 4:
            out.append(buf + chunk)
            buf = b""
    return out


def _val(item: Any) -> Any:
    return json.loads(item.value_json) if item.value_json else None


def _key(item: Any) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


def read_run(path: str | Path) -> dict[str, Any]:
    """{'history': [row dicts], 'summary': {...}, 'config': {...}, 'tags': [...], 'name': str, 'group': str,
    'job_type': str}"""
    from wandb.proto import wandb_internal_pb2 as pb

    path = Path(path)
    if path.is_dir():
        path = next(path.rglob("run-*.wandb"))
    history, summary, config, tags, name, group, job_type = [], {}, {}, [], "", "", ""
    for raw in _payloads(path.read_bytes()):
        rec = pb.Record()
        rec.ParseFromString(raw)
        which = rec.WhichOneof("record_type")
        if which == "history":
            history.append({_key(i): _val(i) for i in rec.history.item})
        elif which == "summary":
            for i in rec.summary.update:
                summary[_key(i)] = _val(i)
        elif which == "config":
            for i in rec.config.update:
                config[_key(i)] = _val(i)
        elif which == "run":
            tags = list(rec.run.tags)
            name = rec.run.display_name
            group, job_type = rec.run.run_group, rec.run.job_type
            for i in rec.run.config.update:
                config[_key(i)] = _val(i)
    return {"history": history, "summary": summary, "config": config, "tags": tags, "name": name, "group": group,
            "job_type": job_type}
