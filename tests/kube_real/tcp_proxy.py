"""A TCP proxy on 127.0.0.1 in front of the service: an agent's way to it, which a test cuts
(a partition) with real sockets. Held bytes are kept, not dropped — as TCP retransmits
across a partition that heals —, so what the service answered meanwhile reaches the agent
late, when the test lets it."""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlsplit

STEP = 0.05


class TcpProxy:
    def __init__(self, upstream_url: str):
        parts = urlsplit(upstream_url)
        self.upstream = (parts.hostname, parts.port)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.listener.settimeout(STEP)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.to_service = threading.Event()
        self.to_agent = threading.Event()
        self.to_service.set()
        self.to_agent.set()
        self.held_for_agent = 0  # bytes the service sent that the agent has not got yet
        self._trigger: bytes | None = None
        self.triggered = threading.Event()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._accepter = threading.Thread(target=self._accept, daemon=True)

    def start(self) -> TcpProxy:
        self._accepter.start()
        return self

    # --- the test's hands ----------------------------------------------------------------------
    def hold(self) -> None:
        """A partition: nothing passes either way."""
        self.to_service.clear()
        self.to_agent.clear()

    def hold_after(self, marker: bytes, settle: float = 0.3) -> None:
        """Cut the link ``settle`` s after the next request containing ``marker`` went
        through (its body too): that request is then in the service's hands."""
        self.triggered.clear()
        self._trigger = marker
        self._settle = settle

    def release_answers(self) -> None:
        """What the service sent reaches the agent; the agent's requests stay held."""
        self.to_agent.set()

    def heal(self) -> None:
        self.to_service.set()
        self.to_agent.set()

    def close(self) -> None:
        self._closed.set()
        self._accepter.join(timeout=5)
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.close()
                except OSError:
                    pass
        self.listener.close()

    # --- the pumps -----------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                agent, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            service = socket.create_connection(self.upstream)
            with self._lock:
                self._sockets += [agent, service]
            for src, dst, gate, up in ((agent, service, self.to_service, True),
                                       (service, agent, self.to_agent, False)):
                threading.Thread(target=self._pump, args=(src, dst, gate, up),
                                 daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, gate: threading.Event,
              up: bool) -> None:
        src.settimeout(STEP)
        pending = bytearray()
        ended = False
        while not self._closed.is_set():
            if not ended:
                try:
                    data = src.recv(65536)
                    if data:
                        pending += data
                        if not up:
                            self._count(len(data))
                    else:
                        ended = True
                except TimeoutError:
                    pass
                except OSError:
                    ended = True
            if pending and gate.is_set():
                sent = bytes(pending)
                pending.clear()
                try:
                    dst.sendall(sent)
                except OSError:
                    return
                if not up:
                    self._count(-len(sent))
                elif self._trigger is not None and self._trigger in sent:
                    self._trigger = None
                    threading.Timer(self._settle, self._fire).start()
            if ended and not pending:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            if ended:
                time.sleep(STEP)

    def _fire(self) -> None:
        self.hold()
        self.triggered.set()

    def _count(self, delta: int) -> None:
        with self._lock:
            self.held_for_agent += delta
