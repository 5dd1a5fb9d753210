"""The OpenAI chat-completions wire format (the subset ``execrl serve`` implements), validated with pydantic.

Supported request fields: ``model``, ``messages`` (system/user/assistant/tool, string content; assistant
messages may carry ``tool_calls``, tool messages need ``tool_call_id``), ``tools`` (function declarations,
their ``parameters`` checked as JSON schemas), ``tool_choice`` (``"auto"`` or ``"none"``), ``n``,
``temperature``, ``top_p``, ``max_tokens`` (or ``max_completion_tokens``), ``stop``, ``seed``, ``stream``
(not together with ``tools``). Fields the server cannot honour (``functions``, ``logprobs``,
``response_format``...) are refused with a 400 naming the field rather than silently ignored; unknown fields the official client may add with default
values (``stream_options``, ``user``) are accepted. Errors use OpenAI's shape:
``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from execrl.chat_http import MAX_JSON_DEPTH, clean_text, json_depth

__all__ = [
    "ChatMessageIn",
    "ChatRequest",
    "FunctionDef",
    "RequestError",
    "ToolCallIn",
    "ToolDecl",
    "error_body",
    "parse_chat_request",
]

UNSUPPORTED_FIELDS = (
    "functions",
    "function_call",
    "logprobs",
    "top_logprobs",
    "response_format",
    "logit_bias",
)
MAX_N = 64
MAX_STOP = 4
MAX_TOOLS = 128  # OpenAI's own cap on functions per request
MAX_TOOL_SCHEMA_VALUES = 8192  # JSON values in all the tools' parameters together (~1 s to check)


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


def _lone_surrogate(value: Any) -> bool:
    """Whether decoded JSON (nested boundedly) holds a string or key with a lone UTF-16 surrogate."""
    if isinstance(value, str):
        return clean_text(value) != value
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    return isinstance(value, list) and any(_lone_surrogate(v) for v in value)


class FunctionCallIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    arguments: str  # a JSON object, encoded, as OpenAI sends it

    @field_validator("arguments")
    @classmethod
    def _json_object(cls, value: str) -> str:
        """JSON inside a JSON string escapes the body's checks (http_edge.py): its depth and its text are
        checked here (issue 35, class 9: deep arguments and an escaped lone surrogate gave a 500)."""
        if json_depth(value.encode("utf-8", "surrogatepass")) > MAX_JSON_DEPTH:
            raise ValueError(f"arguments nest more than {MAX_JSON_DEPTH} levels deep")
        try:
            decoded = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"arguments must be a JSON object encoded as a string: {exc}") from exc
        except RecursionError:  # unbalanced brackets the depth count cannot see
            raise ValueError(f"arguments nest more than {MAX_JSON_DEPTH} levels deep") from None
        if not isinstance(decoded, dict):
            raise ValueError("arguments must be a JSON object encoded as a string")
        if _lone_surrogate(decoded):
            raise ValueError(
                "arguments hold a lone UTF-16 surrogate escape (\\ud800-\\udfff), which is not text"
            )
        return value


class ToolCallIn(BaseModel):
    """A call of an earlier assistant turn, sent back by the client."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    type: Literal["function"] = "function"
    function: FunctionCallIn


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None  # assistant messages only
    tool_call_id: str | None = None  # tool messages only

    @model_validator(mode="after")
    def _role_fields(self) -> ChatMessageIn:
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages carry tool_calls")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs tool_call_id (the id of the call it answers)")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ValueError("only tool messages carry tool_call_id")
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content must be a string (it may be null only for an assistant tool call)")
        return self


class FunctionDef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None  # JSON schema of the arguments object
    strict: bool | None = None  # accepted; arguments are checked at the top level only (tool_calls.py)

    @field_validator("parameters")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        from jsonschema import Draft202012Validator, SchemaError

        if value is None:
            return None
        if value.get("type") != "object":
            raise ValueError('parameters must be a JSON schema with "type": "object"')
        try:
            Draft202012Validator.check_schema(value)
        except SchemaError as exc:
            raise ValueError(f"parameters is not a valid JSON schema: {exc.message}") from exc
        return value


class ToolDecl(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["function"]
    function: FunctionDef


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
    tools: list[ToolDecl] | None = None
    tool_choice: Literal["auto", "none"] | None = None

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
    _check_tool_sizes(body.get("tools"))
    for name in UNSUPPORTED_FIELDS:
        if body.get(name) not in (None, False, [], {}):
            raise RequestError(f"'{name}' is not supported by execrl serve", param=name)
    choice = body.get("tool_choice")
    if choice is not None and choice not in ("auto", "none"):
        raise RequestError(
            f'tool_choice {choice!r} is not supported by execrl serve: only "auto" and "none" '
            "(a required or named function is not enforced)",
            param="tool_choice",
        )
    try:
        req = ChatRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".") or None
        raise RequestError(f"{param}: {first['msg']}", param=param) from exc
    _check_tools(req)
    return req


def _values(value: Any, budget: int) -> int:
    """How many JSON values ``value`` holds, counting stops past ``budget`` (iterative)."""
    count, stack = 0, [value]
    while stack and count <= budget:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _check_tool_sizes(tools: Any) -> None:
    """``tools`` within the caps before any schema is checked: checking is pure Python, ~0.1 ms per value
    (20,000 tools or one 60,000-property schema took 9-19 s; issue 35, class 9)."""
    if not isinstance(tools, list):
        return  # absent, or the wrong type: the schema says so
    if len(tools) > MAX_TOOLS:
        raise RequestError(f"tools: {len(tools)} tools; this server takes at most {MAX_TOOLS}", param="tools")
    left = MAX_TOOL_SCHEMA_VALUES
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        parameters = function.get("parameters") if isinstance(function, dict) else None
        left -= _values(parameters, left) if parameters is not None else 0
        if left < 0:
            param = f"tools[{i}].function.parameters"
            raise RequestError(
                f"{param}: the tools' parameters hold more than {MAX_TOOL_SCHEMA_VALUES} JSON values in all; "
                "this server checks at most that many per request",
                param=param,
            )


def _check_tools(req: ChatRequest) -> None:
    names: set[str] = set()
    for i, tool in enumerate(req.tools or ()):
        if tool.function.name in names:
            param = f"tools[{i}].function.name"
            raise RequestError(f"{param}: a second tool named {tool.function.name!r}", param=param)
        names.add(tool.function.name)
    if req.tools and req.stream:
        raise RequestError(
            "stream=true with tools is not supported by execrl serve; send the request without stream",
            param="stream",
        )
