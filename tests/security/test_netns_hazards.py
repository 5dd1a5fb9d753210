"""Abstract Unix sockets (hazard 18): scoped by network namespace, which each sandbox slot has its own of.

The pool reuses one empty network namespace per slot instead of creating one per execution (``jail.py``,
``make_network_namespaces``); these tests pin down that this opens no channel to the host or between two
sandboxes that run at the same time.
"""

from __future__ import annotations

import socket
import uuid

from security_helpers import assert_no_survivors, py

from execrl.sandbox import Sandbox, Verdict

CONNECTOR = """
import errno, socket, time
def attempt(name):
    for _ in range(100):
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            s = socket.socket(socket.AF_UNIX, kind)
            try:
                if kind == socket.SOCK_STREAM:
                    s.connect(name)
                else:
                    s.sendto(b"hello", name)
                return "connected"
            except OSError as exc:
                last = errno.errorcode.get(exc.errno, exc.errno)
            finally:
                s.close()
        time.sleep(0.02)
    return last
"""

LISTENER = """
import socket
stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
stream.bind(NAME)
stream.listen(1)
stream.settimeout(2.5)
dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
dgram.bind(NAME + b"-dgram")
dgram.settimeout(0.1)
try:
    stream.accept()
    print("accepted")
except TimeoutError:
    print("nobody came")
try:
    dgram.recv(16)
    print("received")
except TimeoutError:
    print("no datagram")
"""


def test_concurrent_sandboxes_cannot_meet_on_abstract_unix_sockets(sandbox: Sandbox) -> None:
    name = f"\0execrl-meet-{uuid.uuid4().hex}".encode()
    listener = f"NAME = {name!r}\n" + LISTENER
    connector = CONNECTOR + f"print(attempt({name!r}), attempt({name + b'-dgram'!r}))\n"
    results = sandbox.run_batch([py(listener), py(connector)])
    assert results[0].verdict is Verdict.PASSED, results[0]
    assert results[1].verdict is Verdict.PASSED, results[1]
    assert results[0].stdout == "nobody came\nno datagram\n"
    assert results[1].stdout == "ECONNREFUSED ECONNREFUSED\n"
    assert_no_survivors(sandbox)


def test_the_host_abstract_namespace_is_out_of_reach(sandbox: Sandbox) -> None:
    name = f"\0execrl-host-{uuid.uuid4().hex}".encode()
    host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host.bind(name)
    host.listen(1)
    host.setblocking(False)
    try:
        result = sandbox.run(py(CONNECTOR + f"print(attempt({name!r}))\n"))
        try:
            host.accept()
            accepted = True
        except BlockingIOError:
            accepted = False
    finally:
        host.close()
    assert result.verdict is Verdict.PASSED, result
    assert result.stdout == "ECONNREFUSED\n"
    assert not accepted
