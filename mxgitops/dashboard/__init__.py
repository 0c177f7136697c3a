"""`mxgitops dashboard`: a read-only web page over the notes of the tracked branch.

`snapshot` (what the pages show, pure), `charts` (training curves as SVG geometry,
pure), `pages` (a path in, HTML out, through Jinja2 with autoescaping), `loading` (the
one edge: the branch and its notes read through `source/`) and `server` (the HTTP edge,
read-only, and the refresh thread). No cluster is asked: git is the store.
"""
