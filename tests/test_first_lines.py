"""`adcompare.model.problem.first_lines`, the one header-line reader the file-fed problems share (ADBench's text files
have blank lines between sections; a header reader must tell its format from another's without the body)."""
from __future__ import annotations

import io

import pytest

from adcompare.model.problem import first_lines
from adcompare.problems import bundle_adjustment, gmm, lstm


def test_skips_blank_lines_and_splits_words():
    f = io.StringIO("\n  \n2 3 4\n\n\n1.5 2.5\nnot read\n")
    assert first_lines(f) == (["2", "3", "4"], ["1.5", "2.5"])
    assert f.readline() == "not read\n"  # stops after the lines it needs: the body stays unread


@pytest.mark.parametrize("text, count, expected", [
    ("", 2, ([], [])),
    ("1 2 3\n", 2, (["1", "2", "3"], [])),
    ("a\nb\nc\n", 3, (["a"], ["b"], ["c"])),
    ("a\nb\nc\n", 1, (["a"],)),
])
def test_pads_short_files_with_empty_lines(text, count, expected):
    assert first_lines(io.StringIO(text), count) == expected


@pytest.mark.parametrize("module", [bundle_adjustment, gmm, lstm])
def test_the_file_fed_problems_use_the_shared_reader(module):
    assert module.first_lines is first_lines
    assert not hasattr(module, "_first_lines")


def test_each_header_reader_still_tells_its_format(tmp_path):
    ba = tmp_path / "ba.txt"
    ba.write_text("1 2 1\n\n" + " ".join(["0.5"] * 11) + "\n")
    lstm_file = tmp_path / "lstm.txt"
    lstm_file.write_text("1 3 2\n\n" + " ".join(["0.5"] * 8) + "\n")
    gmm_file = tmp_path / "gmm.txt"
    gmm_file.write_text("2 1 5\n\n0.5\n")
    assert bundle_adjustment.read_header(str(ba)) == {"n": 1, "m": 2, "p": 1}
    assert lstm.read_lstm_header(str(lstm_file)) == {"l": 1, "c": 3, "b": 2}
    assert gmm._adbench_header(str(gmm_file)) == {"d": 2, "K": 1, "n": 5}
    for reader, other in ((bundle_adjustment.read_header, lstm_file), (lstm.read_lstm_header, gmm_file),
                          (gmm._adbench_header, ba)):
        with pytest.raises(ValueError, match="not ADBench's"):
            reader(str(other))
