"""The scenario player: one self-contained HTML page (`mastemu view RUN.db`).

The page is `player.html` with `player.css`, `player.js` and the run's
recording (`recording.Recording.as_json`) inlined: no file or network
access when it is opened. Plain JavaScript and SVG, no library.

What must stay true: nothing from the run reaches the page as markup. The
recording is JSON inside `<script type="application/json">`, with `<`, `>`,
`&` and the line separators U+2028/2029 written as `\\uXXXX` escapes, so no
name (`</script><script>…`) can end the element or start another; the
script reads it with `JSON.parse` and puts every name in the page with
`textContent` or SVG text nodes, never as HTML. The output is a pure
function of the run database (no clock, no path), so two views of one run
are byte-identical.
"""

from __future__ import annotations

from importlib import resources

import msgspec

from actors.mast.timeline.recording import Recording

_JSON = msgspec.json.Encoder(order="deterministic")
# JSON's own escapes for what would let embedded text leave its <script> element.
_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def embedded_json(value: object) -> str:
    """`value` as JSON safe to put inside a `<script type="application/json">` element."""
    data = _JSON.encode(value)
    for raw, escaped in _ESCAPES:
        data = data.replace(raw, escaped)
    return data.decode()


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def render(rec: Recording) -> str:
    """The player page of one recording."""
    html = _asset("player.html")
    # Replaced in this order, each once: the data comes last, so a run's text
    # can never be taken for a placeholder.
    html = html.replace("/*CSS*/", _asset("player.css"), 1)
    html = html.replace("/*JS*/", _asset("player.js"), 1)
    return html.replace("/*DATA*/", embedded_json(rec.as_json()), 1)
