"""`MessageEvent` and `MessageType`, by their older import path (`gateway/messages.py`)."""

from sessiongate.gateway.messages import MessageEvent, MessageType

__all__ = ["MessageEvent", "MessageType"]
