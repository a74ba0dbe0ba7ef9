"""`adcompare report --figures DIR` (report/paper.py): PDF and PNG per figure through matplotlib."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from adcompare.cli.main import main

matplotlib = pytest.importorskip("matplotlib", reason="matplotlib is the optional extra adcompare[plot]")
FIXTURE = Path(__file__).parent / "fixtures" / "report"


def _pages(pdf: Path) -> int:
    return len(re.findall(rb"/Type\s*/Page[^s]", pdf.read_bytes()))


def test_figures_written_as_pdf_and_png_one_page_per_figure(tmp_path, capsys):
    figures = tmp_path / "figures"
    # the GPU fixture alone (48 cells) has a figure in every section and keeps the test short
    assert main(["report", str(FIXTURE / "gpu.jsonl"), "-o", str(tmp_path / "r"), "--figures", str(figures)]) == 0
    out = capsys.readouterr().out
    assert f"figures (PDF, PNG): {figures}" in out
    assert "confirmed seed 001" in out and out.index("findings (") < out.index("report: ")  # top findings, then path
    pdfs = sorted(p for p in figures.glob("*.pdf") if p.name != "figures.pdf")
    pngs = sorted(figures.glob("*.png"))
    assert [p.stem for p in pdfs] == [p.stem for p in pngs]
    sections = {p.stem.split("-")[0] for p in pdfs}
    assert {"overview", "scaling", "forward", "relative", "compilation"} <= sections
    for pdf in pdfs:
        assert pdf.read_bytes().startswith(b"%PDF") and _pages(pdf) == 1, pdf
    assert _pages(figures / "figures.pdf") == len(pdfs)
    image = matplotlib.image.imread(pngs[0])  # decodes the PNG
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 200 and image.std() > 0.01
    page = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    title = re.search(r'aria-label="(exp_dot_loss · cuda · float32[^"]*)"', page).group(1)
    assert (figures / "scaling-exp_dot_loss-cuda-float32.pdf").exists() and title == "exp_dot_loss · cuda · float32"


def test_figures_without_matplotlib_is_a_one_line_usage_error(tmp_path, monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert main(["report", str(FIXTURE / "cpu.jsonl"), "-o", str(tmp_path), "--figures", str(tmp_path / "f")]) == 2
    assert "pip install 'adcompare[plot]'" in capsys.readouterr().err
