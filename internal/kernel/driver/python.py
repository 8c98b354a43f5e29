# codecell Python driver: runs inside the jail, one process per kernel.
#
# File descriptors (set up by the server, see internal/kernel):
#   3  requests from the server (length-prefixed JSON frames)
#   4  frames to the server (length-prefixed JSON frames)
#   5  read end of the pipe that is this process's fd 1
#   6  read end of the pipe that is this process's fd 2
# Whatever user code writes to sys.stdout, sys.stderr or fds 1 and 2 is
# wrapped here as stream output; it can never be read by the server as a frame.
import codecs
import gc
import io
import json
import os
import select
import signal
import struct
import sys
import threading

REQ_FD, FRAME_FD, OUT_FD, ERR_FD = 3, 4, 5, 6
MAIN_PID = os.getpid()
os.closerange(7, 1 << 16)  # nothing the jail set up is for user code

# The frame fds must not leak into processes user code starts.
for _fd in (REQ_FD, FRAME_FD, OUT_FD, ERR_FD):
    os.set_inheritable(_fd, False)
os.set_blocking(OUT_FD, False)
os.set_blocking(ERR_FD, False)

_lock = threading.RLock()  # serialises frames and the output budget


class _Cell:
    id = None
    budget = 0
    dropped = 0
    running = False


cell = _Cell()


def _write_all(fd, b):
    view = memoryview(b)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(msg):
    body = json.dumps(msg, ensure_ascii=True).encode()
    with _lock:
        _write_all(FRAME_FD, struct.pack(">I", len(body)) + body)


def emit(output):
    """Sends one output of the running cell, within the cell's byte budget."""
    size = len(json.dumps(output))
    with _lock:
        if cell.budget < size:
            cell.dropped += size
            cell.budget = 0
            return
        cell.budget -= size
        send({"type": "output", "id": cell.id, "output": output})


_decoders = {
    OUT_FD: codecs.getincrementaldecoder("utf-8")("replace"),
    ERR_FD: codecs.getincrementaldecoder("utf-8")("replace"),
}
_names = {OUT_FD: "stdout", ERR_FD: "stderr"}


def drain_fds():
    """Forwards whatever is pending on fds 1 and 2 (written by C code,
    os.write or child processes)."""
    with _lock:
        for fd in (OUT_FD, ERR_FD):
            while True:
                try:
                    b = os.read(fd, 1 << 16)
                except BlockingIOError:
                    break
                if not b:
                    break
                text = _decoders[fd].decode(b)
                if text:
                    emit({"output_type": "stream", "name": _names[fd], "text": text})


def _pump_fds():
    while True:
        select.select([OUT_FD, ERR_FD], [], [])
        drain_fds()


class StreamWriter:
    """sys.stdout/sys.stderr for user code: each write becomes a stream output,
    after anything already pending on the raw fds, so order is kept."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, name):
        self.name = name

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if s:
            with _lock:
                drain_fds()
                emit({"output_type": "stream", "name": self.name, "text": s})
        return len(s)

    def writelines(self, lines):
        for s in lines:
            self.write(s)

    def flush(self):
        pass

    def isatty(self):
        return False

    def writable(self):
        return True

    def readable(self):
        return False

    def fileno(self):
        return 1 if self.name == "stdout" else 2

    @property
    def closed(self):
        return False


sys.stdout = sys.__stdout__ = StreamWriter("stdout")
sys.stderr = sys.__stderr__ = StreamWriter("stderr")
threading.Thread(target=_pump_fds, daemon=True, name="codecell-fds").start()

import re  # noqa: E402

from IPython.core.displayhook import DisplayHook  # noqa: E402
from IPython.core.displaypub import DisplayPublisher  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from traitlets.config import Config  # noqa: E402

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _jsonable(data):
    out = {}
    for mime, value in (data or {}).items():
        if isinstance(value, (bytes, bytearray)):
            import base64

            value = base64.b64encode(value).decode()
        elif mime.startswith("image/") and isinstance(value, str) and mime != "image/svg+xml":
            value = value.replace("\n", "")
        out[mime] = value
    return out


class CellDisplayHook(DisplayHook):
    """Turns the value of a cell's last expression into an execute_result."""

    def start_displayhook(self):
        self._data = {}
        self._md = {}

    def write_output_prompt(self):
        pass

    def write_format_data(self, format_dict, md_dict=None):
        self._data = format_dict
        self._md = md_dict or {}

    def finish_displayhook(self):
        emit(
            {
                "output_type": "execute_result",
                "execution_count": self.prompt_count,
                "data": _jsonable(self._data),
                "metadata": self._md,
            }
        )


class CellDisplayPublisher(DisplayPublisher):
    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
        drain_fds()
        emit({"output_type": "display_data", "data": _jsonable(data), "metadata": metadata or {}})

    def clear_output(self, wait=False):
        pass


class Shell(InteractiveShell):
    displayhook_class = CellDisplayHook
    display_pub_class = CellDisplayPublisher

    def _showtraceback(self, etype, evalue, stb):
        text = _ANSI.sub("", "\n".join(stb))
        emit(
            {
                "output_type": "error",
                "ename": getattr(etype, "__name__", str(etype)),
                "evalue": str(evalue),
                "traceback": text.split("\n"),
            }
        )

    def enable_gui(self, gui=None):
        pass


_cfg = Config()
_cfg.HistoryManager.hist_file = ":memory:"
_cfg.InteractiveShell.colors = "NoColor"
_cfg.InteractiveShell.autoindent = False
_cfg.InteractiveShell.autocall = 0
shell = Shell.instance(config=_cfg)
shell.display_page = True


class _PyplotFinder:
    """Sets up inline figures the moment user code imports matplotlib.pyplot:
    plt.show() and figures left open at the end of a cell become image/png."""

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib.pyplot":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            _setup_inline(module)

        spec.loader.exec_module = exec_module
        return spec


def _setup_inline(plt):
    from IPython.core.pylabtools import select_figure_formats

    select_figure_formats(shell, {"png"})

    def show(*args, **kwargs):
        _flush_figures(plt)

    plt.show = show


def _flush_figures(plt=None):
    plt = plt or sys.modules.get("matplotlib.pyplot")
    if plt is None or not hasattr(plt, "get_fignums"):
        return
    nums = plt.get_fignums()
    if not nums:
        return  # closing nothing still costs a garbage collection
    from IPython.display import display

    try:
        for num in nums:
            fig = plt.figure(num)
            if fig.axes or fig.images or fig.texts or fig.artists:
                display(fig)
    finally:
        plt.close("all")


sys.meta_path.insert(0, _PyplotFinder())


def _on_sigint(signum, frame):
    # Only a running cell is interrupted; a late signal between cells is void.
    if cell.running:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, _on_sigint)


def _read_exact(n):
    buf = b""
    while len(buf) < n:
        try:
            chunk = os.read(REQ_FD, n - len(buf))
        except KeyboardInterrupt:
            continue
        if not chunk:
            return None
        buf += chunk
    return buf


def run(req):
    with _lock:
        cell.id = req["id"]
        cell.budget = int(req.get("max_output", 1 << 20))
        cell.dropped = 0
    status = "ok"
    cell.running = True
    try:
        if req.get("cwd"):
            os.chdir(req["cwd"])
        # Standard input is the request's text (fd 0 itself is /dev/null).
        sys.stdin = io.StringIO(req.get("stdin") or "")
        result = shell.run_cell(req.get("code", ""), store_history=True)
        _flush_figures()
        if not result.success:
            status = "error"
    except KeyboardInterrupt:
        status = "error"
        emit({"output_type": "error", "ename": "KeyboardInterrupt", "evalue": "", "traceback": ["KeyboardInterrupt"]})
    except OSError as e:  # the requested working directory
        status = "error"
        emit({"output_type": "error", "ename": type(e).__name__, "evalue": str(e), "traceback": ["%s: %s" % (type(e).__name__, e)]})
    finally:
        cell.running = False
    if os.getpid() != MAIN_PID:
        # A child that user code forked without exiting must not go on to
        # read the next cell: only the kernel itself answers.
        os._exit(0)
    drain_fds()
    with _lock:
        send(
            {
                "type": "done",
                "id": cell.id,
                "status": status,
                "execution_count": shell.execution_count - 1,
                "dropped_bytes": cell.dropped,
            }
        )


def main():
    gc.freeze()  # IPython's own objects, for the same reason as in preload
    send({"type": "ready", "language": "python", "version": sys.version.split()[0]})
    while True:
        head = _read_exact(4)
        if head is None:
            return
        body = _read_exact(struct.unpack(">I", head)[0])
        if body is None:
            return
        req = json.loads(body)
        if req.get("type") == "execute":
            run(req)
        elif req.get("type") == "preload":
            preload(req.get("modules") or [])


def preload(modules):
    """Imports modules ahead of the first cell, outside IPython's history:
    the kernel's first cell still has execution count 1."""
    import importlib

    for m in modules:
        try:
            importlib.import_module(m)
        except Exception:
            pass
    # What was imported stays for the kernel's life: keep it out of the
    # collector's way, or full collections stall cells for tens of ms.
    gc.freeze()
    send({"type": "preloaded"})


main()
