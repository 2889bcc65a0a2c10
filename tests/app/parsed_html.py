"""Reading rendered pages with a real HTML parser (BeautifulSoup over the stdlib's
html.parser), for tests that look at what a page shows: the element that carries a
value, found by a CSS selector, then its text or its attributes.

A substring check on the page bytes still passes when the value lands in the wrong
element, in an attribute, or in a comment; a check on the parsed element does not.
Checks about the bytes themselves (raw markup that must not appear: escaping, XSS)
stay substring checks in the tests, where they are right."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, Tag

_SPACE = re.compile(r"\s+")


def page(html: str) -> BeautifulSoup:
    """The parsed page (or fragment). html.parser: no native parser to install, and it keeps
    a fragment a fragment (no <html> or <body> added around it)."""
    return BeautifulSoup(html, "html.parser")


def _root(doc: str | Tag) -> Tag:
    return page(doc) if isinstance(doc, str) else doc


def text(el: Tag | None) -> str:
    """The element's text with runs of whitespace (template indentation, newlines) made one space."""
    assert el is not None, "no such element"
    return _SPACE.sub(" ", el.get_text()).strip()


def one(doc: str | Tag, css: str) -> Tag:
    """The single element `css` selects; fails, naming the selector, when there are none or several."""
    found = _root(doc).select(css)
    assert len(found) == 1, f"{css!r} selects {len(found)} elements, not 1"
    return found[0]


def select_texts(doc: str | Tag, css: str) -> list[str]:
    """The normalised text of every element `css` selects, in page order."""
    return [text(el) for el in _root(doc).select(css)]


def attrs(doc: str | Tag, css: str, name: str) -> list:
    """Attribute `name` of every element `css` selects that has it, in page order (for class:
    the list of classes, as bs4 splits it)."""
    return [el.get(name) for el in _root(doc).select(css) if el.has_attr(name)]


def texts_of_class(html: str, cls: str) -> list[str]:
    """The text content of each element whose class list holds `cls`, in page order
    (not normalised: callers compare with startswith and exact strings)."""
    return [el.get_text() for el in page(html).find_all(class_=cls)]
