"""Kubeflow's training operator v1.8.1, run out of cluster against the real control plane.

What it needs, set up here as a cluster would have it, on loopback:

- its MXJob CRD (from the operator's own module source, `build.py`);
- the namespace `kubeflow` with the Secret `training-operator-webhook-cert`: its
  cert-controller keeps a CA and a serving certificate there, and keeps ours when
  they are valid (for the DNS name `training-operator.kubeflow.svc`, 90 days ahead
  and more). Ours are valid for `127.0.0.1` too, so kube-apiserver can call the
  webhook on loopback;
- the ValidatingWebhookConfiguration `validator.training-operator.kubeflow.org`,
  its MXJob webhook's URL on loopback; the cert-controller injects the CA bundle;
- the serving certificate in the webhook server's directory: controller-runtime
  reads `$TMPDIR/k8s-webhook-server/serving-certs`, a directory of our own, while
  the cert-controller waits for a `tls.crt` in the fixed `/tmp/...` one (only that
  it exists: it is what a Secret mounted in its pod would put there).

It runs as a user of its own (system:masters), so mxgitops' request log, which the
audit log is filtered to, is not mixed with the operator's requests.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import requests
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.controlplane.harness import RealCluster, wait_for
from tests.controlplane.launcher import die_with_parent, free_port, write_kubeconfig
from tests.kubeflow.build import BINARY, CRD, ensure_built

NAMESPACE = "kubeflow"
SECRET = "training-operator-webhook-cert"
WEBHOOK_CONFIGURATION = "validator.training-operator.kubeflow.org"
SERVICE_DNS = f"training-operator.{NAMESPACE}.svc"
CA_NAME = "training-operator-ca"  # the cert-controller checks its CA is this name's
FIXED_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
MXJOBS = "/apis/kubeflow.org/v1/namespaces/{namespace}/mxjobs"
USER = "kubeflow-training-operator"
START_TIMEOUT = 120.0


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    # PKCS#1: the cert-controller parses its keys so, should it ever re-sign.
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def webhook_certificates() -> dict[str, bytes]:
    """ca.crt, ca.key, tls.crt, tls.key as the cert-controller keeps them, ten years long."""
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=3650)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name(CA_NAME))
        .issuer_name(_name(CA_NAME))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(CA_NAME)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    names = [x509.DNSName(SERVICE_DNS), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    serving = (
        x509.CertificateBuilder()
        .subject_name(_name(SERVICE_DNS))
        .issuer_name(_name(CA_NAME))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM),
        "ca.key": _pem_key(ca_key),
        "tls.crt": serving.public_bytes(serialization.Encoding.PEM),
        "tls.key": _pem_key(key),
    }


class TrainingOperator:
    """The operator's process and what it needs in the cluster; a context manager."""

    def __init__(self, real: RealCluster, directory: Path) -> None:
        self.real = real
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None
        self.log = directory / "training-operator.log"

    def __enter__(self) -> TrainingOperator:
        bindir = ensure_built()
        self.directory.mkdir(parents=True, exist_ok=True)
        certs = webhook_certificates()
        self._install_crd(bindir / CRD)
        self.real.ensure_namespace(NAMESPACE)
        self._put("/api/v1/namespaces/kubeflow/secrets", SECRET, self._secret(certs))
        port = free_port()
        self._put(
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            WEBHOOK_CONFIGURATION,
            self._webhook_configuration(port, certs["ca.crt"]),
        )
        self._start(bindir, port, certs)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    # -- set-up -------------------------------------------------------------------
    def _install_crd(self, path: Path) -> None:
        crd = yaml.safe_load(path.read_text())
        name = crd["metadata"]["name"]
        self._put("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", name, crd)

        def established() -> bool:
            found = self.real.rest.get(
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
            )
            conditions = (found.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        wait_for("for the MXJob CRD to be established", established)

    def _put(self, collection: str, name: str, body: dict[str, Any]) -> None:
        """Create, or replace what an earlier run of the suite left."""
        existing = self.real.rest.get_or_none(f"{collection}/{name}")
        if existing is None:
            self.real.rest.create(collection, body)
        else:
            body = {**body, "metadata": {**body["metadata"], **_version(existing)}}
            self.real.rest.put(f"{collection}/{name}", body)

    @staticmethod
    def _secret(certs: dict[str, bytes]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": NAMESPACE},
            "data": {key: base64.b64encode(value).decode() for key, value in certs.items()},
        }

    @staticmethod
    def _webhook_configuration(port: int, ca: bytes) -> dict[str, Any]:
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": WEBHOOK_CONFIGURATION},
            "webhooks": [
                {
                    "name": "validator.mxjob.training-operator.kubeflow.org",
                    "admissionReviewVersions": ["v1"],
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/validate-kubeflow-org-v1-mxjob",
                        "caBundle": base64.b64encode(ca).decode(),
                    },
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "rules": [
                        {
                            "apiGroups": ["kubeflow.org"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["mxjobs"],
                        }
                    ],
                }
            ],
        }

    def _start(self, bindir: Path, port: int, certs: dict[str, bytes]) -> None:
        tmpdir = self.directory / "tmp"
        serving = tmpdir / "k8s-webhook-server" / "serving-certs"
        serving.mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            (serving / name).write_bytes(certs[name])
        FIXED_CERT_DIR.mkdir(parents=True, exist_ok=True)
        if not (FIXED_CERT_DIR / "tls.crt").exists():  # only its existence is checked
            (FIXED_CERT_DIR / "tls.crt").write_bytes(certs["tls.crt"])
        plane = self.real.plane
        assert plane.pki is not None
        identity = plane.pki.client("training-operator", USER, ("system:masters",))
        kubeconfig = write_kubeconfig(
            self.directory / "kubeconfig", plane.url, plane.pki.ca, identity
        )
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "TMPDIR": str(tmpdir),
            "MY_POD_NAMESPACE": NAMESPACE,
        }
        argv = [
            str(bindir / BINARY),
            "--enable-scheme=mxjob",
            f"--webhook-server-port={port}",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{free_port()}",
            "--leader-elect=false",
        ]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(  # dies with the tests, as the control plane
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=die_with_parent,
            )
        self._wait_serving()

    def _wait_serving(self) -> None:
        """Until the webhook admits an MXJob (a dry run): certificates and controller up."""
        probe = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MXJob",
            "metadata": {"name": "probe", "namespace": NAMESPACE},
            "spec": {
                "jobMode": "MXTrain",
                "mxReplicaSpecs": {
                    "Worker": {
                        "replicas": 1,
                        "template": {"spec": {"containers": [{"name": "mxnet", "image": "x"}]}},
                    }
                },
            },
        }
        deadline = time.monotonic() + START_TIMEOUT

        def admitted() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"the training operator exited: see {self.log}")
            try:
                self.real.rest.create(MXJOBS.format(namespace=NAMESPACE), probe, dryRun="All")
            except requests.HTTPError:
                if time.monotonic() > deadline:
                    raise
                return False
            return True

        wait_for("for the training operator's webhook", admitted, timeout=START_TIMEOUT)


def _version(existing: dict[str, Any]) -> dict[str, Any]:
    return {"resourceVersion": existing["metadata"]["resourceVersion"]}
