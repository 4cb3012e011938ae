"""WhatsApp on the official Cloud API, through pywa (`pip install 'sessiongate[whatsapp]'`).

`payloads.py` maps webhook bodies to the kit's events (pure), `client.py` calls the Graph API
through the SDK, `window.py` holds the 24-hour customer-service window, `adapter.py` joins them
on the kit and serves the webhook (docs/ADAPTERS.md).
"""

from __future__ import annotations

from sessiongate.adapters.whatsapp.adapter import WhatsAppAdapter

__all__ = ["WhatsAppAdapter"]
