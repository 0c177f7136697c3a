"""The one exception hierarchy of mxgitops.

Every failure the user can act on is an MxGitOpsError. Modules raise the most
specific subclass and chain the library exception as the cause, so the HTTP or
git library underneath can change without touching callers. The CLI maps each
class to an exit code in exactly one place (`cli.py`).
"""

from __future__ import annotations


class MxGitOpsError(Exception):
    """Base of every error mxgitops reports to a user."""


class ConfigError(MxGitOpsError):
    """A flag, environment variable or .mxgitops.yaml value is wrong or missing."""


class ManifestError(MxGitOpsError):
    """One or more manifests are invalid; nothing derived from them is applied."""


class GitError(MxGitOpsError):
    """Cloning, fetching, checking out or pushing notes failed."""


class ClusterError(MxGitOpsError):
    """The Kubernetes API could not be used."""


class ClusterUnreachable(ClusterError):
    """No connection to the API server, or it kept failing after retries."""


class ClusterForbidden(ClusterError):
    """The API server refused our credentials (401/403)."""


class ClusterClientError(ClusterError):
    """The API server rejected a request (4xx other than auth)."""

    def __init__(self, message: str, *, status: int, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class ClusterServerError(ClusterError):
    """The API server failed (5xx) after retries."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class CredentialPluginFailed(ClusterError):
    """The kubeconfig's exec credential plugin gave no credential: it failed, printed
    none, or did not answer within its deadline (the request timeout)."""


class LeaseLostError(ClusterError):
    """The Lease this sync held could not be renewed in time: it sent no further write,
    since another sync may take the Lease over (exit 4, a cluster error)."""


class PrerequisiteMissing(MxGitOpsError):
    """What an installation needs is missing: a default StorageClass, a jobs' namespace,
    a recent enough tool (`mxgitops check`)."""


class LeaseHeldError(MxGitOpsError):
    """Another sync holds the Lease; this one must not write."""

    def __init__(self, holder: str) -> None:
        super().__init__(f"another sync holds the lease: {holder}")
        self.holder = holder


class StateDamagedError(MxGitOpsError):
    """mxgitops' own state in the cluster (the ledger, the Lease) cannot be read.

    The sync stops before it writes anything: without the ledger it cannot tell
    which jobs finished, and guessing would run finished jobs again. The message
    says which object is damaged and how to repair it.
    """


class CacheBusyError(MxGitOpsError):
    """Another mxgitops process kept the Git cache locked for longer than we wait."""


class OutputError(MxGitOpsError):
    """A commit status, an Event or a metrics push could not be delivered.

    Never fatal: what the sync applied stands, and the failure is one line in the
    summary and the log, like a note that cannot be pushed (`outputs/sinks.py`).
    """
