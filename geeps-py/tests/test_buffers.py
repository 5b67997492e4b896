"""Buffers: numpy views without a copy, read-only reads, release rules
(no use after release, no release while a view lives), copy_from checks,
context-manager releases."""

import numpy as np
import pytest

import geeps


@pytest.fixture
def ps():
    b = geeps.Builder(row_width=8, device_memory=1 << 20)
    b.parameter_table("w", 4)
    b.local_table("act", 2)
    p = b.build()
    p.finish_virtual_iteration()
    yield p
    p.shutdown()


def test_numpy_view_is_the_buffer_memory(ps):
    buf = ps.local_access_keys(1, [0, 1], fetch=False)
    a = buf.numpy()
    assert a.dtype == np.float32 and a.shape == (2, 8) == buf.shape
    assert a.ctypes.data == buf.data_ptr  # no copy
    b = buf.numpy()
    a[1, 3] = 42.0
    assert b[1, 3] == 42.0
    assert buf.live_views == 2
    del a, b
    assert buf.live_views == 0
    buf.post()


def test_numpy_from_dlpack_is_a_view_too(ps):
    buf = ps.pre_update_keys(0, [0, 1])
    a = np.from_dlpack(buf)
    assert a.shape == (2, 8) and a.ctypes.data == buf.data_ptr and buf.live_views == 1
    del a
    buf.discard()


def test_read_views_are_read_only(ps):
    buf = ps.read_keys(0, [0])
    a = buf.numpy()
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0, 0] = 1.0
    del a
    buf.post()


def test_use_after_release_raises(ps):
    buf = ps.read_keys(0, [0, 1])
    buf.post()
    assert buf.released
    for use in (buf.numpy, buf.post, lambda: buf.data_ptr, lambda: buf.__dlpack__()):
        with pytest.raises(geeps.BufferReleasedError, match="released"):
            use()
    with pytest.raises(geeps.BufferReleasedError):
        np.from_dlpack(buf)


def test_release_with_a_live_view_is_refused_and_the_buffer_stays_held(ps):
    buf = ps.pre_update_keys(0, [0])
    view = buf.numpy()
    with pytest.raises(geeps.StateError, match="still alive"):
        buf.update()
    assert not buf.released
    view[:] = 1.0
    del view
    buf.update()
    ps.clock()
    with ps.read_keys(0, [0]) as r:
        assert r.numpy()[0, 0] == 1.0


def test_copy_from_checks_dtype_and_shape(ps):
    buf = ps.pre_update_keys(0, [0, 1])
    with pytest.raises(geeps.ArgumentError, match="float32"):
        buf.copy_from(np.zeros((2, 8), np.float64))
    with pytest.raises(geeps.ArgumentError, match=r"shape \(2, 8\)"):
        buf.copy_from(np.zeros((3, 8), np.float32))
    buf.copy_from(np.ones(16, np.float32))
    with pytest.raises(geeps.StateError, match="read-only"):
        with ps.read_keys(0, [0]) as r:
            r.copy_from(np.ones(8, np.float32))
    buf.discard()


def test_wrong_release_for_the_kind_says_which_to_use(ps):
    up = ps.pre_update_keys(0, [0])
    with pytest.raises(geeps.StateError, match="update"):
        up.post()
    with pytest.raises(geeps.StateError):
        ps.post_read(up)
    up.discard()
    r = ps.read_keys(0, [0])
    with pytest.raises(geeps.StateError, match="post"):
        r.update()
    with pytest.raises(geeps.ArgumentError):
        r.post(save=True)
    r.post()


def test_exception_in_a_block_discards_the_update(ps):
    with pytest.raises(RuntimeError):
        with ps.pre_update_keys(0, [0]) as d:
            d.numpy()[:] = 5.0
            raise RuntimeError("stop")
    ps.clock()
    with ps.read_keys(0, [0]) as r:
        assert r.numpy()[0, 0] == 0.0


def test_dlpack_device_and_refused_copy(ps):
    with ps.read_keys(0, [0]) as r:
        assert r.__dlpack_device__() == (1, 0)
        with pytest.raises(BufferError):
            r.__dlpack__(copy=True)
        with pytest.raises(BufferError):
            r.__dlpack__(dl_device=(2, 0))
        capsule = r.__dlpack__()  # an unconsumed capsule still counts, then frees itself
        assert r.live_views == 1
        del capsule
        assert r.live_views == 0


def test_a_dropped_buffer_is_released_as_a_guard_would_be():
    b = geeps.Builder(row_width=256, device_memory=64 << 10)  # a pool of a few buffers
    w = b.parameter_table("w", 8)
    ps = b.build()
    with ps.virtual_iteration() as v:
        r = v.read(w, range(8))
        g = v.pre_update(w, range(8))
        v.update(g)
        v.post_read(r)
        v.table_clock(w)
    for _ in range(20):
        buf = ps.read(r)
        view = buf.numpy()
        del buf  # the view holds the buffer
        assert view.shape == (8, 256)
        del view  # now the read is posted
        d = ps.pre_update(g)
        d.numpy()[:] = 1.0
        del d  # dropped without update(): discarded
        ps.table_clock(w)
    with ps.read_keys(w, range(8)) as r2:
        assert float(r2.numpy().sum()) == 0.0
    ps.shutdown()
