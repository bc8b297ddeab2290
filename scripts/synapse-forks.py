"""Starts test Synapses by forking one Python process that has already imported Synapse.

Importing `synapse.app.homeserver` takes about 1.1 s of CPU, nearly all of a test
Synapse's start (measured: 1.2 s for the import alone, 1.3 s from launch to a served
`/versions`); the test suites start a few hundred. This process pays it once per test
binary: it imports Synapse, then reads one request a line on stdin,

    {"config": "/path/homeserver.yaml", "dir": "/path", "out": "/path/synapse.out"}

forks, answers the child's PID on stdout, and the child runs Synapse's own `main()` with
`-c config` in `dir`, its output appended to `out`. The child is the real homeserver,
the same code on the same config as `python -m synapse.app.homeserver`; it is stopped by
its PID (SIGTERM), and the kernel reaps it (SIGCHLD ignored here). This process ends
when stdin closes, that is when the test process ends, and each child gets SIGTERM when
it does (PR_SET_PDEATHSIG), so no test Synapse outlives the test process.

Run by `tests/it/support/synapse.rs` with the Synapse venv's Python.
"""

import ctypes
import json
import os
import select
import signal
import sys

import synapse.app.homeserver
from twisted.internet import reactor

PR_SET_PDEATHSIG = 1

# The test Synapses yield the CPU to the rest of the suite when it is short: the real-model
# lanes are the suite's critical path (one model-server thread for minutes), and a
# homeserver that answers a few milliseconds later changes no test's outcome.
NICE = 5


def fresh_reactor():
    """Gives the child its own epoll instance and waker pipe: the imported reactor's are
    shared with the zygote and every sibling across the fork, and one epoll instance
    shared between processes delivers one's socket events to another."""
    old = reactor.waker
    reactor._internalReaders.discard(old)
    reactor._poller.close()
    reactor._poller = select.epoll(1024)
    reactor._reads.clear()
    reactor._writes.clear()
    reactor._selectables.clear()
    reactor.waker = None
    old.connectionLost(None)
    reactor.installWaker()


def child(request):
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:
        os._exit(1)
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)
    os.chdir(request["dir"])
    fresh_reactor()
    sys.argv = ["synapse.app.homeserver", "-c", request["config"]]
    code = 0
    try:
        synapse.app.homeserver.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def main():
    os.nice(NICE)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(request)
        print(pid, flush=True)


if __name__ == "__main__":
    main()
