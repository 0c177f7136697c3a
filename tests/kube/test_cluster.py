"""cluster: requests, idempotent writes and the mapping of API errors, over HTTP against
the API double (401/403 from a stub server: the double does no authentication)."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from kubernetes.config import incluster_config

from mxgitops.errors import (
    ClusterClientError,
    ClusterError,
    ClusterForbidden,
    ClusterServerError,
    ClusterUnreachable,
    ConfigError,
)
from mxgitops.kube import calls as kubecalls
from mxgitops.kube import cluster, kubeconfig, listing
from mxgitops.objects import Create, Delete, Kind, ObjectRef, ownership_labels, ownership_selector
from tests.controlplane.harness import wait_for
from tests.kubeapi.harness import KubeAPI, StubHandler, stub_api, write_kubeconfig

NS = "ml"


def connect(api_kubeconfig: Path, sleeps: list[float] | None = None) -> cluster.Cluster:
    return cluster.connect(
        kubeconfig=api_kubeconfig,
        retry=kubecalls.RetryPolicy(attempts=3, base_delay=0.1, max_delay=1),
        sleep=(sleeps if sleeps is not None else []).append,
    )


def config_map(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "labels": labels or ownership_labels("t1")},
        "data": {"k": "v"},
    }


@pytest.fixture
def kube(kubeapi: KubeAPI) -> cluster.Cluster:
    return connect(kubeapi.kubeconfig)


def test_get_of_a_missing_object_is_none(kube: cluster.Cluster) -> None:
    assert kube.get(ObjectRef(Kind.CONFIG_MAP, NS, "nope")) is None


def test_create_of_an_existing_object_of_ours_succeeds(
    kubeapi: KubeAPI, kube: cluster.Cluster
) -> None:
    obj = config_map("a")
    first, second = kube.write([Create(obj)]) + kube.write([Create(obj)])
    assert first.ok and second.ok
    assert [e["status"] for e in kubeapi.request_log] == [201, 409, 200]  # POST, POST, GET


def test_create_never_takes_over_a_foreign_object(kubeapi: KubeAPI, kube: cluster.Cluster) -> None:
    kubeapi.create(config_map("a", {"app": "theirs"}), NS)
    (result,) = kube.write([Create(config_map("a"))])
    assert isinstance(result.error, ClusterClientError) and result.error.status == 409
    assert "not managed by this mxgitops instance" in str(result.error)
    other = config_map("b", ownership_labels("other"))
    kubeapi.create(other, NS)
    (result,) = kube.write([Create(config_map("b"))])
    assert not result.ok
    stored = kubeapi.get("ConfigMap", "a", NS)
    assert stored is not None and stored["metadata"]["labels"] == {"app": "theirs"}


def test_delete_of_a_missing_object_succeeds(kube: cluster.Cluster) -> None:
    (result,) = kube.write([Delete(ObjectRef(Kind.JOB, NS, "gone"))])
    assert result.ok


def test_create_strict_conflicts_and_replace_needs_the_current_version(
    kube: cluster.Cluster,
) -> None:
    created = kube.create_strict(config_map("a"))
    with pytest.raises(ClusterClientError) as caught:
        kube.create_strict(config_map("a"))
    assert (caught.value.status, caught.value.reason) == (409, "AlreadyExists")
    kube.replace({**created, "data": {"k": "w"}})
    with pytest.raises(ClusterClientError) as caught:
        kube.replace({**created, "data": {"k": "x"}})  # stale resourceVersion
    assert (caught.value.status, caught.value.reason) == (409, "Conflict")


def test_422_is_a_client_error_with_the_servers_message(kube: cluster.Cluster) -> None:
    bad = config_map("Not_A_Name")
    with pytest.raises(ClusterClientError) as caught:
        kube.create_strict(bad)
    assert (caught.value.status, caught.value.reason) == (422, "Invalid")
    assert 'ConfigMap "Not_A_Name" is invalid' in str(caught.value)
    (result,) = kube.write([Create(bad)])
    assert isinstance(result.error, ClusterClientError) and result.error.status == 422


def test_list_is_one_request_per_kind_with_the_ownership_selector(
    kubeapi: KubeAPI, kube: cluster.Cluster
) -> None:
    kubeapi.create(config_map("a"), NS)
    kubeapi.create(config_map("b", {"app": "theirs"}), NS)
    kubeapi.create(
        {**config_map("c"), "metadata": {"name": "c", "labels": ownership_labels("t1")}},
        "elsewhere",
    )
    kubeapi.clear_log()
    items = kube.list_all(Kind.CONFIG_MAP, ownership_selector("t1"))
    assert sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in items) == [
        ("elsewhere", "c"),
        (NS, "a"),
    ]
    assert all((o["kind"], o["apiVersion"]) == ("ConfigMap", "v1") for o in items)
    (entry,) = kubeapi.request_log
    assert (entry["path"], entry["query"]) == (
        "/api/v1/configmaps",
        {"labelSelector": ownership_selector("t1"), "limit": str(listing.LIST_PAGE_SIZE)},
    )


def test_server_errors_are_retried_then_reported(kubeapi: KubeAPI) -> None:
    sleeps: list[float] = []
    kubeapi.faults("")  # the real backend's fault proxy is in the path from the first request
    kube = connect(kubeapi.kubeconfig, sleeps)
    kubeapi.faults("get:503=1")
    with pytest.raises(ClusterServerError) as caught:
        kube.get(ObjectRef(Kind.CONFIG_MAP, NS, "a"))
    assert caught.value.status == 503
    assert sleeps == [0.1, 0.2] and len(kubeapi.request_log) == 3
    kubeapi.faults("get:drop=1")
    with pytest.raises(ClusterUnreachable, match="cannot reach the Kubernetes API"):
        kube.get(ObjectRef(Kind.CONFIG_MAP, NS, "a"))
    kubeapi.faults("create:429=1", retry_after=7)
    sleeps.clear()
    (result,) = kube.write([Create(config_map("a"))])
    assert isinstance(result.error, ClusterServerError) and result.error.status == 429
    assert sleeps == [1, 1]  # Retry-After 7, capped at max_delay


def test_writes_keep_their_order_under_parallelism(kubeapi: KubeAPI) -> None:
    kube = cluster.connect(kubeconfig=kubeapi.kubeconfig, parallelism=8)
    writes = [Create(config_map(f"cm-{i}")) for i in range(20)]
    results = kube.write(writes)
    assert [r.write for r in results] == writes and all(r.ok for r in results)
    assert len(kubeapi.objects("configmaps", NS)) == 20


def test_a_missing_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(kubeconfig.NoClusterConfigured):
        cluster.connect(kubeconfig=tmp_path / "none")


def test_a_kubeconfig_that_is_not_yaml_is_a_config_error(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("clusters: [unclosed")
    with pytest.raises(ConfigError, match="cannot load the cluster configuration"):
        cluster.connect(kubeconfig=broken)


def two_contexts(path: Path, good: str) -> Path:
    """A kubeconfig whose current context points nowhere and whose `good` one works."""
    clusters = {"good": good, "bad": "http://127.0.0.1:9"}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "bad",
                "clusters": [{"name": n, "cluster": {"server": u}} for n, u in clusters.items()],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n in clusters],
            }
        )
    )
    return path


def test_the_context_is_selectable(kubeapi: KubeAPI, tmp_path: Path) -> None:
    kubeconfig = two_contexts(tmp_path / "kubeconfig", kubeapi.url)
    assert cluster.connect(kubeconfig=kubeconfig, context="good").server == kubeapi.url
    assert cluster.connect(kubeconfig=kubeconfig).server == "http://127.0.0.1:9"
    with pytest.raises(ConfigError, match="nowhere"):
        cluster.connect(kubeconfig=kubeconfig, context="nowhere")


def test_kubeconfig_env_then_in_cluster_service_account(
    kubeapi: KubeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    monkeypatch.setenv("KUBECONFIG", str(kubeapi.kubeconfig))
    assert cluster.connect().server == kubeapi.url

    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("pod-token")
    ca.write_text("not read until a TLS connection is made")
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setattr(kubeconfig, "IN_CLUSTER_TOKEN", token)
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    in_pod = cluster.connect()
    assert in_pod.server == "https://10.0.0.1:443"
    assert in_pod.api_client.configuration.api_key["BearerToken"].lower() == "bearer pod-token"
    with pytest.raises(ConfigError, match="--context prod needs a kubeconfig"):
        cluster.connect(context="prod")

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(kubeconfig.NoClusterConfigured, match="no cluster configured"):
        cluster.connect()


class _Refusing(StubHandler):
    def do_GET(self) -> None:
        code = 401 if "secret" in self.path else 403
        reason = "Unauthorized" if code == 401 else "Forbidden"
        message = f'configmaps is {reason.lower()}: User "x" cannot get'
        self.answer(
            code,
            {
                "kind": "Status",
                "status": "Failure",
                "reason": reason,
                "code": code,
                "message": message,
            },
        )


@pytest.fixture
def refusing(tmp_path: Path) -> Iterator[Path]:
    with stub_api(_Refusing, tmp_path / "kubeconfig") as kubeconfig:
        yield kubeconfig


@pytest.mark.parametrize("name", ["secret", "plain"])
def test_401_and_403_are_forbidden_and_not_retried(refusing: Path, name: str) -> None:
    sleeps: list[float] = []
    kube = connect(refusing, sleeps)
    with pytest.raises(ClusterForbidden, match="the Kubernetes API refused GET") as caught:
        kube.get(ObjectRef(Kind.CONFIG_MAP, NS, name))
    assert "cannot get" in str(caught.value)
    assert sleeps == []


def test_an_unreachable_server_is_reported(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    sleeps: list[float] = []
    with pytest.raises(ClusterUnreachable, match=r"127\.0\.0\.1:9"):
        connect(kubeconfig, sleeps).list_live(ownership_selector("t1"))
    # The batch Jobs' LIST retried twice; the Services' and pods', made at once, as often
    # as they got to by then.
    assert 2 <= len(sleeps) <= 6


# -- credentials asked of the configuration at each request ---------------------------


class _Recording(StubHandler):
    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization"))
        self.answer(200, {"kind": "ConfigMap", "metadata": {"name": "a"}})


def test_each_request_carries_the_token_the_refresh_hook_gives(tmp_path: Path) -> None:
    """The configuration's refresh hook (an exec plugin's, the pod's token file's) runs
    at each request, and the request carries what it set."""
    _Recording.seen = []
    with stub_api(_Recording, tmp_path / "kubeconfig") as kubeconfig:
        kube = connect(kubeconfig)
        configuration = kube.api_client.configuration
        tokens = iter(["first", "second", "third"])

        def refresh(config: Any) -> None:
            config.api_key["BearerToken"] = f"Bearer {next(tokens)}"

        configuration.refresh_api_key_hook = refresh
        for _ in range(3):
            assert kube.get(ObjectRef(Kind.CONFIG_MAP, NS, "a")) is not None
    assert _Recording.seen == ["Bearer first", "Bearer second", "Bearer third"]


_EXEC_PLUGIN = """
import datetime, json, pathlib, sys
runs, tokens = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]).read_text().split()
count = len(runs.read_text().splitlines()) if runs.exists() else 0
runs.write_text("run\\n" * (count + 1))
# Expiring within the client's five minutes of skew: it runs the plugin again at each request.
expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=1)
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "kind": "ExecCredential",
    "status": {"token": tokens[count % len(tokens)],
               "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")},
}))
"""
ACCOUNT = "token-refresh"


def exec_kubeconfig(kubeapi: KubeAPI, tmp_path: Path, tokens: list[str]) -> tuple[Path, Path]:
    """The backend's kubeconfig with its user replaced by an exec plugin handing out
    `tokens` in turn, each about to expire; and the file counting the plugin's runs."""
    plugin, runs, listed = tmp_path / "plugin.py", tmp_path / "runs", tmp_path / "tokens"
    plugin.write_text(_EXEC_PLUGIN)
    listed.write_text("\n".join(tokens))
    config = yaml.safe_load(kubeapi.kubeconfig.read_text())
    command = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": sys.executable,
        "args": [str(plugin), str(runs), str(listed)],
    }
    config["users"] = [{"name": u["name"], "user": {"exec": command}} for u in config["users"]]
    path = tmp_path / "exec.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path, runs


def service_account_tokens(real: Any, count: int) -> list[str]:
    """Tokens of a ServiceAccount of NS that may edit its objects (the real backend)."""
    real.ensure_namespace(NS)
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT}}
    status, _, body = real.raw("POST", f"/api/v1/namespaces/{NS}/serviceaccounts", account)
    assert status in (201, 409), body
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": ACCOUNT},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": ACCOUNT},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NS}],
    }
    for plural, body in (("roles", role), ("rolebindings", binding)):
        status, _, answer = real.raw("POST", f"{rbac}/{plural}", body)
        assert status in (201, 409), answer
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{NS}:{ACCOUNT}",
            "resourceAttributes": {"namespace": NS, "verb": "create", "resource": "configmaps"},
        },
    }
    reviews = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    wait_for(  # the authorizer's informer sees the binding a moment later
        "the RoleBinding to take effect",
        lambda: real.raw("POST", reviews, review)[2]["status"].get("allowed") or None,
    )
    tokens = []
    for _ in range(count):
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
        path = f"/api/v1/namespaces/{NS}/serviceaccounts/{ACCOUNT}/token"
        status, _, body = real.raw("POST", path, request)
        assert status == 201, body
        tokens.append(body["status"]["token"])
    return tokens


def test_an_exec_plugins_renewed_tokens_authenticate_the_writes(
    kubeapi: KubeAPI, tmp_path: Path
) -> None:
    """A kubeconfig's exec plugin whose token is about to expire is run again at each
    request, and each renewed token authenticates the write it is sent with (on the
    real server, as the ServiceAccount the tokens are of)."""
    real = kubeapi.backend == "real"
    tokens = service_account_tokens(kubeapi, 2) if real else ["one", "two"]
    try:
        kubeconfig, runs = exec_kubeconfig(kubeapi, tmp_path, tokens)
        kube = cluster.connect(kubeconfig=kubeconfig, parallelism=2)
        kubeapi.clear_log()
        results = kube.write([Create(config_map(f"cm-{n}")) for n in range(4)])
        assert all(r.ok for r in results), [r.error for r in results]
        assert kube.get(ObjectRef(Kind.CONFIG_MAP, NS, "cm-3")) is not None
        assert len(runs.read_text().splitlines()) >= 1 + 5  # loading, then each request
        posts = [e for e in kubeapi.request_log if e["method"] == "POST"]
        assert [e["status"] for e in posts] == [201] * 4
        if real:
            account = f"system:serviceaccount:{NS}:{ACCOUNT}"
            assert {e["user"] for e in kubeapi.request_log} == {account}
    finally:
        if real:
            rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}"
            for path in (
                f"{rbac}/rolebindings",
                f"{rbac}/roles",
                f"/api/v1/namespaces/{NS}/serviceaccounts",
            ):
                kubeapi.raw("DELETE", f"{path}/{ACCOUNT}")


# -- where requests go ------------------------------------------------------------------


class _ClosesAfterAnswering(StubHandler):
    """Keeps HTTP/1.1 connections open, as kube-apiserver does, then closes each after
    its answer without saying so: what a server's idle timeout does to a connection."""

    protocol_version = "HTTP/1.1"
    ports: ClassVar[list[int]] = []
    closed = threading.Event()

    def do_GET(self) -> None:
        type(self).ports.append(self.client_address[1])
        self.answer(200, {"kind": "ConfigMap", "metadata": {"name": "a"}})
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True
        type(self).closed.set()


class _RefusesFirst(StubHandler):
    protocol_version = "HTTP/1.1"
    ports: ClassVar[list[int]] = []

    def do_GET(self) -> None:
        type(self).ports.append(self.client_address[1])
        if len(self.ports) == 1:
            self.answer(409, {"kind": "Status", "reason": "Conflict", "message": "busy"})
        else:
            self.answer(200, {"kind": "ConfigMap", "metadata": {"name": "a"}})


def test_a_refusal_read_to_its_end_leaves_the_connection_for_the_next_request(
    tmp_path: Path,
) -> None:
    """A 409 (an object created before, on a second sync) costs no new connection, and
    with TLS no new handshake: its body is read whole, the connection is clean."""
    _RefusesFirst.ports = []
    with stub_api(_RefusesFirst, tmp_path / "kubeconfig") as kubeconfig:
        kube = connect(kubeconfig)
        with pytest.raises(ClusterClientError, match="busy"):
            kube.get(ObjectRef(Kind.CONFIG_MAP, NS, "a"))
        assert kube.get(ObjectRef(Kind.CONFIG_MAP, NS, "a")) is not None
    first, second = _RefusesFirst.ports
    assert first == second


def test_a_connection_the_server_closed_is_not_used_again(tmp_path: Path) -> None:
    """A kept connection the server closed while it was idle is replaced before the next
    request, not found closed by it (a failed request, retried after a delay)."""
    _ClosesAfterAnswering.ports = []
    sleeps: list[float] = []
    with stub_api(_ClosesAfterAnswering, tmp_path / "kubeconfig") as kubeconfig:
        kube = connect(kubeconfig, sleeps)
        for _ in range(3):
            _ClosesAfterAnswering.closed.clear()
            assert kube.get(ObjectRef(Kind.CONFIG_MAP, NS, "a")) is not None
            assert _ClosesAfterAnswering.closed.wait(10)
    assert sleeps == []  # no request failed
    assert len(set(_ClosesAfterAnswering.ports)) == 3  # each on a connection of its own


class _AnswersInPieces(StubHandler):
    """Answers a LIST chunked (Transfer-Encoding), a few bytes at a time, as a large
    list leaves kube-apiserver; keeps the connection."""

    protocol_version = "HTTP/1.1"
    ports: ClassVar[list[int]] = []

    def do_GET(self) -> None:
        type(self).ports.append(self.client_address[1])
        items = [{"kind": "ConfigMap", "metadata": {"name": f"cm-{i}"}} for i in range(50)]
        body = json.dumps({"kind": "ConfigMapList", "metadata": {}, "items": items}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for at in range(0, len(body), 7):
            piece = body[at : at + 7]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


def test_an_answer_in_chunks_reads_as_one_and_keeps_its_connection(tmp_path: Path) -> None:
    _AnswersInPieces.ports = []
    with stub_api(_AnswersInPieces, tmp_path / "kubeconfig") as kubeconfig:
        kube = connect(kubeconfig)
        for _ in range(2):
            listed = kube.list_all(Kind.CONFIG_MAP, "a=b", NS)
            assert [item["metadata"]["name"] for item in listed] == [f"cm-{i}" for i in range(50)]
    assert len(_AnswersInPieces.ports) == 2
    assert len(set(_AnswersInPieces.ports)) == 1


class _CutsShort(StubHandler):
    """Says 100 bytes of body, sends 10 and closes: once. Then answers whole."""

    protocol_version = "HTTP/1.1"
    calls: ClassVar[list[int]] = []

    def do_GET(self) -> None:
        type(self).calls.append(1)
        if len(self.calls) == 1:
            self.wfile.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"kind": "')
            self.close_connection = True
            return
        self.answer(200, {"kind": "ConfigMap", "metadata": {"name": "a"}})


def test_an_answer_cut_short_is_no_answer_and_is_asked_again(tmp_path: Path) -> None:
    _CutsShort.calls = []
    sleeps: list[float] = []
    with stub_api(_CutsShort, tmp_path / "kubeconfig") as kubeconfig:
        answer = connect(kubeconfig, sleeps).get(ObjectRef(Kind.CONFIG_MAP, NS, "a"))
    assert answer == {"kind": "ConfigMap", "metadata": {"name": "a"}}
    assert len(_CutsShort.calls) == 2 and len(sleeps) == 1


class _SaysMore(StubHandler):
    """Follows its answer with a second, forged one nobody asked for: in the same
    write, or in one of its own."""

    protocol_version = "HTTP/1.1"
    ports: ClassVar[list[int]] = []
    apart = False
    said = threading.Event()

    def do_GET(self) -> None:
        type(self).ports.append(self.client_address[1])
        answer = json.dumps({"kind": "ConfigMap", "metadata": {"name": "a"}}).encode()
        forged = json.dumps({"kind": "ConfigMap", "metadata": {"name": "forged"}}).encode()
        head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.apart:
            self.wfile.write(head % len(answer) + answer)
            self.wfile.write(head % len(forged) + forged)
        else:
            self.wfile.write(head % len(answer) + answer + head % len(forged) + forged)
        type(self).said.set()


@pytest.mark.parametrize("apart", [False, True], ids=["same-write", "own-write"])
def test_bytes_after_an_answer_are_not_taken_for_the_next_answer(
    tmp_path: Path, apart: bool
) -> None:
    """The connection they came on is not used again: the next request is answered on a
    connection of its own, and reads its own answer."""
    _SaysMore.ports, _SaysMore.apart = [], apart
    with stub_api(_SaysMore, tmp_path / "kubeconfig") as kubeconfig:
        kube = connect(kubeconfig)
        for _ in range(2):
            _SaysMore.said.clear()
            answer = kube.get(ObjectRef(Kind.CONFIG_MAP, NS, "a"))
            assert answer is not None and answer["metadata"]["name"] == "a"
            assert _SaysMore.said.wait(10)  # the forged answer sent before the next request
    assert len(set(_SaysMore.ports)) == 2


class _EndlessHead(StubHandler):
    """Headers that never end."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        try:
            for n in range(20_000):  # 2.3 MB
                self.wfile.write(b"X-Filler-%d: %s\r\n" % (n, b"x" * 100))
        except OSError:
            pass  # the client stopped reading
        self.close_connection = True


def test_an_answer_whose_headers_never_end_is_given_up(tmp_path: Path) -> None:
    with (
        stub_api(_EndlessHead, tmp_path / "kubeconfig") as kubeconfig,
        pytest.raises(ClusterUnreachable, match="headers run over 1048576 bytes"),
    ):
        connect(kubeconfig).get(ObjectRef(Kind.CONFIG_MAP, NS, "a"))


class _Paths(StubHandler):
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        self.answer(200, {"kind": "ConfigMap", "metadata": {"name": "a"}})


def rewritten(kubeconfig: Path, server: str, proxy: str | None = None) -> Path:
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = server
    if proxy is not None:
        config["clusters"][0]["cluster"]["proxy-url"] = proxy
    kubeconfig.write_text(yaml.safe_dump(config))
    return kubeconfig


def stub_url(kubeconfig: Path) -> str:
    url: str = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return url


def test_a_token_with_a_line_break_is_not_sent(tmp_path: Path) -> None:
    """A header smuggled into the token (a kubeconfig's, an exec plugin's) never
    reaches the server: the request is refused, not sent."""
    _Paths.seen = []
    with stub_api(_Paths, tmp_path / "kubeconfig") as kubeconfig:
        config = yaml.safe_load(kubeconfig.read_text())
        config["users"][0]["user"] = {"token": "t0ken\r\nX-Smuggled: 1"}
        kubeconfig.write_text(yaml.safe_dump(config))
        with pytest.raises(ClusterError, match="not sent: a line break"):
            connect(kubeconfig).get(ObjectRef(Kind.CONFIG_MAP, NS, "a"))
    assert _Paths.seen == []


def test_a_server_under_a_path_keeps_its_path(tmp_path: Path) -> None:
    """A server URL with a path (a Rancher or a gateway's) prefixes every request."""
    _Paths.seen = []
    with stub_api(_Paths, tmp_path / "kubeconfig") as kubeconfig:
        rewritten(kubeconfig, stub_url(kubeconfig) + "/k8s/clusters/c-1/")
        assert connect(kubeconfig).get(ObjectRef(Kind.CONFIG_MAP, NS, "a")) is not None
    assert _Paths.seen == [f"/k8s/clusters/c-1/api/v1/namespaces/{NS}/configmaps/a"]


def test_the_kubeconfigs_proxy_url_carries_the_requests(tmp_path: Path) -> None:
    """An HTTP proxy (the stub, here) is asked for the server's whole URL."""
    _Paths.seen = []
    with stub_api(_Paths, tmp_path / "kubeconfig") as kubeconfig:
        rewritten(kubeconfig, "http://kube.invalid:6443", proxy=stub_url(kubeconfig))
        kube = connect(kubeconfig)
        assert kube.get(ObjectRef(Kind.CONFIG_MAP, NS, "a")) is not None
    assert _Paths.seen == [f"http://kube.invalid:6443/api/v1/namespaces/{NS}/configmaps/a"]
