"""A TCP proxy for tests that can cut every connection through it on demand."""

from __future__ import annotations

import socket
import threading


class DroppingProxy:
    def __init__(self, listen_port: int = 0, target: tuple[str, int] | None = None) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", listen_port), reuse_port=False)
        self.port = self.server.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        self.drops = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self._connect(client)

    def _connect(self, client: socket.socket) -> None:
        try:
            if self.target is None:
                raise OSError("no target yet")
            upstream = socket.create_connection(self.target, timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        with self._lock:
            self._conns += [client, upstream]
        threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
        threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _on_data(self, client: socket.socket, to_upstream: bool, data: bytes) -> None:
        """Bytes that just passed through (a hook for recording subclasses)."""

    def _pipe(self, src: socket.socket, dst: socket.socket, to_upstream: bool) -> None:
        client = src if to_upstream else dst
        try:
            while data := src.recv(65536):
                self._on_data(client, to_upstream, data)  # before the answer can come back
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def drop_all(self) -> None:
        """Cut every open connection (both sides), as a flaky network would."""
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.drops += 1

    def close(self) -> None:
        self._closed = True
        self.server.close()
        self.drop_all()
