"""The adapter contract suite's view of a platform: what every adapter's harness provides.

The suite (`test_contract.py`) is written once against `Harness`; each platform supplies one
implementation that drives its real SDK against its loopback stub (`telegram_harness.py`).
To put a new adapter under the suite: implement `Harness` for it (map `Msg` to the
platform's wire payload, read back what the stub recorded as `Posted`), and add its factory
to `HARNESSES` in `conftest.py`. docs/ADAPTERS.md has the walk-through.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from sessiongate.agents.base import TurnRequest, TurnResult, Usage
from sessiongate.core.turn_events import TextDelta, TurnEnd

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from sessiongate import SessionStore
    from sessiongate.adapters.kit import ClockSleep, KitAdapter, PlatformEvent
    from sessiongate.core.clock import FakeClock
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway import GatewayRunner

# A hang guard so a broken adapter fails the test instead of hanging it; never a timing check.
HANG_GUARD_SECONDS = 15.0

ChatKind = Literal["dm", "group", "thread", "channel"]
Fault = Literal[
    "rate_limited",
    "format",
    "blocked",
    "transient",
    "unconfirmed",
    "gone",
    "file_refused",
    "reply_target_gone",
]
Call = Literal["send", "edit", "commands", "upload"]


@dataclass(frozen=True, slots=True)
class Msg:
    """A platform-neutral inbound message; each harness renders it in its platform's shape."""

    text: str
    chat: ChatKind = "dm"
    chat_id: str | None = None  # default: the harness's chat for that kind
    user: str = "alice"
    thread: str | None = None  # for chat="thread": the thread id (default one per harness)
    mention: bool = False
    reply_to_bot: bool = False
    command_to_bot: bool = False  # the text is "/cmd"; sent addressed to this bot
    command_to_other: bool = False
    from_bot: bool = False
    own: bool = False
    edit_of: str | None = None  # the event id of the message this edits
    attachment_bytes: int | None = None
    album: str | None = None  # an item (a photo) of this album, where the platform has albums


@dataclass(frozen=True, slots=True)
class Posted:
    chat_id: str
    thread_id: str | None
    text: str
    markup: bool
    message_id: str
    # The message this one quotes (replies to), when the platform has quoted replies.
    reply_to: str | None = None


@dataclass(frozen=True, slots=True)
class Uploaded:
    """A file the bot uploaded: `kind` is the platform's (Telegram photo or document)."""

    chat_id: str
    thread_id: str | None
    name: str
    data: bytes
    kind: str = "file"


class Harness(Protocol):
    name: str
    clock: FakeClock
    sleeper: ClockSleep
    adapter: KitAdapter
    runner: GatewayRunner
    store: SessionStore
    agent: BlockingEcho
    limit: int
    measure: Callable[[str], int]
    edit_interval: float
    # The kind of chat where the platform shows a typing indicator (Slack: threads only).
    typing_chat: ChatKind
    # "**bold** and `code`" as the platform's markup renders it.
    rendered_sample: str
    # Whether the platform can refuse markup (Discord renders any text, so it cannot).
    rejects_markup: bool
    # The adapter asks for events (Telegram's long poll) instead of being sent them.
    polls: bool
    # Whether the platform has quoted replies (`reply_to_mode`; Slack has none).
    quotes_replies: bool
    # Whether a message can be one item of an album (Telegram's media groups).
    albums: bool
    # The `retry_after` of the harness's rate-limit fault (Discord: one past the 30 s that
    # discord.py waits out by itself, so the kit sees it).
    rate_limit_seconds: float
    # What the platform does not have is declared False (optional; the default is that it
    # has it): threads, channels, bot_senders (it marks bots), edits (a message edited in
    # place), registers_commands (a command registry), approval_buttons (Approve and Deny
    # under an approval prompt: `approval_buttons` and `press` below).

    async def start(self, **platform_config: Any) -> None:
        """Start the stub, a runner on a fresh home and the adapter (config overrides)."""
        ...

    async def restart(self) -> None:
        """Stop runner and adapter (the stub keeps its state), start new ones on the home."""
        ...

    async def close(self) -> None: ...

    def push(self, msg: Msg) -> str:
        """Queue `msg` on the platform as a new event; its event id."""
        ...

    def push_again(self, event_id: str) -> None:
        """The platform delivers event `event_id` once more (a redelivery)."""
        ...

    def event(self, msg: Msg) -> tuple[str, PlatformEvent]:
        """`msg` mapped to the kit's event without delivering it (for direct `admit`)."""
        ...

    async def settle(self) -> None:
        """Until every pushed event is taken and every turn it started has replied."""
        ...

    def source(self, msg: Msg) -> SessionSource:
        """The source a message like `msg` maps to (to address sends and streams)."""
        ...

    def posted(self, chat_id: str | None = None) -> list[Posted]: ...

    def message_id_of(self, event_id: str) -> str:
        """The platform's id of the message pushed as event `event_id`."""
        ...

    def edit_times(self) -> list[float]:
        """The fake clock's monotonic reading at each edit the platform received."""
        ...

    def typing_count(self) -> int: ...

    def registered_commands(self) -> list[str]: ...

    def fail(self, call: Call, fault: Fault, times: int = 1) -> None: ...

    def uploads(self) -> list[Uploaded]:
        """The files the bot uploaded, in order."""
        ...

    def ephemeral(self) -> list[str]:
        """What the bot told a command's user alone (Slack's slash command acknowledgement,
        Discord's interaction response); empty where the platform has no such answer."""
        ...

    def calls(self, call: Literal["send", "edit", "typing"]) -> int: ...

    def approval_buttons(self) -> list[str]:
        """What each button the bot posted carries (`approve:<id>`), in order."""
        ...

    def press(self, value: str, user: str = "alice") -> str:
        """`user` presses the posted button carrying `value`, in their DM with the bot."""
        ...

    def chat_of(self, kind: ChatKind) -> str:
        """The raw chat id the harness uses for chats of `kind`."""
        ...


async def wait_admitted(adapter: KitAdapter, sleeper: ClockSleep, count: int) -> None:
    """Until the adapter has settled `count` events; a split message it holds meanwhile gets
    its merge window moved on by the fake clock (no test sleeps)."""
    while not await adapter.wait_events_or_hold(count):
        await sleeper.advance(adapter.settings.merge.window)


class BlockingEcho:
    """An echo agent a test can hold: with `blocking`, a turn waits for `release()`."""

    def __init__(self) -> None:
        self.blocking = False
        # The next turn raises (a failing agent).
        self.fail_next = False
        self.started: asyncio.Queue[TurnRequest] = asyncio.Queue()
        self._gate = asyncio.Event()
        self.requests: list[TurnRequest] = []

        # (clock, step, pieces): turns stream `pieces`, the clock moved `step` s before each.
        self.stream: tuple[FakeClock, float, list[str]] | None = None

    def factory(self, key: str) -> BlockingEcho | StreamingEcho:
        return self if self.stream is None else StreamingEcho(self, *self.stream)

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        self.requests.append(request)
        self.started.put_nowait(request)
        if self.blocking:
            await self._gate.wait()
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("the agent failed")
        text = str(request.messages[-1]["content"])
        return TurnResult(text=f"echo: {text}", usage=Usage(input_tokens=1, output_tokens=1))

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return "summary"

    def release(self) -> None:
        self.blocking = False
        self._gate.set()

    async def aclose(self) -> None:
        return None


class StreamingEcho:
    """A reply generated slowly (on the fake clock), for the streamed-edit path."""

    def __init__(self, echo: BlockingEcho, clock: FakeClock, step: float, pieces: list[str]):
        self.echo = echo
        self.clock = clock
        self.step = step
        self.pieces = pieces

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[Any]:
        self.echo.requests.append(request)
        for piece in self.pieces:
            self.clock.advance(self.step)
            yield TextDelta(piece)
        yield TurnEnd("".join(self.pieces))

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        raise AssertionError("a streaming agent is streamed")

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return "summary"

    async def aclose(self) -> None:
        return None
