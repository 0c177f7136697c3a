"""Benchmark the API double: create N Jobs over HTTP, then LIST them.

    python -m bench.bench_kubeapi [N]

Prints per-create latency (server round trip with a keep-alive connection)
and the time of one LIST of all Jobs (request + JSON decode).
"""

from __future__ import annotations

import http.client
import json
import sys
import tempfile
import time
from pathlib import Path

from tests.kubeapi.clients import job_manifest
from tests.kubeapi.harness import KubeAPI


def main(count: int = 8000) -> None:
    with tempfile.TemporaryDirectory() as tmp, KubeAPI(Path(tmp) / "kubeconfig") as api:
        host, port = api.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port))
        path = "/apis/batch/v1/namespaces/default/jobs"
        start = time.perf_counter()
        for i in range(count):
            body = json.dumps(job_manifest(f"job-{i}", {"app": "mx", "i": str(i)}))
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            assert response.status == 201, response.status
        created = time.perf_counter() - start
        start = time.perf_counter()
        conn.request("GET", path)
        items = json.loads(conn.getresponse().read())["items"]
        listed = time.perf_counter() - start
        start = time.perf_counter()
        conn.request("GET", path + "?labelSelector=i%3D7")
        selected = json.loads(conn.getresponse().read())["items"]
        filtered = time.perf_counter() - start
        assert len(items) == count and len(selected) == 1
        print(f"create: {created / count * 1000:.2f} ms each ({count} jobs, {created:.1f} s)")
        print(f"list:   {listed * 1000:.0f} ms for {count} jobs")
        print(f"list with labelSelector: {filtered * 1000:.0f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8000)
