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


def calibrate_with_setting(tmp_path, capsys, setting: str):
    """``collsynth calibrate`` on a one-measurement manifest carrying the top-level line
    ``setting``: ``(path, exit code, stdout, stderr)``."""
    path = tmp_path / "m.toml"
    path.write_text(f'system = "s"\nsource = "x"\n{setting}\n[[measurement]]\nname = "a"\n'
                    'program = "p.xml"\ninstance = "i.toml"\nlog = "l.txt"\n')
    return (path, *run_cli(["calibrate", str(path)], capsys))
