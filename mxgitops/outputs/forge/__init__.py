"""Commit statuses on the forge (GitHub, GitLab, Gitea/Forgejo): the one place mxgitops
talks to a forge's API.

`wanted` decides, purely from a sync's `Summary`, which status each commit should show;
`providers` knows how each forge reads and writes one; `api` makes the HTTP calls
(rate limits waited out within a deadline); `post` reads each commit's status back and
writes only what changed, so a sync that changed nothing writes nothing.
"""
