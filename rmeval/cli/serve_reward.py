"""``rmeval serve-reward``: a reward model over HTTP, OpenRLHF's remote reward protocol (rmeval.reward_server)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    sr = sub.add_parser("serve-reward", help="serve a reward model over HTTP (OpenRLHF's remote reward protocol)")
    sr.add_argument("--checkpoint", required=True, help="one-label sequence classifier (an rmtrain checkpoint)")
    sr.add_argument("--host", default="127.0.0.1", help="bind address (default: local only)")
    sr.add_argument("--port", type=int, default=5000)
    sr.add_argument("--max-length", type=int, default=2048)
    sr.add_argument("--batch-size", type=int, default=32)
    sr.add_argument("--device", default=None)
    sr.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    sr.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmeval.reward_server import serve_reward

    serve_reward(args.checkpoint, host=args.host, port=args.port, max_length=args.max_length,
                 batch_size=args.batch_size, device=args.device, dtype=args.dtype)
    return 0
