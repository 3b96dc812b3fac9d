"""Loopback servers for the remote-checkpoint tests (tests/cli/test_remote.py), each started by the test itself and
stopped by its process id: Debian's nginx serving a folder with range support (plain HTTP, and HTTPS with a
self-signed certificate made here by openssl), and a fault-injecting proxy of our own in front of it."""
import http.client
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing listens on 127.0.0.1:%d after %d s" % (port, timeout))


class Nginx:
    """nginx (foreground, one worker) on 127.0.0.1 serving `root`; `tls` adds an HTTPS port with a certificate for
    127.0.0.1 made by openssl (cert_file: the CA bundle a client trusts). access_log: one line per request with
    the status, the Range asked for, the body bytes sent, the Authorization header and the URI."""

    def __init__(self, root, tls=False):
        self.dir = tempfile.mkdtemp(prefix="tm-nginx-")
        self.port = free_port()
        self.tls_port = free_port() if tls else None
        self.cert_file = None
        tls_server = ""
        if tls:
            self.cert_file = os.path.join(self.dir, "cert.pem")
            key = os.path.join(self.dir, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", self.cert_file,
                            "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                           check=True, capture_output=True)
            tls_server = """server { listen 127.0.0.1:%d ssl; ssl_certificate %s; ssl_certificate_key %s; root %s; location / { } }""" % (
                self.tls_port, self.cert_file, key, root)
        user = "user root;" if os.geteuid() == 0 else ""
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""%s
worker_processes 1;
pid %s/nginx.pid;
error_log %s/error.log;
events { worker_connections 256; }
http {
  log_format ranges '$status\t$http_range\t$body_bytes_sent\t$http_authorization\t$request_uri';
  access_log %s/access.log ranges;
  client_body_temp_path %s/body; proxy_temp_path %s/proxy; fastcgi_temp_path %s/fcgi; uwsgi_temp_path %s/uwsgi; scgi_temp_path %s/scgi;
  types { application/json json; }
  default_type application/octet-stream;
  keepalive_requests 10000;
  server { listen 127.0.0.1:%d; root %s; location / { } }
  %s
}
""" % (user, self.dir, self.dir, self.dir, *([self.dir] * 5), self.port, root, tls_server))
        self.proc = subprocess.Popen([NGINX, "-c", conf, "-p", self.dir, "-g", "daemon off;"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_port(self.port)
            if tls:
                wait_port(self.tls_port)
        except RuntimeError:
            self.stop()
            raise

    def url(self, path=""):
        return "http://127.0.0.1:%d/%s" % (self.port, path)

    def tls_url(self, path=""):
        return "https://127.0.0.1:%d/%s" % (self.tls_port, path)

    def log(self, uris=False):
        """(status, Range header, body bytes sent, Authorization header[, URI]) per request so far ('-' when absent)."""
        rows = []
        path = os.path.join(self.dir, "access.log")
        if os.path.exists(path):
            for line in open(path):
                status, rng, sent, auth, uri = line.rstrip("\n").split("\t")
                row = (int(status), rng, int(sent), auth)
                rows.append(row + (uri,) if uris else row)
        return rows

    def clear_log(self):
        open(os.path.join(self.dir, "access.log"), "w").close()
        os.kill(self.proc.pid, 10)  # SIGUSR1: reopen the log
        time.sleep(0.2)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def read_request(f):
    """(method, path, headers) of the next request on a client connection's file (no body: GET and HEAD), or None
    at its end."""
    line = f.readline()
    if not line:
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers = {}
    while True:
        h = f.readline().decode("latin-1")
        if h in ("\r\n", "\n", ""):
            break
        k, v = h.split(":", 1)
        headers[k.strip()] = v.strip()
    return method, path, headers


class LoopbackProxy:
    """A listening socket on 127.0.0.1 in front of an upstream server on `upstream_port`: each connection is served by
    a thread, its requests answered in turn by the subclass's _answer (keep-alive honoured)."""

    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path=""):
        return "http://127.0.0.1:%d/%s" % (self.port, path)

    def stop(self):
        self.stopped = True
        self.sock.close()

    def _accept(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        """The connection's requests in turn, each answered by self._answer(conn, method, path, headers), which returns
        False to end the connection."""
        f = conn.makefile("rb")
        try:
            while True:
                request = read_request(f)
                if not request or not self._answer(conn, *request):
                    return
        except (OSError, ValueError):
            return
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def upstream(self, method, path, headers):
        """The upstream server's answer: (status, reason, headers without the hop-by-hop ones, body)."""
        up = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        try:
            up.request(method, path, headers=headers)
            resp = up.getresponse()
            body = resp.read()
            kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in ("connection", "keep-alive", "transfer-encoding")]
            return resp.status, resp.reason, kept, body
        finally:
            up.close()


def response_head(status, reason, headers):
    return ("HTTP/1.1 %d %s\r\n" % (status, reason) + "".join("%s: %s\r\n" % kv for kv in headers) + "\r\n").encode("latin-1")


class FaultProxy(LoopbackProxy):
    """An HTTP/1.1 proxy on 127.0.0.1 in front of `upstream_port` that spoils the first `count` ranged responses
    (requests with a Range header whose range starts past `min_offset`) in one way (`fault`):
      reset     headers and half the body, then a TCP reset
      503       503 with Retry-After: 1 and no body
      stall     headers and half the body, then nothing for `stall_s` seconds, then a close
      short     headers (the full Content-Length) and half the body, then a clean close
      etag      every response from the (count+1)-th on carries another ETag (count = responses left intact)
    Each client connection is served by its own thread; keep-alive is honoured."""

    def __init__(self, upstream_port, fault, count=1, min_offset=0, stall_s=4):
        self.fault, self.count, self.min_offset, self.stall_s = fault, count, min_offset, stall_s
        self.spoiled = 0
        self.seen = 0
        super().__init__(upstream_port)

    def _take(self, ranged_from):
        """Whether this response is to be spoiled."""
        with self.lock:
            if self.fault == "etag":
                self.seen += 1
                return self.seen > self.count
            if ranged_from is None or ranged_from < self.min_offset or self.spoiled >= self.count:
                return False
            self.spoiled += 1
            return True

    def _answer(self, conn, method, path, headers):
        rng = headers.get("Range")
        ranged_from = int(rng.split("=")[1].split("-")[0]) if rng else None
        status, reason, out_headers, body = self.upstream(method, path, {"Range": rng} if rng else {})
        spoil = self._take(ranged_from)
        if spoil and self.fault == "503":
            conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n")
            return True
        if spoil and self.fault == "etag":
            out_headers = [(k, '"changed-%s"' % v.strip('"') if k.lower() == "etag" else v) for k, v in out_headers]
        conn.sendall(response_head(status, reason, out_headers))
        if spoil and self.fault in ("reset", "stall", "short"):
            conn.sendall(body[: len(body) // 2])
            if self.fault == "stall":
                time.sleep(self.stall_s)
            if self.fault == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            return False
        conn.sendall(body)
        return True


S3RVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "web", "node_modules", "s3rver", "bin", "s3rver.js")


def have_s3rver():
    return os.path.isfile(S3RVER) and shutil.which("node") is not None


class S3rver:
    """s3rver (npm, a local S3 protocol server; credentials S3RVER / S3RVER) on 127.0.0.1 with one bucket, behind a
    SigV4Gate that checks every request's signature; put() uploads a file to s3rver directly with a SigV4-signed PUT
    written here from the AWS specification (hashlib/hmac), independent of libcurl's signer that tensormorph uses."""

    KEY_ID = SECRET = "S3RVER"
    REGION = "us-east-1"

    def __init__(self, bucket):
        self.dir = tempfile.mkdtemp(prefix="tm-s3rver-")
        self.port = free_port()
        self.bucket = bucket
        self.proc = subprocess.Popen(["node", S3RVER, "-d", self.dir, "-a", "127.0.0.1", "-p", str(self.port), "-s",
                                      "--configure-bucket", bucket], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_port(self.port, timeout=30)
        except RuntimeError:
            self.proc.kill()
            raise RuntimeError("s3rver did not start: " + self.proc.stderr.read().decode(errors="replace"))
        self.gate = SigV4Gate(self.port, self.SECRET)

    @property
    def endpoint(self):
        """Where clients connect: the signature-checking gate in front of s3rver."""
        return "http://127.0.0.1:%d" % self.gate.port

    def env(self, secret=None):
        """The environment a client of this server needs (endpoint, region, credentials)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": self.REGION, "AWS_ACCESS_KEY_ID": self.KEY_ID,
                "AWS_SECRET_ACCESS_KEY": secret or self.SECRET}

    def put(self, key, path):
        import datetime
        import hashlib
        with open(path, "rb") as f:
            body = f.read()
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        payload = hashlib.sha256(body).hexdigest()
        uri = "/%s/%s" % (self.bucket, key)
        signed = "host;x-amz-content-sha256;x-amz-date"
        headers = {"Host": "127.0.0.1:%d" % self.port, "x-amz-date": amz_date, "x-amz-content-sha256": payload}
        signature = sigv4_signature(self.SECRET, "PUT", uri, headers, signed, day, self.REGION, amz_date, payload)
        headers["Content-Length"] = str(len(body))
        headers["Authorization"] = "AWS4-HMAC-SHA256 Credential=%s/%s/%s/s3/aws4_request, SignedHeaders=%s, Signature=%s" % (
            self.KEY_ID, day, self.REGION, signed, signature)
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request("PUT", uri, body=body, headers=headers)
            r = c.getresponse()
            text = r.read()
            if r.status != 200:
                raise RuntimeError("s3rver PUT %s: %d %s" % (uri, r.status, text[:300]))
        finally:
            c.close()

    def stop(self):
        self.gate.stop()
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def sigv4_signature(secret, method, path, headers, signed, day, region, amz_date, payload_hash):
    """AWS Signature Version 4 of a request without a query, from the AWS specification (hashlib/hmac)."""
    import hashlib
    import hmac
    lower = {k.lower(): " ".join(v.split()) for k, v in headers.items()}
    canonical = "\n".join([method, path, "", *("%s:%s" % (h, lower.get(h, "")) for h in signed.split(";")), "", signed, payload_hash])
    scope = "%s/%s/s3/aws4_request" % (day, region)
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (day, region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()


class SigV4Gate(LoopbackProxy):
    """A proxy in front of s3rver that checks each request's AWS Signature Version 4 (s3rver 3.7 checks the key id
    and the Authorization header's form but not the V4 signature itself): a request whose signature is not the one
    computed here from the secret gets S3's 403 SignatureDoesNotMatch; the others are forwarded. `checked` counts
    the requests whose signature matched."""

    def __init__(self, upstream_port, secret):
        self.secret = secret
        self.checked = 0
        super().__init__(upstream_port)

    def _valid(self, method, path, headers):
        import re
        auth = headers.get("Authorization", "")
        m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$", auth)
        lower = {k.lower(): v for k, v in headers.items()}
        if not m or "x-amz-content-sha256" not in lower:
            return False
        _, day, region, signed, given = m.groups()
        want = sigv4_signature(self.secret, method, path, headers, signed, day, region, lower.get("x-amz-date", ""),
                               lower["x-amz-content-sha256"])
        return want == given

    def _answer(self, conn, method, path, headers):
        if not self._valid(method, path, headers):
            body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code><Message>The request '
                    b'signature we calculated does not match the signature you provided.</Message></Error>')
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            return True
        with self.lock:
            self.checked += 1
        status, reason, out_headers, body = self.upstream(method, path, {k: v for k, v in headers.items() if k.lower() != "host"})
        conn.sendall(response_head(status, reason, out_headers) + (body if method != "HEAD" else b""))
        return True
