"""HTML as Markdown for the model, by ``markdownify`` over a BeautifulSoup tree without scripts, styles and chrome."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup
from markdownify import MarkdownConverter

__all__ = ["html_to_markdown"]

#: elements whose content is never text for a reader
_DROPPED = ("script", "style", "noscript", "template", "iframe", "svg", "canvas", "object", "embed")
_BLANK_LINES = re.compile(r"\n{3,}")


def html_to_markdown(html: str) -> str:
    """The document as Markdown, its ``<title>`` as a first-level heading when it has one."""
    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for element in soup(_DROPPED):
        element.decompose()
    if soup.head is not None:
        soup.head.decompose()
    body = MarkdownConverter(heading_style="ATX", bullets="-", escape_underscores=False).convert_soup(soup)
    text = _BLANK_LINES.sub("\n\n", body).strip()
    if title and not text.startswith(f"# {title}"):
        text = f"# {title}\n\n{text}"
    return text
