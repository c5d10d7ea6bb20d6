"""The stores tests run against: every backend behind one fixture.

``backend`` is the name of a store backend: ``"lmdb"`` unless a test asks for more.  A test
(or a whole module, with ``pytestmark``) marked ``@pytest.mark.every_backend`` runs once per
backend in :data:`BACKENDS`: an LMDB folder, the session's Redis server and its three-node
Redis Cluster (``tests/redis_servers.py``), each empty at the start of the test.  The
fixtures that build on it (``store_location``, ``store``, and ``engine`` in conftest.py)
then open that backend, so a behaviour is written once and checked on all three.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mailfilter.config import Settings
from mailfilter.store import Store, open_store

BACKENDS = ("lmdb", "redis", "cluster")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "every_backend: run once per store backend "
                            "(lmdb, redis, cluster) through the backend fixture")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames and \
            metafunc.definition.get_closest_marker("every_backend") is not None:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test: a parameter of ``every_backend`` tests, else LMDB."""
    return getattr(request, "param", "lmdb")


@pytest.fixture
def store_location(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where an empty store of ``backend`` is: a folder, or a freshly emptied Redis URL."""
    if backend == "lmdb":
        return str(tmp_path / "store")
    if backend == "redis":
        return request.getfixturevalue("redis_url")
    if backend == "cluster":
        return request.getfixturevalue("cluster_url")
    raise ValueError(f"unknown store backend {backend!r}")


@pytest.fixture
def store(store_location: str, settings: Settings) -> Iterator[Store]:
    """A bare store of ``backend`` (no engine), opened with the default parameters."""
    opened = open_store(store_location, settings.fingerprint.store_parameters(),
                        retention_seconds=settings.store.retention_seconds())
    yield opened
    opened.close()
