"""Slack on slack-sdk (`pip install 'sessiongate[slack]'`): Socket Mode or the HTTP Events API.

`payloads.py` maps Events API payloads to the kit's events (pure), `mrkdwn.py` renders
Markdown for Slack, `client.py` calls the Web API through the SDK, `adapter.py` joins them on
the kit (docs/ADAPTERS.md).
"""

from __future__ import annotations

from sessiongate.adapters.slack.adapter import SlackAdapter

__all__ = ["SlackAdapter"]
