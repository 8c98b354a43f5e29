# codecell Python driver: runs inside the jail, one process per kernel, or,
# started with the argument "zygote", as the sandbox's fork server (see
# zygote_main and internal/kernel/zygote.go).
#
# File descriptors of a kernel (set up by the server, see internal/kernel):
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
ZYGOTE = len(sys.argv) > 1 and sys.argv[1] == "zygote"
MAIN_PID = os.getpid()
_wired = False  # fds 1-6 are the kernel's (never in the zygote itself)

_lock = threading.RLock()  # serialises frames and the output budget


def wire_fds():
    """Takes fds 1-6 as the kernel's and starts the thread that forwards
    fds 1 and 2. Never called in the zygote: it must fork with no thread."""
    global MAIN_PID, _wired
    MAIN_PID = os.getpid()
    os.closerange(7, 1 << 16)  # nothing the jail set up is for user code
    # The frame fds must not leak into processes user code starts.
    for fd in (REQ_FD, FRAME_FD, OUT_FD, ERR_FD):
        os.set_inheritable(fd, False)
    os.set_blocking(OUT_FD, False)
    os.set_blocking(ERR_FD, False)
    _wired = True
    threading.Thread(target=_pump_fds, daemon=True, name="codecell-fds").start()


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
    if not _wired:
        return  # the zygote has no frame pipe: what it prints goes nowhere
    body = json.dumps(msg, ensure_ascii=True).encode()
    with _lock:
        _write_all(FRAME_FD, struct.pack(">I", len(body)) + body)


class _Line:
    name = None
    text = ""


_line = _Line()  # stream text written since the last newline


def flush_line():
    """Sends the partial line held back by emit_text. Preconditions: _lock."""
    if _line.text:
        text, _line.text = _line.text, ""
        _send_output({"output_type": "stream", "name": _line.name, "text": text})


_LINE_MAX = 8192  # a partial line longer than this goes out anyway


def emit_text(name, s):
    """Sends stream text a line at a time, as a terminal would: print()
    writes its text and its newline separately, and one output per line is
    what a streaming client should see. A partial line goes out on flush(),
    at a carriage return (progress bars), past _LINE_MAX, before any other
    output, and at the end of the cell."""
    with _lock:
        if _line.name != name:
            flush_line()
            _line.name = name
        # Only the new text is searched: many small writes stay linear.
        i = max(s.rfind("\n"), s.rfind("\r"))
        if i >= 0:
            head = _line.text + s[: i + 1]
            _line.text = s[i + 1 :]
            _send_output({"output_type": "stream", "name": name, "text": head})
        else:
            _line.text += s
        if len(_line.text) > _LINE_MAX:
            flush_line()


def emit(output):
    """Sends one output of the running cell, within the cell's byte budget."""
    with _lock:
        flush_line()
        _send_output(output)


def _send_output(output):
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
    if not _wired:
        return
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
    # SIGINT must reach the main thread: one taken by this thread would
    # only be noticed once the cell's blocking call (a sleep) returns.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
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
                emit_text(self.name, s)
        return len(s)

    def writelines(self, lines):
        for s in lines:
            self.write(s)

    def flush(self):
        with _lock:
            flush_line()

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
if not ZYGOTE:
    wire_fds()

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
        send({"type": "started", "id": cell.id})  # from here SIGINT reaches this cell
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
        flush_line()
        send(
            {
                "type": "done",
                "id": cell.id,
                "status": status,
                "execution_count": shell.execution_count - 1,
                "dropped_bytes": cell.dropped,
            }
        )


def warm_up():
    """Runs representative cells once, out of sight, and forgets them. What
    IPython and the libraries set up on first use (formatters, tracebacks,
    a DataFrame's HTML, matplotlib's renderer) costs ~10-100 ms; paid here,
    in the zygote or while a kernel warms, not in a user's cells."""
    global _warm
    if _warm:
        return
    _warm = True
    cells = ["1", "print(end='')", "1/0"]
    if "pandas" in sys.modules:
        cells.append("__import__('pandas').DataFrame({'a': [1]})")
    if "matplotlib.pyplot" in sys.modules:
        cells.append("__import__('matplotlib.pyplot').pyplot.plot([1, 2])")
    with _lock:
        cell.id, cell.budget = None, 0  # every output is dropped
    ns = dict(shell.user_ns)
    for code in cells:
        shell.run_cell(code, store_history=False)
        _flush_figures()
    shell.user_ns.clear()
    shell.user_ns.update(ns)
    shell.history_manager.output_hist.clear()
    for name in ("last_type", "last_value", "last_traceback"):
        sys.__dict__.pop(name, None)


_warm = False


def main():
    warm_up()
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
        elif req.get("type") in ("complete", "inspect"):
            try:
                reply = (complete if req["type"] == "complete" else inspect)(req)
            except Exception as e:  # a broken __dir__ or __getattr__ of user code
                reply = {"error": "%s: %s" % (type(e).__name__, e)}
            send({"type": "reply", "id": req.get("id"), "reply": reply})


def complete(req):
    """Jupyter's complete_reply, as ipykernel makes it with IPython's
    completer. Positions count code points, as Python strings do."""
    from IPython.core.completer import provisionalcompleter, rectify_completions

    code, pos = req.get("code", ""), int(req.get("cursor_pos", len(req.get("code", ""))))
    with provisionalcompleter():
        comps = list(rectify_completions(code, shell.Completer.completions(code, pos)))
    start, end = (comps[0].start, comps[0].end) if comps else (pos, pos)
    return {
        "matches": [c.text for c in comps],
        "cursor_start": start,
        "cursor_end": end,
        "metadata": {"_jupyter_types_experimental": [{"text": c.text, "type": c.type, "start": c.start, "end": c.end} for c in comps]},
    }


def inspect(req):
    """Jupyter's inspect_reply: IPython's own help for the name at the cursor."""
    from IPython.utils.tokenutil import token_at_cursor

    code = req.get("code", "")
    name = token_at_cursor(code, int(req.get("cursor_pos", len(code))))
    try:
        data = shell.object_inspect_mime(name, detail_level=int(req.get("detail_level", 0)))
    except KeyError:
        return {"found": False, "data": {}, "metadata": {}}
    if "text/plain" in data:
        data["text/plain"] = _ANSI.sub("", data["text/plain"])
    return {"found": True, "data": data, "metadata": {}}


def preload(modules):
    """Imports modules ahead of the first cell, outside IPython's history:
    the kernel's first cell still has execution count 1."""
    import importlib

    for m in modules:
        try:
            importlib.import_module(m)
        except Exception:
            pass
    global _warm
    _warm = False  # again, with the modules
    warm_up()
    # What was imported stays for the kernel's life: keep it out of the
    # collector's way, or full collections stall cells for tens of ms.
    gc.freeze()
    send({"type": "preloaded"})



# --- fork server -------------------------------------------------------------
#
# The zygote (argv: zygote MODULE,MODULE...) runs in a jail of its own that
# keeps every capability inside its user namespace and has no seccomp filter;
# it never runs user code. fd 3 is its control socket (SOCK_SEQPACKET), fd 4
# holds the seccomp program, which it reads once and keeps in memory. For
# each request (a JSON message with seven fds: requests-read, frames-write,
# stdout-read, stderr-read, stdout-write, stderr-write, go-read) it forks C2
# straight into new mount, pid, net, ipc and uts namespaces (pid 1 of the new
# pid namespace; see _forker) as a child of the jail's init, which reaps it,
# and replies with C2's pid. C2 makes its mounts
# private, mounts its own /proc and /dev/shm, brings lo up, keeps only its seven fds and waits on the go pipe
# while the server moves it into the kernel's cgroup. Then C2 drops every
# capability, sets no_new_privs, loads the seccomp filter (and checks all of
# it in /proc/self/status), and forks C3, the kernel, which runs main() on
# fds 0-6 as a spawned kernel would. C2 stays as the namespace's init and
# exits when C3 does. Any failure in C2 exits before
# user code runs.

CLONE_PARENT, CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x8000, 0x20000, 0x4000000, 0x8000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_RDONLY = 2, 4, 8, 1
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_CAP_AMBIENT = 24, 38, 22, 47
PR_CAP_AMBIENT_CLEAR_ALL, SECCOMP_MODE_FILTER = 4, 2


def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.unshare.argtypes = [ctypes.c_int]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    libc.capset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return ctypes, libc


def _check(ctypes, ret, what):
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))


def zygote_main():
    # Started with -I: no "" (home) and no user site-packages on sys.path.
    if not sys.flags.isolated or "" in sys.path or os.getcwd() in sys.path:
        raise SystemExit("zygote: not isolated from the working directory (start it with -I)")
    # Nor configuration user code can write: matplotlib reads its rc file and
    # font cache from home, and the zygote, which keeps capabilities and has
    # no seccomp filter, must not parse files (fonts) chosen by user code.
    import tempfile

    # Hidden, so that it is not listed among the files code wrote.
    os.environ["MPLCONFIGDIR"] = tempfile.mkdtemp(prefix=".codecell-zygote-")
    import socket

    ctypes, libc = _libc()
    import fcntl
    import resource

    ctl = socket.socket(fileno=REQ_FD)
    with os.fdopen(FRAME_FD, "rb") as f:
        program = f.read()
    os.closerange(5, 1 << 16)
    if not program or len(program) % 8:
        raise SystemExit("zygote: no seccomp program")
    modules = [m for m in (sys.argv[2] if len(sys.argv) > 2 else "").split(",") if m]
    import importlib

    for m in modules:
        try:
            importlib.import_module(m)
        except Exception:
            pass
    warm_up()
    gc.freeze()
    _collapse_heap(ctypes, libc)
    tasks = os.listdir("/proc/self/task")
    if len(tasks) != 1 or threading.active_count() != 1:
        raise SystemExit("zygote: %d threads before forking; refusing" % len(tasks))
    env = (ctypes, libc, fcntl, resource, socket, program)
    fork_into = _forker(ctypes)
    ctl.send(json.dumps({"type": "ready", "version": sys.version.split()[0]}).encode())
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ctl, 1 << 16, 16)
        except InterruptedError:
            continue
        if not msg:
            os._exit(0)  # the server is gone
        try:
            req = json.loads(msg)
        except ValueError:
            req = None
        if req is None or len(fds) != 7:
            for fd in fds:
                os.close(fd)
            ctl.send(b'{"error":"bad fork request"}')
            continue
        if len(os.listdir("/proc/self/task")) != 1:
            # A thread would be copied half-way into every child: stop here.
            for fd in fds:
                os.close(fd)
            ctl.send(b'{"error":"the zygote has more than one thread"}')
            os._exit(1)
        try:
            pid = fork_into(CLONE_PARENT | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
        except OSError as e:
            for fd in fds:
                os.close(fd)
            ctl.send(json.dumps({"error": "fork: %s" % (e,)}).encode())
            continue
        if pid == 0:
            try:
                ctl.close()
                _child2(env, fds, req)
            finally:
                os._exit(1)
        for fd in fds:
            os.close(fd)
        ctl.send(json.dumps({"pid": pid}).encode())


def _collapse_heap(ctypes, libc):
    """Backs the zygote's anonymous memory with huge pages where it can
    (MADV_COLLAPSE, Linux 6.1+): a fork copies one page-table entry per 2 MiB
    instead of 512, about a third less time per fork with pandas loaded.
    A child's write still copies only the 4 KiB page it touches. Where the
    kernel cannot (older than 6.1, or a region it refuses), nothing changes."""
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    huge, madv_collapse = 1 << 21, 25
    with open("/proc/self/maps") as f:
        maps = f.read().splitlines()
    for line in maps:
        f = line.split()
        if not f[1].startswith("rw") or (len(f) > 5 and f[5] != "[heap]"):
            continue
        start, end = (int(x, 16) for x in f[0].split("-"))
        lo, hi = (start + huge - 1) & ~(huge - 1), end & ~(huge - 1)
        if hi > lo:
            libc.madvise(lo, hi - lo, madv_collapse)  # best effort


def _forker(ctypes):
    """Returns fork_into(flags): os.fork() into new namespaces in one clone
    call. A plain fork would need a short-lived child to unshare the pid
    namespace first (setns back is not allowed under bwrap's nested user
    namespace), which costs a second copy of the whole interpreter per
    kernel. Python's own fork hooks run around the raw clone, as in
    os.fork(); the zygote is single-threaded, so glibc's fork handlers (lock
    resets for threads) have nothing to do, and the child, C2, only runs
    set-up code and forks the kernel with os.fork()."""
    nr = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)
    if nr is None:
        raise SystemExit("zygote: no clone syscall number for %s" % os.uname().machine)
    api = ctypes.pythonapi
    # PyDLL keeps the GIL across the call, as os.fork() does.
    raw = ctypes.PyDLL(None, use_errno=True).syscall
    raw.restype = ctypes.c_long
    raw.argtypes = [ctypes.c_long, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]

    def fork_into(flags):
        api.PyOS_BeforeFork()
        pid = raw(nr, flags | signal.SIGCHLD, None, None, None, None)
        if pid == 0:
            api.PyOS_AfterFork_Child()
            return 0
        err = ctypes.get_errno()
        api.PyOS_AfterFork_Parent()
        if pid < 0:
            raise OSError(err, "clone: " + os.strerror(err))
        return pid

    return fork_into


def _child2(env, fds, req):
    ctypes, libc, fcntl, resource, socket, program = env
    # Keep only our seven fds (moved above 100) and fd 0 (/dev/null).
    mine = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in fds]
    for fd in fds:
        os.close(fd)
    os.closerange(1, 100)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in mine:
            try:
                os.close(fd)
            except OSError:
                pass
    errw = mine[5]
    try:
        os.setsid()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        _check(ctypes, libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "private propagation")
        _check(ctypes, libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
        for sub in (b"/proc/sys", b"/proc/sysrq-trigger", b"/proc/irq", b"/proc/bus"):
            if os.path.exists(sub):  # read-only, as bwrap does
                _check(ctypes, libc.mount(sub, sub, None, MS_BIND | MS_REC, None), "bind " + sub.decode())
                _check(ctypes, libc.mount(None, sub, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "remount " + sub.decode())
        shm = b"size=%d,mode=1777" % int(req.get("shm_bytes") or 64 << 20)
        _check(ctypes, libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, shm), "mount /dev/shm")
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        ifr = fcntl.ioctl(s, 0x8913, struct.pack("16sH14x", b"lo", 0))  # SIOCGIFFLAGS
        flags = struct.unpack("16sH14x", ifr)[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))  # SIOCSIFFLAGS IFF_UP
        s.close()
        socket.sethostname("sandbox")
        # Wait until the server has put this process into the kernel's cgroup.
        if os.read(mine[6], 2) != b"go":
            os._exit(1)
        os.close(mine[6])
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        fsize, nofile = int(req["fsize"]), int(req["nofile"])
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        # Every capability: bounding, ambient, then effective, permitted, inheritable.
        for cap in range(64):
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
                _check(ctypes, -1, "drop capability %d" % cap)
        _check(ctypes, libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
        hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
        data = (ctypes.c_uint32 * 6)()
        _check(ctypes, libc.capset(ctypes.addressof(hdr), ctypes.addressof(data)), "capset")
        _check(ctypes, libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")

        class SockFprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        buf = ctypes.create_string_buffer(program, len(program))
        fprog = SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
        _check(ctypes, libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0), "seccomp")
        st = {}
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                st[k] = v.strip()
        want = {"Seccomp": "2", "NoNewPrivs": "1", "CapEff": "0" * 16, "CapPrm": "0" * 16,
                "CapBnd": "0" * 16, "CapInh": "0" * 16, "CapAmb": "0" * 16}
        for k, v in want.items():
            if st.get(k) != v:
                raise OSError("%s is %r after set-up, want %r" % (k, st.get(k), v))
        os.chdir("/home/user")
        kpid = os.fork()
    except BaseException as e:
        try:
            os.write(errw, ("codecell zygote: setting up the kernel failed: %s\n" % (e,)).encode())
        finally:
            os._exit(125)
    if kpid == 0:
        try:
            _kernel_child(mine)
        finally:
            os._exit(1)
    for fd in mine[:6]:
        os.close(fd)
    # The namespace's init: reap, and leave (taking every process of the
    # namespace with it) when the kernel exits.
    while True:
        try:
            p, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if p == kpid:
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _kernel_child(mine):
    for target, fd in zip((3, 4, 5, 6, 1, 2), mine[:6]):
        os.dup2(fd, target)
    os.environ.pop("MPLCONFIGDIR", None)  # the zygote's own; see zygote_main
    sys.argv = ["-c"]
    # What `python3 -u -c` gives a spawned kernel and the zygote's -I left
    # out (it must not import anything user code can write).
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    sys.path.insert(0, "")
    import site

    site.ENABLE_USER_SITE = True
    user_site = site.getusersitepackages()
    if os.path.isdir(user_site):
        site.addsitedir(user_site)
    signal.signal(signal.SIGINT, _on_sigint)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()  # not the zygote's state, shared by every fork
    wire_fds()
    main()
    os._exit(0)


if ZYGOTE:
    try:
        zygote_main()
    except BaseException as e:
        os.write(2, ("codecell zygote: %s\n" % (e,)).encode())
    os._exit(1)
else:
    main()
