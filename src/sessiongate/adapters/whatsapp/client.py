"""`WhatsAppClient`: the Cloud API (Graph API) through pywa, in the kit's terms.

pywa is used for what it does well: the Graph API calls (send text, upload and send media,
templates, typing, the media URL and its download), their parameters and its error classes.
Its webhook server is not used: it wants to own the route (or a Flask/FastAPI app it adds
routes to), parses the body before anything else, keeps its duplicate check in memory and
dispatches to handlers by callback. The gateway's route checks the signature header before it
reads the body, bounds the body, and claims each message id durably (decision 13); the
mapping is `payloads.py`. pywa's own `webhook_updates_validator` checks the HMAC.

pywa builds its URLs from https://graph.facebook.com/v<version>; `base_url` (a stub, a proxy)
replaces that root on the client's own `httpx.AsyncClient`, so every request, media downloads
included, goes where the operator points it.

Every SDK or transport exception is translated here, once, into the kit's kinds
(`kit/errors.py`), by the Graph API error code (`_CODES`) plus the transport rule: a request
that provably never left (connect error, pool or connect timeout) is transient; one that may
have arrived (a read timeout, a dropped connection) is *unconfirmed* for a send.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from pywa.errors import WhatsAppError
from pywa.types.others import Command
from pywa.types.templates import TemplateLanguage
from pywa_async.client import WhatsApp

from sessiongate.adapters.kit.errors import (
    CredentialsError,
    FileRejectedError,
    PermanentSendError,
    PlatformError,
    RateLimitedError,
    ReplyTargetError,
    TransientSendError,
    UnconfirmedSendError,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from sessiongate.adapters.kit.events import PlatformCommand
    from sessiongate.adapters.kit.media_out import OutboundFile
    from sessiongate.adapters.kit.outbound import Target

__all__ = [
    "MAX_COMMANDS",
    "MediaTooLargeError",
    "ServiceWindowClosedError",
    "WhatsAppClient",
    "translate",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class ServiceWindowClosedError(PermanentSendError):
    """The user has not written for 24 hours (Graph 131047, or the adapter's own check)."""

    code = "whatsapp_window_closed"


class MediaTooLargeError(PlatformError):
    code = "whatsapp_media_too_large"


# Graph API error codes -> what they mean for a send (developers.facebook.com, Cloud API
# error codes). Anything not here is a plain `PlatformError` (it answered; nothing was sent).
_CODES: dict[int, type[PlatformError]] = {
    0: CredentialsError,  # AuthException
    190: CredentialsError,  # the access token expired or is invalid
    4: RateLimitedError,  # too many API calls (app)
    80007: RateLimitedError,  # the WABA's rate limit
    130429: RateLimitedError,  # Cloud API throughput
    131048: RateLimitedError,  # spam rate limit
    131056: RateLimitedError,  # too many messages to one user (pair rate limit)
    131047: ServiceWindowClosedError,  # more than 24 hours since the user last wrote
    131026: PermanentSendError,  # undeliverable (not on WhatsApp, old app, blocked us)
    131030: PermanentSendError,  # a test number's recipient not on its allowed list
    131031: PermanentSendError,  # the business account is locked
    368: PermanentSendError,  # temporarily blocked for policy violations
    130497: PermanentSendError,  # the account may not message this country
    131052: FileRejectedError,  # media download error
    131053: FileRejectedError,  # media upload error (size, type)
    1: TransientSendError,  # API unknown
    2: TransientSendError,  # API service (temporary)
    131000: TransientSendError,  # something went wrong
    131016: TransientSendError,  # service unavailable
    133004: TransientSendError,  # server temporarily unavailable
}
# WhatsApp lists at most 30 commands per business number.
MAX_COMMANDS = 30
# Seconds waited after a throttling error without a Retry-After header.
_DEFAULT_RETRY_AFTER = 2.0
# Requests that provably never left: retry is safe.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# WhatsApp shows images up to this size as photos; larger ones go as documents.
_IMAGE_LIMIT_BYTES = 5 * 1_048_576
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png"})


def translate(exc: Exception, *, sending: bool) -> PlatformError:
    """The kit's kind for a pywa or httpx error (see the module docstring)."""
    if isinstance(exc, WhatsAppError):
        message = f"WhatsApp error {exc.code}: {exc.message}"
        if exc.details:
            message += f" ({exc.details})"
        kind = _CODES.get(exc.code)
        if kind is RateLimitedError:
            return RateLimitedError(message, retry_after=_retry_after(exc))
        if kind is None and exc.code == 131009 and "context" in (exc.details or "").lower():
            kind = ReplyTargetError  # the quoted message is not valid (gone, too old)
        if kind is None and exc.code in range(200, 300):
            kind = CredentialsError  # a permission the token lacks
        if kind is None and (exc.is_transient or (exc.status_code or 0) >= 500):
            kind = TransientSendError
        return (kind or PlatformError)(message)
    if isinstance(exc, _NOT_SENT):
        return TransientSendError(f"WhatsApp not reached: {type(exc).__name__}")
    if isinstance(exc, httpx.TransportError):
        what = f"WhatsApp answer lost: {type(exc).__name__}"
        return UnconfirmedSendError(what) if sending else TransientSendError(what)
    raise exc


def _retry_after(exc: WhatsAppError) -> float:
    response = exc.raw_response
    header = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(header)) if header is not None else _DEFAULT_RETRY_AFTER
    except ValueError:
        return _DEFAULT_RETRY_AFTER


class WhatsAppClient:
    """The Graph API for one business phone number (`phone_number_id`)."""

    def __init__(
        self,
        token: str,
        *,
        phone_number_id: str,
        base_url: str = "https://graph.facebook.com",
        api_version: str = "26.0",
        timeout: float = 20.0,
    ) -> None:
        self.phone_number_id = phone_number_id
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=5.0))
        self.wa = WhatsApp(
            phone_id=phone_number_id,
            token=token,
            session=self._http,
            api_version=float(api_version),
            validate_updates=False,  # the gateway's route verifies; pywa serves no webhook
        )
        # pywa pins graph.facebook.com on the session it was given: point it at `base_url`.
        self._http.base_url = httpx.URL(f"{base_url.rstrip('/')}/v{api_version}/")
        # The message a chat's user last sent: WhatsApp shows "typing" against a message.
        self._last_inbound: dict[str, str] = {}

    async def _call(self, call: Callable[[], Awaitable[_T]], *, sending: bool = True) -> _T:
        try:
            return await call()
        except (WhatsAppError, httpx.TransportError) as exc:
            raise translate(exc, sending=sending) from exc

    async def open(self) -> str:
        """Verify the token and the phone number id (GET /<phone_number_id>); returns the
        business's display number, digits only. A refusal raises `CredentialsError`."""
        try:
            number = await self._call(self.wa.get_business_phone_number, sending=False)
        except CredentialsError:
            raise
        except PlatformError as exc:
            raise CredentialsError(f"WhatsApp refused the phone number id: {exc}") from exc
        return "".join(ch for ch in str(number.display_phone_number or "") if ch.isdigit())

    async def close(self) -> None:
        await self._http.aclose()

    async def set_commands(self, commands: Sequence[PlatformCommand]) -> None:
        """The commands WhatsApp offers when a user types `/` (conversational automation):
        at most 30, names up to 32 characters, descriptions up to 256."""
        valid = [
            Command(name=c.name, description=(c.description or c.name)[:256])
            for c in commands
            if 0 < len(c.name) <= 32
        ][:MAX_COMMANDS]
        await self._call(
            lambda: self.wa.update_conversational_automation(commands=valid), sending=False
        )

    def note_inbound(self, chat_id: str, message_id: str) -> None:
        self._last_inbound[chat_id] = message_id

    # ------------------------------------------------------------------ PlatformSender

    async def send_text(self, target: Target, text: str, *, markup: bool) -> str:
        sent = await self._call(
            lambda: self.wa.send_message(
                to=target.chat_id, text=text, reply_to_message_id=target.reply_to
            )
        )
        return str(sent.id)

    async def send_file(self, target: Target, file: OutboundFile) -> str:
        """Upload the bytes (POST /<phone>/media, the file's own name kept), then send the
        media id: an image WhatsApp shows as a photo (JPEG/PNG up to 5 MB) as an image, any
        other file as a document."""
        as_image = file.mime_type in _IMAGE_TYPES and file.size <= _IMAGE_LIMIT_BYTES

        async def upload() -> Any:
            media = await self.wa.upload_media(
                media=file.data, mime_type=file.mime_type, filename=file.name
            )
            if as_image:
                return await self.wa.send_image(
                    to=target.chat_id, image=media, reply_to_message_id=target.reply_to
                )
            return await self.wa.send_document(
                to=target.chat_id,
                document=media,
                filename=file.name,
                reply_to_message_id=target.reply_to,
            )

        sent = await self._call(upload)
        return str(sent.id)

    async def edit_text(self, target: Target, message_id: str, text: str, *, markup: bool) -> None:
        raise PermanentSendError("WhatsApp cannot edit a message a business sent")

    async def delete_message(self, target: Target, message_id: str) -> None:
        raise PermanentSendError("WhatsApp cannot delete a message a business sent")

    async def send_typing(self, target: Target) -> None:
        """Marks the user's last message read and shows "typing..." (up to 25 s, or until the
        reply); nothing when the chat has not written (the indicator needs a message)."""
        message_id = self._last_inbound.get(target.chat_id)
        if message_id is not None:
            await self._call(lambda: self.wa.indicate_typing(message_id), sending=False)

    async def send_template(self, chat_id: str, name: str, language: str) -> str:
        """An approved template with no parameters (the window's fallback)."""
        try:
            lang = TemplateLanguage(language)
        except ValueError:
            raise PermanentSendError(f"unknown template language {language!r}") from None
        sent = await self._call(lambda: self.wa.send_template(to=chat_id, name=name, language=lang))
        return str(sent.id)

    # ------------------------------------------------------------------ media in

    async def download(self, media_id: str, *, max_bytes: int) -> tuple[bytes, str]:
        """(bytes, MIME type) of an inbound media id: the URL from GET /<media_id>, then the
        bytes with the token. Over `max_bytes` raises `MediaTooLargeError` before the download."""
        found = await self._call(lambda: self.wa.get_media_url(media_id), sending=False)
        if found.file_size > max_bytes:
            raise MediaTooLargeError(
                f"the media is {found.file_size} bytes, over the {max_bytes}-byte limit"
            )
        data = await self._call(lambda: self.wa.get_media_bytes(found.url), sending=False)
        if len(data) > max_bytes:
            raise MediaTooLargeError(f"the media is over the {max_bytes}-byte limit")
        return data, found.mime_type
