"""Each chat's documented message format, built from `Notice`s.

One message per destination and sync: one notice in full (its facts, the log's last
lines, links), or a burst grouped (the count by event, the first `GROUP_SHOWN` jobs
one line each, how many more). Every field is escaped for the provider's markup and
cut to its documented limit:

- Slack, Block Kit (a `header` of plain text, 150 characters; `section`s of mrkdwn,
  3,000; a `context`), and `text` as the notification's fallback; mrkdwn escapes
  `&`, `<`, `>`, so `<!here>` and `<@U123>` arrive as text.
- Microsoft Teams, through a Workflows webhook: a `message` whose one attachment is
  an Adaptive Card 1.4 (`TextBlock`s, a `FactSet`, `Action.OpenUrl`); its Markdown
  escaped, no `<at>` left (`notice.neutral`).
- Discord, an execute-webhook body: `content` (2,000 characters), one embed (title
  256, description 4,096, at most 25 fields of 256/1,024, 6,000 in all), and
  `allowed_mentions: {parse: []}`, so nobody is pinged whatever the text says.
- Google Chat, a card v2 (`cardsV2`: header, a section of `decoratedText`,
  `textParagraph` and `buttonList` widgets); its text is HTML, escaped.
- Mattermost, its Slack-compatible incoming webhook (`text`, Markdown, 4,000 here of
  the 16,383 it takes); Markdown escaped, mentions neutralised.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from mxgitops.outputs.notify.notice import GROUP_SHOWN, Notice, fit, neutral

SLACK_HEADER = 150
SLACK_TEXT = 3000
DISCORD_CONTENT = 2000
DISCORD_TITLE = 256
DISCORD_DESCRIPTION = 4096
DISCORD_FIELD_NAME = 256
DISCORD_FIELD_VALUE = 1024
DISCORD_FIELDS = 25
DISCORD_EMBED_TOTAL = 6000
MATTERMOST_TEXT = 4000
TEAMS_TEXT = 2000
GOOGLECHAT_TEXT = 4000
COLORS = {"failed": 0xD73A49, "sync-failed": 0xD73A49, "disrupted": 0xE3A008}
_MARKDOWN = re.compile(r"([\\`*_~|>\[\]])")
SHORT = {
    "failed": "failed",
    "succeeded": "succeeded",
    "disrupted": "disrupted",
    "waiting": "waiting",
    "sync-failed": "not synced",
}


def group_headline(notices: Sequence[Notice]) -> str:
    counts = Counter(n.event for n in notices)
    said = ", ".join(f"{counts[e]} {SHORT[e]}" for e in SHORT if counts[e])
    return f"{len(notices)} jobs need a look: {said}"


def headline(notices: Sequence[Notice]) -> str:
    return notices[0].headline if len(notices) == 1 else group_headline(notices)


def one_line(notice: Notice) -> str:
    said = f"{notice.subject} {SHORT[notice.event]}"
    if notice.reason:
        said += f": {notice.reason}"
    return said


def _rest(notices: Sequence[Notice]) -> str:
    more = len(notices) - GROUP_SHOWN
    return f"and {more} more" if more > 0 else ""


def slack_escape(text: str) -> str:
    return neutral(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def markdown_escape(text: str) -> str:
    return neutral(_MARKDOWN.sub(r"\\\1", text))


def code(text: str, escape: Callable[[str], str] = lambda s: s) -> str:
    """A log in a fenced block it cannot close: its backticks become look-alikes."""
    return "```\n" + neutral(escape(text.replace("`", "\u02cb"))) + "\n```"


def slack(notices: Sequence[Notice]) -> dict[str, Any]:
    first = notices[0]
    if len(notices) == 1:
        lines = [f"*{k}:* {slack_escape(v)}" for k, v in first.facts()]
    else:
        lines = [f"• {slack_escape(one_line(n))}" for n in notices[:GROUP_SHOWN]]
        lines += [_rest(notices)] if _rest(notices) else []
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": fit(neutral(headline(notices)), SLACK_HEADER)},
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": _fit_lines(lines, SLACK_TEXT)}},
    ]
    if len(notices) == 1 and first.log:
        log = fit(first.log, SLACK_TEXT - 10, lambda s: code(s, slack_escape))
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": log}})
    links = [f"<{_slack_url(url)}|{label}>" for label, url in _links(notices)]
    if links:
        blocks.append(
            {"type": "context", "elements": [{"type": "mrkdwn", "text": " · ".join(links)}]}
        )
    return {"text": fit(headline(notices), SLACK_TEXT, slack_escape), "blocks": blocks}


def _slack_url(url: str) -> str:
    return url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")


def _links(notices: Sequence[Notice]) -> list[tuple[str, str]]:
    if len(notices) == 1:
        return notices[0].links()
    commits = {n.commit_url for n in notices if n.commit_url}
    return [("Commit", commits.pop())] if len(commits) == 1 else []


def _fit_lines(lines: Sequence[str], limit: int) -> str:
    """Whole lines (already escaped) while they fit, then how many were left out."""
    kept: list[str] = []
    used = 0
    for n, line in enumerate(lines):
        cost = len(line) + 1
        if used + cost > limit - 40:
            kept.append(f"({len(lines) - n} more lines)")
            break
        kept.append(line)
        used += cost
    return "\n".join(kept) or "-"


def mattermost(notices: Sequence[Notice]) -> dict[str, Any]:
    first = notices[0]
    lines = [f"#### {markdown_escape(headline(notices))}"]
    if len(notices) == 1:
        lines += [f"**{k}:** {markdown_escape(v)}" for k, v in first.facts()]
        if first.log:
            lines.append(code(first.log))
    else:
        lines += [f"- {markdown_escape(one_line(n))}" for n in notices[:GROUP_SHOWN]]
        lines += [_rest(notices)] if _rest(notices) else []
    lines += [" · ".join(f"[{label}]({_md_url(url)})" for label, url in _links(notices))]
    return {"username": "mxgitops", "text": _fit_lines([ln for ln in lines if ln], MATTERMOST_TEXT)}


def _md_url(url: str) -> str:
    return url.replace("(", "%28").replace(")", "%29").replace(" ", "%20")


def discord(notices: Sequence[Notice]) -> dict[str, Any]:
    first = notices[0]
    embed: dict[str, Any] = {
        "title": fit(headline(notices), DISCORD_TITLE, markdown_escape),
        "color": COLORS.get(first.event, 0x2DA44E) if len(notices) == 1 else COLORS["failed"],
    }
    if len(notices) == 1:
        embed["fields"] = [
            {
                "name": fit(k, DISCORD_FIELD_NAME),
                "value": fit(v, DISCORD_FIELD_VALUE, markdown_escape),
                "inline": len(v) < 40,
            }
            for k, v in first.facts()[:DISCORD_FIELDS]
        ]
        description = code(first.log) if first.log else ""
    else:
        lines = [f"- {markdown_escape(one_line(n))}" for n in notices[:GROUP_SHOWN]]
        description = "\n".join(lines + ([_rest(notices)] if _rest(notices) else []))
    links = _links(notices)
    if links:
        embed["url"] = links[-1][1]
        description += "\n" + " · ".join(f"[{label}]({_md_url(url)})" for label, url in links)
    rest = (
        DISCORD_EMBED_TOTAL
        - len(embed["title"])
        - sum(len(f["name"]) + len(f["value"]) for f in embed.get("fields", ()))
    )
    if description.strip():
        embed["description"] = fit(description.strip(), min(DISCORD_DESCRIPTION, rest - 10))
    return {
        "content": fit(headline(notices), DISCORD_CONTENT, markdown_escape),
        "embeds": [embed],
        "allowed_mentions": {"parse": []},
    }


def _teams_text(text: str) -> str:
    return markdown_escape(text)  # `<at>` too: neutral breaks every tag


def msteams(notices: Sequence[Notice]) -> dict[str, Any]:
    first = notices[0]
    body: list[dict[str, Any]] = [
        {
            "type": "TextBlock",
            "text": fit(headline(notices), TEAMS_TEXT, _teams_text),
            "weight": "Bolder",
            "size": "Medium",
            "wrap": True,
        }
    ]
    if len(notices) == 1:
        facts = [{"title": k, "value": fit(v, TEAMS_TEXT, _teams_text)} for k, v in first.facts()]
        body.append({"type": "FactSet", "facts": facts})
        if first.log:
            text = fit(first.log, TEAMS_TEXT, neutral)
            body.append({"type": "TextBlock", "text": text, "fontType": "Monospace", "wrap": True})
    else:
        lines = [f"- {_teams_text(one_line(n))}" for n in notices[:GROUP_SHOWN]]
        lines += [_rest(notices)] if _rest(notices) else []
        body.append({"type": "TextBlock", "text": _fit_lines(lines, TEAMS_TEXT), "wrap": True})
    card = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
        "actions": [
            {"type": "Action.OpenUrl", "title": label, "url": url} for label, url in _links(notices)
        ],
    }
    return {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": card,
            }
        ],
    }


def _html(text: str) -> str:
    return neutral(html.escape(text, quote=True))


def googlechat(notices: Sequence[Notice]) -> dict[str, Any]:
    first = notices[0]
    widgets: list[dict[str, Any]] = []
    if len(notices) == 1:
        for label, value in first.facts():
            text = fit(value, 1000, _html)
            widgets.append({"decoratedText": {"topLabel": label, "text": text, "wrapText": True}})
        if first.log:
            text = fit(first.log, GOOGLECHAT_TEXT // 2, lambda s: _html(s).replace("\n", "<br>"))
            widgets.append({"textParagraph": {"text": text}})
    else:
        lines = [_html(one_line(n)) for n in notices[:GROUP_SHOWN]]
        lines += [_rest(notices)] if _rest(notices) else []
        widgets.append({"textParagraph": {"text": _fit_lines(lines, GOOGLECHAT_TEXT)}})
    buttons = [
        {"text": label, "onClick": {"openLink": {"url": url}}} for label, url in _links(notices)
    ]
    if buttons:
        widgets.append({"buttonList": {"buttons": buttons}})
    said = "\n".join(n.key for n in notices)
    return {
        "cardsV2": [
            {
                "cardId": "mxgitops-" + hashlib.sha256(said.encode()).hexdigest()[:16],
                "card": {
                    "header": {
                        "title": fit(headline(notices), 200, _html),
                        "subtitle": "mxgitops",
                    },
                    "sections": [{"widgets": widgets}],
                },
            }
        ]
    }
