"""An operator takes a session over from the agent, answers, and hands it back.

    GET    /v1/sessions/{key}/takeover   whether it is taken over, by whom, until when
    POST   /v1/sessions/{key}/takeover   take it over (201; 200 when it was already)
    DELETE /v1/sessions/{key}/takeover   hand it back to the agent (409 when not taken over)
    POST   /v1/sessions/{key}/reply      the operator's reply, sent to the chat as the bot

Operator routes (the bearer token, checked before any body is read). While a session is taken
over the agent does not answer it: people's messages are stored in its transcript, and the
operator's replies are stored as the assistant's and delivered to the chat
(`gateway/takeover.py` has the rules, docs/AUTOMATION.md the story).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Depends, Response

from sessiongate.api.auth import require_operator
from sessiongate.api.deps import (
    ConfigDep,
    KeyDep,
    RunnerDep,
    StoreDep,
    require_entry,
)
from sessiongate.api.errors import ApiError
from sessiongate.api.responses import errors
from sessiongate.api.schemas import OperatorReplyIn, OperatorReplyOut, TakeoverOut
from sessiongate.errors import NotTakenOverError
from sessiongate.gateway.takeover import OPERATOR

if TYPE_CHECKING:
    from sessiongate.gateway.runner import GatewayRunner
    from sessiongate.store.session_store import SessionStore
    from sessiongate.store.takeover import Takeover

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["takeover"], dependencies=[Depends(require_operator)])


def _out(key: str, takeover: Takeover | None) -> TakeoverOut:
    if takeover is None:
        return TakeoverOut(session_key=key, taken_over=False)
    return TakeoverOut(
        session_key=key,
        taken_over=True,
        taken_by=takeover.taken_by,
        since=takeover.since,
        resume_at=takeover.resume_at,
    )


@router.get(
    "/sessions/{key}/takeover",
    response_model=TakeoverOut,
    responses=errors(400, 401, 404),
    summary="Whether an operator has taken the session over",
)
async def get_takeover(key: KeyDep, store: StoreDep, runner: RunnerDep) -> TakeoverOut:
    return _out(key, await runner.calls.run(_taken_over, store, runner, key))


def _taken_over(store: SessionStore, runner: GatewayRunner, key: str) -> Takeover | None:
    """The session's takeover, if it has one; 404 for an unknown session (store reads)."""
    require_entry(store, key)
    return runner.takeovers.get(key)


@router.post(
    "/sessions/{key}/takeover",
    response_model=TakeoverOut,
    status_code=201,
    responses={
        200: {"model": TakeoverOut, "description": "The session was already taken over"},
        **errors(400, 401, 404),
    },
    summary="Take the session over: the agent stops answering it (a running turn is stopped)",
)
async def take_over(
    key: KeyDep, response: Response, store: StoreDep, runner: RunnerDep
) -> TakeoverOut:
    await runner.calls.run(require_entry, store, key)
    takeover, new = await runner.takeovers.take_over(key, by=OPERATOR)
    if not new:
        response.status_code = 200
    return _out(key, takeover)


@router.delete(
    "/sessions/{key}/takeover",
    response_model=TakeoverOut,
    responses=errors(400, 401, 404, 409),
    summary="Hand the session back to the agent (it answers what people said meanwhile)",
)
async def hand_back(key: KeyDep, store: StoreDep, runner: RunnerDep) -> TakeoverOut:
    await runner.calls.run(require_entry, store, key)
    ended = await runner.takeovers.hand_back(key, by=OPERATOR)
    if ended is None:
        raise NotTakenOverError("the session is not taken over", session_key=key)
    return _out(key, None)


@router.post(
    "/sessions/{key}/reply",
    response_model=OperatorReplyOut,
    status_code=201,
    responses=errors(400, 401, 404, 409, 413, 422),
    summary="Reply as the bot in a session the operator has taken over",
)
async def reply(
    key: KeyDep, body: OperatorReplyIn, store: StoreDep, runner: RunnerDep, config: ConfigDep
) -> OperatorReplyOut:
    await runner.calls.run(require_entry, store, key)
    limit = config.api.max_message_chars
    if len(body.text) > limit:
        raise ApiError(413, "message_too_long", f"the text is longer than {limit} characters")
    if not body.text.strip():
        raise ApiError(422, "empty_reply", "the reply is only whitespace")
    sent = await runner.takeovers.reply(key, body.text, by=OPERATOR)
    return OperatorReplyOut(**sent.to_dict())
