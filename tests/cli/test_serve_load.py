"""`tensormorph serve` against slow, idle and too many clients (Debian's python3, standard library only):
20 clients dribbling a request one byte every 2 s do not keep /api/health from answering within a second,
and are cut off (408) at the 10 s request deadline; keep-alive connections left idle do not keep new clients
waiting; connections over the per-peer bound (from one address; 127.0.0.2 and 127.0.0.3 are other peers on
loopback) and over the total bound are answered 503.

Time bounds are wall-clock; under the sanitizer build (ctest --preset asan sets ASAN_OPTIONS), where the
server runs 2-3x slower, the latency bounds are multiplied by SCALE; the deadline itself does not change."""
import http.client
import json
import os
import socket
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_serve import Server, http_get, private_env, write_small_safetensors  # noqa: E402

SCALE = 3.0 if "ASAN_OPTIONS" in os.environ else 1.0
DEADLINE_S = 10.0  # the server's request deadline (docs/server.md)


def get(host, port, path, timeout=10, source=None):
    """(status, body) of GET path on a fresh connection, optionally from another loopback address."""
    status, _, body = http_get(host, port, path, timeout=timeout, source=source)
    return status, body


class SlowClientsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tm-serve-load-")
        cls.env = private_env(cls.tmp)
        cls.small = os.path.join(cls.tmp, "small.safetensors")
        write_small_safetensors(cls.small)

    def serve(self, *args):
        s = Server([self.small] + list(args), self.env)
        self.addCleanup(lambda: s.proc.poll() is None and s.stop())
        return s

    def test_slow_clients_neither_starve_health_nor_outlive_the_deadline(self):
        s = self.serve()
        request = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"z" * 40 + b"\r\n\r\n"
        slow = []
        for _ in range(20):
            c = socket.create_connection((s.host, s.port), timeout=30)
            slow.append([c, time.time(), 0, None])  # socket, connected at, bytes sent, (seconds, first bytes) when cut
        stop = threading.Event()

        def dribble():  # one byte to each slow client every 2 s, until the server answers or closes
            while not stop.is_set():
                for entry in slow:
                    if entry[3] is None and entry[2] < len(request):
                        try:
                            entry[0].send(request[entry[2]:entry[2] + 1])
                            entry[2] += 1
                        except OSError:
                            pass
                stop.wait(2.0)

        def watch(entry):  # what the server sends, and when (EOF or reset: b"")
            try:
                data = entry[0].recv(4096)
            except OSError:
                data = b""
            entry[3] = (time.time() - entry[1], data)

        threads = [threading.Thread(target=dribble)] + [threading.Thread(target=watch, args=(e,)) for e in slow]
        for t in threads:
            t.start()
        try:
            time.sleep(1.0)
            for _ in range(5):
                t0 = time.time()
                status, _ = get(s.host, s.port, "/api/health", timeout=5)
                took = time.time() - t0
                self.assertEqual(status, 200)
                self.assertLess(took, 1.0 * SCALE, "/api/health waited behind the slow clients")
                time.sleep(0.5)
            for t in threads[1:]:
                t.join(DEADLINE_S + 10)
        finally:
            stop.set()
            threads[0].join()
            for entry in slow:
                entry[0].close()
        for _, _, sent, cut in slow:
            self.assertIsNotNone(cut, "a slow client was not cut off")
            seconds, data = cut
            self.assertLess(sent, len(request))
            self.assertGreater(seconds, DEADLINE_S - 1.0)
            self.assertLess(seconds, DEADLINE_S + 2.0 * SCALE)
            self.assertTrue(data.startswith(b"HTTP/1.1 408 "), data[:100])
            self.assertIn(b"did not arrive within 10 s", data)

    def test_idle_keep_alive_connections_do_not_hold_new_clients(self):
        s = self.serve()
        # 16 keep-alive connections that asked once and keep asking every 2 s (a browser's open tabs).
        idle = [http.client.HTTPConnection(s.host, s.port, timeout=10) for _ in range(16)]
        stop = threading.Event()

        def keep_asking():
            while not stop.wait(2.0):
                for c in idle:
                    c.request("GET", "/api/health")
                    c.getresponse().read()
        for c in idle:
            c.request("GET", "/api/health")
            r = c.getresponse()
            r.read()
            self.assertEqual(r.status, 200)
        keeper = threading.Thread(target=keep_asking)
        keeper.start()
        results = []
        try:
            def fetch():
                t0 = time.time()
                try:
                    status, _ = get(s.host, s.port, "/api/tensors?limit=5", timeout=10)
                except OSError as e:
                    status = type(e).__name__
                results.append((status, time.time() - t0))
            t0 = time.time()
            fetchers = [threading.Thread(target=fetch) for _ in range(32)]
            for t in fetchers:
                t.start()
            for t in fetchers:
                t.join(15)
            took = time.time() - t0
        finally:
            stop.set()
            keeper.join()
            for c in idle:
                c.close()
        self.assertEqual([r[0] for r in results], [200] * 32, results)
        self.assertLess(took, 3.0 * SCALE, results)

    def test_connections_over_the_bounds_are_refused(self):
        s = self.serve("--http-threads", "8")  # at most 8 connections at once, 4 from one address

        def hold(source):
            c = http.client.HTTPConnection(s.host, s.port, timeout=10, source_address=(source, 0))
            c.request("GET", "/api/health")
            r = c.getresponse()
            return c, r.status, r.read()

        def hold_admitted(source):
            # The start-up polls (wait_indexed) close their connections, but on a loaded machine the server may
            # count one for a moment more: a 503 within the first seconds is a released connection still counted.
            deadline = time.time() + 10 * SCALE
            while True:
                c, status, body = hold(source)
                if status != 503 or time.time() > deadline:
                    return c, status
                c.close()
                time.sleep(0.1)

        held = []
        try:
            for _ in range(4):
                c, status = hold_admitted("127.0.0.1")
                held.append(c)
                self.assertEqual(status, 200)
            c, status, body = hold("127.0.0.1")
            c.close()
            self.assertEqual(status, 503, body)
            self.assertIn("too many connections from 127.0.0.1 (at most 4 at once)", json.loads(body)["error"])
            for _ in range(4):  # another peer still gets in
                c, status, _ = hold("127.0.0.2")
                held.append(c)
                self.assertEqual(status, 200)
            c, status, body = hold("127.0.0.3")  # 8 connections open: the server is full
            c.close()
            self.assertEqual(status, 503, body)
            self.assertIn("most connections (8)", json.loads(body)["error"])
            held.pop(0).close()  # a connection ending frees its place
            deadline = time.time() + 5
            while (status := get(s.host, s.port, "/api/health", source="127.0.0.3")[0]) == 503 and time.time() < deadline:
                time.sleep(0.05)
            self.assertEqual(status, 200)
        finally:
            for c in held:
                c.close()


if __name__ == "__main__":
    unittest.main()
