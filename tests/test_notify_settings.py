"""The notifications file: read as the operator wrote it, refused in one line with a
did-you-mean when misspelt, its addresses and keys never shown."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from mxgitops.errors import ConfigError
from mxgitops.outputs import sinks
from mxgitops.outputs.notify.settings import read_file
from mxgitops.settings.config import SyncConfig

SECRET_URL = "https://hooks.slack.example/services/T000/B000/XXXXSECRETXXXX"


def written(tmp_path: Path, data: object) -> Path:
    (tmp_path / "slack.url").write_text(SECRET_URL + "\n")
    path = tmp_path / "notifications.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def one(**entry: object) -> dict[str, object]:
    return {"notifications": [{"provider": "slack", "addressFile": "slack.url", **entry}]}


def refused(tmp_path: Path, data: object) -> str:
    with pytest.raises(ConfigError) as caught:
        read_file(written(tmp_path, data))
    message = str(caught.value)
    assert "\n" not in message
    assert "XXXXSECRETXXXX" not in message
    return message


def test_a_destination_is_read_with_its_address_beside_the_file(tmp_path: Path) -> None:
    path = written(
        tmp_path,
        {
            "dashboardURL": "https://mx.example/",
            "notifications": [
                {
                    "name": "ml-team",
                    "provider": "slack",
                    "addressFile": "slack.url",
                    "events": ["waiting", "failed"],
                    "waitingAfter": "1h30m",
                    "namespaces": ["ml-*"],
                    "jobs": ["train-*"],
                }
            ],
        },
    )
    found = read_file(path)
    (destination,) = found.destinations
    assert destination.address == SECRET_URL
    assert destination.events == ("failed", "waiting")  # in the file's order of events
    assert destination.waiting_after == timedelta(hours=1, minutes=30)
    assert destination.wants("failed", "ml-a", "train-1")
    assert not destination.wants("failed", "other", "train-1")
    assert not destination.wants("failed", "ml-a", "eval")
    assert not destination.wants("succeeded", "ml-a", "train-1")
    assert not destination.wants("failed")  # the repository's trouble: not this team's
    assert "XXXXSECRETXXXX" not in repr(found)
    assert found.job_link("ml-a", "train-1") == "https://mx.example/jobs/ml-a/train-1"


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (
            one(event=["failed"]),
            "notifications[0].event: not a key of a destination; did you mean 'events'?",
        ),
        (
            one(provider="slak"),
            "notifications[0].provider: 'slak' is no provider; did you mean 'slack'?",
        ),
        (
            one(events=["faild"]),
            "notifications[0].events: 'faild' is no event; did you mean 'failed'?",
        ),
        (
            {**one(), "dashboardUrl": "x"},
            "dashboardUrl: not a key of this file; did you mean 'dashboardURL'?",
        ),
        (one(waitingAfter="soon"), "notifications[0].waitingAfter: expected a duration"),
        (one(namespaces="ml"), "notifications[0].namespaces: expected a list"),
        (one(secretFile="k"), "notifications[0].secretFile: only generic-hmac signs"),
        (
            {"notifications": [{"provider": "generic-hmac", "addressFile": "slack.url"}]},
            "notifications[0].secretFile: missing",
        ),
        ({"notifications": []}, "notifications: expected a list of destinations"),
        ({"other": 1}, "must be one YAML mapping with a notifications list"),
    ],
)
def test_a_misspelt_file_is_one_line_saying_what_was_meant(
    tmp_path: Path, data: object, said: str
) -> None:
    assert said in refused(tmp_path, data)


def test_an_address_that_is_not_a_url_is_refused_without_showing_it(tmp_path: Path) -> None:
    path = written(tmp_path, one())
    (tmp_path / "slack.url").write_text("ftp://XXXXSECRETXXXX/\n")
    with pytest.raises(ConfigError) as caught:
        read_file(path)
    assert "its content is not an http or https URL" in str(caught.value)
    assert "XXXXSECRETXXXX" not in str(caught.value)
    (tmp_path / "slack.url").unlink()
    with pytest.raises(ConfigError, match=r"slack\.url cannot be read"):
        read_file(path)


def test_a_wrong_file_fails_the_notifications_alone(tmp_path: Path) -> None:
    """A sink whose settings are wrong is Unusable: the apply and the other sinks go on,
    and the summary says why, as for a status token not mounted."""
    path = written(tmp_path, one(provider="teams"))
    (made,) = sinks.sinks_for(SyncConfig(notifications_file=path, events=False))
    assert isinstance(made, sinks.Unusable)
    assert made.phase == "notify"
    assert "did you mean 'msteams'?" in made.why
