"""metav1.Status errors with kube-apiserver's reasons, codes and wording.

Every failure the double returns is an :class:`ApiError`; the HTTP layer turns
it into the JSON ``Status`` body.  The constructors mirror
``k8s.io/apimachinery/pkg/api/errors`` (NewNotFound, NewAlreadyExists,
NewConflict, NewInvalid, NewBadRequest, ...) so that message formats match the
real server and clients that parse them (the Python client, kubectl) behave
the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .resources import Resource

OPTIMISTIC_LOCK_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error``: type string, path, bad value and detail."""

    type: str  # e.g. "Required value", "Invalid value"
    field: str
    value: Any = None
    detail: str = ""
    show_value: bool = True

    CAUSES = {  # noqa: RUF012 - a constant table, not per-instance state
        "Not found": "FieldValueNotFound",
        "Required value": "FieldValueRequired",
        "Duplicate value": "FieldValueDuplicate",
        "Invalid value": "FieldValueInvalid",
        "Unsupported value": "FieldValueNotSupported",
        "Forbidden": "FieldValueForbidden",
        "Too long": "FieldValueTooLong",
        "Too many": "FieldValueTooMany",
    }

    def body(self) -> str:
        """``field.Error.ErrorBody()``: the message without the field path."""
        if self.type in ("Required value", "Forbidden", "Too long") or not self.show_value:
            text = self.type
        else:
            text = f"{self.type}: {go_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> dict[str, str]:
        return {
            "reason": self.CAUSES.get(self.type, "FieldValueInvalid"),
            "message": self.body(),
            "field": self.field,
        }


def go_value(value: Any) -> str:
    """Approximate how field.Error prints a bad value (Go ``%q``/``%v``)."""
    import json

    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    # The real server prints Go structs with %#v; JSON is the honest equivalent here.
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def aggregate(errors: list[FieldError]) -> str:
    """``ErrorList.ToAggregate().Error()``: deduplicated, bracketed when several."""
    messages: list[str] = []
    for err in errors:
        text = str(err)
        if text not in messages:
            messages.append(text)
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


@dataclass
class ApiError(Exception):
    """An error response: HTTP code plus the ``metav1.Status`` it carries."""

    code: int
    reason: str
    message: str
    details: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(res: Resource, name: str, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if res.group:
        details["group"] = res.group
    details["kind"] = res.plural
    details.update(extra)
    return details


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{res.qualified} "{name}" not found', _details(res, name))


def already_exists(res: Resource, name: str) -> ApiError:
    return ApiError(
        409, "AlreadyExists", f'{res.qualified} "{name}" already exists', _details(res, name)
    )


def conflict(res: Resource, name: str, why: str = OPTIMISTIC_LOCK_MESSAGE) -> ApiError:
    message = f'Operation cannot be fulfilled on {res.qualified} "{name}": {why}'
    return ApiError(409, "Conflict", message, _details(res, name))


def invalid(res: Resource, name: str, errors: list[FieldError]) -> ApiError:
    details: dict[str, Any] = {"name": name}
    if res.group:
        details["group"] = res.group
    details["kind"] = res.kind
    details["causes"] = [e.cause() for e in errors]
    message = f'{res.group_kind} "{name}" is invalid: {aggregate(errors)}'
    return ApiError(422, "Invalid", message, details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message, {})


def unsupported_media_type(accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
    )


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})
