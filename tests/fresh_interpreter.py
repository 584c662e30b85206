"""Fresh interpreters for the import-isolation checks, forked from one interpreter per test session.

A check such as "importing ``bert_kd.core`` loads neither Kedro nor MLflow" needs an interpreter in
which nothing of bert_kd, Kedro, MLflow or Optuna is loaded yet. Starting ``python -c`` for each pays
the torch and transformers imports every time (seconds each); here one server interpreter imports
those libraries once, and every check runs in a ``fork`` of it: a new process whose ``sys.modules``
holds only the server's preloaded libraries (the server checks that none of :data:`WATCHED` is
among them) and whatever the check's code imports. Where ``fork`` does not exist each check starts
its own ``python -c``, as before.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading

#: Libraries the server imports before it forks: the slow imports, none of them a watched package.
#: pandas, scipy.stats and matplotlib are a second or more per check that imports the tracking,
#: sweep or report modules; no check asks whether they load.
PRELOADED = (
    "torch",
    "numpy",
    "transformers",
    "transformers.modeling_utils",
    "safetensors.torch",
    "pydantic",
    "yaml",
    "pandas",
    "scipy.stats",
    "matplotlib",
)

#: Packages no check may find loaded before its own code runs.
WATCHED = ("bert_kd", "kedro", "kedro_mlflow", "mlflow", "optuna", "tests")

#: The environment variables read when a preloaded library is imported: a check that sets one of
#: them differently from the server runs in its own ``python -c``.
IMPORT_TIME_VARIABLES = ("HF_", "TRANSFORMERS_", "TORCH", "PYTORCH_", "OMP_", "MKL_", "CUDA_", "PYTHON", "MPL")

SERVER = r"""
import atexit, json, os, shutil, signal, sys, tempfile, traceback
preloaded, watched = json.loads(sys.argv[1]), tuple(json.loads(sys.argv[2]))
replies = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # what an import prints goes to stderr, never into the replies
for name in preloaded:
    __import__(name)
leaked = sorted(m for m in sys.modules if m.split(".")[0] in watched)
print(json.dumps({"leaked": leaked}), file=replies, flush=True)
for line in sys.stdin:
    request = json.loads(line)
    folder = tempfile.mkdtemp()  # not TemporaryDirectory: the check runs the exit handlers, which would remove it
    out, err = os.path.join(folder, "out"), os.path.join(folder, "err")
    pid = os.fork()
    if pid == 0:  # the check's interpreter: runs the code, its exit handlers, then ends
        status = 1
        try:
            signal.alarm(request["timeout"])
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            for fd, path in ((1, out), (2, err)):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            sys.argv = ["-c", *request["args"]]
            try:
                exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__"})
                status = 0
            except SystemExit as stop:
                if stop.code is None or isinstance(stop.code, int):
                    status = stop.code or 0
                else:
                    print(stop.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
            atexit._run_exitfuncs()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(status)
    _, wait_status = os.waitpid(pid, 0)
    texts = [open(path, errors="replace").read() if os.path.exists(path) else "" for path in (out, err)]
    reply = {"returncode": os.waitstatus_to_exitcode(wait_status), "stdout": texts[0], "stderr": texts[1]}
    shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(reply), file=replies, flush=True)
"""


class FreshInterpreters:
    """``run(code, *args, env=…, cwd=…)`` → :class:`subprocess.CompletedProcess`, as
    ``subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)`` gives."""

    def __init__(self) -> None:
        self._server: subprocess.Popen | None = None
        self._server_env: dict[str, str] = {}
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        self._server_env = dict(os.environ)
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, json.dumps(PRELOADED), json.dumps(WATCHED)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=self._server_env,
        )
        ready = json.loads(server.stdout.readline())
        if ready["leaked"]:
            server.kill()
            raise RuntimeError(f"the fork server's preloaded libraries load watched modules: {ready['leaked']}")
        return server

    def forks(self, env: dict[str, str]) -> bool:
        """Whether a check with ``env`` can run in a fork: ``fork`` exists and every variable a
        preloaded library reads on import is as the server had it."""
        if not hasattr(os, "fork"):
            return False
        server_env = self._server_env if self._server is not None else dict(os.environ)

        def import_time(variables: dict[str, str]) -> dict[str, str]:
            return {k: v for k, v in variables.items() if k.startswith(IMPORT_TIME_VARIABLES)}

        return import_time(env) == import_time(server_env)

    def run(
        self, code: str, *args: str, env: dict[str, str] | None = None, cwd: str | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess:
        env = dict(os.environ if env is None else env)
        cwd = str(cwd or os.getcwd())
        command = [sys.executable, "-c", code, *args]
        if not self.forks(env):
            return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
        with self._lock:
            if self._server is None or self._server.poll() is not None:
                self._server = self._start()
            self._server.stdin.write(
                json.dumps({"code": code, "args": list(args), "env": env, "cwd": cwd, "timeout": int(timeout)}) + "\n"
            )
            self._server.stdin.flush()
            reply = json.loads(self._server.stdout.readline())
        return subprocess.CompletedProcess(command, reply["returncode"], reply["stdout"], reply["stderr"])

    def check_output(self, code: str, *args: str, **kwargs) -> str:
        """The check's stdout; :class:`subprocess.CalledProcessError` when it fails (``check=True``)."""
        done = self.run(code, *args, **kwargs)
        if done.returncode:
            raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
        return done.stdout

    def close(self) -> None:
        if self._server is not None:
            self._server.stdin.close()
            try:
                self._server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._server.kill()
            self._server = None


#: The session's server (started by the first check, ended with the test process).
INTERPRETERS = FreshInterpreters()
atexit.register(INTERPRETERS.close)


def run(code: str, *args: str, **options) -> subprocess.CompletedProcess:
    """``python -c code *args`` in a fresh interpreter (:meth:`FreshInterpreters.run`)."""
    return INTERPRETERS.run(code, *args, **options)


def check_output(code: str, *args: str, **options) -> str:
    """The stdout of ``python -c code *args`` in a fresh interpreter, which must succeed."""
    return INTERPRETERS.check_output(code, *args, **options)
