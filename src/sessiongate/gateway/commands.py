"""Slash commands, and the one table of what each does while its lane is busy.

A command is recognised after stripping a leading mention (`@bot /new`, `<@U123> /new`) and a
`/cmd@bot` suffix, case-insensitively; `/new` and `/reset` are the configured
`reset_triggers`. An unknown `/word` (a typo such as `/stauts`) is answered with a pointer
to `/help` instead of reaching the model, unless it is one of the configured
`agent_commands`, which the agent understands itself. Every command is
deduplicated by its message id like any message, and its effect commits in the same
transaction as that record, so a redelivered `/new` neither resets twice nor is lost.

Over the ~400-line budget so that the busy table sits next to every handler it governs.
"""

from __future__ import annotations

import contextlib
import enum
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from sessiongate.core.bindings import DEFAULT_AGENT, agent_of_key
from sessiongate.core.config import OpenAIAgentSpec
from sessiongate.core.context import sanitize_untrusted
from sessiongate.errors import (
    ApprovalDecidedError,
    ApprovalNotFoundError,
    NotAnApproverError,
    SessionBusyError,
    StaleWriteError,
)
from sessiongate.gateway import operations
from sessiongate.gateway.approvals import approver_id
from sessiongate.gateway.lanes import CancelReason
from sessiongate.gateway.messages import Receipt, ReceiptStatus
from sessiongate.store.lanes import AcceptStatus, Inbound, InboxKind

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.approvals import Approvals
    from sessiongate.gateway.lanes import LaneTable
    from sessiongate.gateway.messages import MessageEvent
    from sessiongate.gateway.routing import Routed
    from sessiongate.gateway.takeover import Takeovers
    from sessiongate.store.lanes import Acceptance, LaneStore
    from sessiongate.store.session_store import SessionStore

__all__ = [
    "BUSY_REPLY",
    "COMMANDS",
    "RUN_WHEN_ARCHIVED",
    "UNKNOWN_REPLY",
    "BusyPolicy",
    "CommandHost",
    "CommandRunner",
    "CommandSpec",
    "ParsedCommand",
    "parse_command",
]


class BusyPolicy(enum.StrEnum):
    RUN = "run"  # runs at once, beside the running turn
    INTERRUPT = "interrupt"  # interrupts the running turn, waits for it to end, then runs
    REFUSE = "refuse"  # answers BUSY_REPLY and changes nothing


@dataclass(frozen=True, slots=True)
class CommandSpec:
    name: str
    busy: BusyPolicy
    usage: str
    summary: str


# What each command does while a turn of its lane is running (or waiting to run). Control
# commands must get through a busy lane (a blocked agent must never make /stop unreachable);
# commands that rewrite the transcript or switch sessions under a running turn are refused.
COMMANDS: dict[str, CommandSpec] = {
    spec.name: spec
    for spec in (
        CommandSpec("stop", BusyPolicy.RUN, "/stop", "stop the current reply"),
        CommandSpec("status", BusyPolicy.RUN, "/status", "show this conversation's state"),
        CommandSpec(
            "queue", BusyPolicy.RUN, "/queue <text>", "run <text> as its own turn, in order"
        ),
        CommandSpec("sessions", BusyPolicy.RUN, "/sessions", "list this conversation's sessions"),
        CommandSpec("title", BusyPolicy.RUN, "/title [name]", "show or set the title"),
        CommandSpec(
            "model",
            BusyPolicy.RUN,
            "/model [name | default]",
            "show the model, or choose one of the allowed ones",
        ),
        CommandSpec("help", BusyPolicy.RUN, "/help", "list the commands"),
        CommandSpec("approve", BusyPolicy.RUN, "/approve <id>", "let a waiting tool call run"),
        CommandSpec("deny", BusyPolicy.RUN, "/deny <id>", "refuse a waiting tool call"),
        CommandSpec(
            "bot",
            BusyPolicy.RUN,
            "/bot [off | on]",
            "an operator answers here instead of the bot, or hands back (operators only)",
        ),
        CommandSpec(
            "new",
            BusyPolicy.INTERRUPT,
            "/new [text]",
            "start a new session; text is its first turn",
        ),
        CommandSpec(
            "reset",
            BusyPolicy.INTERRUPT,
            "/reset [soft] [text]",
            "start over; soft keeps the session id",
        ),
        CommandSpec(
            "resume", BusyPolicy.REFUSE, "/resume [n | session id]", "go back to an earlier session"
        ),
        CommandSpec("undo", BusyPolicy.REFUSE, "/undo [n]", "take back the last n turns"),
        CommandSpec("retry", BusyPolicy.REFUSE, "/retry", "answer the last message again"),
        CommandSpec(
            "compress",
            BusyPolicy.REFUSE,
            "/compress",
            "summarise the older part of this conversation",
        ),
    )
}

# Not in `COMMANDS` (so neither in `/help` nor typeable as `/unknown`): the answer to a `/word`
# that is no command. It changes nothing, so it runs beside a busy turn.
_UNKNOWN = CommandSpec("unknown", BusyPolicy.RUN, "", "")

# What an archived session still answers: commands that start no work and change nothing
# (every other command gets the archived notice, like a message).
RUN_WHEN_ARCHIVED = frozenset({"stop", "status", "help"})

BUSY_REPLY = "Busy with the current reply: try /{name} again after it arrives (or /stop it)."
_HELD_ELSEWHERE = "That session is open in another conversation; send /new there first to free it."
_RESET_NAMES = frozenset({"new", "reset"})
# A leading mention before a command: `@bot` (Telegram, WhatsApp) or `<@U123>` / `<@!42>`
# (Slack, Discord).
_MENTION = re.compile(r"^(?:@\S+|<@[^>\n]+>)\s+(?=/)")
# The `@bot` a group client appends to a command word (`/new@mybot`).
_BOT_SUFFIX = re.compile(r"^@[^\s@/]+")
_COMMAND = re.compile(r"^/([^\s@/]+)(?:@\S+)?(?:\s+(.*))?$", re.DOTALL)
# ASCII digits only: `str.isdigit` also takes `²`, which `int` refuses.
_COUNT = re.compile(r"[0-9]+")
_TITLE_MAX = 100
# A `/sessions` line stays one line on a phone.
_HEADLINE_MAX = 40
_UNDO_MAX = 100
_LIST_MAX = 10


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    name: str
    args: str
    # False for a `/word` that is no command here: it is answered with `UNKNOWN_REPLY`.
    known: bool = True


UNKNOWN_REPLY = "Unknown command /{name}; see /help for the commands."


def parse_command(
    text: str, *, reset_triggers: list[str], agent_commands: Sequence[str] = ()
) -> ParsedCommand | None:
    """The command in `text`, or None when it is text for the agent (ordinary text, or one of
    `agent_commands`, given with or without the slash)."""
    stripped = _MENTION.sub("", text.strip(), count=1)
    for trigger in reset_triggers:
        word = trigger.strip().lower()
        args = _trigger_args(stripped, word)
        if args is not None:
            name = word.lstrip("/")
            return ParsedCommand(name if name in _RESET_NAMES else "new", args)
    match = _COMMAND.match(stripped)
    if match is None:
        return None
    name = match.group(1).lower()
    if name in _RESET_NAMES or name in {c.strip().lstrip("/").lower() for c in agent_commands}:
        return None  # /new and /reset exist only as configured reset triggers
    return ParsedCommand(name, (match.group(2) or "").strip(), known=name in COMMANDS)


def _trigger_args(text: str, word: str) -> str | None:
    """The arguments when `text` starts with the reset trigger `word` (a `/word` may carry an
    `@bot` suffix; any whitespace ends it), else None."""
    if not word or text[: len(word)].lower() != word:
        return None
    rest = text[len(word) :]
    if word.startswith("/"):
        rest = _BOT_SUFFIX.sub("", rest, count=1)
    if rest and not rest[0].isspace():
        return None  # `/newer` is another word
    return rest.strip()


class CommandHost(Protocol):
    """What commands need from the runner."""

    def route(
        self,
        source: SessionSource,
        *,
        event_kind: str | None = None,
        session_key: str | None = None,
    ) -> Routed: ...

    async def refuse_archived(
        self, entry: SessionEntry, source: SessionSource, *, event: str | None = None
    ) -> Receipt: ...

    async def compact(
        self, session_key: str, *, record: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]: ...

    def accept(self, entry: SessionEntry, inbound: Inbound, kind: InboxKind) -> Acceptance: ...

    async def dispatch(
        self,
        entry: SessionEntry,
        source: SessionSource,
        acceptance: Acceptance,
        *,
        wait: bool,
        interrupt: bool,
    ) -> Receipt: ...

    async def notify(self, source: SessionSource, text: str) -> None: ...

    def discard(self, entry: SessionEntry, inbox_ids: Sequence[int]) -> None: ...

    def wake(self, session_key: str) -> None: ...

    def write_restart_counts(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Call:
    command: ParsedCommand
    event: MessageEvent
    entry: SessionEntry
    inbound: Inbound
    wait: bool
    busy: bool

    @property
    def key(self) -> str:
        return self.entry.session_key


class _Duplicate(Exception):
    """Raised inside a command's transaction when its message id was seen meanwhile."""


class CommandRunner:
    def __init__(
        self,
        *,
        store: SessionStore,
        lane_store: LaneStore,
        lanes: LaneTable,
        config: GatewayConfig,
        host: CommandHost,
        approvals: Approvals | None = None,
        takeovers: Takeovers | None = None,
    ) -> None:
        self._approvals = approvals
        self._takeovers = takeovers
        self._store = store
        self._lane_store = lane_store
        self._lanes = lanes
        self._config = config
        self._host = host

    async def run(self, command: ParsedCommand, event: MessageEvent, *, wait: bool) -> Receipt:
        spec = COMMANDS[command.name] if command.known else _UNKNOWN
        inbound = event.to_inbound()
        # Dedup is per lane and sender: look the id up in the lane this command routes to
        # (read only, so a redelivered command never creates or rotates anything).
        lane_key = event.session_key or self._lane_store.resolve(event.source)[0]
        seen = self._lane_store.lookup_seen(inbound, lane_key)
        if seen is not None:
            return Receipt(
                seen.session_key, seen.session_id, ReceiptStatus.DUPLICATE, seen.reply, seen.turn_id
            )
        with self._lane_store.atomic():
            routed = self._host.route(event.source, session_key=event.session_key)
        entry = routed.entry
        self._host.discard(entry, routed.dropped)
        if routed.archived and spec.name not in RUN_WHEN_ARCHIVED:
            return await self._host.refuse_archived(entry, event.source)
        busy = entry.session_key in self._lanes
        call = _Call(command, event, entry, inbound, wait, busy)
        if busy and spec.busy is BusyPolicy.REFUSE:
            return await self._answer(call, BUSY_REPLY.format(name=spec.name), record=False)
        handler: Callable[[_Call], Awaitable[Receipt]] = getattr(self, f"_cmd_{spec.name}")
        try:
            return await handler(call)
        except _Duplicate:
            return Receipt(entry.session_key, entry.session_id, ReceiptStatus.DUPLICATE, None, None)

    # ------------------------------------------------------------------ helpers

    async def _answer(
        self, call: _Call, reply: str, *, record: bool = True, entry: SessionEntry | None = None
    ) -> Receipt:
        if record:
            with self._lane_store.atomic():
                self._check_new(call)
                self._record(call, reply)
        await self._host.notify(call.event.source, reply)
        entry = entry or call.entry
        return Receipt(entry.session_key, entry.session_id, ReceiptStatus.COMMAND, reply, None)

    def _check_new(self, call: _Call) -> None:
        """Inside the command's transaction: raise `_Duplicate` if the id was seen meanwhile."""
        if self._lane_store.lookup_seen(call.inbound, call.key) is not None:
            raise _Duplicate

    def _record(self, call: _Call, reply: str) -> None:
        self._lane_store.record_command(
            call.inbound, session_key=call.key, session_id=call.entry.session_id, reply=reply
        )

    def _turn_inbound(self, call: _Call, text: str, *, verbatim: bool = False) -> Inbound:
        # The command's message id is recorded for the command; the turn it starts has none.
        return replace(call.inbound, text=text, message_id=None, media=(), verbatim=verbatim)

    @contextlib.asynccontextmanager
    async def _quiet_lane(self, key: str) -> AsyncIterator[None]:
        """Hold the lane: interrupt its running turn, wait for its worker to leave, keep new
        workers out until the block ends (so the slot cannot be claimed under `/new`)."""
        self._lanes.hold(key)
        try:
            lane = self._lanes.get(key)
            if lane is not None:
                if lane.running is not None:
                    lane.running.cancel(CancelReason.INTERRUPT)
                await lane.released.wait()
            yield
        finally:
            self._lanes.unhold(key)

    # ------------------------------------------------------------------ the commands

    async def _cmd_new(self, call: _Call) -> Receipt:
        return await self._reset(call, soft=False, text=call.command.args)

    async def _cmd_reset(self, call: _Call) -> Receipt:
        args = call.command.args
        soft = args.lower() == "soft" or args.lower().startswith(("soft ", "soft\n"))
        return await self._reset(call, soft=soft, text=args[4:].strip() if soft else args)

    async def _reset(self, call: _Call, *, soft: bool, text: str) -> Receipt:
        key = call.key
        acceptance: Acceptance | None = None
        if self._approvals is not None:
            self._approvals.cancel(key, by=call.command.name)
        async with self._quiet_lane(key):
            with self._lane_store.atomic():
                self._check_new(call)
                dropped = self._lane_store.clear_pending(key)
                entry, _ = operations.reset(
                    self._store,
                    self._lane_store,
                    key,
                    mode="boundary" if soft else None,
                    reason=call.command.name,
                )
                assert entry is not None  # get_or_create_session made the lane
                if text:
                    acceptance = self._host.accept(
                        entry, self._turn_inbound(call, text), InboxKind.SLOT
                    )
                reply = "Started a new session." if not soft else "Started over (same session)."
                if dropped:
                    reply += f" {len(dropped)} waiting message(s) were dropped."
                self._record(call, reply)
            self._host.discard(entry, dropped)
        # The file mirrors the database: a crash before the next stop must not bring the old
        # count back.
        self._host.write_restart_counts()
        await self._host.notify(call.event.source, reply)
        if acceptance is None:
            self._host.wake(key)
            return Receipt(key, entry.session_id, ReceiptStatus.COMMAND, reply, None)
        return await self._host.dispatch(
            entry, call.event.source, acceptance, wait=call.wait, interrupt=False
        )

    async def _cmd_unknown(self, call: _Call) -> Receipt:
        name = sanitize_untrusted(call.command.name, _HEADLINE_MAX)
        return await self._answer(call, UNKNOWN_REPLY.format(name=name))

    async def _cmd_stop(self, call: _Call) -> Receipt:
        if self._approvals is not None:
            self._approvals.cancel(call.key, by="stop")
        lane = self._lanes.get(call.key)
        running = lane.running if lane is not None else None
        stopped = running is not None and running.cancel(CancelReason.STOP)
        reply = "Stopped the current reply." if stopped else "Nothing is running."
        depth = self._lane_store.queue_depth(call.key)
        if depth:
            reply += f" {depth} waiting message(s) will run next."
        return await self._answer(call, reply)

    async def _cmd_approve(self, call: _Call) -> Receipt:
        return await self._decide(call, approve=True)

    async def _cmd_deny(self, call: _Call) -> Receipt:
        return await self._decide(call, approve=False)

    async def _decide(self, call: _Call, *, approve: bool) -> Receipt:
        """`/approve <id>` and `/deny <id>`: only an allowed approver decides, once."""
        approval_id = call.command.args.strip()
        name = "approve" if approve else "deny"
        if not approval_id or any(c.isspace() for c in approval_id) or len(approval_id) > 64:
            return await self._answer(call, f"Usage: {COMMANDS[name].usage}", record=False)
        if self._approvals is None:
            return await self._answer(call, f"No approval {approval_id} is waiting.")
        source = call.event.source
        try:
            row = self._approvals.decide(
                approval_id,
                approve=approve,
                by=approver_id(str(source.platform), source.user_id),
            )
        except ApprovalNotFoundError:
            reply = f"No approval {approval_id} is waiting."
        except NotAnApproverError:
            reply = f"You may not decide approval {approval_id}."
        except ApprovalDecidedError as exc:
            reply = f"Approval {approval_id} is already {exc.data.get('status', 'decided')}."
        else:
            verb = "Approved" if approve else "Denied"
            reply = f"{verb}: {row.tool} [{row.id}]."
        return await self._answer(call, reply)

    async def _cmd_bot(self, call: _Call) -> Receipt:
        """`/bot off` and `/bot on` (`takeover.py`): only `takeover.operators` may switch."""
        if self._takeovers is None:
            return await self._answer(call, "Takeover is not available here.", record=False)
        reply, after = await self._takeovers.bot_command(
            call.key, call.command.args, call.event.source
        )
        receipt = await self._answer(call, reply)
        if after is not None:
            await after()
        return receipt

    async def _cmd_queue(self, call: _Call) -> Receipt:
        text = call.command.args
        if not text:
            return await self._answer(call, f"Usage: {COMMANDS['queue'].usage}", record=False)
        with self._lane_store.atomic():
            self._check_new(call)
            acceptance = self._host.accept(
                call.entry, self._turn_inbound(call, text), InboxKind.QUEUED
            )
            if acceptance.status is not AcceptStatus.FULL:
                self._record(call, "queued")
        if call.busy and acceptance.status is not AcceptStatus.FULL:
            await self._host.notify(
                call.event.source, f"Queued; it runs after {acceptance.depth - 1} other(s)."
            )
        return await self._host.dispatch(
            call.entry, call.event.source, acceptance, wait=call.wait, interrupt=False
        )

    async def _cmd_status(self, call: _Call) -> Receipt:
        entry = call.entry
        lane = self._lanes.get(call.key)
        state = (
            "replying"
            if lane is not None and lane.running is not None
            else ("busy" if lane is not None else "idle")
        )
        lines = [
            f"Session: {entry.session_id}",
            f"Title: {entry.display_name or '(none)'}",
            f"State: {state}, {self._lane_store.queue_depth(call.key)} waiting",
            _tokens_line(entry),
        ]
        if entry.resume_pending:
            lines.append(f"Resume pending: {entry.resume_reason}")
        if self._takeovers is not None and self._takeovers.holds(call.key):
            lines.append("Taken over: an operator answers here (/bot on hands back)")
        if self._approvals is not None:
            lines.extend(
                f"Waiting for approval [{row.id}]: {row.tool} (/approve {row.id} or /deny {row.id})"
                for row in self._approvals.pending_for(call.key)
            )
        return await self._answer(call, "\n".join(lines))

    async def _cmd_sessions(self, call: _Call) -> Receipt:
        sessions = self._store.sessions_for_key(call.key)[:_LIST_MAX]
        lines = [
            f"{i}. {self._title_of(s['session_id'], call.entry)} · {s['session_id']} · "
            f"{s['message_count']} messages"
            + (" (current)" if s["session_id"] == call.entry.session_id else "")
            for i, s in enumerate(sessions, 1)
        ]
        return await self._answer(call, "\n".join(lines) or "No sessions yet.")

    def _title_of(self, session_id: str, current: SessionEntry) -> str:
        """The current session's `/title`, else what the session was last about (the
        headline of its active branch: its latest user message)."""
        if session_id == current.session_id and current.display_name:
            return current.display_name
        for tip in self._store.list_branches(session_id):
            if tip.get("active") and tip.get("headline"):
                return sanitize_untrusted(str(tip["headline"]), _HEADLINE_MAX)
        return "(untitled)"

    async def _cmd_title(self, call: _Call) -> Receipt:
        name = sanitize_untrusted(call.command.args, _TITLE_MAX)
        if not name:
            return await self._answer(call, f"Title: {call.entry.display_name or '(none)'}")
        with self._lane_store.atomic():
            self._check_new(call)
            entry = self._store.set_session_fields(call.key, display_name=name)
            reply = f"Title set: {name}"
            self._record(call, reply)
        await self._host.notify(call.event.source, reply)
        return Receipt(call.key, entry.session_id, ReceiptStatus.COMMAND, reply, None)

    async def _cmd_model(self, call: _Call) -> Receipt:
        """`/model`: the model the next turn uses and the allowed ones; `/model <name>`: the
        session's choice, when the agent's `models` list allows it (its own `model` always);
        `/model default`: back to the agent's model. The choice is the session's model
        override, recorded with a `model_change` entry in the command's transaction."""
        agent_id = agent_of_key(call.key) or DEFAULT_AGENT
        try:
            spec = self._config.agent_spec(agent_id)
        except KeyError:
            return await self._answer(call, f"Agent {agent_id!r} is not configured.", record=False)
        if not isinstance(spec, OpenAIAgentSpec):
            reply = f"This conversation's agent ({agent_id}, echo) uses no model."
            return await self._answer(call, reply, record=False)
        allowed = [spec.model, *(m for m in spec.models if m != spec.model)]
        setting = f"agents.{agent_id}.models" if agent_id in self._config.agents else "agent.models"
        wanted = call.command.args.strip()
        if not wanted:
            current = self._store.model_context(call.entry.session_id).model
            current = current or call.entry.model_override or spec.model
            chosen = "" if current == spec.model else f" (the agent's default: {spec.model})"
            lines = [f"Model: {current}{chosen}", "Allowed: " + ", ".join(allowed)]
            if len(allowed) > 1:
                lines.append("Choose with /model <name>; /model default goes back.")
            else:
                lines.append(f"Only the agent's model is allowed ({setting}).")
            return await self._answer(call, "\n".join(lines), record=False)
        if wanted.lower() == "default":
            choice: str | None = None
            reply = f"Model: {spec.model} (the agent's default)."
        elif wanted in allowed:
            choice = None if wanted == spec.model else wanted
            reply = f"Model: {wanted}. It answers from the next message on."
        else:
            shown = sanitize_untrusted(wanted, _HEADLINE_MAX)
            reply = f"Model {shown} is not allowed here. Allowed: {', '.join(allowed)} ({setting})."
            return await self._answer(call, reply, record=False)
        with self._lane_store.atomic():
            self._check_new(call)
            entry = self._store.set_model_choice(call.key, model=choice)
            self._record(call, reply)
        await self._host.notify(call.event.source, reply)
        return Receipt(call.key, entry.session_id, ReceiptStatus.COMMAND, reply, None)

    async def _cmd_help(self, call: _Call) -> Receipt:
        lines = [f"{spec.usage} — {spec.summary}" for spec in COMMANDS.values()]
        return await self._answer(call, "\n".join(lines))

    async def _cmd_undo(self, call: _Call) -> Receipt:
        n = _undo_count(call.command.args)
        if n is None:
            # `/undo all` or `/undo 0` must not quietly take back one turn.
            return await self._answer(call, f"Usage: {COMMANDS['undo'].usage}", record=False)
        with self._lane_store.atomic():
            self._check_new(call)
            result = self._store.rewind_session(call.entry.session_id, n)
            undone = int(result["turns_undone"])
            reply = f"Took back {undone} turn(s)." if undone else "Nothing to take back."
            self._record(call, reply)
        await self._host.notify(call.event.source, reply)
        return Receipt(call.key, call.entry.session_id, ReceiptStatus.COMMAND, reply, None)

    async def _cmd_retry(self, call: _Call) -> Receipt:
        acceptance: Acceptance | None = None
        with self._lane_store.atomic():
            self._check_new(call)
            result = self._store.rewind_session(call.entry.session_id, 1)
            if result["turns_undone"]:
                text = str(result["target_text"])
                acceptance = self._host.accept(
                    call.entry, self._turn_inbound(call, text, verbatim=True), InboxKind.SLOT
                )
            self._record(call, "retry" if acceptance else "Nothing to retry.")
        if acceptance is None:
            return await self._answer(call, "Nothing to retry.", record=False)
        return await self._host.dispatch(
            call.entry, call.event.source, acceptance, wait=call.wait, interrupt=False
        )

    async def _cmd_resume(self, call: _Call) -> Receipt:
        session_id, refusal = self._resolve_target(call)
        if session_id is None:
            return await self._answer(call, refusal, record=False)
        with self._lane_store.atomic():
            self._check_new(call)
            # Checked in the switch's transaction: two keys on one session would run two lanes
            # of turns on one transcript at once.
            holder = self._store.lookup_by_session_id(session_id)
            if holder is not None and holder.session_key != call.key:
                entry, reply = None, _HELD_ELSEWHERE
            else:
                # `_resolve_target` checked the owner (this lane's, or the same person's).
                entry = self._store.switch_session(call.key, session_id, owner_checked=True)
                reply = (
                    # The resumed session's own counters (the store restores them).
                    f"Resumed session {session_id}. {_tokens_line(entry)}"
                    if entry is not None
                    else "That session cannot be resumed."
                )
            self._record(call, reply)
        await self._host.notify(call.event.source, reply)
        entry = entry or call.entry
        return Receipt(call.key, entry.session_id, ReceiptStatus.COMMAND, reply, None)

    async def _cmd_compress(self, call: _Call) -> Receipt:
        def record(result: dict[str, Any]) -> None:
            # Inside the compaction's commit: the command is remembered with its effect.
            self._check_new(call)
            self._record(call, _compress_reply(result))

        try:
            result = await self._host.compact(call.key, record=record)
        except SessionBusyError:
            return await self._answer(call, BUSY_REPLY.format(name="compress"), record=False)
        except StaleWriteError:
            reply = "The conversation moved on while it was being summarised; try again."
            return await self._answer(call, reply, record=False)
        reply = _compress_reply(result)
        if not result["compacted"]:
            return await self._answer(call, reply)
        await self._host.notify(call.event.source, reply)
        return Receipt(call.key, call.entry.session_id, ReceiptStatus.COMMAND, reply, None)

    def _resolve_target(self, call: _Call) -> tuple[str | None, str]:
        """The session id to switch to, or None and the refusal to show."""
        arg = call.command.args.strip()
        current = call.entry.session_id
        own = [str(s["session_id"]) for s in self._store.sessions_for_key(call.key)]
        if not arg:
            earlier = [sid for sid in own if sid != current]
            return (earlier[0], "") if earlier else (None, "No earlier session to resume.")
        if arg.isdigit():
            index = int(arg) - 1
            if 0 <= index < min(len(own), _LIST_MAX):
                return own[index], ""
            return None, "No session with that number; see /sessions."
        if arg == current:
            return None, "That is the current session."
        if arg in own or self._same_origin(call, arg):
            return arg, ""
        # Another person's or another chat's session: refused without saying whether it exists.
        return None, "That session cannot be resumed from here."

    def _same_origin(self, call: _Call, session_id: str) -> bool:
        """Whether `session_id` belongs to the same person in the same chat (IDOR guard)."""
        info = self._store.session_info(session_id)
        if info is None or not info.get("session_key"):
            return False
        other = self._store.get_session(str(info["session_key"]))
        origin = other.origin if other is not None else None
        source = call.event.source
        return (
            origin is not None
            and origin.platform == source.platform
            and origin.chat_id == source.chat_id
            and origin.user_id is not None
            and origin.user_id == source.user_id
        )


def _tokens_line(entry: SessionEntry) -> str:
    return f"Tokens: {entry.input_tokens} in, {entry.output_tokens} out"


def _undo_count(arg: str) -> int | None:
    """How many turns `/undo <arg>` takes back (1 without an argument, at most `_UNDO_MAX`);
    None unless `arg` is a positive whole number."""
    if not arg:
        return 1
    if _COUNT.fullmatch(arg) is None:
        return None
    digits = arg.lstrip("0")
    if not digits:
        return None
    # Compared by length first: `int` refuses strings of over 4,300 digits.
    return _UNDO_MAX if len(digits) > len(str(_UNDO_MAX)) else min(int(digits), _UNDO_MAX)


def _compress_reply(result: dict[str, Any]) -> str:
    if result["compacted"]:
        return (
            f"Summarised the earlier conversation: about {result['tokens_before']} tokens of "
            f"context are now {result['tokens_after']}."
        )
    if result.get("reason") == "summary_failed":
        return "Could not summarise the conversation right now; nothing was changed."
    return "Nothing to summarise yet: there is nothing before the latest exchange."
