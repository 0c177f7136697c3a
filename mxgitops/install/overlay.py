"""What an installation is, from install's flags: the overlay over the packaged base.

`Installation` holds the flags; `kustomization()` is the overlay a person would write
for them (what `--export` users and the test against `kubectl kustomize` read), and
`settings()` the sync's MXGITOPS_* variables it sets. Pure: no file is read here but
the package's own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

KUSTOMIZE = Path(str(resources.files("mxgitops.install") / "kustomize"))
BASE = KUSTOMIZE / "base"
COMPONENTS = KUSTOMIZE / "components"

CRONJOB = "mxgitops"  # the base's CronJob, its ServiceAccount and ClusterRole
CONFIG_MAP = "mxgitops-config"
CLUSTER_RBAC = ("ClusterRole", "ClusterRoleBinding")  # the base's, named CRONJOB
INSTALL_LABEL = "mxgitops.io/install"  # on every object install made: its namespace
FIELD_MANAGER = "mxgitops-install"
# The Secrets the CronJob and the receiver read (base/cronjob.yaml, the receiver's
# deployment.yaml), each key from a file named by a flag.
GIT_SECRET = "mxgitops-git"
STATUS_SECRET = "mxgitops-status"
WEBHOOK_SECRET = "mxgitops-webhook"
SSH_KEY_PATH = "/etc/mxgitops/git/ssh-privatekey"
KNOWN_HOSTS_PATH = "/etc/mxgitops/git/known_hosts"
_IMAGE = re.compile(r"^(?P<name>[^@]+?)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>\S+))?$")


@dataclass(frozen=True)
class SecretFile:
    """One key of a Secret, read from a file when the Secret is made (never printed)."""

    secret: str
    key: str
    file: Path


@dataclass(frozen=True)
class Installation:
    repo: str
    image: str
    namespace: str = "mxgitops"
    branch: str = "main"
    path: str | None = None
    jobs_namespace: str | None = None
    schedule: str | None = None
    receiver: bool = False
    queues: bool = False
    dashboard: bool = False
    status_provider: str | None = None
    pushgateway: str | None = None
    token_file: Path | None = None
    ssh_key: Path | None = None
    known_hosts: Path | None = None
    status_token_file: Path | None = None
    webhook_secret_file: Path | None = None

    def settings(self) -> dict[str, str]:
        """The MXGITOPS_* variables of the sync's ConfigMap that the flags set."""
        found = {"MXGITOPS_REPO": self.repo, "MXGITOPS_REF": self.branch}
        optional = {
            "MXGITOPS_PATH": self.path,
            "MXGITOPS_NAMESPACE": self.jobs_namespace,
            "MXGITOPS_STATUS_PROVIDER": self.status_provider,
            "MXGITOPS_PUSHGATEWAY": self.pushgateway,
        }
        found.update({key: value for key, value in optional.items() if value})
        if self.ssh_key is not None:
            found["MXGITOPS_SSH_KEY"] = SSH_KEY_PATH
        if self.known_hosts is not None:
            found["MXGITOPS_KNOWN_HOSTS"] = KNOWN_HOSTS_PATH
        return found

    def components(self) -> list[str]:
        chosen = {"receiver": self.receiver, "jobset": self.queues, "dashboard": self.dashboard}
        return [name for name, on in chosen.items() if on]

    def secret_files(self) -> list[SecretFile]:
        """Each Secret key the flags give, in the order the Secrets are named."""
        files = [
            (GIT_SECRET, "token", self.token_file),
            (GIT_SECRET, "ssh-privatekey", self.ssh_key),
            (GIT_SECRET, "known_hosts", self.known_hosts),
            (STATUS_SECRET, "token", self.status_token_file),
            (WEBHOOK_SECRET, "secret", self.webhook_secret_file if self.receiver else None),
        ]
        return [SecretFile(name, key, file) for name, key, file in files if file is not None]

    def expected_secrets(self) -> dict[str, list[str]]:
        """The Secrets these manifests read, each with the keys it needs: those the
        flags name, and the webhook's, which the receiver cannot start without."""
        expected: dict[str, list[str]] = {}
        for secret_file in self.secret_files():
            expected.setdefault(secret_file.secret, []).append(secret_file.key)
        if self.receiver:
            expected.setdefault(WEBHOOK_SECRET, ["secret"])
        return expected

    def kustomization(self, base: str, components: str) -> dict[str, Any]:
        """The overlay `kubectl kustomize` renders as install does, with the base and
        the components at the paths given (relative to the overlay's directory)."""
        name, tag, digest = image_parts(self.image)
        image: dict[str, str] = {"name": "mxgitops", "newName": name}
        if digest:
            image["digest"] = digest
        elif tag:
            image["newTag"] = tag
        overlay: dict[str, Any] = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": ["namespace.yaml", base],
        }
        if self.components():
            overlay["components"] = [f"{components}/{c}" for c in self.components()]
        overlay["labels"] = [{"pairs": {INSTALL_LABEL: self.namespace}, "includeSelectors": False}]
        overlay["configMapGenerator"] = [
            {
                "name": CONFIG_MAP,
                "behavior": "merge",
                "literals": [f"{k}={v}" for k, v in self.settings().items()],
            }
        ]
        overlay["images"] = [image]
        overlay["patches"] = [
            *([{"patch": schedule_patch(self.schedule)}] if self.schedule else []),
            *(rename_patch(kind, CRONJOB, self.cluster_role()) for kind in CLUSTER_RBAC),
        ]
        overlay["transformers"] = [namespace_transformer(self.namespace)]
        return overlay

    def cluster_role(self) -> str:
        """The name of the ClusterRole and ClusterRoleBinding, the installation's only
        cluster-scoped objects but its namespace: one pair per install namespace, so that
        an install in another namespace makes its own instead of taking these over."""
        return f"{CRONJOB}-{self.namespace}"

    def namespace_object(self) -> dict[str, Any]:
        """Install's namespace, where Pod Security `restricted` is enforced (the sync's
        and the receiver's pods pass it)."""
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": self.namespace,
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                },
            },
        }


def image_parts(reference: str) -> tuple[str, str | None, str | None]:
    """name, tag and digest of an image reference (`registry:5000/a/b:tag@sha256:...`)."""
    found = _IMAGE.match(reference)
    if found is None or "/" in (found.group("tag") or ""):
        return reference, None, None
    return found.group("name"), found.group("tag"), found.group("digest")


def schedule_patch(schedule: str) -> str:
    return (
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: mxgitops\n"
        f"spec:\n  schedule: {_quoted(schedule)}\n"
    )


def rename_patch(kind: str, name: str, new_name: str) -> dict[str, Any]:
    """A JSON patch renaming one object (kustomize renames the references to it too)."""
    operation = [{"op": "replace", "path": "/metadata/name", "value": new_name}]
    return {"target": {"kind": kind, "name": name}, "patch": json.dumps(operation)}


def namespace_transformer(namespace: str) -> str:
    """kustomize's NamespaceTransformer that moves the role bindings' ServiceAccounts
    too (`namespace:` alone leaves them behind), as the example overlay's."""
    return (
        "apiVersion: builtin\nkind: NamespaceTransformer\nmetadata:\n  name: namespace\n"
        f"  namespace: {namespace}\nsetRoleBindingSubjects: allServiceAccounts\n"
        "unsetOnly: false\n"
    )


def _quoted(text: str) -> str:
    return json.dumps(text)
