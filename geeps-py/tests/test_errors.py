"""Errors: every failure a GeepsError subclass with geeps' message, bad
arguments, a missing cluster environment, panics, and the GIL released
while a call blocks."""

import subprocess
import sys
import threading
import time

import pytest

import geeps
from conftest import clean_env


def test_the_hierarchy():
    for cls in (
        geeps.ConfigError,
        geeps.UnknownKeyError,
        geeps.StateError,
        geeps.ArgumentError,
        geeps.MemoryBudgetError,
        geeps.DeviceError,
        geeps.TimeoutError,
        geeps.PeerError,
        geeps.ShutDownError,
        geeps.CheckpointError,
        geeps.GeepsPanic,
    ):
        assert issubclass(cls, geeps.GeepsError) and issubclass(cls, Exception)
    assert issubclass(geeps.BufferReleasedError, geeps.StateError)


def test_unknown_table_and_row_name_the_key():
    b = geeps.Builder(row_width=4, device_memory=1 << 20)
    b.parameter_table("w", 2)
    ps = b.build()
    ps.finish_virtual_iteration()
    with pytest.raises(geeps.UnknownKeyError, match="unknown table 7"):
        ps.read_keys(7, [0])
    with pytest.raises(geeps.UnknownKeyError, match="table `w` has 2 rows"):
        ps.read_keys(0, [2])
    with pytest.raises(geeps.UnknownKeyError, match='no table named "x"'):
        ps.table("x")
    ps.shutdown()


def test_bad_arguments():
    with pytest.raises(geeps.ConfigError, match="row_width"):
        geeps.Builder(row_width=0)
    with pytest.raises(geeps.ArgumentError, match="wait_deadline"):
        geeps.Builder(wait_deadline=-1.0)
    with pytest.raises(geeps.ArgumentError, match="device"):
        geeps.Builder(device="tpu").build()
    with pytest.raises(geeps.ArgumentError, match="without a cluster"):
        geeps.Builder(device_memory=1 << 20).build(rank=1)
    with pytest.raises(geeps.ArgumentError, match="needs rank"):
        geeps.Builder(device_memory=1 << 20).build(geeps.LocalCluster(2))
    with pytest.raises(geeps.ArgumentError, match="cluster is"):
        geeps.Builder(device_memory=1 << 20).build("localhost")
    b = geeps.Builder(row_width=4, device_memory=1 << 20)
    b.parameter_table("w", 2)
    with pytest.raises(geeps.ConfigError, match="declared twice"):
        b2 = geeps.Builder(row_width=4, device_memory=1 << 20)
        b2.parameter_table("w", 1)
        b2.parameter_table("w", 1)
        b2.build()
    ps = b.build()
    with pytest.raises(geeps.StateError, match="built"):
        b.parameter_table("late", 1)
    with ps.virtual_iteration() as v:
        with pytest.raises(geeps.ArgumentError, match="rows"):
            v.read(0, "abc")
        with pytest.raises(geeps.ArgumentError, match="rows"):
            v.read(0, [-1])
        with pytest.raises(geeps.ArgumentError, match="slack"):
            v.read(0, [0], slack=-2)
        with pytest.raises(geeps.ArgumentError, match="table"):
            v.read("w", [0])
    with pytest.raises(geeps.ArgumentError, match="Handle"):
        ps.read(3)
    ps.shutdown()


def test_a_budget_too_small_names_the_bytes_needed():
    b = geeps.Builder(row_width=1024, device_memory=8 << 10)
    w = b.parameter_table("w", 64)
    ps = b.build()
    with pytest.raises(geeps.MemoryBudgetError, match="at least"):
        with ps.virtual_iteration() as v:
            v.post_read(v.read(w, range(64)))
    ps.shutdown()


def test_init_without_a_cluster_environment_says_what_to_set():
    code = "import geeps\ntry:\n    geeps.init()\nexcept geeps.ConfigError as e:\n    print('ConfigError:', e)\n"
    out = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "ConfigError:" in out.stdout and "GEEPS_RANK" in out.stdout


def test_a_panic_becomes_geeps_panic():
    with pytest.raises(geeps.GeepsPanic, match="geeps panicked: on purpose"):
        geeps._geeps._panic_for_test("on purpose")
    # The module still works afterwards.
    b = geeps.Builder(row_width=4, device_memory=1 << 20)
    b.parameter_table("w", 1)
    b.build().shutdown()


def test_blocking_calls_release_the_gil():
    # Worker 0 reads at clock 1 under BSP: it waits for worker 1's clock,
    # which this thread gives only after it ran Python while the read blocked.
    cluster = geeps.LocalCluster(2)
    pss = []
    for rank in range(2):
        b = geeps.Builder(row_width=4, device_memory=1 << 20)
        w = b.parameter_table("w", 1)
        pss.append(b.build(cluster, rank=rank))
    for ps in pss:
        ps.finish_virtual_iteration()
    ps0, ps1 = pss
    ps0.clock()
    done = []

    def reader():
        with ps0.read_keys(w, [0], slack=0) as r:
            done.append(float(r.numpy()[0, 0]))

    t = threading.Thread(target=reader)
    t.start()
    ticks, deadline = 0, time.monotonic() + 0.5
    while time.monotonic() < deadline:
        ticks += 1  # Python runs here only if the blocked read let go of the GIL
    assert not done, "the read should still wait for worker 1's clock"
    assert ticks > 1000
    ps1.clock()
    t.join(30)
    assert done == [0.0]
    for ps in pss:
        ps.shutdown()


def test_a_wait_past_the_deadline_raises_timeout():
    cluster = geeps.LocalCluster(2)
    pss = []
    for rank in range(2):
        b = geeps.Builder(row_width=4, device_memory=1 << 20, wait_deadline=0.3)
        w = b.parameter_table("w", 1)
        pss.append(b.build(cluster, rank=rank))
    for ps in pss:
        ps.finish_virtual_iteration()
    pss[0].clock()
    with pytest.raises(geeps.TimeoutError):
        pss[0].read_keys(w, [0], slack=0)
    for ps in pss:
        ps.shutdown()
