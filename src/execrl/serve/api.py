"""The OpenAI chat-completions wire format (the subset ``execrl serve`` implements), validated with pydantic.

Supported request fields: ``model``, ``messages`` (system/user/assistant, string content), ``n``,
``temperature``, ``top_p``, ``max_tokens`` (or ``max_completion_tokens``), ``stop``, ``seed``, ``stream``.
Fields the server cannot honour (``tools``, ``logprobs``, ``response_format``...) are refused with a 400
naming the field rather than silently ignored; unknown fields the official client may add with default
values (``stream_options``, ``user``) are accepted. Errors use OpenAI's shape:
``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = ["ChatMessageIn", "ChatRequest", "RequestError", "error_body", "parse_chat_request"]

UNSUPPORTED_FIELDS = (
    "tools",
    "tool_choice",
    "functions",
    "function_call",
    "logprobs",
    "top_logprobs",
    "response_format",
    "logit_bias",
)
MAX_N = 64
MAX_STOP = 4


class RequestError(ValueError):
    """A request the server refuses; carries the HTTP status and OpenAI error fields."""

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        status: int = 400,
        code: str | None = None,
        error_type: str | None = None,
    ):
        super().__init__(message)
        self.message, self.param, self.status, self.code = message, param, status, code
        self._error_type = error_type

    @property
    def error_type(self) -> str:
        """OpenAI's ``type``: given, else invalid_request_error for 4xx and server_error for 5xx."""
        if self._error_type is not None:
            return self._error_type
        return "invalid_request_error" if self.status < 500 else "server_error"


def error_body(err: RequestError) -> dict[str, Any]:
    return {"error": {"message": err.message, "type": err.error_type, "param": err.param, "code": err.code}}


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str
    name: str | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessageIn] = Field(min_length=1)
    n: int = Field(1, ge=1, le=MAX_N, strict=True)  # strict: `true` is not 1, 2.0 is not 2
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1, strict=True)
    max_completion_tokens: int | None = Field(None, ge=1, strict=True)
    stop: str | list[str] | None = None
    seed: int | None = Field(None, ge=0, lt=2**63, strict=True)
    stream: bool = False

    @field_validator("stop")
    @classmethod
    def _stop(cls, value: str | list[str] | None) -> str | list[str] | None:
        stops = [value] if isinstance(value, str) else (value or [])
        if len(stops) > MAX_STOP or any(not s for s in stops):
            raise ValueError(f"stop takes at most {MAX_STOP} non-empty strings")
        return value

    @property
    def stop_strings(self) -> tuple[str, ...]:
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())

    def new_tokens(self, default: int) -> int:
        return self.max_completion_tokens or self.max_tokens or default


def parse_chat_request(body: Any) -> ChatRequest:
    """Validate a decoded JSON body; a bad field raises :class:`RequestError` naming it."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    for name in UNSUPPORTED_FIELDS:
        if body.get(name) not in (None, False, [], {}):
            raise RequestError(f"'{name}' is not supported by execrl serve", param=name)
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".") or None
        raise RequestError(f"{param}: {first['msg']}", param=param) from exc
