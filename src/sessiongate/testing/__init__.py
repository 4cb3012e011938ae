"""sessiongate's test kit: what our own tests use, shipped openly for users' tests.

- `sessiongate.testing.stubs.<platform>`: each platform's API on loopback (`telegram`,
  `slack`, `discord`, `matrix`, `signal`, `whatsapp`), speaking the wire format the
  platform's own SDK sends and reads, so an adapter runs unchanged against it; each records
  what the bot did and lets a test push what users do. `stubs.server` serves them.
- `sessiongate.testing.agents`: scripted agents (`ScriptedAgent`, `GatedAgent`, `HeldAgent`,
  `FailingAgent`) implementing the real `Agent` protocol, no model behind them.
- `sessiongate.testing.loopback`: the in-memory platform (`LoopbackAdapter`, also at
  `sessiongate.adapters.loopback`).
- `sessiongate.testing.trial` and `trials.<platform>`: what `sessiongate try <platform>` runs
  (a stub and one simulated user in a direct chat).

A layer of its own: it may use the adapters (and everything below them), and nothing in the
product imports it but the `try` command and the benchmark (tests/test_layers.py).
"""

from sessiongate.adapters.loopback import LoopbackAdapter, SentMessage
from sessiongate.testing.agents import FailingAgent, GatedAgent, HeldAgent, ScriptedAgent

__all__ = [
    "FailingAgent",
    "GatedAgent",
    "HeldAgent",
    "LoopbackAdapter",
    "ScriptedAgent",
    "SentMessage",
]
