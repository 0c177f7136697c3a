"""jobs-repo-example/ci/pr-plan.py, the one script both CI configurations call: its steps
on a pull-request-like branch of a real jobs repository (the example, in a bare remote),
the markdown it would post, and the posting itself against a loopback double of the
GitHub and GitLab comment APIs (one comment per pull request, updated, never another's).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.gitrepos.fixtures import GitRemote
from tests.helpers.cronjob import EXAMPLE, example_files

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = EXAMPLE / "ci/pr-plan.py"
MARKER = "<!-- mxgitops-plan -->"
NEW_JOB = (
    (EXAMPLE / "jobs/vision/cifar10-local.yaml")
    .read_text()
    .replace("name: cifar10-local", "name: mnist-local")
)


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pr_plan", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def pull_request(make_git_remote: Callable[..., GitRemote]) -> GitRemote:
    """The example on main, and a branch `pr` that adds, changes, removes and breaks."""
    remote = make_git_remote("jobs", files=example_files())
    remote.git("fetch", "--quiet", "origin")
    remote.git("switch", "--quiet", "-c", "pr")
    work = remote.work
    (work / "jobs/vision/mnist-local.yaml").write_text(NEW_JOB)
    cifar = work / "jobs/vision/cifar10-local.yaml"
    cifar.write_text(cifar.read_text().replace("--num-epochs=2", "--num-epochs=3"))
    (work / "jobs/nlp/bert-gpu.yaml").unlink()
    remote.git("add", "--all")
    remote.git("commit", "--quiet", "-m", "a pull request")
    return remote


def run_script(
    work: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = f"{sys.executable} -m mxgitops.cli"
    environment = {"PATH": "/usr/bin:/bin", "MXGITOPS_COMMAND": command, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "origin/main", "HEAD", *args],
        cwd=work,
        env={**environment, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_plan_of_a_pull_request(pull_request: GitRemote) -> None:
    done = run_script(pull_request.work)
    assert done.returncode == 0, done.stdout + done.stderr
    plan = (pull_request.work / "mxgitops-plan.md").read_text()
    assert plan.startswith(MARKER + "\n") and done.stdout.startswith(plan)
    for row in (
        # Files named from the repository's root, as validate at its root names them.
        "| added | `ml-training/mnist-local` | `jobs/vision/mnist-local.yaml` | created |",
        "| changed | `ml-training/cifar10-local` | `jobs/vision/cifar10-local.yaml` | replaced",
        "| removed | `ml-training/bert-gpu` | `jobs/nlp/bert-gpu.yaml` | deleted |",
    ):
        assert row in plan, plan
    assert "mxgitops validate passed" in plan
    assert "3 jobs valid, 0 invalid manifests" in plan
    # The plan it wrote is ignored by git (the example's .gitignore): the tree stays clean.
    assert pull_request.git("status", "--porcelain") == ""


def test_a_broken_manifest_fails_the_check_and_shows(pull_request: GitRemote) -> None:
    broken = pull_request.work / "jobs/vision/mnist-local.yaml"
    broken.write_text(NEW_JOB.replace("replicas: 1", "replica: 1"))
    (pull_request.work / ".mxgitops.yaml").write_text("path: jobs\ninstance: team-b\n")
    pull_request.git("commit", "--quiet", "-am", "break it")
    done = run_script(pull_request.work)
    assert done.returncode == 1, done.stdout + done.stderr
    plan = (pull_request.work / "mxgitops-plan.md").read_text()
    assert 'unknown field "replica"' in plan
    assert ".mxgitops.yaml:2: instance: only the operator may set this" in plan
    assert "mxgitops validate failed (exit 1)" in plan


def test_output_from_the_pull_request_cannot_close_its_code_block() -> None:
    script = load_script()
    text = "a ``` b\n````\n## Approved"
    block = script.fenced(text)
    fence = block.splitlines()[0].removesuffix("text")
    assert fence == "`````" and block.endswith("\n" + fence)
    assert all(not line.startswith(fence) for line in text.splitlines())


@pytest.mark.parametrize(
    ("source", "pinned"),
    [
        ("mxgitops", False),
        ("mxgitops==0.1.0", False),
        ("mxgitops @ git+https://github.com/example/mxgitops@COMMIT", False),
        ("mxgitops @ git+https://github.com/example/mxgitops@main", False),
        ("mxgitops @ git+https://github.com/example/mxgitops@" + "a" * 40, True),
        (
            "mxgitops @ https://files.example/mxgitops-0.1.0-py3-none-any.whl#sha256=" + "0" * 64,
            True,
        ),
    ],
)
def test_mxgitops_is_installed_only_from_a_pinned_source(source: str, pinned: bool) -> None:
    script = load_script()
    assert bool(script.PINNED.match(source)) is pinned
    if not pinned:
        with pytest.raises(SystemExit, match="is not pinned"):
            script.install(source)


def test_both_ci_configurations_call_the_script_pinned() -> None:
    github = yaml.safe_load((EXAMPLE / ".github/workflows/mxgitops.yml").read_text())
    gitlab = yaml.safe_load((EXAMPLE / ".gitlab-ci.yml").read_text())
    runs = [s["run"] for job in github["jobs"].values() for s in job["steps"] if "run" in s]
    runs += [
        line for name in ("mxgitops-plan", "mxgitops-comment") for line in gitlab[name]["script"]
    ]
    assert [r for r in runs if "pr-plan.py --install" in r] and not [
        r for r in runs if "pip install" in r
    ]
    for job in github["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:
                assert re.fullmatch(r"[\w-]+/[\w-]+@[0-9a-f]{40}", step["uses"]), step
    assert "@sha256:" in gitlab[".mxgitops"]["image"]


def test_the_token_is_held_only_by_code_the_pull_request_cannot_change() -> None:
    """Under `pull_request` the workflow and the script come from the pull request: it
    could rewrite them to edit another pull request's comment. The job with the token
    runs the base branch's script; the pull request's checkout is data."""
    github = yaml.safe_load((EXAMPLE / ".github/workflows/mxgitops.yml").read_text())
    assert set(github[True]) == {"pull_request_target", "push"}  # "on"
    assert github["permissions"] == {"contents": "read"}
    for job in github["jobs"].values():
        writes = "write" in job.get("permissions", {}).values()
        steps = job["steps"]
        checkouts = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
        assert all(s["with"]["persist-credentials"] is False for s in checkouts)
        if not writes:
            continue
        trusted, pr = checkouts
        assert "ref" not in trusted["with"] and trusted["with"]["path"] == "trusted"
        assert pr["with"]["path"] == "pr" and "head.sha" in pr["with"]["ref"]
        runs = [s for s in steps if "run" in s]
        assert all(s["working-directory"] == "pr" for s in runs)
        commands = [line for s in runs for line in s["run"].splitlines()]
        scripts = [c for c in commands if c.startswith("python")]
        assert scripts == [
            'python3 -I ../trusted/ci/pr-plan.py --install "$BASE_SHA" HEAD --post github '
            '--notes-from "$NOTES_FROM"'
        ]
        assert all(c.startswith(("git fetch", "python3 -I ../trusted/")) for c in commands)
    gitlab = yaml.safe_load((EXAMPLE / ".gitlab-ci.yml").read_text())
    comment = gitlab["mxgitops-comment"]
    assert "$CI_CONFIG_PATH =~ /@/" in comment["rules"][0]["if"]
    assert "$CI_CONFIG_PATH !~ /@/" in gitlab["mxgitops-plan"]["rules"][0]["if"]
    fetch = gitlab[".mxgitops"]["before_script"]
    assert any("git show" in line and ":ci/pr-plan.py" in line for line in fetch)
    assert all(
        line.startswith('python3 -I "$CI_BUILDS_DIR/pr-plan.py"') for line in comment["script"]
    )


def test_the_workflow_step_runs_the_base_script_on_the_pull_requests_tree(
    pull_request: GitRemote, forge: ForgeAPI, tmp_path: Path
) -> None:
    """The plan job's own commands, run as the runner would (bash, the two checkouts
    side by side): a pull request that rewrites ci/pr-plan.py runs none of it, and the
    comment is the base script's plan of the pull request's tree."""
    work = pull_request.work
    marker = tmp_path / "pwned"
    (work / "ci/pr-plan.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    pull_request.git("commit", "--quiet", "-am", "rewrite the script")
    trusted = work.parent / "trusted"
    subprocess.run(["git", "clone", "--quiet", pull_request.url, str(trusted)], check=True)
    base = subprocess.run(
        ["git", "-C", str(trusted), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    pr = work.parent / "pr"
    work.rename(pr)
    github = yaml.safe_load((EXAMPLE / ".github/workflows/mxgitops.yml").read_text())
    (step,) = [s for s in github["jobs"]["plan"]["steps"] if "run" in s]
    # Installing from the pinned source needs the network: the test's mxgitops stands in.
    commands = step["run"].replace(" --install", "")
    mxgitops = Path(sys.executable).parent / "mxgitops"
    env = {
        **github_env(forge, tmp_path),
        "PATH": "/usr/bin:/bin",
        "BASE_SHA": base,
        "MXGITOPS_COMMAND": str(mxgitops),
    }
    done = subprocess.run(
        ["bash", "-e", "-c", commands], cwd=pr, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert not marker.exists()
    (comment,) = forge.comments
    assert comment["body"].startswith(MARKER)
    assert (
        "| removed | `ml-training/bert-gpu` | `jobs/nlp/bert-gpu.yaml` | deleted |"
        in comment["body"]
    )


# -- posting -------------------------------------------------------------------------------


class ForgeAPI(ThreadingHTTPServer):
    """Comments of one pull request (GitHub) or merge request (GitLab), on loopback."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ForgeHandler)
        self.comments: list[dict[str, Any]] = []
        self.writes: list[str] = []
        self.max_body = 65536  # GitHub's limit: a longer comment is refused with 422
        self.refuse: int | None = None  # every write answered with this status

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def add(self, body: str, login: str) -> dict[str, Any]:
        comment = {
            "id": 100 + len(self.comments),
            "body": body,
            "user": {"login": login},
            "author": {"username": login},
        }
        self.comments.append(comment)
        return comment


class _ForgeHandler(BaseHTTPRequestHandler):
    server: ForgeAPI

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _reply(self, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        return data

    def _refused(self, body: dict[str, Any]) -> bool:
        status = self.server.refuse
        if status is None and len(body["body"]) > self.server.max_body:
            status = 422
        if status is None:
            return False
        self.server.writes.append(f"refused {status}")
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
        return True

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/api/v4/user":
            self._reply({"username": "plan-bot"})
        else:
            self._reply(self.server.comments)

    def do_POST(self) -> None:
        body = self._body()
        if self._refused(body):
            return
        self.server.writes.append("create")
        login = "github-actions[bot]" if "/repos/" in self.path else "plan-bot"
        self._reply(self.server.add(body["body"], login))

    def _update(self) -> None:
        body = self._body()
        if self._refused(body):
            return
        self.server.writes.append("update")
        number = int(urlsplit(self.path).path.rsplit("/", 1)[1])
        (comment,) = [c for c in self.server.comments if c["id"] == number]
        comment["body"] = body["body"]
        self._reply(comment)

    do_PATCH = _update
    do_PUT = _update


@pytest.fixture
def forge() -> Iterator[ForgeAPI]:
    server = ForgeAPI()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_one_comment_is_posted_then_updated(
    kind: str, forge: ForgeAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The script's last step, in-process: its first run posts, later runs update."""
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7}}))
    env = {
        "github": {
            "GITHUB_API_URL": forge.url,
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_REPOSITORY": "org/jobs",
            "GITHUB_TOKEN": "t0ken",
        },
        "gitlab": {
            "CI_API_V4_URL": f"{forge.url}/api/v4",
            "CI_PROJECT_ID": "42",
            "CI_MERGE_REQUEST_IID": "7",
            "MXGITOPS_GITLAB_TOKEN": "t0ken",
        },
    }[kind]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    script = load_script()
    post = script.post_github if kind == "github" else script.post_gitlab
    # Someone else's comment that starts with the marker is not ours to edit.
    forged = forge.add(MARKER + "\nlooks good to me", "mallory")
    assert post(MARKER + "\nfirst plan").startswith("posted")
    assert post(MARKER + "\nsecond plan").startswith("updated")
    assert forge.writes == ["create", "update"]
    ours = [c for c in forge.comments if c is not forged]
    assert [c["body"] for c in ours] == [MARKER + "\nsecond plan"]
    assert forged["body"] == MARKER + "\nlooks good to me"


def github_env(forge: ForgeAPI, tmp_path: Path) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7}}))
    return {
        "GITHUB_API_URL": forge.url,
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": "org/jobs",
        "GITHUB_TOKEN": "t0ken",
    }


def test_a_plan_over_the_comment_limit_keeps_removals_and_violations(
    pull_request: GitRemote, forge: ForgeAPI, tmp_path: Path
) -> None:
    """Refused with 422, the new plan left the last push's comment, which did not
    mention this push's removal: now the comment is cut to fit, what matters first."""
    work = pull_request.work
    for n in range(700):
        name = f"bulk-{n:04d}-" + "x" * 30
        (work / f"jobs/bulk/{name}.yaml").parent.mkdir(exist_ok=True)
        (work / f"jobs/bulk/{name}.yaml").write_text(NEW_JOB.replace("mnist-local", name))
    hostile = NEW_JOB.replace("mnist-local", "zz-host").replace(
        "          containers:", "          hostPID: true\n          containers:"
    )
    (work / "jobs/vision/zz-host.yaml").write_text(hostile)
    pull_request.git("add", "--all")
    pull_request.git("commit", "--quiet", "-m", "many jobs")
    done = run_script(work, "--post", "github", env=github_env(forge, tmp_path))
    assert done.returncode == 1, done.stderr  # the policy violation fails the check
    assert forge.writes == ["create"], (forge.writes, done.stderr)
    (comment,) = forge.comments
    body = comment["body"]
    assert len(body) <= 65536 and body.startswith(MARKER)
    assert "| removed | `ml-training/bert-gpu` | `jobs/nlp/bert-gpu.yaml` | deleted |" in body
    assert "adds 1 policy violation**" in body and "zz-host" in body
    assert "the full plan is in the job's log" in body
    # The log has it all.
    assert done.stdout.count("| added |") == 701


@pytest.mark.parametrize("status", [422, 403, 500])
def test_a_comment_that_cannot_be_posted_fails_the_check(
    pull_request: GitRemote, forge: ForgeAPI, tmp_path: Path, status: int
) -> None:
    forge.refuse = status
    done = run_script(pull_request.work, "--post", "github", env=github_env(forge, tmp_path))
    assert done.returncode != 0, done.stderr
    assert f"could not post the comment: HTTP {status}" in done.stderr
    assert "stale" in done.stderr


def test_installing_runs_no_code_of_the_pull_request(tmp_path: Path) -> None:
    """The script runs in the pull request's tree: `python -m pip` there would import a
    `pip` package the pull request adds, in a step that holds the token."""
    tree = tmp_path / "pr"
    (tree / "pip").mkdir(parents=True)
    marker = tmp_path / "ran"
    (tree / "pip/__init__.py").write_text("")
    (tree / "pip/__main__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    source = f"mxgitops @ file://{tmp_path}/missing.whl#sha256=" + "0" * 64
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--install", "origin/main", "HEAD"],
        cwd=tree,
        env={"PATH": "/usr/bin:/bin", "MXGITOPS_PIP_SOURCE": source, "PIP_NO_INDEX": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0  # the wheel does not exist
    assert not marker.exists(), done.stdout + done.stderr
