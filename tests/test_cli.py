"""The command line: model introspection and clear one-line errors."""

import signal
import subprocess
import sys

import pytest

from mlmclm.cli import attention_check, main


@pytest.mark.parametrize("size,params", [("210m", "211.8M"), ("610m", "607.9M"), ("1b", "1,187.9M")])
def test_model_info_counts_the_papers_sizes(size, params, capsys):
    assert main(["model", "info", size]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("params: embeddings + body"))
    assert line.endswith(f"({params})")
    assert "FLOPs/token training" in out


def test_model_info_in_a_fresh_process_and_bad_size():
    ok = subprocess.run([sys.executable, "-m", "mlmclm.cli", "model", "info", "tiny"], capture_output=True, text=True)
    assert ok.returncode == 0 and "params: total" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "mlmclm.cli", "model", "info", "3b"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "mlmclm: error: unknown model size '3b'; choose one of 210m, 610m, 1b, tiny, tiny-s, tiny-m, tiny-l, mini-xs, "
        "mini-s, mini-m, mini-l, twin, small-s, small-m, small-l, smollm2-135m"]


def test_attention_check_reports_every_cpu_backend():
    rows = attention_check("cpu")
    assert {r[0] for r in rows} == {"sdpa", "kernels"} and len(rows) == 4
    assert all(fwd <= 1e-5 and grad <= 1e-4 for _, _, fwd, grad in rows)


# ---- every fault one line ----
def _one_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_a_full_disk_a_killed_worker_and_ctrl_c_at_any_moment_are_one_line(capsys, monkeypatch, request):
    import errno
    import signal
    from concurrent.futures.process import BrokenProcessPool

    import mlmclm.cli as cli

    def raising(error):
        def run(*args, **kwargs):
            raise error
        return run

    # main installs its Ctrl-C handler over Python's default one only (an ignored SIGINT stays ignored): start from
    # the default, whatever an earlier test of this process left (in one CI run main's handler was not installed here)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    monkeypatch.setattr(cli, "model_info", raising(OSError(errno.ENOSPC, "No space left on device",
                                                           "results/runs/x/results.json")))
    assert main(["model", "info", "tiny"]) == 2
    assert _one_line(capsys) == ("mlmclm: error: no space left on the device writing results/runs/x/results.json; "
                                 "free some and re-run the same command (what was written whole is kept, what was "
                                 "half-written is removed)")
    monkeypatch.setattr(cli, "model_info", raising(Exception(  # how safetensors reports it
        'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })')))
    assert main(["model", "info", "tiny"]) == 2
    assert _one_line(capsys).startswith("mlmclm: error: no space left on the device; free some and re-run")
    monkeypatch.setattr(cli, "model_info", raising(BrokenProcessPool("A child process terminated abruptly")))
    assert main(["model", "info", "tiny"]) == 1
    assert _one_line(capsys).startswith("mlmclm: error: a worker process ended abruptly (killed, or out of memory)")
    monkeypatch.setattr(cli, "model_info", raising(OSError(errno.EACCES, "Permission denied")))
    with pytest.raises(PermissionError):  # any other fault of the system is not a user's: its traceback stays
        main(["model", "info", "tiny"])
    monkeypatch.setattr(cli, "_verbs", raising(KeyboardInterrupt()))  # Ctrl-C while the verbs' modules import
    with pytest.raises(KeyboardInterrupt):  # called with argv (a test, a script): the caller's Ctrl-C stays its own
        main(["model", "info", "tiny"])
    program = ["mlmclm", "model", "info", "tiny"]
    monkeypatch.setattr(sys, "argv", program)  # as the program (no argv): the command's
    assert main() == 130
    assert _one_line(capsys) == "mlmclm: interrupted; re-run the same command to resume"

    def swallowed(*args, **kwargs):  # a library that catches the KeyboardInterrupt of an import and fails otherwise
        import os
        import signal
        try:
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:
            pass
        raise ModuleNotFoundError("Could not import module 'LlamaConfig'")

    monkeypatch.undo()
    monkeypatch.setattr(sys, "argv", program)
    monkeypatch.setattr(cli, "model_info", swallowed)
    assert main() == 130
    assert _one_line(capsys) == "mlmclm: interrupted; re-run the same command to resume"
    monkeypatch.setattr(cli, "model_info", raising(ModuleNotFoundError("no Ctrl-C")))
    with pytest.raises(ModuleNotFoundError):  # without one, it stays a bug with its traceback
        main()


def test_bad_numbers_and_config_files_on_the_command_line_are_refused(tmp_path):
    bad = subprocess.run([sys.executable, "-m", "mlmclm.cli", "model", "info", "tiny", "--seq-len", "0"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "argument --seq-len: must be positive, got 0" in bad.stderr
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "latin.yaml").write_bytes("run_id: caf\u00e9\n".encode("latin-1"))
    for config, message in ((tmp_path / "empty.yaml", "empty.yaml: the config is empty"),
                            (tmp_path, f"config file {tmp_path} is a folder; name a YAML file"),
                            (tmp_path / "latin.yaml", "latin.yaml: not UTF-8 text (byte 11)")):
        proc = subprocess.run([sys.executable, "-m", "mlmclm.cli", "pretrain", str(config)], capture_output=True,
                              text=True)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr


@pytest.mark.parametrize("delay", [1.0, 3.0])
def test_ctrl_c_in_the_first_seconds_of_a_command_is_one_line_and_130(tmp_path, delay):
    """While the CLI still imports torch and its verbs (before any handler of a job's own): no traceback."""
    import signal
    import time

    config = tmp_path / "run.yaml"
    config.write_text(f"run_id: r\nscale: tiny\nphases: [[clm, 100000]]\nresults_dir: {tmp_path / 'runs'}\n"
                      f"checkpoints_dir: {tmp_path / 'ckpt'}\ndata: {{root: {tmp_path / 'data'}}}\n")
    proc = subprocess.Popen([sys.executable, "-m", "mlmclm.cli", "pretrain", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    # 130, or killed by its own SIGINT (-2; a shell shows 130 for both): CPython ends that way when it noted an unhandled
    # KeyboardInterrupt in code run beneath ours during the imports, though ours caught it and printed its line (CI, 3 s)
    assert proc.returncode in (130, -signal.SIGINT), err[-1000:]
    assert "Traceback" not in err and err.strip().splitlines()[-1].endswith("re-run the same command to resume")


def test_ctrl_c_while_torch_still_imports_is_raised_once_the_import_is_done():
    """A KeyboardInterrupt inside torch's initialization can abort the process (SIGABRT, CI): the handler holds the
    first signal until no torch module is importing, then it arrives; a second one is raised at once."""
    import importlib.machinery
    import signal
    import time
    import types

    from mlmclm import cli

    name = "torch._mlmclm_half_imported"
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__spec__._initializing = True
    interrupted = []
    handler = cli._on_signal(interrupted, [])
    previous = signal.signal(signal.SIGINT, handler)
    sys.modules[name] = module
    try:
        try:
            handler(signal.SIGINT, None)  # held: no KeyboardInterrupt while "torch" imports
        except KeyboardInterrupt:
            pytest.fail("Ctrl-C was raised inside torch's import")
        assert interrupted == [signal.SIGINT]
        time.sleep(0.2)
        assert interrupted == [signal.SIGINT]  # still held
        module.__spec__._initializing = False
        with pytest.raises(KeyboardInterrupt):
            time.sleep(30)  # the held signal arrives
        assert interrupted == [signal.SIGINT, signal.SIGINT]
        module.__spec__._initializing = True
        with pytest.raises(KeyboardInterrupt):  # a second one while it imports: at once
            handler(signal.SIGINT, None)
    finally:
        signal.signal(signal.SIGINT, previous)
        del sys.modules[name]


def test_ctrl_c_that_lands_in_a_finalizer_still_stops_the_command():
    """A KeyboardInterrupt raised inside a `__del__` is swallowed by Python ("Exception ignored in ..."): the command
    must still stop (it once went on building its corpus when Ctrl-C met a library's finalizer under load)."""
    script = (
        "import os, signal, sys, time\n"
        "from mlmclm import cli\n"
        "class Finalized:\n"
        "    def __del__(self):\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        time.sleep(0.5)\n"  # the handler runs here, inside the finalizer
        "def job(argv):\n"
        "    Finalized()\n"
        "    for _ in range(200):\n"
        "        time.sleep(0.1)\n"
        "    return 0\n"
        "cli._main = job\n"
        "sys.exit(cli.main())\n")
    # SIGINT back to its default in the child: a test run started in the background inherits an ignored SIGINT
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.returncode == 130, proc.stderr[-1000:]
    assert proc.stderr.strip().splitlines()[-1].endswith("re-run the same command to resume"), proc.stderr


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_test_run_stops_within_seconds_of_sigterm_or_ctrl_c(tmp_path, name):
    """`make test` can be stopped: SIGTERM or Ctrl-C while a test runs the command line in-process (`cli.main`)
    ends pytest at once, rather than failing that test as an interrupted command and going on with the next."""
    import signal
    import time

    started = tmp_path / "started"
    (tmp_path / "test_slow.py").write_text(
        "import time\nfrom pathlib import Path\nfrom mlmclm import cli\n\n"
        "def slow(*args):\n"
        f"    Path({str(started)!r}).touch()\n"
        "    time.sleep(120)\n\n"
        "def test_slow(monkeypatch):\n"
        "    monkeypatch.setattr(cli, 'model_info', slow)\n"
        "    assert cli.main(['model', 'info', 'tiny']) == 0\n\n"
        "def test_next():\n"
        "    time.sleep(120)\n")
    # SIGINT back to its default in the child: a test run started in the background inherits an ignored SIGINT
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_slow.py"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), proc.communicate()[0][-2000:]
        proc.send_signal(getattr(signal, name))
        out, _ = proc.communicate(timeout=100)  # under test_next's 120 s: a run that went on could not end by then
    finally:
        proc.kill()
    assert "test_next" not in out and "1 failed" not in out, out[-2000:]
