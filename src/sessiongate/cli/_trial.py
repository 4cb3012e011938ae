"""The conversation `sessiongate try` runs: a gateway on a platform's stub, a simulated user.

The gateway is the real one (store, runner, the platform's adapter on its real SDK, the
configured agent: echo by default), only the platform is a loopback stub. The script shows
how a stranger gets in: their first message is answered with a pairing code, the operator
approves it (`sessiongate pairing approve CODE` does the same), and from then on each
message gets the agent's reply.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from sessiongate.adapters.registry import build_adapters
from sessiongate.agents import build_agent_factory
from sessiongate.cli._common import agent_description
from sessiongate.core.config import GatewayConfig
from sessiongate.gateway.runner import GatewayRunner
from sessiongate.store.platform_state import PlatformState
from sessiongate.store.session_store import SessionStore

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from sessiongate.testing.trial import TrySession, TryTarget

__all__ = ["DEFAULT_MESSAGES", "Line", "TrialResult", "run_trial"]

DEFAULT_MESSAGES = ("hello", "/status")
# How often the simulated user looks for the bot's answer in the stub's record.
_LOOK_EVERY_SECONDS = 0.02

Speaker = Literal["user", "bot", "operator", "note"]


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the simulated conversation."""

    speaker: Speaker
    text: str


@dataclass(slots=True)
class TrialResult:
    platform: str
    stub_url: str
    sdk: str
    agent: str
    home: str
    lines: list[Line] = field(default_factory=list)
    sent: int = 0
    answered: int = 0
    paired: bool = False
    sessions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.paired and self.sent > 0 and self.answered == self.sent

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        return data


async def run_trial(
    target: TryTarget,
    *,
    home: Path,
    messages: Sequence[str] = DEFAULT_MESSAGES,
    reply_timeout: float = 30.0,
    on_line: Callable[[Line], None] = lambda line: None,
) -> TrialResult:
    """Start `target`'s stub and a gateway on `home` (an existing directory), pair the
    simulated user, send `messages` one by one (each waits for the bot's answer, up to
    `reply_timeout`), stop."""
    async with target.open() as session:
        config = GatewayConfig(platforms={target.platform: session.platform_config})
        result = TrialResult(
            platform=target.platform,
            stub_url=session.url,
            sdk=target.sdk,
            agent=agent_description(config),
            home=str(home),
        )

        def say(speaker: Speaker, text: str) -> None:
            line = Line(speaker, text)
            result.lines.append(line)
            on_line(line)

        adapters = build_adapters(config)
        # A platform whose events the gateway is sent (webhooks) is wired to its adapter.
        attach = getattr(session, "attach", None)
        if attach is not None:
            attach(adapters)
        store = SessionStore(home / "sessions", config)
        runner = GatewayRunner(
            store,
            config,
            home=home,
            agent_factory=build_agent_factory(config),
            adapters=adapters,
        )
        try:
            await runner.start()
            await asyncio.wait_for(session.wait_ready(), reply_timeout)

            async def exchange(text: str) -> list[str]:
                say("user", text)
                before = len(session.bot_messages())
                session.send(text)
                answer = await _answer(session, runner, before, reply_timeout)
                for reply in answer:
                    say("bot", reply)
                if not answer:
                    say("note", f"no answer within {reply_timeout:g} s")
                return answer

            # A stranger's first message: the bot answers with a pairing code.
            if await exchange(messages[0] if messages else "hello"):
                pending = [
                    r
                    for r in PlatformState(store).list_pairing()
                    if r.platform == target.platform and not r.approved
                ]
                if pending:
                    approved = PlatformState(store).approve_pairing(pending[-1].code)
                    result.paired = approved is not None
                    say("operator", f"sessiongate pairing approve {pending[-1].code}")
                else:
                    say("note", "the bot asked for no pairing code")
            if result.paired:
                for text in messages or DEFAULT_MESSAGES:
                    result.sent += 1
                    if await exchange(text):
                        result.answered += 1
            result.sessions = [
                {
                    "session_key": e.session_key,
                    "session_id": e.session_id,
                    "display_name": e.display_name,
                    "messages": len(store.load_transcript(e.session_id)),
                }
                for e in store.list_sessions()
            ]
        finally:
            await runner.stop()
            store.close()
    return result


async def _answer(
    session: TrySession, runner: GatewayRunner, before: int, within: float
) -> list[str]:
    """The bot's messages after the first `before`, once one came and the turn it belongs
    to is over (its edits applied); [] when none came `within` seconds."""
    try:
        async with asyncio.timeout(within):
            # The stubs keep what the bot posted in a plain list and signal nothing (a
            # delete even replaces the list), so the user looks at it, as a person would.
            while len(session.bot_messages()) <= before:  # noqa: ASYNC110
                await asyncio.sleep(_LOOK_EVERY_SECONDS)
            await runner.wait_idle()
    except TimeoutError:
        pass
    return session.bot_messages()[before:]
