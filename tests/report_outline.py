"""A report page's outline: its nav, its sections (id and heading) in order, and its figures (title and how many
hover titles — tiles, points — each holds). tests/test_report_sections.py holds the committed baselines' reports to
the outlines recorded in tests/fixtures/report_baselines/."""
from __future__ import annotations

import re

NAV = re.compile(r'<nav>(.*?)</nav>', re.S)
LINK = re.compile(r'<a href="#([^"]+)">([^<]*)</a>')
SECTION = re.compile(r'<section id="([^"]+)">\s*<h2>([^<]*)</h2>')
SVG = re.compile(r'<svg [^>]*aria-label="([^"]*)"[^>]*>(.*?)</svg>', re.S)


def outline(html: str) -> dict:
    nav = NAV.search(html)
    return {
        "nav": [list(link) for link in LINK.findall(nav.group(1) if nav else "")],
        "sections": [list(s) for s in SECTION.findall(html)],
        "figures": [[title, body.count("<title>")] for title, body in SVG.findall(html)],
    }
