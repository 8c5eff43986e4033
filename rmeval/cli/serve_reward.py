"""``rmeval serve-reward``: a reward model over HTTP, OpenRLHF's remote reward protocol (rmeval.scoring.server)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rmcore.settings.commands import add_command
from rmcore.settings.fields import nested, option
from rmeval.scoring.server import ServerSettings, serve_reward


@dataclass
class ServeRewardCommand:
    """``rmeval serve-reward``'s settings: the checkpoint and how it is served (``ServerSettings``)."""

    checkpoint: str = option("", required=True, help="one-label sequence classifier (an rmtrain checkpoint)")
    server: ServerSettings = nested(ServerSettings)


def add_parser(sub: argparse._SubParsersAction) -> None:
    add_command(sub, "serve-reward", ServeRewardCommand, run,
                help="serve a reward model over HTTP (OpenRLHF's remote reward protocol)",
                description="POST /get_reward {query, prompts, labels} -> {rewards, scores}; GET /health. "
                            "Requests from many clients are scored together in one forward.")


def run(s: ServeRewardCommand) -> int:
    serve_reward(s.checkpoint, s.server)
    return 0
