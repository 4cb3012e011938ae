"""Tool approvals asked in the chat (DESIGN decision 18: a decision binds to what was shown).

An agent's `approvals.tools` names the tools whose calls wait for a person. When the model
calls one, the agent asks its turn's `TurnApprovals`: the call is stored as a `pending`
approval (`store/approvals.py`: the exact tool name and arguments and their SHA-256, the turn,
the session key, who may decide, when it expires) and the chat gets a prompt showing the full
call with `/approve <id>` and `/deny <id>`. The turn stays `running` while it waits (the lane
stays busy, so follow-ups queue behind it and `/stop` reaches it), and the approval row, not
the journal, is the truth of what it waits for: a restart requeues the running turn as after
any crash, recovery resumes it without counting the wait as a crash loop (`recovery.py`), and
the resumed turn asks again for the same call, finds the same approval and goes on waiting.

A decision comes from `/approve` or `/deny` in a chat (only from an allowed approver:
`<platform>:<user_id>` of the configured list, or the person whose message started the turn
for `session-user`), or from the operator over HTTP (`POST /v1/approvals/{id}`); it is one
conditional update from `pending`, so two presses make one decision. An approved call is
marked started before it runs, so a resumed turn never runs it twice. An approval not decided
within `timeout_minutes` (by the injected clock) expires and the call gets a
`denied: expired` result; `/stop` and `/new` cancel the session's pending approvals.

Where the platform has buttons, the prompt carries Approve and Deny (the adapter's
`send_approval`), and a press is the presser's command. Once the waiting call learns the
outcome, the prompt is told it (`settled`: the adapter that posted it shows the outcome in
place of the buttons, where it can; best effort, a failure changes nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sessiongate.core.bindings import agent_of_key
from sessiongate.core.config import SESSION_USER, EntryAgentSpec
from sessiongate.errors import ApprovalDecidedError, ApprovalNotFoundError, NotAnApproverError
from sessiongate.gateway.store_calls import in_thread
from sessiongate.store.approvals import PENDING, ApprovalBook, arguments_sha256
from sessiongate.store.records import from_us

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import ApprovalsConfig, GatewayConfig
    from sessiongate.core.source import SessionSource
    from sessiongate.store.records import ApprovalRow
    from sessiongate.store.session_store import SessionStore

__all__ = [
    "OPERATOR",
    "Approvals",
    "Decision",
    "TurnApprovals",
    "approver_id",
    "denied_result",
    "needs_approval",
    "outcome_line",
]

log = logging.getLogger(__name__)

# Who decided over HTTP: the operator's bearer token, trusted like the other operator routes.
OPERATOR = "operator"
# How often a waiting call looks at its approval again besides being woken (a decision made by
# another instance on a shared database, an expiry by the clock).
_POLL_SECONDS = 0.5

PROMPT = (
    "Approval needed [{id}]: the agent wants to run\n{tool}({arguments})\n"
    "Reply /approve {id} or /deny {id} (expires in {minutes:g} min)."
)
_OUTCOMES = {
    "approved": "Approved by {by}.",
    "denied": "Denied by {by}.",
    "expired": "Expired: nobody decided in time.",
    "cancelled": "Cancelled.",
}
_REASONS = {
    "denied": "denied: the call was not approved",
    "expired": "denied: expired (nobody decided in time)",
    "cancelled": "denied: cancelled",
}


def needs_approval(config: ApprovalsConfig, tool: str) -> bool:
    """Whether a call of `tool` waits for approval under `config.tools` (names or patterns
    with `*`, e.g. `mcp:files:*`)."""
    names = [tool]
    if tool.startswith("mcp__"):
        # An MCP tool's function name (`mcp__<server>__<tool>`) also answers to the pattern
        # form of the configuration (`mcp:<server>:<tool>`, `mcp:<server>:*`).
        server, sep, rest = tool.removeprefix("mcp__").partition("__")
        if sep:
            names.append(f"mcp:{server}:{rest}")
    return any(fnmatch.fnmatchcase(name, pattern) for name in names for pattern in config.tools)


def approver_id(platform: str, user_id: str | None) -> str | None:
    return None if not user_id else f"{platform}:{user_id}"


def outcome_line(row: ApprovalRow) -> str:
    """What a settled prompt says of its approval (`Approved by slack:U123.`)."""
    template = _OUTCOMES.get(row.status, "{status}.")
    return template.format(by=row.decided_by or "someone", status=row.status.capitalize())


def denied_result(status: str) -> str:
    """A refused call's result, as the model reads it."""
    return json.dumps({"error": _REASONS.get(status, f"denied: {status}")})


@dataclass(frozen=True, slots=True)
class Decision:
    """What a waiting call learnt: its approval as decided, and whether it may run now (it was
    approved, binds to these exact arguments, and had not been started before)."""

    approval: ApprovalRow
    run: bool
    result: str | None  # the refusal the model reads, when it may not run


class Approvals:
    """The gateway's approvals: the policy of each agent, the book, and the waiting calls."""

    def __init__(
        self,
        store: SessionStore,
        config: GatewayConfig,
        *,
        clock: Clock,
        notify: Callable[[SessionSource, str, str], Awaitable[object]],
        waiting: Callable[[int], None] | None = None,
        settled: Callable[[SessionSource, str, str], Awaitable[object]] | None = None,
    ) -> None:
        self.book = ApprovalBook(store, clock=clock)
        self._config = config
        self._clock = clock
        self._notify = notify
        # Told (source, approval id, outcome line) once a waiting call learnt the outcome.
        self._settled = settled
        # Told the turn id when a turn starts waiting (the runner's startup gate).
        self._waiting = waiting or (lambda _turn_id: None)
        self._wakers: dict[str, asyncio.Event] = {}
        self._policies: dict[str, ApprovalsConfig | None] = {}

    def policy(self, session_key: str) -> ApprovalsConfig | None:
        """The approvals of the agent serving `session_key`; None when none of its tools
        needs one."""
        agent_id = agent_of_key(session_key) or "main"
        if agent_id not in self._policies:  # read once per agent: a turn pays a dict lookup
            try:
                spec = self._config.agent_spec(agent_id)
            except KeyError:
                spec = None
            approvals = None if spec is None else spec.approvals
            # A framework agent may ask for approval by its own markers (the Agents SDK's
            # `needs_approval`, pydantic-ai's deferred tools, LangGraph's `interrupt()`), so
            # its turns always get the approvals, even with no tool named.
            own_markers = isinstance(spec, EntryAgentSpec)
            self._policies[agent_id] = (
                approvals if approvals and (approvals.tools or own_markers) else None
            )
        return self._policies[agent_id]

    def for_turn(
        self, *, turn_id: int, session_key: str, source: SessionSource
    ) -> TurnApprovals | None:
        policy = self.policy(session_key)
        if policy is None:
            return None
        if policy.approvers == SESSION_USER:
            asker = approver_id(str(source.platform), source.user_id)
            approvers = [asker] if asker else []
        else:
            approvers = list(policy.approvers)
        return TurnApprovals(self, policy, turn_id, session_key, source, approvers)

    # ------------------------------------------------------------------ deciding

    def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        by: str | None,
        sha256: str | None = None,
        session_key: str | None = None,
    ) -> ApprovalRow:
        """Decide one pending approval. `by` is `<platform>:<user_id>` of a chat (it must be
        one of the approval's approvers) or `OPERATOR`; `sha256`, when given, must be the
        hash of the call shown; `session_key`, when given (a chat's command), must be the
        approval's conversation. Raises `ApprovalNotFoundError`, `NotAnApproverError` or
        `ApprovalDecidedError` (decided before, expired, cancelled, another call)."""
        row = self.book.get(approval_id)
        if row is None or (session_key is not None and row.session_key != session_key):
            raise ApprovalNotFoundError(f"no approval {approval_id!r}")
        if by != OPERATOR and by not in json.loads(row.approvers):
            raise NotAnApproverError(f"you may not decide approval {approval_id}")
        if sha256 is not None and sha256 != row.arguments_sha256:
            raise ApprovalDecidedError(
                f"approval {approval_id} is for another call than the one given", status=row.status
            )
        if row.status == PENDING and self._clock.now() >= from_us(row.expires_at):
            self.expire_due()
            row = self.book.get(approval_id) or row
        decided = None
        if row.status == PENDING:
            decided = self.book.decide(
                approval_id, approve=approve, by=by, sha256=row.arguments_sha256
            )
        if decided is None:
            current = self.book.get(approval_id) or row
            raise ApprovalDecidedError(
                f"approval {approval_id} is already {current.status}", status=current.status
            )
        log.info(
            "approval decided",
            extra={"approval_id": approval_id, "status": decided.status, "tool": decided.tool},
        )
        self._wake(approval_id)
        return decided

    def cancel(self, session_key: str, *, by: str) -> list[str]:
        """Cancel the session key's pending approvals (`/stop`, `/new`)."""
        cancelled = self.book.cancel(session_key, by=by)
        for approval_id in cancelled:
            self._wake(approval_id)
        return cancelled

    def expire_due(self) -> list[ApprovalRow]:
        """Expire the approvals whose time is up, and wake their calls."""
        expired = self.book.expire_due()
        for row in expired:
            log.info("approval expired", extra={"approval_id": row.id, "tool": row.tool})
            self._wake(row.id)
        return expired

    def pending_for(self, session_key: str) -> list[ApprovalRow]:
        """The session key's pending approvals, oldest first (`/status`)."""
        rows = self.book.listed(status=PENDING, limit=100_000)
        return [row for row in reversed(rows) if row.session_key == session_key]

    def pending_turns(self) -> set[int]:
        return {row.turn_id for row in self.book.listed(status=PENDING, limit=100_000)}

    def told_waiting(self, turn_id: int) -> None:
        self._waiting(turn_id)

    def _wake(self, approval_id: str) -> None:
        event = self._wakers.get(approval_id)
        if event is not None:
            event.set()

    async def wait(self, row: ApprovalRow) -> ApprovalRow:
        """The approval once it is no longer pending."""
        event = self._wakers.setdefault(row.id, asyncio.Event())
        try:
            while True:
                # Cleared before the read, not after: a decision made while the row is read
                # (its wake then already set) must end the wait at once, not at the next poll.
                event.clear()
                # Read off the loop (DESIGN decision 15): on PostgreSQL a poll is a round trip.
                current = await in_thread(self.book.get, row.id)
                if current is None:  # erased meanwhile
                    return replace(row, status="cancelled")
                if current.status != PENDING:
                    return current
                if self._clock.now() >= from_us(current.expires_at):
                    self.expire_due()
                    continue
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_POLL_SECONDS):
                        await event.wait()
        finally:
            self._wakers.pop(row.id, None)

    async def prompt(self, source: SessionSource, row: ApprovalRow, minutes: float) -> None:
        text = PROMPT.format(id=row.id, tool=row.tool, arguments=row.arguments, minutes=minutes)
        try:
            await self._notify(source, text, row.id)
        except Exception:
            # The approval stays pending and listed (`GET /v1/approvals`); the operator may
            # still decide it.
            log.exception("approval prompt not delivered", extra={"approval_id": row.id})

    async def settle(self, source: SessionSource, row: ApprovalRow) -> None:
        """Tell the prompt of a decided (expired, cancelled) approval its outcome."""
        if self._settled is None or row.status == PENDING:
            return
        try:
            await self._settled(source, row.id, outcome_line(row))
        except Exception:
            log.warning("approval prompt not updated", exc_info=True,
                        extra={"approval_id": row.id})  # fmt: skip


class TurnApprovals:
    """One turn's approvals: what the agent asks before running a call."""

    def __init__(
        self,
        approvals: Approvals,
        policy: ApprovalsConfig,
        turn_id: int,
        session_key: str,
        source: SessionSource,
        approvers: list[str],
    ) -> None:
        self._approvals = approvals
        self._policy = policy
        self.turn_id = turn_id
        self.session_key = session_key
        self._source = source
        self.approvers = approvers
        # The turn's `agent.gateway_timeout`, held while a call waits for a person: the wait
        # has its own timeout (`timeout_minutes`), and the agent's time is what it computes.
        self.deadline: asyncio.Timeout | None = None
        self._waiting = 0
        self._left: float | None = None

    def needs(self, tool: str) -> bool:
        return needs_approval(self._policy, tool)

    def named(self) -> bool:
        """Whether `approvals.tools` names any tool (else only a framework's own markers ask)."""
        return bool(self._policy.tools)

    def has_open_calls(self, call_ids: list[str]) -> bool:
        """Whether some of these calls (of this turn) have approvals and none was started:
        the calls are still to be run (a resumed turn waits for or acts on them)."""
        book = self._approvals.book
        rows = [book.for_call(self.session_key, self.turn_id, call_id) for call_id in call_ids]
        found = [row for row in rows if row is not None]
        return bool(found) and not any(row.used for row in found)

    async def ask(self, call_id: str, tool: str, arguments: str) -> ApprovalRow:
        """The decided approval of one call: asked now (the chat gets the prompt), or found
        from before a restart; waits until it is decided, expires or is cancelled."""
        row, new = self._approvals.book.request(
            turn_id=self.turn_id,
            call_id=call_id,
            session_key=self.session_key,
            tool=tool,
            arguments=arguments,
            approvers=self.approvers,
            timeout_seconds=self._policy.timeout_minutes * 60,
        )
        if new:
            log.info(
                "approval requested",
                extra={"approval_id": row.id, "tool": tool, "session_key": self.session_key},
            )
            await self._approvals.prompt(self._source, row, self._policy.timeout_minutes)
        if row.status == PENDING:
            self._approvals.told_waiting(self.turn_id)
        with self._deadline_held():
            decided = await self._approvals.wait(row)
        await self._approvals.settle(self._source, decided)
        return decided

    @contextlib.contextmanager
    def _deadline_held(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        if self._waiting == 0 and self.deadline is not None:
            when = self.deadline.when()
            self._left = None if when is None else when - loop.time()
            self.deadline.reschedule(None)
        self._waiting += 1
        try:
            yield
        finally:
            self._waiting -= 1
            if self._waiting == 0 and self.deadline is not None and self._left is not None:
                self.deadline.reschedule(loop.time() + max(self._left, 0.0))

    def start(self, rows: list[ApprovalRow], calls: dict[str, tuple[str, str]]) -> list[Decision]:
        """Mark the message's decided approvals started (before any of its calls runs), and
        say of each whether its call may run: approved, for these exact arguments (`calls`:
        call id -> tool, arguments), and not started before."""
        decisions = []
        for row in rows:
            first = self._approvals.book.use(row.id)
            tool, arguments = calls[row.call_id]
            if row.status != "approved":
                decisions.append(Decision(row, False, denied_result(row.status)))
            elif arguments_sha256(tool, arguments) != row.arguments_sha256:
                reason = "denied: the call differs from the one approved"
                decisions.append(Decision(row, False, json.dumps({"error": reason})))
            elif not first:
                reason = "denied: this approved call was already started once"
                decisions.append(Decision(row, False, json.dumps({"error": reason})))
            else:
                decisions.append(Decision(row, True, None))
        return decisions
