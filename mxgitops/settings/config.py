"""SyncConfig: one value built from flags, MXGITOPS_* environment and .mxgitops.yaml.

Precedence is flags over environment over the jobs repository's
`.mxgitops.yaml` over built-in defaults. Click resolves flags and
environment (every option has an `MXGITOPS_*` envvar) and tells which
values were left at their default; the file is read only after the
repository is checked out, and may set only what describes its jobs
(`repofile`): who mxgitops is and what it may do is the operator's.

Each setting means one thing. `namespace` is where jobs whose manifest
names none go; `state_namespace` is where mxgitops keeps its Lease and
ledger: the namespace the pod runs in (its service account's namespace
file), else the operator's `namespace`, never the repository's. Every
bound is checked here, whoever set the value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from mxgitops.errors import ConfigError
from mxgitops.kube.calls import DEFAULT_PARALLELISM, DEFAULT_REQUEST_TIMEOUT, MAX_REQUEST_TIMEOUT
from mxgitops.manifests import policy, repofile
from mxgitops.manifests.files import Problem, read_section
from mxgitops.manifests.spec import is_dns1123_label
from mxgitops.model import MAX_NAME_LENGTH, NAMESPACE
from mxgitops.planning.changes import DEFAULT_MAX_PRUNE_SHARE
from mxgitops.runtimes import registry
from mxgitops.runtimes.shared.accelerators import parse_accelerators
from mxgitops.runtimes.shared.reruns import DEFAULT_MAX_DISRUPTION_RUNS, MAX_DISRUPTION_RUNS

# Where Kubernetes mounts the namespace of a pod's service account.
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
MAX_PARALLELISM = 256  # each write holds a connection of the client's pool
FILE_SIZE_BOUNDS = (1 << 10, 64 << 20)  # of --max-file-size: 1 KiB to 64 MiB
MAX_FAILURE_LOG_LINES = 1000  # of --failure-log-lines
DEFAULT_TRAINING_LOG_READS = 100  # of --training-log-reads (state/training.py)
MAX_TRAINING_LOG_READS = 100_000
MAX_INSTANCE_LENGTH = MAX_NAME_LENGTH - len("mxgitops-ledger-")
DEFAULT_NOTES_REF = "refs/notes/mxgitops"
ACCELERATORS_FILE_SIZE = 64 * 1024
MAX_TOKEN_FILE = 64 << 10  # bytes of a token file: as install takes a Secret's file
DEFAULT_STATUS_TIMEOUT = 60.0
MAX_STATUS_TIMEOUT = 600.0  # a CronJob's pod has activeDeadlineSeconds: 900


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mxgitops"


@dataclass(frozen=True)
class SyncConfig:
    repo: str = field(default=".", repr=False)  # a URL may embed a token
    ref: str | None = None
    path: str = "."
    namespace: str = NAMESPACE
    state_namespace: str = ""  # "": the namespace given above (operator settings only)
    instance: str = "default"
    kubeconfig: Path | None = None
    context: str | None = None
    prune: bool = True
    max_prune_share: float = DEFAULT_MAX_PRUNE_SHARE
    force_prune: bool = False
    dry_run: bool = False
    offline: bool = False  # a dry run against an empty cluster, none asked
    notes: bool = True
    notes_ref: str = DEFAULT_NOTES_REF
    cache_dir: Path = field(default_factory=default_cache_dir)
    parallelism: int = DEFAULT_PARALLELISM
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT  # seconds per API call, retries included
    output: str = "text"
    log_format: str = "text"
    verbose: int = 0  # -1 quiet, 0 normal, 1 verbose
    ssh_key: Path | None = None
    known_hosts: Path | None = None
    git_token: str | None = field(default=None, repr=False)
    max_file_size: int = 1024 * 1024
    failure_log_lines: int = 20  # of a newly failed container's log kept; 0: none
    # Running jobs' worker 0 logs read in one sync for their training record; 0: none.
    training_log_reads: int = DEFAULT_TRAINING_LOG_READS
    # Runs of one spec made anew for a disruption, in a row, before it is Failed.
    max_disruption_runs: int = DEFAULT_MAX_DISRUPTION_RUNS
    cancel: tuple[str, ...] = ()  # .mxgitops.yaml: namespace/name pruned without waiting
    accelerators: Mapping[str, Any] = field(default_factory=dict)  # the operator's, raw
    accelerators_file: Path | None = None  # the operator's accelerators (read into the above)
    policy_file: Path | None = None  # the operator's policy
    repo_policy: Mapping[str, Any] = field(default_factory=dict)  # .mxgitops.yaml's, parsed
    tenant_service_account: str | None = None  # writes into N impersonate N's account
    # Where results go besides the note (outputs/sinks.py); all the operator's.
    status_provider: str = ""  # github, gitlab, gitea; "": no commit statuses
    # "": the provider's public API (Gitea: the --repo host's); never shown (a URL may
    # hold credentials, which are refused)
    status_api_url: str = field(default="", repr=False)
    status_repository: str = ""  # OWNER/NAME on the forge; "": from --repo
    status_url: str = ""  # the statuses' link, {commit} and {instance} filled in
    status_token: str | None = field(default=None, repr=False)
    status_token_file: Path | None = None
    status_timeout: float = DEFAULT_STATUS_TIMEOUT  # seconds, rate-limit waits included
    events: bool = True  # Kubernetes Events on the jobs a sync acts on
    notifications_file: Path | None = None  # chats told of jobs' transitions (outputs/notify)
    # URL of a Pushgateway for the metrics ("": none); its credentials are basic auth
    pushgateway: str = field(default="", repr=False)
    default_runtime: str = "batch"  # the operator's: what a dist job naming no queue runs on

    def __post_init__(self) -> None:
        if self.offline:
            object.__setattr__(self, "dry_run", True)  # no cluster asked: nothing to write
        if not self.state_namespace:
            object.__setattr__(self, "state_namespace", self.namespace)
        if self.accelerators_file is not None and not self.accelerators:
            object.__setattr__(self, "accelerators", read_accelerators(self.accelerators_file))
        if not 1 <= self.parallelism <= MAX_PARALLELISM:
            raise ConfigError(
                f"parallelism must be between 1 and {MAX_PARALLELISM}, not {self.parallelism}"
            )
        if not 0 < self.request_timeout <= MAX_REQUEST_TIMEOUT:
            raise ConfigError(
                f"request-timeout must be more than 0 and at most {MAX_REQUEST_TIMEOUT:g} "
                f"seconds, not {self.request_timeout}"
            )
        if not 0 < self.status_timeout <= MAX_STATUS_TIMEOUT:
            raise ConfigError(
                f"status-timeout must be more than 0 and at most {MAX_STATUS_TIMEOUT:g} "
                f"seconds, not {self.status_timeout}"
            )
        if self.status_token:  # from a Secret made of a file: its newline is no part of it
            object.__setattr__(self, "status_token", self.status_token.strip())
        if self.status_token_file is not None and not self.status_token:
            # A Secret not mounted (yet) stops the statuses alone: their sink says why.
            with suppress(ConfigError):
                object.__setattr__(self, "status_token", read_token(self.status_token_file))
        if not 0 <= self.max_prune_share <= 1:
            raise ConfigError(
                f"max-prune-share must be between 0 and 1, not {self.max_prune_share}"
            )
        if not 0 <= self.max_disruption_runs <= MAX_DISRUPTION_RUNS:
            raise ConfigError(
                f"max-disruption-runs must be between 0 and {MAX_DISRUPTION_RUNS}, "
                f"not {self.max_disruption_runs}"
            )
        if not 0 <= self.training_log_reads <= MAX_TRAINING_LOG_READS:
            raise ConfigError(
                f"training-log-reads must be between 0 and {MAX_TRAINING_LOG_READS}, "
                f"not {self.training_log_reads}"
            )
        if not 0 <= self.failure_log_lines <= MAX_FAILURE_LOG_LINES:
            raise ConfigError(
                f"failure-log-lines must be between 0 and {MAX_FAILURE_LOG_LINES}, "
                f"not {self.failure_log_lines}"
            )
        if not FILE_SIZE_BOUNDS[0] <= self.max_file_size <= FILE_SIZE_BOUNDS[1]:
            raise ConfigError(
                f"max-file-size must be between 1 KiB and 64 MiB, not {self.max_file_size} bytes"
            )
        for what, value in (
            ("namespace", self.namespace),
            ("state namespace", self.state_namespace),
        ):
            if not is_dns1123_label(value):
                raise ConfigError(
                    f"{what} {value!r} is not a valid namespace name "
                    "(lower-case letters, digits and '-', at most 63 characters)"
                )
        if self.default_runtime not in registry.NAMES:
            raise ConfigError(
                f"default runtime must be one of {', '.join(registry.NAMES)}, "
                f"not {self.default_runtime!r}"
            )
        account = self.tenant_service_account
        if account is not None and not is_dns1123_label(account):
            raise ConfigError(
                f"tenant service account {account!r} must be lower-case letters, digits "
                "and '-', at most 63 characters"
            )
        # The instance names the Lease (mxgitops-…) and the ledger (mxgitops-ledger-…)
        # and is a label value: a DNS-1123 label short enough for both names.
        if not is_dns1123_label(self.instance, MAX_INSTANCE_LENGTH):
            raise ConfigError(
                f"instance {self.instance!r} must be lower-case letters, digits and '-', "
                f"at most {MAX_INSTANCE_LENGTH} characters"
            )


def read_token(path: Path, flag: str = "status-token-file") -> str:
    """A token file (a mounted Secret's key): its text, without the trailing newline.
    One line of printable UTF-8 of at most `MAX_TOKEN_FILE` bytes, else a ConfigError
    naming `flag` and the file, never its content: a token goes into a header, where a
    second line would be a header of its own."""
    where = f"{flag} {path}"
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_TOKEN_FILE + 1)
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_TOKEN_FILE:
        raise ConfigError(f"{where}: larger than {MAX_TOKEN_FILE} bytes, not a token")
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text, not a token") from None
    if not token:
        raise ConfigError(f"{where}: is empty")
    if not token.isprintable():
        raise ConfigError(f"{where}: more than one line, or control characters: not a token")
    return token


def read_accelerators(path: Path) -> dict[str, Any]:
    """The operator's accelerators file: YAML with one `accelerators` section (resource
    name -> host-path volumes and env vars), checked as the sync will read it."""
    section = read_section(path, "accelerators", ACCELERATORS_FILE_SIZE, "accelerators file")
    parse_accelerators(section, where=f"accelerators file {path}: accelerators")
    raw: dict[str, Any] = section or {}
    return raw


def effective_policy(config: SyncConfig) -> policy.Policy:
    """The defaults, made stricter by the operator's policy file, then by the repository's."""
    operator = policy.read_file(config.policy_file) if config.policy_file else {}
    return policy.combine(operator, config.repo_policy)


def from_options(options: Mapping[str, Any]) -> SyncConfig:
    """A config from the options that were given (None = not given: keep the default).

    The state namespace, when not given, is the pod's own namespace if there is one."""
    names = {f.name for f in fields(SyncConfig)}
    unknown = set(options) - names
    if unknown:
        raise ConfigError(f"unknown settings: {', '.join(sorted(unknown))}")
    given = {k: v for k, v in options.items() if v is not None}
    if "state_namespace" not in given:
        given["state_namespace"] = pod_namespace() or given.get("namespace", "")
    return SyncConfig(**given)


def pod_namespace() -> str | None:
    """The namespace this pod runs in, from its service account; None outside a pod."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def apply_repo_settings(
    config: SyncConfig, explicit: set[str], root: Path
) -> tuple[SyncConfig, tuple[Problem, ...]]:
    """Fill in from the repository's .mxgitops.yaml what flags and environment left unset;
    also return the operator's settings it tried to set (ignored), to be reported."""
    found = repofile.read(root)
    values = {k: v for k, v in found.values.items() if k not in explicit}
    return replace(config, **values), found.refused


def read_repo_settings(root: Path) -> repofile.RepoFile:
    """What the repository's .mxgitops.yaml sets, and what it may not set."""
    return repofile.read(root)
