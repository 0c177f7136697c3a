"""Helpers of `tests/outputs/test_forge_hostile.py` that other test modules use too."""

from __future__ import annotations

from typing import Any

from mxgitops.outputs.forge.post import StatusSettings, settings_for


def checked_settings(**given: Any) -> StatusSettings:
    """`settings_for` of a GitHub repository, but for what is `given`."""
    values: dict[str, Any] = {
        "provider": "github",
        "api_url": None,
        "repository": "org/jobs",
        "repo": "https://github.com/org/jobs.git",
        "token": "t",
        "url_template": "",
        "timeout": 10,
    }
    return settings_for(**{**values, **given})
