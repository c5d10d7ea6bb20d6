"""Real Redis servers for the tests, on loopback only, started and stopped by the tests.

``redis_server`` is one ``redis-server`` for the session, ``redis_cluster`` a three-node Redis
Cluster (``--cluster-enabled yes`` on three ports, joined by ``redis-cli --cluster create``).
``redis_url`` and ``cluster_url`` empty them before each test; ``spare_redis`` is a server of
the test's own, to kill and restart.  Test modules load this file as a plugin
(``pytest_plugins = ("redis_servers",)``), so the session's servers are started once
whichever module asks first, and stopped when the session ends.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port nothing listens on at the moment (and its +10000 cluster bus port)."""
    while True:
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            port = probe.getsockname()[1]
        if port + 10000 < 65536:
            with socket.socket() as bus:
                try:
                    bus.bind((HOST, port + 10000))
                except OSError:
                    continue
            return port


def _wait(condition, what: str, timeout: float = 15.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


class RedisServer:
    """One ``redis-server`` subprocess on 127.0.0.1 without persistence."""

    def __init__(self, folder: Path, port: int | None = None, *, cluster: bool = False) -> None:
        assert os.path.exists(REDIS_SERVER), (
            "redis-server is not installed (.ci/run installs the redis-server package)")
        self.folder = folder
        self.port = port or free_port()
        self.cluster = cluster
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port, socket_timeout=5)

    def start(self) -> RedisServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        command = [REDIS_SERVER, "--bind", HOST, "--port", str(self.port), "--save", "",
                   "--appendonly", "no", "--daemonize", "no", "--dir", str(self.folder),
                   "--logfile", str(self.folder / "redis.log")]
        if self.cluster:
            command += ["--cluster-enabled", "yes", "--cluster-config-file",
                        f"nodes-{self.port}.conf", "--cluster-node-timeout", "5000"]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        client = self.client()
        try:
            _wait(lambda: self.process.poll() is None and client.ping(),
                  f"redis-server on port {self.port}")
        except RuntimeError:
            log = (self.folder / "redis.log")
            raise RuntimeError(f"redis-server on port {self.port} did not start: "
                               f"{log.read_text()[-2000:] if log.exists() else ''}") from None
        finally:
            client.close()
        return self

    def kill(self) -> None:
        """SIGKILL, as a crash would (no shutdown save: nothing is persisted anyway)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None


class RedisClusterNodes:
    """Three cluster-enabled servers joined into one cluster with no replicas."""

    def __init__(self, folder: Path) -> None:
        self.nodes = [RedisServer(folder / f"node{i}", cluster=True) for i in range(3)]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self) -> RedisClusterNodes:
        for node in self.nodes:
            node.start()
        addresses = [f"{HOST}:{node.port}" for node in self.nodes]
        created = subprocess.run([REDIS_CLI, "--cluster", "create", *addresses,
                                  "--cluster-replicas", "0", "--cluster-yes"],
                                 capture_output=True, timeout=60)
        if created.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: "
                               f"{created.stdout.decode()[-2000:]}{created.stderr.decode()}")

        def ready() -> bool:
            for node in self.nodes:
                with node.client() as client:
                    info = client.execute_command("CLUSTER", "INFO")
                    text = info.decode() if isinstance(info, bytes) else str(info)
                    if "cluster_state:ok" not in text or "cluster_known_nodes:3" not in text:
                        return False
            return True

        _wait(ready, "cluster_state:ok on all three nodes", timeout=30)
        return self

    def flush(self) -> None:
        for node in self.nodes:
            with node.client() as client:
                client.flushall()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


# -- fixtures ---------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    atexit.register(server.stop)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterNodes]:
    cluster = RedisClusterNodes(tmp_path_factory.mktemp("redis-cluster"))
    atexit.register(cluster.stop)
    yield cluster.start()
    cluster.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The standalone server's URL, emptied for this test."""
    with redis_server.client() as client:
        client.flushall()
    return redis_server.url


@pytest.fixture
def cluster_url(redis_cluster: RedisClusterNodes) -> str:
    """The cluster's URL (its first node), emptied for this test."""
    redis_cluster.flush()
    return redis_cluster.url


@pytest.fixture
def spare_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of this test's own (to kill and restart), stopped at its end."""
    server = RedisServer(tmp_path / "spare-redis").start()
    yield server
    server.stop()


@pytest.fixture
def closed_port() -> int:
    """A loopback port where nothing listens."""
    return free_port()
