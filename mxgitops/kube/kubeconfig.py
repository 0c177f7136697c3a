"""Where the cluster's configuration comes from, found as kubectl finds it.

A kubeconfig file (the flag, $KUBECONFIG, ~/.kube/config) if there is one, else the
pod's service account. `cluster.connect` loads it into the official client's
`Configuration`, which the transport is built from; a dry run asks only whether
there is one (`cluster_configured`), without importing the client.

A kubeconfig user's exec credential plugin is run here, not by the client: the
client waits for it for ever, and a plugin stuck on its identity provider would
hold every request of the sync behind it (they share one refresh), the Lease's
renewal included. Each run of the plugin, when connecting and at each refresh, has
the request timeout (`--request-timeout`, 30 s by default) as its deadline: a
refresh is part of the call that needed it, and a call may take no longer. At the
deadline the plugin's process group is killed and the call fails with one line
naming the plugin (`CredentialPluginFailed`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import yaml

from mxgitops.errors import ConfigError, CredentialPluginFailed
from mxgitops.kube.clustertext import said

IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


class NoClusterConfigured(ConfigError):
    """Neither a kubeconfig nor an in-cluster service account is available."""


_MAX_CONTEXTS_SAID = 20  # of a kubeconfig's contexts, listed when --context names none


def cluster_configured(kubeconfig: Path | None = None) -> bool:
    """Whether `connect` would find a configuration (for a dry run without a cluster)."""
    return any(_config_candidates(kubeconfig)) or _in_cluster()


def planned_against(kubeconfig: Path | None, context: str | None) -> str | None:
    """The configuration `connect` would load, in words for a person ("the kubeconfig
    context NAME (FILE)"), or None if there is none. A dry run says it on its first
    line: on a laptop it plans against whatever cluster the current context names.
    ConfigError for a --context the kubeconfig has not, or given with no kubeconfig."""
    if kubeconfig is not None and not kubeconfig.is_file():
        raise NoClusterConfigured(f"kubeconfig {kubeconfig} does not exist")
    for candidate in _config_candidates(kubeconfig):
        name = _context_of(candidate, context)
        return f"the kubeconfig context {said(name) if name else '(none set)'} ({candidate})"
    if context is not None:
        raise ConfigError(_needs_kubeconfig(context))
    return "the pod's service account (in-cluster)" if _in_cluster() else None


def _context_of(candidate: Path, context: str | None) -> str:
    """The context of the kubeconfig file `candidate` a connection uses: `context`, which
    must be one of its contexts (the client's own refusal names none of them), else its
    current context ("" if it sets none)."""
    try:
        config = yaml.safe_load(candidate.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(f"cannot load the cluster configuration: {said(detail)}") from exc
    config = config if isinstance(config, dict) else {}
    if context is None:
        current = config.get("current-context")
        return current if isinstance(current, str) else ""
    listed = config.get("contexts")
    names = [
        entry["name"]
        for entry in (listed if isinstance(listed, list) else [])
        if isinstance(entry, dict) and isinstance(entry.get("name"), str)
    ]
    if context not in names:
        shown = ", ".join(said(name, 100) for name in names[:_MAX_CONTEXTS_SAID])
        more = len(names) - _MAX_CONTEXTS_SAID
        more_said = f" and {more} more" if more > 0 else ""
        raise ConfigError(
            f"--context {said(context, 100)}: no such context in {candidate}; "
            + (f"its contexts: {shown}{more_said}" if names else "it has no contexts")
        )
    return context


def _needs_kubeconfig(context: str) -> str:
    return (
        f"--context {said(context, 100)} needs a kubeconfig, and none was found "
        "(--kubeconfig, $KUBECONFIG, ~/.kube/config)"
    )


def load_configuration(
    configuration: Any, kubeconfig: Path | None, context: str | None, *, plugin_timeout: float
) -> str | None:
    """Which configuration was loaded into `configuration`, or None if there is none.

    As kubectl does: a kubeconfig file if there is one (the flag, $KUBECONFIG,
    ~/.kube/config), else the pod's service account. An exec credential plugin is
    given `plugin_timeout` seconds at each run.
    """
    import kubernetes

    if kubeconfig is not None and not kubeconfig.is_file():
        raise NoClusterConfigured(f"kubeconfig {kubeconfig} does not exist")
    for candidate in _config_candidates(kubeconfig):
        if context is not None:
            _context_of(candidate, context)  # one that is not there: the ones that are
        # `kubernetes.config.load_kube_config`'s steps, with the loader that runs the
        # exec plugin within its deadline.
        merged = kubernetes.config.kube_config.KubeConfigMerger(str(candidate))
        if merged.config is None:
            raise kubernetes.config.ConfigException(
                "Invalid kube-config file. No configuration found."
            )
        loader = _loader_class()(
            config_dict=merged.config, active_context=context, config_base_path=None
        )
        loader.plugin_timeout = plugin_timeout
        loader.load_and_set(configuration)
        return str(candidate)
    if _in_cluster():
        if context is not None:
            raise ConfigError(_needs_kubeconfig(context))
        kubernetes.config.load_incluster_config(client_configuration=configuration)
        return "in-cluster"
    return None


def _config_candidates(kubeconfig: Path | None) -> Iterator[Path]:
    if kubeconfig is not None:
        yield kubeconfig
        return
    paths = os.environ.get("KUBECONFIG", "")
    for path in [*filter(None, paths.split(os.pathsep)), "~/.kube/config"]:
        candidate = Path(path).expanduser()
        if candidate.is_file():
            yield candidate


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and IN_CLUSTER_TOKEN.is_file()


_LOADER: type[Any] | None = None


def _loader_class() -> type[Any]:
    """The client's kubeconfig loader, but for how it runs an exec plugin (`run_plugin`).
    Defined on first use: the client is imported only by commands that connect."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    from kubernetes.config.kube_config import FileOrData, KubeConfigLoader

    class Loader(KubeConfigLoader):
        plugin_timeout = 30.0

        def _load_from_exec_plugin(self) -> bool | None:
            """As the client's, but run within `plugin_timeout`, and a plugin that fails
            is an error, not a line logged before the request goes with the old token."""
            user, cluster = self._user, self._cluster
            if user is None or cluster is None or "exec" not in user:
                return None
            exec_config = user["exec"]
            base_path = self._get_base_path(cluster.path)
            status = run_plugin(exec_config, base_path, cluster, self.plugin_timeout)
            if "token" in status:
                self.token = f"Bearer {status['token']}"
            elif "clientCertificateData" in status and "clientKeyData" in status:
                for attribute, key in (
                    ("cert_file", "clientCertificateData"),
                    ("key_file", "clientKeyData"),
                ):
                    made = FileOrData(
                        status,
                        None,
                        data_key_name=key,
                        file_base_path=base_path,
                        base64_file_content=False,
                        temp_file_path=self._temp_file_path,
                    )
                    setattr(self, attribute, made.as_file())
            else:
                raise CredentialPluginFailed(
                    f"the exec credential plugin {_plugin_name(exec_config)} gave "
                    "neither a token nor a client certificate and key"
                )
            if "expirationTimestamp" in status:
                from kubernetes.config.dateutil import parse_rfc3339

                self.expiry = parse_rfc3339(status["expirationTimestamp"])
            return True

    _LOADER = Loader
    return Loader


def run_plugin(exec_config: Any, base_path: str, cluster: Any, timeout: float) -> dict[str, Any]:
    """The `status` of the ExecCredential the kubeconfig user's exec plugin prints, the
    plugin run as the client runs it (`ExecProvider`: its command, arguments,
    environment and KUBERNETES_EXEC_INFO), in a process group of its own that is
    killed if it has not answered within `timeout` seconds."""
    from kubernetes.config.exec_provider import ExecProvider

    provider = ExecProvider(exec_config, base_path, cluster)
    name = _plugin_name(exec_config)
    interactive = sys.stdout.isatty()  # a login prompt reaches a person, as kubectl's would
    spec: dict[str, Any] = {"interactive": interactive}
    if provider.cluster is not None:
        spec["cluster"] = provider.cluster.value
    info = {"apiVersion": provider.api_version, "kind": "ExecCredential", "spec": spec}
    try:
        process = subprocess.Popen(
            provider.args,
            stdin=None if interactive else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=None if interactive else subprocess.PIPE,
            cwd=provider.cwd,
            env={**provider.env, "KUBERNETES_EXEC_INFO": json.dumps(info)},
            start_new_session=True,  # its children die with it at the deadline
        )
    except OSError as exc:
        why = _bounded(exc.strerror or str(exc))
        raise CredentialPluginFailed(
            f"the exec credential plugin {name} could not be run: {why}"
        ) from exc
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        with suppress(ProcessLookupError):  # ended by itself meanwhile
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise CredentialPluginFailed(
            f"the exec credential plugin {name} gave no credential within {timeout:g} s "
            "(--request-timeout); it was stopped"
        ) from exc
    if process.returncode != 0:
        said = _last_line(stderr)
        raise CredentialPluginFailed(
            f"the exec credential plugin {name} failed (exit status {process.returncode})"
            + (f": {said}" if said else "")
        )
    try:
        answer = json.loads(stdout)
        status = answer["status"]
        if not isinstance(status, dict) or answer.get("apiVersion") != provider.api_version:
            raise ValueError(f"not an ExecCredential of {provider.api_version}")
    except (ValueError, KeyError, TypeError) as exc:
        raise CredentialPluginFailed(
            f"the exec credential plugin {name} printed no ExecCredential: {_bounded(str(exc))}"
        ) from exc
    return status


def _bounded(text: str, limit: int = 200) -> str:
    """Text from a kubeconfig or a plugin on one line of the terminal or log: control
    and bidi characters escaped, at most `limit` characters (`clustertext.said`)."""
    return said(text.strip(), limit)


def _plugin_name(exec_config: Any) -> str:
    return repr(_bounded(str(exec_config["command"])))


def _last_line(stderr: bytes | None) -> str:
    lines = (stderr or b"").decode("utf-8", errors="replace").strip().splitlines()
    return _bounded(lines[-1]) if lines else ""
