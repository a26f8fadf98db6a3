"""Calling the command line in process, for the CLI tests."""
from torchfits.cli.main import main


def run(capsys, *argv):
    """Run ``torchfits *argv``; return (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err
