"""Fixtures of the reproduction tests."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture
def no_network(monkeypatch):
    """Any socket connection (a Hub call) fails the test; the Hub is offline too."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"network call during the dry run: {args}")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
