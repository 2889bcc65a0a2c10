"""Reading rendered pages with a real HTML parser (the stdlib's), for tests that look at what a page shows."""

from __future__ import annotations

from html.parser import HTMLParser


#: Elements without an end tag: they must not deepen the nesting count.
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})


class _Texts(HTMLParser):
    """The text inside every element carrying `cls` (a real parser, not a substring search)."""

    def __init__(self, cls: str):
        super().__init__()
        self.cls, self.depth, self.texts = cls, 0, []

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            return
        if self.depth:
            self.depth += 1
        elif self.cls in (dict(attrs).get("class") or "").split():
            self.depth = 1
            self.texts.append("")

    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.texts[-1] += data


def texts_of_class(html: str, cls: str) -> list[str]:
    """The text content of each element whose class list holds `cls`, in page order."""
    parser = _Texts(cls)
    parser.feed(html)
    return parser.texts
