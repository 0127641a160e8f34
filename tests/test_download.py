"""The downloader against a loopback HTTP server serving small files made by the tests."""

import hashlib
import http.server
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from minialbert.download import DownloadError, cache_dir, download


@dataclass
class Route:
    body: bytes = b""
    status: int = 200
    declared_length: int | None = None      # Content-Length to announce (None: the true length)
    delay: float = 0.0                      # seconds to wait before answering


class LoopbackServer:
    """An HTTP server on 127.0.0.1 in a thread; `routes` maps a path to what it answers."""

    def __init__(self):
        self.routes: dict[str, Route] = {}
        self.hits: dict[str, int] = {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.hits[self.path] = server.hits.get(self.path, 0) + 1
                route = server.routes.get(self.path, Route(b"not found", 404))
                time.sleep(route.delay)
                length = len(route.body) if route.declared_length is None else route.declared_length
                self.close_connection = True
                try:
                    self.send_response(route.status)
                    self.send_header("Content-Length", str(length))
                    self.end_headers()
                    self.wfile.write(route.body)
                except (BrokenPipeError, ConnectionResetError):   # the client gave up (timeout test)
                    pass

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def serve(self, path: str, body: bytes, **kwargs) -> str:
        """Register `path` and return its full URL."""
        self.routes[path] = Route(body, **kwargs)
        return self.url + path


@contextmanager
def loopback_server():
    server = LoopbackServer()
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


@pytest.fixture(scope="module")
def server():
    with loopback_server() as s:
        yield s


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def assert_nothing_left(directory):
    """No destination file and no temp file: nothing a later run could trust."""
    assert list(directory.iterdir()) == []


def test_success_then_cache_hit(server, tmp_path):
    body = b"hello corpus\n" * 1000
    url = server.serve("/ok.txt", body)
    dest = tmp_path / "ok.txt"
    assert download(url, dest, sha256=sha(body)) == dest
    assert dest.read_bytes() == body
    assert download(url, dest, sha256=sha(body)) == dest      # verified cache hit: no request
    assert server.hits["/ok.txt"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ok.txt"]


@pytest.mark.parametrize("status", [404, 500])
def test_http_error(server, tmp_path, status):
    url = server.serve(f"/error{status}", b"oops", status=status)
    with pytest.raises(DownloadError, match=f"HTTP {status} for URL {url}"):
        download(url, tmp_path / "x.bin")
    assert_nothing_left(tmp_path)


def test_wrong_hash_names_both_hashes(server, tmp_path):
    body = b"the real content"
    url = server.serve("/changed.bin", body)
    expected = sha(b"what we pinned")
    with pytest.raises(DownloadError, match=f"expected {expected}, got {sha(body)}"):
        download(url, tmp_path / "changed.bin", sha256=expected)
    assert_nothing_left(tmp_path)


def test_truncated_body(server, tmp_path):
    url = server.serve("/short.bin", b"x" * 100, declared_length=1000)
    with pytest.raises(DownloadError, match="truncated"):
        download(url, tmp_path / "short.bin")
    assert_nothing_left(tmp_path)


def test_expected_size_mismatch(server, tmp_path):
    url = server.serve("/size.bin", b"y" * 10)
    with pytest.raises(DownloadError, match="expected 11"):
        download(url, tmp_path / "size.bin", expected_size=11)
    assert_nothing_left(tmp_path)


def test_corrupt_cache_is_downloaded_again(server, tmp_path):
    body = b"good bytes"
    url = server.serve("/cached.bin", body)
    dest = tmp_path / "cached.bin"
    dest.write_bytes(b"poisoned")
    assert download(url, dest, sha256=sha(body)).read_bytes() == body
    assert server.hits["/cached.bin"] == 1


def test_cached_file_of_wrong_size_is_downloaded_again(server, tmp_path):
    url = server.serve("/sized.bin", b"12345")
    dest = tmp_path / "sized.bin"
    dest.write_bytes(b"123")                                    # an interrupted copy, no hash pinned
    assert download(url, dest, expected_size=5).read_bytes() == b"12345"


def test_failed_redownload_leaves_no_corrupt_file(server, tmp_path):
    dest = tmp_path / "gone.bin"
    dest.write_bytes(b"poisoned")
    url = server.serve("/gone.bin", b"", status=404)
    with pytest.raises(DownloadError):
        download(url, dest, sha256=sha(b"good"))
    assert_nothing_left(tmp_path)


def test_timeout(server, tmp_path):
    url = server.serve("/slow.bin", b"late", delay=2.0)
    start = time.perf_counter()
    with pytest.raises(DownloadError, match="timeout was 0.2 s"):
        download(url, tmp_path / "slow.bin", timeout=0.2)
    assert time.perf_counter() - start < 1.5
    assert_nothing_left(tmp_path)


def test_unreachable_host(tmp_path):
    with pytest.raises(DownloadError, match="check your network"):
        download("http://127.0.0.1:9/nothing", tmp_path / "x", timeout=2)   # port 9: discard, closed
    assert_nothing_left(tmp_path)


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "cache"))
    assert cache_dir() == tmp_path / "cache"
    assert cache_dir().is_dir()
