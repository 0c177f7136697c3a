"""How each forge reads and writes one commit status, as its API documents.

- GitHub (REST "commit statuses"): the combined status of a ref lists the newest
  status of each context; `POST /repos/{owner}/{repo}/statuses/{sha}` adds one.
  States pending, success, failure, error. A token needs "Commit statuses: write".
- Gitea and Forgejo (`/api/v1`, GitHub's shape): the same two calls; a status's
  state is in its `status` field.
- GitLab (`/projects/:id/statuses/:sha`): states pending, running, success,
  failed, canceled; a status that is pending or running is moved along a state
  machine, and asking it to move to where it already is answers 400 "Cannot
  transition status via :run from :running": the status stands, nothing to do.
  A status that finished is followed by a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol
from urllib.parse import quote

from mxgitops.outputs.forge.api import Api, Refused
from mxgitops.outputs.forge.wanted import StatusState, Wanted

PUBLIC_API = {
    "github": "https://api.github.com",
    "gitlab": "https://gitlab.com/api/v4",
    "gitea": "https://gitea.com/api/v1",
}


@dataclass(frozen=True)
class Posted:
    """A status as the forge shows it, in its own state names."""

    state: str
    description: str
    target_url: str


class Provider(Protocol):
    def headers(self, token: str) -> dict[str, str]: ...

    def state_name(self, wanted: Wanted) -> str: ...

    def read(self, api: Api, repository: str, commit: str, context: str) -> Posted | None: ...

    def post(
        self, api: Api, repository: str, commit: str, context: str, body: dict[str, str]
    ) -> None: ...


class GitHub:
    def headers(self, token: str) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }

    def state_name(self, wanted: Wanted) -> str:
        return str(wanted.state)

    def read(self, api: Api, repository: str, commit: str, context: str) -> Posted | None:
        path = f"/repos/{_parts(repository)}/commits/{_part(commit)}/status?per_page=100"
        combined = api.call("GET", path)
        return _newest(_list(combined, "statuses"), context, "context", "state")

    def post(
        self, api: Api, repository: str, commit: str, context: str, body: dict[str, str]
    ) -> None:
        path = f"/repos/{_parts(repository)}/statuses/{_part(commit)}"
        api.call("POST", path, {**body, "context": context})


class Gitea(GitHub):
    def headers(self, token: str) -> dict[str, str]:
        return {"Authorization": f"token {token}"}

    def read(self, api: Api, repository: str, commit: str, context: str) -> Posted | None:
        path = f"/repos/{_parts(repository)}/commits/{_part(commit)}/status?limit=100"
        combined = api.call("GET", path)
        return _newest(_list(combined, "statuses"), context, "context", "status")


class GitLab:
    _STATES: ClassVar[dict[StatusState, str]] = {
        StatusState.SUCCESS: "success",
        StatusState.FAILURE: "failed",
    }

    def headers(self, token: str) -> dict[str, str]:
        return {"PRIVATE-TOKEN": token}

    def state_name(self, wanted: Wanted) -> str:
        if wanted.state is StatusState.PENDING:
            return "running" if wanted.running else "pending"
        return self._STATES[wanted.state]

    def read(self, api: Api, repository: str, commit: str, context: str) -> Posted | None:
        found = api.call(
            "GET",
            f"/projects/{_part(repository)}/repository/commits/{_part(commit)}/statuses"
            f"?name={quote(context, safe='')}&per_page=100",
        )
        return _newest(found if isinstance(found, list) else [], context, "name", "status")

    def post(
        self, api: Api, repository: str, commit: str, context: str, body: dict[str, str]
    ) -> None:
        path = f"/projects/{_part(repository)}/statuses/{_part(commit)}"
        try:
            api.call("POST", path, {**body, "name": context})
        except Refused as exc:
            if exc.status == 400 and "Cannot transition status" in exc.body:
                return  # already there: GitLab keeps a running status as it is
            raise


PROVIDERS: dict[str, Provider] = {"github": GitHub(), "gitlab": GitLab(), "gitea": Gitea()}


def _part(text: str) -> str:
    """One segment of an API path: a `/` or `?` in it stays in it."""
    return quote(text, safe="")


def _parts(repository: str) -> str:
    """owner/name, each segment escaped."""
    return "/".join(_part(segment) for segment in repository.split("/"))


def _list(data: Any, key: str) -> list[Any]:
    found = data.get(key) if isinstance(data, dict) else None
    return found if isinstance(found, list) else []


def _newest(statuses: list[Any], context: str, name_key: str, state_key: str) -> Posted | None:
    """The first status of `context` in a list the forge gives newest first."""
    for status in statuses:
        if isinstance(status, dict) and status.get(name_key) == context:
            return Posted(
                str(status.get(state_key) or status.get("state") or ""),
                str(status.get("description") or ""),
                str(status.get("target_url") or ""),
            )
    return None
