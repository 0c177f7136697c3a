#!/usr/bin/env python3
"""The plan of a pull request, as one comment on it: what CI runs for every change.

    python3 ci/pr-plan.py [--install] BASE [HEAD] [--out FILE] [--post github|gitlab]
                          [--notes-from REMOTE]

0. with --install, mxgitops is installed from MXGITOPS_PIP_SOURCE, which must be
   pinned: a commit (`mxgitops @ git+https://host/org/mxgitops@<40 hex digits>`)
   or a wheel with its hash (`...whl#sha256=<64 hex digits>`). A bare package
   name is refused: whoever registers it on an index would run code here;
1. with --notes-from, the sync's notes (`refs/notes/mxgitops`, or MXGITOPS_NOTES_REF)
   are fetched from REMOTE (a URL, or `origin`): their newest commit only, within
   NOTES_DEADLINE seconds, with GITHUB_TOKEN as the credential of an https URL when
   it is set. A CI checkout has no notes, and without them diff cannot say what the
   changed jobs' earlier runs reached; a fetch that fails is said in one line and the
   plan goes on without them;
2. `mxgitops validate`: every manifest of HEAD, as the sync will read them;
3. `mxgitops diff BASE HEAD -o markdown`: which jobs the change adds, changes
   (replaced on sync), removes (pruned on sync), what it breaks, and what the changed
   jobs' last runs reached (from the notes);
4. one markdown comment of both (FILE, default mxgitops-plan.md, and stdout),
   starting with a marker so that it can be found again. The full plan goes to
   FILE and stdout (the job's log); the comment is cut to fit the forge's limit
   (65,536 characters on GitHub), keeping the policy violations and the jobs
   removed, which the plan lists first, and saying where the rest is;
5. with --post, that comment is posted on the pull request (GitHub) or merge
   request (GitLab), or the earlier one updated: one comment per pull request.

Exits 1 when validate or diff found a problem (the check fails), after posting;
exits 3 when the comment could not be posted: the pull request would go on
showing the previous push's plan, which may not mention what this push does.

The script runs in the pull request's tree, read as data: the workflows run
the base branch's copy of this script, and mxgitops from a pinned source, in
the one step that holds a token; nothing the pull request contains is run
(pip runs isolated, so a `pip/` directory in the tree is not imported).
Needs Python 3, git and mxgitops (MXGITOPS_COMMAND, default `mxgitops`); no
other package. Posting reads the CI's own variables (see the two workflows).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

MARKER = "<!-- mxgitops-plan -->"
COMMENT_LIMIT = 65536  # characters: GitHub's; GitLab's notes allow more
POST_FAILED = 3
NOTES_REF = os.environ.get("MXGITOPS_NOTES_REF", "refs/notes/mxgitops")
NOTES_DEADLINE = 60  # seconds the notes' fetch may take
PINNED = re.compile(r"^\S+ @ \S+(@[0-9a-f]{40}|#sha256=[0-9a-f]{64})$")


def install(source: str) -> None:
    if not PINNED.match(source):
        raise SystemExit(
            f"MXGITOPS_PIP_SOURCE={source!r} is not pinned: set it to "
            "'mxgitops @ git+https://HOST/ORG/mxgitops@COMMIT' (40 hex digits) "
            "or to a wheel URL ending in #sha256=HASH"
        )
    # -I: neither the working directory (the pull request's tree) nor PYTHON*
    # variables decide what `-m pip` imports.
    pip = [sys.executable, "-I", "-m", "pip", "install", "--disable-pip-version-check", source]
    if subprocess.run(pip, check=False).returncode != 0:
        raise SystemExit(f"could not install mxgitops from {source!r} (pip failed, above)")


def fetch_notes(remote: str) -> str:
    """Fetch the notes' newest commit from `remote` into NOTES_REF; "" when done, else
    why not (one line)."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    token = os.environ.get("GITHUB_TOKEN", "")
    if token and remote.startswith("https://"):
        # As actions/checkout passes it: a header for that host, never in the URL or argv.
        host = "/".join(remote.split("/", 3)[:3]) + "/"
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env.update(
            GIT_CONFIG_COUNT="1",
            GIT_CONFIG_KEY_0=f"http.{host}.extraheader",
            GIT_CONFIG_VALUE_0=f"AUTHORIZATION: basic {basic}",
        )
    refspec = f"+{NOTES_REF}:{NOTES_REF}"
    command = ["git", "fetch", "--quiet", "--no-tags", "--depth=1", remote, refspec]
    try:
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=NOTES_DEADLINE, check=False
        )
    except subprocess.TimeoutExpired:
        return f"no answer within {NOTES_DEADLINE} s"
    if done.returncode == 0:
        return ""
    said = [line for line in done.stderr.splitlines() if line.strip()]
    return (said[-1] if said else f"git fetch exited {done.returncode}")[:300]


def run(*args: str) -> tuple[int, str]:
    command = [*shlex.split(os.environ.get("MXGITOPS_COMMAND", "mxgitops")), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    return done.returncode, (done.stdout + done.stderr).strip()


def fenced(text: str) -> str:
    """Text in a code block no line of it can close (a PR may name files with backticks)."""
    longest = max((len(ticks) for ticks in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def compose(base: str, head: str) -> tuple[str, str, bool]:
    """The full plan, the comment (the plan cut to COMMENT_LIMIT), and whether
    everything passed."""
    validated, validate_output = run("validate")
    diffed, diff_output = run("diff", base, head, "-o", "markdown")
    if diffed in (0, 1):  # 1: HEAD has invalid manifests, which the markdown shows
        plan = diff_output
    else:
        plan = f"**mxgitops diff failed** (exit {diffed}):\n\n{fenced(diff_output)}"
    verdict = "passed" if validated == 0 else f"failed (exit {validated})"
    summary = f"<details><summary>mxgitops validate {verdict}</summary>\n\n"
    details = f"{summary}{fenced(validate_output)}\n\n</details>"
    full = "\n\n".join([MARKER, plan, details]) + "\n"
    if len(full) <= COMMENT_LIMIT:
        return full, full, validated == 0 and diffed == 0
    short = f"{summary}Its output is in the job's log.\n\n</details>"
    comment = "\n\n".join([MARKER, cut(plan, COMMENT_LIMIT - len(MARKER) - len(short) - 8), short])
    return full, comment + "\n", validated == 0 and diffed == 0


def cut(plan: str, limit: int) -> str:
    """The first lines of `plan` that fit in `limit` characters with the line that
    says so. Whole lines only, so a table row or a code span is never cut open; a
    blank line before the note ends a table, and a code block cut open (diff's
    own error output) is closed first, so the note is no code."""
    lines = plan.splitlines()
    kept: list[str] = []
    size, fence = 0, ""
    for number, line in enumerate(lines):
        close = f"\n{fence}" if fence else ""
        note = (
            f"{close}\n\n**The plan is cut here** ({len(lines) - number} more lines, over "
            f"the comment's {COMMENT_LIMIT:,} characters): the full plan is in the job's log."
        )
        if size + len(line) + 1 + len(note) > limit:
            return "\n".join(kept) + note
        kept.append(line)
        size += len(line) + 1
        if opened := re.match(r"^(`{3,})", line):
            if not fence:
                fence = opened.group(1)
            elif line.strip() == fence:
                fence = ""
    return plan


# -- posting ----------------------------------------------------------------------


def request(method: str, url: str, headers: dict[str, str], body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as response:
        return json.loads(response.read() or b"null")


def pages(url: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for page in range(1, 100):
        batch = request("GET", f"{url}?per_page=100&page={page}", headers)
        found += batch
        if len(batch) < 100:
            break
    return found


def post_github(body: str) -> str:
    env = os.environ
    api = env.get("GITHUB_API_URL", "https://api.github.com")
    event = json.loads(Path(env["GITHUB_EVENT_PATH"]).read_text())
    number = event["pull_request"]["number"]
    repo = env["GITHUB_REPOSITORY"]
    headers = {
        "Authorization": f"Bearer {env['GITHUB_TOKEN']}",
        "Accept": "application/vnd.github+json",
    }
    author = env.get("MXGITOPS_COMMENT_AUTHOR", "github-actions[bot]")
    comments = pages(f"{api}/repos/{repo}/issues/{number}/comments", headers)
    ours = [c for c in comments if c["body"].startswith(MARKER) and c["user"]["login"] == author]
    if ours:
        url = f"{api}/repos/{repo}/issues/comments/{ours[0]['id']}"
        request("PATCH", url, headers, {"body": body})
        return f"updated comment {ours[0]['id']}"
    created = request(
        "POST", f"{api}/repos/{repo}/issues/{number}/comments", headers, {"body": body}
    )
    return f"posted comment {created['id']}"


def post_gitlab(body: str) -> str:
    env = os.environ
    api = env["CI_API_V4_URL"]
    notes = (
        f"{api}/projects/{env['CI_PROJECT_ID']}/merge_requests/{env['CI_MERGE_REQUEST_IID']}/notes"
    )
    headers = {"PRIVATE-TOKEN": env["MXGITOPS_GITLAB_TOKEN"]}
    me = request("GET", f"{api}/user", headers)["username"]
    ours = [
        n for n in pages(notes, headers)
        if n["body"].startswith(MARKER) and n["author"]["username"] == me
    ]  # fmt: skip
    if ours:
        request("PUT", f"{notes}/{ours[0]['id']}", headers, {"body": body})
        return f"updated note {ours[0]['id']}"
    created = request("POST", notes, headers, {"body": body})
    return f"posted note {created['id']}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("head", nargs="?", default="HEAD")
    parser.add_argument("--out", default="mxgitops-plan.md")
    parser.add_argument("--post", choices=["github", "gitlab"])
    parser.add_argument("--install", action="store_true", help="from MXGITOPS_PIP_SOURCE")
    parser.add_argument("--notes-from", metavar="REMOTE", help="fetch the sync's notes first")
    options = parser.parse_args()
    if options.install:
        install(os.environ.get("MXGITOPS_PIP_SOURCE", ""))
    if options.notes_from and (why := fetch_notes(options.notes_from)):
        print(f"the changed jobs' earlier runs are not shown: no notes ({why})", file=sys.stderr)
    full, comment, ok = compose(options.base, options.head)
    Path(options.out).write_text(full)
    print(full)
    if summary := os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(summary, "a") as stream:
            stream.write(comment)
    if options.post:
        post = post_github if options.post == "github" else post_gitlab
        try:
            print(post(comment), file=sys.stderr)
        except (urllib.error.URLError, OSError, KeyError, ValueError) as error:
            why = (
                f"HTTP {error.code} {error.reason}"
                if isinstance(error, urllib.error.HTTPError)
                else f"{type(error).__name__}: {error}"
            )
            print(
                f"could not post the comment: {why}; the pull request's plan comment is "
                "stale (it shows an earlier push): the plan is in this job's log",
                file=sys.stderr,
            )
            return POST_FAILED
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
