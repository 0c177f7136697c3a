"""`docs/reference/notifications.md`: what each notification provider is sent for one
failed job, made by mxgitops' own payload code (`mxgitops.outputs.notify`), so the
examples are what a chat receives, not a description of it. Written by
`scripts/generate_reference.py` with the other reference pages."""

from __future__ import annotations

import json

from mxgitops.outputs.notify import chat, webhook
from mxgitops.outputs.notify.notice import Notice
from mxgitops.outputs.notify.sink import PAYLOADS

INSTANCE = "example"
LOG = (
    "INFO Epoch[2] Validation-accuracy=0.7422\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/train/fit.py", line 88, in <module>\n'
    "FloatingPointError: loss is NaN <!here> @channel"
)
NOTICE = Notice(
    event="failed",
    key="vision/resnet50@3f9c2d1e8a7b",
    namespace="vision",
    name="resnet50",
    state="Failed",
    reason="WORKER 0 exited with 1 (Error)",
    commit="3f9c2d1e8a7b5c4d3e2f1a0b9c8d7e6f5a4b3c2d",
    author="Ada Lovelace",
    exit_code=1,
    log=LOG,
    training="epoch 3/10 · validation-accuracy 0.7422 · 14m05s · 0.94 GPU-hours",
    commit_url="https://git.example.com/ml/jobs/commit/3f9c2d1e8a7b5c4d3e2f1a0b9c8d7e6f5a4b3c2d",
    dashboard_url="https://mxgitops.example.com/jobs/vision/resnet50",
)
TITLES = {
    "slack": "Slack (Block Kit)",
    "msteams": "Microsoft Teams (an Adaptive Card, through a Workflows webhook)",
    "discord": "Discord (one embed, no mention parsed)",
    "googlechat": "Google Chat (a card v2)",
    "mattermost": "Mattermost (its Slack-compatible incoming webhook)",
}


def payloads() -> dict[str, object]:
    """Each provider's JSON body for `NOTICE`; `generic` for both generic providers."""
    made: dict[str, object] = {name: build([NOTICE]) for name, build in PAYLOADS.items()}
    made["generic"] = webhook.generic_body([NOTICE], INSTANCE)
    return made


def page(header: str) -> str:
    said = chat.headline([NOTICE])
    parts = [
        header,
        "",
        "# Notification payloads",
        "",
        "What each provider is sent when one job fails: the job `vision/resnet50`, its",
        "worker's exit code and log tail (whose `<!here>` and `@channel` arrive inert), the",
        "training record's summary, the commit, its author and the links. How to set up",
        "notifications: [Where to see results](../guides/results.md#notifications). A burst",
        "of jobs is one message of the same shape, the first five jobs one line each.",
        "",
        f"The headline every provider shows: `{said}`.",
    ]
    for name, body in payloads().items():
        title = TITLES.get(name, "generic and generic-hmac (JSON for a program)")
        parts += ["", f"## {title}", "", "```json", json.dumps(body, indent=2), "```"]
    parts += [
        "",
        "`generic-hmac` sends the same body with the header `X-Signature: sha256=<hex>`,",
        "the HMAC-SHA256 of the body's bytes keyed with the secret file's content.",
        "",
    ]
    return "\n".join(parts)
