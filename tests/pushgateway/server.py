"""A real Prometheus Pushgateway on loopback, built by `build.py`."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType

import requests
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.controlplane.launcher import free_port
from tests.pushgateway.build import ensure_built

START_TIMEOUT = 60.0


class Pushgateway:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Pushgateway:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._serve()
        return self

    def _serve(self) -> None:
        """The Pushgateway on its port; until it says it is ready."""
        self._log = open(self.directory / "pushgateway.log", "ab")  # noqa: SIM115 - closed in kill/__exit__
        self.process = subprocess.Popen(
            [
                str(ensure_built() / "pushgateway"),
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-admin-api",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"pushgateway exited {self.process.returncode}: "
                    f"{(self.directory / 'pushgateway.log').read_text()[-2000:]}"
                )
            try:
                if requests.get(f"{self.url}/-/ready", timeout=2).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.05)  # polling a condition (the port answers), with a deadline
        raise RuntimeError(f"the pushgateway did not answer within {START_TIMEOUT:g} s")

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """The Pushgateway down: sent `sig` by its pid, waited for (what it held is
        lost: it runs without a persistence file). `start_again` brings it back."""
        assert self.process is not None
        os.kill(self.process.pid, sig)
        self.process.wait(timeout=30)
        self._log.close()

    def start_again(self) -> None:
        """Started again as it was, on the same port; until it is ready."""
        assert self.process is not None and self.process.poll() is not None
        self._serve()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self._log.close()

    def wipe(self) -> None:
        """Delete every group (the admin API), so each test starts from nothing."""
        answer = requests.put(f"{self.url}/api/v1/admin/wipe", timeout=10)
        assert answer.status_code == 202, answer.text

    def scrape(self, job: str = "mxgitops") -> dict[str, list[Sample]]:
        """The samples of /metrics pushed by `job`, by metric family name, parsed."""
        text = requests.get(f"{self.url}/metrics", timeout=10).text
        found: dict[str, list[Sample]] = {}
        for family in text_string_to_metric_families(text):
            ours = [s for s in family.samples if s.labels.get("job") == job]
            if ours:
                found[family.name] = ours
        return found
