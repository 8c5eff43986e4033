"""``rmeval serve-reward``: a reward model over HTTP, OpenRLHF's remote reward protocol (rmeval.scoring.server)."""

from __future__ import annotations

import argparse

from rmcore.device import DTYPES


def add_parser(sub: argparse._SubParsersAction) -> None:
    sr = sub.add_parser("serve-reward", help="serve a reward model over HTTP (OpenRLHF's remote reward protocol)",
                        description="POST /get_reward {query, prompts, labels} -> {rewards, scores}; GET /health. "
                                    "Requests from many clients are scored together in one forward.")
    sr.add_argument("--checkpoint", required=True, help="one-label sequence classifier (an rmtrain checkpoint)")
    sr.add_argument("--host", default="127.0.0.1", help="bind address (default: this machine only)")
    sr.add_argument("--port", type=int, default=5000)
    sr.add_argument("--max-length", type=int, default=None,
                    help="tokens per text (default: the model's own limit); the prompt is cut from the left")
    sr.add_argument("--device", default="auto", help="auto (cuda:LOCAL_RANK where CUDA is, else cpu), cpu, cuda, cuda:N")
    sr.add_argument("--dtype", default="auto", choices=list(DTYPES), help="auto: bfloat16 on a GPU, float32 on the CPU")
    sr.add_argument("--attn-implementation", default=None, help="e.g. sdpa, flash_attention_2 (default: transformers')")
    sr.add_argument("--trust-remote-code", action="store_true", help="run the checkpoint's own modelling code")
    sr.add_argument("--device-map", default=None, choices=["auto"], help="auto: one model over every visible GPU")
    sr.add_argument("--max-batch-tokens", type=int, default=32768,
                    help="tokens scored in one forward, over the requests waiting (default 32768)")
    sr.add_argument("--max-batch-items", type=int, default=256, help="texts scored in one forward (default 256)")
    sr.add_argument("--batch-wait-ms", type=float, default=0.0,
                    help="how long the first waiting request waits for others to join its forward (default 0: "
                         "a forward takes what is waiting; requests that arrive during it join the next)")
    sr.add_argument("--max-body-bytes", type=int, default=32 * 2**20, help="larger request bodies get a 413")
    sr.add_argument("--request-timeout", type=float, default=60.0,
                    help="seconds a client may take to send its request before a 408 (default 60)")
    sr.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rmcore.device import Placement
    from rmeval.scoring.server import serve_reward

    placement = Placement(device=args.device, dtype=args.dtype, attn_implementation=args.attn_implementation,
                          trust_remote_code=args.trust_remote_code, device_map=args.device_map)
    serve_reward(args.checkpoint, host=args.host, port=args.port, max_length=args.max_length, placement=placement,
                 max_batch_tokens=args.max_batch_tokens, max_batch_items=args.max_batch_items,
                 wait_ms=args.batch_wait_ms, max_body_bytes=args.max_body_bytes,
                 request_timeout=args.request_timeout)
    return 0
