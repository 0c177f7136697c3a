"""mxgitops.source.repository against real git: bare remotes via file:// and a loopback
HTTP server.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mxgitops.errors import GitError
from mxgitops.source.gitauth import Credentials, redact
from mxgitops.source.gittree import export_tree, resolve
from mxgitops.source.repository import NOTES_REF, Repository

if TYPE_CHECKING:  # imported for real by pytest_plugins, so that its asserts are rewritten
    from tests.gitrepos.fixtures import GitHttpServer, GitRemote

    MakeRemote = Callable[..., GitRemote]
    MakeServer = Callable[..., GitHttpServer]

# Shared git fixtures (make_git_remote, make_git_http_server, git_isolation).
SECRET = "s3cr3t-Tok3n"


def run_git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def remote(make_git_remote: MakeRemote) -> GitRemote:
    return make_git_remote(files={"jobs/a.yaml": "name: a\n", "README.md": "jobs\n"})


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def all_cache_bytes(cache: Path) -> bytes:
    """Every byte stored under the cache directory (config, refs, objects, logs)."""
    return b"".join(p.read_bytes() for p in sorted(cache.rglob("*")) if p.is_file())


def full_error_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


# -- redact --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://user:pw@host/r.git", "https://user:***@host/r.git"),
        ("fatal: 'http://a:b@h:8080/x' failed", "fatal: 'http://a:***@h:8080/x' failed"),
        ("https://ghp_TOKEN@github.com/o/r", "https://***@github.com/o/r"),
        ("ssh://git@host/r.git", "ssh://git@host/r.git"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        ("https://host/r.git mail me@example.com", "https://host/r.git mail me@example.com"),
    ],
)
def test_redact_hides_url_credentials_and_keeps_host_and_path(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_redact_hides_given_secrets_anywhere() -> None:
    assert redact(f"header Bearer {SECRET} sent", [SECRET, ""]) == "header Bearer *** sent"


# -- clone, fetch, checkout ---------------------------------------------------------------


def test_first_sync_clones_and_the_next_only_fetches(remote: GitRemote, cache: Path) -> None:
    repository = Repository(remote.url, cache_dir=cache)
    first = repository.sync()
    assert first.cloned
    assert first.recloned_reason is None
    assert first.commit == remote.rev()
    assert first.ref == "main"
    assert (first.root / "jobs/a.yaml").read_text() == "name: a\n"
    assert first.root.parent == cache

    new = remote.commit({"jobs/b.yaml": "name: b\n"})
    second = Repository(remote.url, cache_dir=cache).sync()
    assert not second.cloned
    assert second.commit == new
    assert (second.root / "jobs/b.yaml").exists()


def test_sync_without_new_commit_leaves_the_work_tree_alone(remote: GitRemote, cache: Path) -> None:
    repository = Repository(remote.url, cache_dir=cache)
    root = repository.sync().root
    untracked = root / "left-alone.txt"  # a checkout would clean it away
    untracked.write_text("x")
    before = (root / "jobs/a.yaml").stat().st_mtime_ns

    again = repository.sync()
    assert not again.cloned
    assert untracked.exists()
    assert (root / "jobs/a.yaml").stat().st_mtime_ns == before


def test_deleted_and_stray_files_do_not_survive_a_new_commit(
    remote: GitRemote, cache: Path
) -> None:
    repository = Repository(remote.url, cache_dir=cache)
    root = repository.sync().root
    (root / "jobs/stray.yaml").write_text("name: stray\n")
    remote.commit({"jobs/a.yaml": None, "jobs/c.yaml": "name: c\n"})

    repository.sync()
    assert sorted(p.name for p in (root / "jobs").iterdir()) == ["c.yaml"]


def test_checks_out_a_branch_a_tag_and_a_commit(remote: GitRemote, cache: Path) -> None:
    first = remote.rev()
    remote.tag("v1")
    remote.switch("feature")
    feature = remote.commit({"jobs/f.yaml": "name: f\n"})
    repository = Repository(remote.url, cache_dir=cache)

    assert repository.sync("feature").commit == feature
    assert repository.sync("refs/heads/feature").commit == feature
    assert repository.sync("v1").commit == first
    assert repository.sync("refs/tags/v1").commit == first
    assert repository.sync(first).commit == first
    abbreviated = repository.sync(first[:8])
    assert abbreviated.commit == first
    assert abbreviated.ref == first[:8]
    assert not (abbreviated.root / "jobs/f.yaml").exists()


@pytest.mark.parametrize("ref", ["nope", "deadbeef", "--upload-pack=evil", "main..x", "a b"])
def test_unknown_or_malformed_ref_is_a_git_error(remote: GitRemote, cache: Path, ref: str) -> None:
    with pytest.raises(GitError, match="branch, tag or commit"):
        Repository(remote.url, cache_dir=cache).sync(ref)


def test_follows_the_remote_default_branch(make_git_remote: MakeRemote, cache: Path) -> None:
    remote = make_git_remote(branch="trunk")
    checkout = Repository(remote.url, cache_dir=cache).sync()
    assert (checkout.ref, checkout.commit) == ("trunk", remote.rev())


def test_a_local_path_works_like_a_url(remote: GitRemote, cache: Path) -> None:
    checkout = Repository(str(remote.bare), cache_dir=cache).sync()
    assert checkout.commit == remote.rev()
    assert not Repository(str(remote.bare), cache_dir=cache).sync().cloned


# -- sub-path -------------------------------------------------------------------------------


def test_subpath_is_validated_and_joined(remote: GitRemote, cache: Path) -> None:
    checkout = Repository(remote.url, cache_dir=cache).sync(subpath="jobs/")
    assert checkout.subpath == "jobs"
    assert checkout.path == checkout.root / "jobs"
    assert (checkout.path / "a.yaml").is_file()


@pytest.mark.parametrize("subpath", ["missing", "README.md", "../outside", "/etc", "jobs/../.."])
def test_bad_subpath_is_a_git_error(remote: GitRemote, cache: Path, subpath: str) -> None:
    with pytest.raises(GitError, match="sub-path"):
        Repository(remote.url, cache_dir=cache).sync(subpath=subpath)


def test_symlink_subpath_leaving_the_repo_is_refused(remote: GitRemote, cache: Path) -> None:
    (remote.work / "escape").symlink_to("/etc")
    remote.commit({})
    with pytest.raises(GitError, match="not a directory"):
        Repository(remote.url, cache_dir=cache).sync(subpath="escape")


# -- broken caches --------------------------------------------------------------------------


def _not_a_repo(root: Path, _: GitRemote) -> None:
    shutil.rmtree(root / ".git")
    (root / "junk.txt").write_text("junk")


def _head_deleted(root: Path, _: GitRemote) -> None:
    (root / ".git/HEAD").unlink()


def _head_garbage(root: Path, _: GitRemote) -> None:
    (root / ".git/HEAD").write_text("garbage\n")


def _other_origin(root: Path, remote: GitRemote) -> None:
    run_git("remote", "set-url", "origin", "https://elsewhere.example/other.git", cwd=root)


def _interrupted_clone(root: Path, remote: GitRemote) -> None:
    shutil.rmtree(root)
    root.mkdir()
    run_git("init", "--quiet", cwd=root)
    run_git("remote", "add", "origin", remote.url, cwd=root)


def _objects_lost(root: Path, _: GitRemote) -> None:
    shutil.rmtree(root / ".git/objects")
    (root / ".git/objects/pack").mkdir(parents=True)
    (root / ".git/objects/info").mkdir()


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_not_a_repo, "not a git repository"),
        (_head_deleted, "broken .git"),
        (_head_garbage, "broken .git"),
        (_other_origin, "another remote (https://elsewhere.example/other.git)"),
        (_interrupted_clone, "interrupted clone"),
        (_objects_lost, "HEAD does not point to a commit"),
    ],
)
def test_a_broken_cache_is_cloned_again_and_says_why(
    remote: GitRemote,
    cache: Path,
    damage: Callable[[Path, GitRemote], None],
    reason: str,
) -> None:
    repository = Repository(remote.url, cache_dir=cache)
    damage(repository.sync().root, remote)

    checkout = repository.sync()
    assert checkout.cloned
    assert checkout.recloned_reason is not None
    assert reason in checkout.recloned_reason
    assert checkout.commit == remote.rev()
    assert (checkout.root / "jobs/a.yaml").is_file()
    assert not repository.sync().cloned


def test_a_cache_whose_fetch_fails_while_the_remote_is_fine_is_cloned_again(
    remote: GitRemote, cache: Path
) -> None:
    repository = Repository(remote.url, cache_dir=cache)
    root = repository.sync().root
    remote.commit({"jobs/b.yaml": "name: b\n"})
    shutil.rmtree(root / ".git/refs/remotes")
    (root / ".git/refs/remotes").write_text("a file where a directory belongs\n")

    checkout = repository.sync()
    assert checkout.cloned
    assert checkout.recloned_reason is not None
    assert "fetching into the cache failed" in checkout.recloned_reason


def test_an_outage_keeps_the_cache(remote: GitRemote, cache: Path) -> None:
    repository = Repository(remote.url, cache_dir=cache)
    commit = repository.sync().commit
    away = remote.bare.with_name("away.git")
    remote.bare.rename(away)

    with pytest.raises(GitError, match="cannot fetch from file://"):
        repository.sync()
    assert (repository.path / "jobs/a.yaml").is_file()
    away.rename(remote.bare)
    checkout = repository.sync()
    assert (checkout.cloned, checkout.commit) == (False, commit)


# -- force-push -------------------------------------------------------------------------------


def test_a_force_pushed_branch_is_followed_and_reported(remote: GitRemote, cache: Path) -> None:
    remote.commit({"jobs/b.yaml": "name: b\n"})
    repository = Repository(remote.url, cache_dir=cache)
    old = repository.sync().commit

    new = remote.rewrite_last_commit({"jobs/c.yaml": "name: c\n"})
    checkout = repository.sync()
    assert checkout.commit == new
    assert checkout.forced_update == (
        f"branch main was force-pushed: {old[:7]}...{new[:7]} (history rewritten)"
    )
    assert not (checkout.root / "jobs/b.yaml").exists()
    assert repository.sync().forced_update is None


def test_a_fast_forward_is_not_a_forced_update(remote: GitRemote, cache: Path) -> None:
    repository = Repository(remote.url, cache_dir=cache)
    repository.sync()
    remote.commit({"jobs/b.yaml": "name: b\n"})
    assert repository.sync().forced_update is None


# -- credentials ---------------------------------------------------------------------------


def test_token_is_sent_as_a_header_and_never_stored(
    remote: GitRemote,
    cache: Path,
    make_git_http_server: MakeServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = make_git_http_server(remote.bare.parent, {("x-access-token", SECRET)})
    caplog.set_level(logging.DEBUG)
    repository = Repository(server.url("jobs"), cache_dir=cache, credentials=Credentials(SECRET))

    checkout = repository.sync()
    assert checkout.commit == remote.rev()
    repository.write_note(checkout.commit, "synced\n")
    repository.push_notes()
    assert remote.note(checkout.commit) == "synced\n"
    assert SECRET.encode() not in all_cache_bytes(cache)
    assert SECRET not in caplog.text
    assert all(SECRET not in path for path in server.paths)


def test_credentials_in_the_url_work_and_never_show(
    remote: GitRemote,
    cache: Path,
    make_git_http_server: MakeServer,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    server = make_git_http_server(remote.bare.parent, {("robot", SECRET)})
    caplog.set_level(logging.DEBUG)
    url = server.url("jobs", f"robot:{SECRET}")
    repository = Repository(url, cache_dir=cache)

    checkout = repository.sync()
    repository.write_note(checkout.commit, "synced\n")
    repository.push_notes()
    assert checkout.url == server.url("jobs", "robot:***")
    assert SECRET not in repr(checkout) + repository.url
    assert SECRET.encode() not in all_cache_bytes(cache)
    config = (checkout.root / ".git/config").read_text()
    assert f"url = {server.url('jobs')}" in config
    out, err = capfd.readouterr()
    assert SECRET not in out + err + caplog.text
    assert SECRET not in (repository.read_note(checkout.commit) or "")


@pytest.mark.parametrize("userinfo", [f"robot:{SECRET}", SECRET])
def test_refused_credentials_are_a_redacted_git_error(
    remote: GitRemote, cache: Path, make_git_http_server: MakeServer, userinfo: str
) -> None:
    server = make_git_http_server(remote.bare.parent, {("robot", "the-right-one")})
    with pytest.raises(GitError) as raised:
        Repository(server.url("jobs", userinfo), cache_dir=cache).sync()
    assert "cannot fetch from http://" in str(raised.value)
    assert SECRET not in full_error_text(raised.value)
    assert not list(cache.iterdir())  # no half-made cache left behind


def test_an_unreachable_remote_is_a_redacted_git_error(cache: Path, git_isolation: None) -> None:
    url = f"https://user:{SECRET}@127.0.0.1:1/repo.git"
    repository = Repository(url, cache_dir=cache, credentials=Credentials(token="tok-" + SECRET))
    with pytest.raises(GitError) as raised:
        repository.sync()
    message = str(raised.value)
    assert "https://user:***@127.0.0.1:1/repo.git" in message
    assert SECRET not in full_error_text(raised.value)
    causes = []
    cause: BaseException | None = raised.value
    while cause is not None:
        causes.append(type(cause).__name__)
        cause = cause.__cause__
    assert causes == ["GitError", "CommandFailed"]  # git's own failure stays chained


def test_ssh_key_and_known_hosts_are_passed_to_ssh(
    tmp_path: Path, cache: Path, git_isolation: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake `ssh` first on PATH records how git calls it, then fails like a closed port."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "ssh-args"
    fake = bin_dir / "ssh"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}\nexit 255\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path('/usr/bin')}:{Path('/bin')}")
    key, known = tmp_path / "deploy key", tmp_path / "known_hosts"
    credentials = Credentials(ssh_key=key, known_hosts=known)

    with pytest.raises(GitError):
        Repository("git@git.example:org/jobs.git", cache_dir=cache, credentials=credentials).sync()
    args = record.read_text().splitlines()
    assert args[args.index("-i") + 1] == str(key)
    assert {"IdentitiesOnly=yes", f"UserKnownHostsFile={known}", "StrictHostKeyChecking=yes"} <= (
        set(args)
    )
    assert "git@git.example" in args


# -- notes ---------------------------------------------------------------------------------


def test_write_note_reports_whether_anything_changed(remote: GitRemote, cache: Path) -> None:
    repository = Repository(remote.url, cache_dir=cache)
    commit = repository.sync().commit
    assert repository.read_note(commit) is None

    assert repository.write_note(commit, "status: ok\n\n")
    notes_tip = run_git("rev-parse", NOTES_REF, cwd=repository.path)
    assert not repository.write_note(commit, "status: ok\n\n")
    assert run_git("rev-parse", NOTES_REF, cwd=repository.path) == notes_tip
    assert repository.read_note(commit[:10]) == "status: ok\n\n"
    assert remote.note(commit) is None  # local until pushed

    repository.push_notes()
    assert remote.note(commit) == "status: ok\n\n"
    repository.push_notes()  # nothing new: a no-op


def test_notes_need_a_synced_cache(remote: GitRemote, cache: Path) -> None:
    with pytest.raises(GitError, match="sync before"):
        Repository(remote.url, cache_dir=cache).read_note(remote.rev())


def test_notes_are_found_in_a_fanned_out_notes_tree(remote: GitRemote, cache: Path) -> None:
    """Past 256 notes git stores them as ab/cdef...: a long-lived notes ref looks like that."""
    stream = ["reset refs/notes/mxgitops\n"]
    for number in range(300):
        stream.append(
            f"commit refs/heads/main\nmark :{number + 1}\n"
            f"committer T <t@t> {1_700_000_000 + number} +0000\ndata 2\nc\n"
            + (f"from {remote.rev()}\n" if number == 0 else "")
        )
    stream.append("commit refs/notes/mxgitops\ncommitter T <t@t> 1700000000 +0000\ndata 2\nn\n")
    stream += [f"N inline :{n + 1}\ndata {len(str(n)) + 1}\n{n}\n" for n in range(300)]
    subprocess.run(
        ["git", "fast-import", "--quiet"],
        cwd=remote.work,
        check=True,
        input="".join(stream).encode(),
    )
    remote.git("push", "--quiet", "origin", "main", "refs/notes/mxgitops")
    assert "/" in run_git("ls-tree", "--name-only", "-r", NOTES_REF, cwd=remote.bare).split()[0]
    repository = Repository(remote.url, cache_dir=cache)
    tip = repository.sync().commit

    assert repository.read_note(remote.rev("main~10")) == "289\n"
    assert repository.write_note(tip, "299 again\n")
    assert repository.read_note(tip) == "299 again\n"
    assert not repository.write_note(remote.rev("main~1"), "298\n")


def test_notes_written_by_another_cache_are_read_after_sync(
    remote: GitRemote, tmp_path: Path
) -> None:
    writer = Repository(remote.url, cache_dir=tmp_path / "writer")
    reader = Repository(remote.url, cache_dir=tmp_path / "reader")
    commit = writer.sync().commit
    reader.sync()
    writer.write_note(commit, "from writer\n", notes_ref="refs/notes/custom")
    writer.push_notes(notes_ref="refs/notes/custom")

    assert reader.read_note(commit, notes_ref="refs/notes/custom") is None
    reader.sync()
    assert reader.read_note(commit, notes_ref="refs/notes/custom") == "from writer\n"
    assert reader.read_note(commit) is None


def test_racing_writers_lose_no_note_and_the_later_writer_wins_its_commit(
    remote: GitRemote, tmp_path: Path
) -> None:
    c1 = remote.rev()
    c2 = remote.commit({"jobs/b.yaml": "name: b\n"})
    c3 = remote.commit({"jobs/c.yaml": "name: c\n"})
    first = Repository(remote.url, cache_dir=tmp_path / "first")
    second = Repository(remote.url, cache_dir=tmp_path / "second")
    first.sync()
    second.sync()

    first.write_note(c1, "first on c1\n")
    first.write_note(c3, "first on c3\n")
    second.write_note(c1, "second on c1\n")
    second.write_note(c2, "second on c2\n")
    first.push_notes()
    second.push_notes()  # rejected once: fetches, merges, retries

    assert remote.note(c1) == "second on c1\n"
    assert remote.note(c2) == "second on c2\n"
    assert remote.note(c3) == "first on c3\n"
    assert run_git("rev-list", "--merges", "--count", NOTES_REF, cwd=remote.bare) == "1"


def test_a_stale_local_note_does_not_overwrite_a_newer_remote_one(
    remote: GitRemote, tmp_path: Path
) -> None:
    c1 = remote.rev()
    c2 = remote.commit({"jobs/b.yaml": "name: b\n"})
    first = Repository(remote.url, cache_dir=tmp_path / "first")
    second = Repository(remote.url, cache_dir=tmp_path / "second")
    first.sync()
    first.write_note(c1, "v1\n")
    first.push_notes()
    second.sync()
    second.write_note(c1, "v2\n")
    second.push_notes()

    first.sync()
    assert first.read_note(c1) == "v2\n"
    first.write_note(c2, "first on c2\n")
    first.push_notes()
    assert (remote.note(c1), remote.note(c2)) == ("v2\n", "first on c2\n")


def test_concurrent_pushes_from_threads_keep_every_note(remote: GitRemote, tmp_path: Path) -> None:
    commits = [remote.commit({f"jobs/{i}.yaml": f"name: j{i}\n"}) for i in range(4)]
    writers = [Repository(remote.url, cache_dir=tmp_path / f"w{i}") for i in range(4)]
    for index, writer in enumerate(writers):
        writer.sync()
        writer.write_note(commits[index], f"writer {index}\n")
    errors: list[BaseException] = []

    def push(writer: Repository) -> None:
        try:
            writer.push_notes(attempts=len(writers) + 1)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=push, args=(w,)) for w in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [remote.note(c) for c in commits] == [f"writer {i}\n" for i in range(4)]


def test_sync_writes_nothing_to_the_remote_nor_to_the_local_notes(
    remote: GitRemote, tmp_path: Path
) -> None:
    commit = remote.rev()
    other = Repository(remote.url, cache_dir=tmp_path / "other")
    other.sync()
    other.write_note(commit, "elsewhere\n")
    other.push_notes()
    remote_refs = remote.refs()
    dry = Repository(remote.url, cache_dir=tmp_path / "dry")

    dry.sync()
    dry.sync()
    assert dry.read_note(commit) == "elsewhere\n"
    assert remote.refs() == remote_refs
    local_notes = run_git("for-each-ref", "refs/notes/mxgitops", cwd=dry.path)
    assert local_notes == ""


# -- helpers for other commands -----------------------------------------------------------


def test_resolve_and_export_tree_read_a_checkout_without_touching_it(
    remote: GitRemote, tmp_path: Path
) -> None:
    base = remote.rev()
    head = remote.commit({"jobs/a.yaml": "name: a2\n", "jobs/b.yaml": "name: b\n"})
    (remote.work / "jobs/a.yaml").write_text("uncommitted\n")

    assert resolve(remote.work, "HEAD~1") == base
    assert resolve(remote.work / "jobs", base[:7]) == base
    exported = export_tree(remote.work, base, tmp_path / "base", subpath="jobs")
    assert exported == tmp_path / "base/jobs"
    assert sorted(p.name for p in exported.iterdir()) == ["a.yaml"]
    whole = export_tree(remote.work, head, tmp_path / "head")
    assert (whole / "jobs/a.yaml").read_text() == "name: a2\n"
    assert (remote.work / "jobs/a.yaml").read_text() == "uncommitted\n"
    with pytest.raises(GitError):
        resolve(remote.work, "no-such-rev")
    with pytest.raises(GitError, match="sub-path"):
        export_tree(remote.work, head, tmp_path / "x", subpath="nope")
