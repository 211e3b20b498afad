"""Running the real command line in-process and checking what it says on bad input: exit code
2 and exactly one stderr line ``error: <where>: <what>``, no traceback."""

from __future__ import annotations

from collsynth.solvers.cli import main


def run_cli(argv, capsys):
    """``(exit code, stdout, stderr)`` of ``collsynth argv`` (items made strings)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(err, must):
    """``err`` is one line ``error: ...`` holding every string of ``must``, and no traceback;
    returns that line."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    for m in must:
        assert m in lines[0], (m, lines[0])
    assert "Traceback" not in err
    return lines[0]
