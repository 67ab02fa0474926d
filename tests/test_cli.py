"""The mapper command line and REPL, driven in-process."""

import io
import os

import pytest
from rich.console import Console

from mapper.cli import main, parse_sizes

EX = os.path.join(os.path.dirname(__file__), "..", "examples")


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_show_prints_types_and_constraints(capsys):
    rc, out, _ = run(capsys, "show", f"{EX}/cc22_listing3.lift", "--sizes", "N=64,s0=16,s1=4")
    assert rc == 0
    assert "X : [float]N" in out and "N % s0 == 0" in out and "holds" in out


def test_show_reports_violation(capsys):
    rc, _, err = run(capsys, "show", f"{EX}/cc22_listing3.lift", "--sizes", "N=60,s0=16,s1=4")
    assert rc == 2 and "N % s0 == 0" in err and "N=60" in err


def test_constraints_enumerate_check_explain(capsys):
    rc, out, _ = run(capsys, "constraints", f"{EX}/cc22_listing1.lift", "--list")
    assert rc == 0 and "duplicate-scheduling" in out and "chains:" in out
    rc, out, _ = run(capsys, "enumerate", f"{EX}/cc22_listing3.lift", "--count")
    assert rc == 0 and out.startswith("37 valid mappings")
    rc, out, _ = run(capsys, "enumerate", f"{EX}/cc22_listing3.lift", "--limit", "2",
                     "--random", "--seed", "3")
    assert rc == 0 and "2 mapping(s) shown" in out
    rc, out, _ = run(capsys, "check", f"{EX}/cc22_listing3.lift", "--mapping",
                     "A=W0 B=L0 C=L0 D=S")
    assert rc == 0 and "valid" in out
    rc, out, _ = run(capsys, "check", f"{EX}/cc22_listing3.lift", "--mapping",
                     "A=G1 B=G0 C=G0 D=S")
    assert rc == 1 and "cross-thread-dependency" in out
    rc, out, _ = run(capsys, "explain", f"{EX}/cc22_listing3.lift", "--partial", "A=W0 C=G0")
    assert rc == 0 and "impossible" in out


def test_space(capsys):
    rc, out, _ = run(capsys, "space", f"{EX}/gpgpu20_conv_partial.lift", "--sizes",
                     "H=6,W=6,C=2,M=4,K=3,S=1,P=1", "--max", "10")
    assert rc == 0 and "valid configurations" in out and "kappa" in out


def test_user_errors_exit_2_without_traceback(capsys):
    rc, _, err = run(capsys, "show", "no/such/file.lift")
    assert rc == 2 and "No such file" in err and "Traceback" not in err
    rc, _, err = run(capsys, "check", f"{EX}/cc22_listing3.lift", "--mapping", "A=99")
    assert rc == 2 and "not a map code" in err
    rc, _, err = run(capsys, "space", f"{EX}/cc22_listing3.lift", "--sizes", "N=x")
    assert rc == 2 and "integer" in err


def test_parse_sizes():
    assert parse_sizes("N=64, s0=16") == {"N": 64, "s0": 16}


def test_repl_session():
    from mapper.repl import MapperShell

    buf = io.StringIO()
    sh = MapperShell(Console(file=buf, width=200, highlight=False))
    for line in (f"load {EX}/cc22_listing3.lift", "tree", "pin A=W0", "count", "why C=G0",
                 "pin B=G0", "enumerate 2", "unpin", "count", "bogus"):
        sh.onecmd(line)
    out = buf.getvalue()
    assert "4 maps (A, B, C, D)" in out and "mapA" in out
    assert "4 valid mapping(s)" in out and "37 valid mapping(s)" in out
    assert "is impossible (a validity rule rejects it) because of these rule instances" in out
    assert "no valid mapping has A=W0 B=G0" in out  # contradiction explained
    assert "unknown command 'bogus'" in out


def test_run_lowers_runs_and_checks(capsys):
    rc, out, err = run(capsys, "run", f"{EX}/listing3_local.lift", "--mapping",
                     "A=W0 B=L0 C=L0 D=S", "--sizes", "N=1024,s0=64,s1=4", "--show-source",
                     "--repeats", "2")
    assert rc == 0 and "barrier(CLK_LOCAL_MEM_FENCE)" in out  # the source on stdout
    assert err.startswith("ok") and "global_total" in err  # the verdict on stderr


def test_run_refuses_invalid_mappings(capsys):
    rc, _, err = run(capsys, "run", f"{EX}/cc22_listing1.lift", "--fusion", "free",
                     "--mapping", "A=G1 B=G0 C=S D=G0 E=S", "--sizes", "I=4,J=8,K=8")
    assert rc == 2 and "cross-thread-dependency" in err  # the constraints refuse it
    rc, out, _ = run(capsys, "run", f"{EX}/cc22_listing1.lift", "--fusion", "free",
                     "--mapping", "A=G1 B=G0 C=S D=G0 E=S", "--sizes", "I=4,J=8,K=8",
                     "--force")
    assert rc == 1 and "rejected:cross-group-dependency" in out  # and so does the lowering
    rc, out, _ = run(capsys, "run", f"{EX}/cc22_listing1.lift", "--fusion", "free",
                     "--mapping", "A=S B=W0 C=L0 D=W0 E=L0", "--sizes", "I=4,J=8,K=8",
                     "--force")
    assert rc == 1 and "rejected:memory-scope" in out


L3 = f"{EX}/cc22_listing3.lift"


@pytest.mark.parametrize("argv, message", [
    (["show", L3, "--sizes", "Q=5"], "has no size Q; its sizes are: N, s0, s1"),
    (["show", L3, "--sizes", "N=64,N=32"], "size N is given twice"),
    (["show", L3, "--sizes", "=5"], "is not a name"),
    (["show", L3, "--sizes", "N=0"], "out of range"),
    (["show", L3, "--sizes", "N=-3"], "out of range"),
    (["show", L3, "--sizes", "N=64,s0=0"], "out of range"),
    (["show", L3, "--sizes", "N=" + "9" * 5000], "must be an integer"),
    (["space", f"{EX}/gpgpu20_conv_highlevel.lift", "--sizes",
      "H=28,W=28,C=64,M=64,K=3,S=1,P=1"], "has no size K, P, S; its sizes are: C, H, KH"),
    (["run", L3, "--mapping", "A=W0 B=L0 C=L0 D=S", "--sizes", "N=4096,s0=64"],
     "missing s1"),
    (["check", L3, "--mapping", "A=W0 A=G0"], "map A is given twice"),
])
def test_bad_arguments_are_one_clear_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_negative_limit_and_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["enumerate", L3, "--limit", "-1"])
    assert e.value.code == 2 and "negative" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("mapper ")


def test_repl_ctrl_c_cancels_the_command_and_keeps_the_session():
    from mapper.repl import MapperShell

    buf = io.StringIO()
    sh = MapperShell(Console(file=buf, width=200, highlight=False))
    sh.onecmd(f"load {EX}/cc22_listing3.lift")
    sh.onecmd("pin A=W0")

    def interrupted(arg):
        raise KeyboardInterrupt

    sh.do_enumerate = interrupted
    assert sh.onecmd("enumerate 3") is False
    assert "interrupted" in buf.getvalue()
    assert sh.pins and sh.problem is not None
    sh.onecmd("count")
    assert "4 valid mapping(s)" in buf.getvalue()


def test_run_force_names_the_rules_it_overrides(capsys):
    rc = main(["run", f"{EX}/cc22_listing3.lift", "--mapping", "A=G1 B=G0 C=G0 D=S",
               "--sizes", "N=4096,s0=64,s1=4", "--force"])
    out = capsys.readouterr()
    assert "--force overrides 1 constraint instance(s) of cross-thread-dependency (validity)" \
        in out.err
    assert rc == 1 and "rejected:cross-group-dependency" in out.out  # the lowering refuses it


def test_type_errors_point_at_what_the_user_wrote(capsys, tmp_path):
    """A type error names the file, line and column of the application the user wrote
    (the hole sugar included), with the source line and a caret; no internal node numbers."""
    prog = tmp_path / "bad.lift"
    prog.write_text("X : [float]N\n# a comment line\nmapA(_ + X) $ X\n")
    rc, _, err = run(capsys, "show", str(prog))
    assert rc == 2
    assert f"{prog}, line 3, column 6:" in err and "expects float" in err
    assert "mapA(_ + X) $ X" in err and "\n       ^" in err
    assert "(node" not in err
