"""A minimal JSON REST client for the harness: the tests' own reads and writes as admin.

Not the official client: the harness must not share code paths with the product
it judges, and must see exactly what the server sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

TIMEOUT = 30.0


class Rest:
    def __init__(self, url: str, ca: Path, cert: Path, key: Path) -> None:
        self.url = url
        self.session = requests.Session()
        self.session.trust_env = False  # REQUESTS_CA_BUNDLE would replace our CA, proxies add hops
        self.session.verify = str(ca)
        self.session.cert = (str(cert), str(key))

    def _call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        headers = {"Accept": "application/json"}
        if method == "PATCH":
            headers["Content-Type"] = "application/merge-patch+json"
        response = self.session.request(
            method,
            self.url + path,
            params=params or None,
            data=json.dumps(body) if body is not None else None,
            headers=headers,
            timeout=TIMEOUT,
        )
        response.raise_for_status()
        return response.json()

    def get(self, path: str, **params: Any) -> Any:
        return self._call("GET", path, **params)

    def get_or_none(self, path: str) -> Any:
        try:
            return self.get(path)
        except requests.HTTPError as err:
            if err.response is not None and err.response.status_code == 404:
                return None
            raise

    def create(self, path: str, body: dict[str, Any], **params: Any) -> Any:
        return self._call("POST", path, body, **params)

    def put(self, path: str, body: dict[str, Any]) -> Any:
        return self._call("PUT", path, body)

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        """A JSON merge patch."""
        return self._call("PATCH", path, body)

    def delete(self, path: str, options: dict[str, Any] | None = None, **params: Any) -> Any:
        return self._call("DELETE", path, options, **params)

    def watch(self, path: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Watch events until the server ends the watch (``timeoutSeconds``)."""
        with self.session.get(
            self.url + path,
            params={**params, "watch": "1"},
            stream=True,
            timeout=TIMEOUT,
        ) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if line:
                    yield json.loads(line)
