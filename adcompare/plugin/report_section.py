"""A report section as a unit: what `adcompare_report_sections` returns, built-in and third-party alike.

The page loops over the sections by `order` (asv's publishers run the same way) and draws each one: the nav link,
`<section id="anchor">`, then either `template` — a jinja2 template name, looked up in adcompare's report package
(the built-ins' report/sections/) and then in the template folder a plugin names (`templates`), rendered with the
section's `data` as `data` — or `body`, text that is escaped (pass `markupsafe.Markup` for trusted HTML).
The data is computed before rendering (the built-ins' in analysis/report_sections.py); a template only draws it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Where the old (title, body) sections go: after the cell table, before the method notes.
EXTRA_ORDER = 130.0


@dataclass(frozen=True)
class Section:
    title: str  # the heading (a built-in template writes its own heading)
    anchor: str  # the section's id, the nav link's target
    order: float  # sections are drawn in increasing order; the built-ins use 10 … 125 and 1000 (Method)
    template: str | None = None  # a jinja2 template that draws `data`; without one, `body` is the section
    data: Any = None  # what the template shows, computed before rendering
    body: str = ""  # the section's content when it has no template (escaped unless markupsafe.Markup)
    templates: Path | None = None  # a plugin's own template folder, searched after adcompare's
    nav: tuple[tuple[str, str], ...] | None = None  # (anchor, title) nav links; default the section's own

    @property
    def links(self) -> tuple[tuple[str, str], ...]:
        return ((self.anchor, self.title),) if self.nav is None else self.nav


def from_pair(title: str, body: str, index: int) -> Section:
    """The old hook form, a (title, body) pair: the `index`-th such section, after the built-in ones."""
    return Section(title, f"extra-{index}", EXTRA_ORDER, body=body)
