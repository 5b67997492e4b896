"""The API from Python on one worker and on in-process workers: builder and
tables, the virtual iteration, real and keyed calls, clocks under BSP and
SSP, stats and plan, checkpoint and restore."""

import threading

import numpy as np
import pytest

import geeps


def instance(rows=4, width=4, local_rows=2, **kw):
    b = geeps.Builder(row_width=width, device_memory=1 << 20, **kw)
    w = b.parameter_table("w", rows)
    act = b.local_table("act", local_rows)
    return b.build(), w, act


def test_builder_declares_tables_and_instance_reports_them():
    ps, w, act = instance()
    assert (w.id, w.name, w.rows, w.parameter) == (0, "w", 4, True)
    assert (act.id, act.parameter) == (1, False)
    assert ps.tables == [w, act]
    assert ps.table("act") == act
    assert (ps.rank, ps.num_workers, ps.row_width) == (0, 1, 4)
    assert ps.dlpack_device == (1, 0)
    ps.shutdown()


def test_recorded_iteration_runs_and_accumulates_updates():
    ps, w, act = instance()
    with ps.virtual_iteration() as v:
        r = v.read(w, range(4), slack=0)
        loc = v.local_access(act, [1, 0], fetch=True)
        g = v.pre_update(w, range(4))
        v.update(g)
        v.post_local_access(loc, save=True)
        v.post_read(r)
        v.table_clock(w)
    assert isinstance(r, geeps.Handle) and r.position == 0
    plan = ps.plan()
    assert plan["budget"] == 1 << 20 and plan["tables"][0] == ("w", 4, 0)
    for it in range(3):
        with ps.read(r) as params:
            assert params.data_age == it  # BSP: every clock below this one is in
            a = params.numpy()
            assert a.shape == (4, 4)
            np.testing.assert_array_equal(a, np.full((4, 4), 0.25 * it, np.float32))
            del a
        with ps.local_access(loc) as mine:
            m = mine.numpy()
            np.testing.assert_array_equal(m[0], np.full(4, float(it), np.float32))  # row 1 was saved last time
            m[0] = it + 1
            del m
        with ps.pre_update(g) as delta:
            assert delta.data_age is None  # not a read
            delta.copy_from(np.full((4, 4), 0.25, np.float32))
        ps.table_clock(w)
    with pytest.raises(geeps.BufferReleasedError):
        params.data_age
    assert ps.current_table_clock(w) == 3
    stats = ps.stats()
    assert stats["calls"]["read"][0] == 3
    assert stats["slow_path_calls"] == 0
    assert "stall" in stats["text"]
    ps.shutdown()


def test_keyed_calls_without_recording():
    ps, w, act = instance()
    ps.finish_virtual_iteration()
    d = ps.pre_update_keys(w, [2, 3])
    d.copy_from(np.ones(8, np.float32))
    ps.update(d)
    ps.clock()
    buf = ps.read_keys(w, range(4), slack=0)
    np.testing.assert_array_equal(buf.numpy()[:, 0], [0, 0, 1, 1])
    ps.post_read(buf)
    loc = ps.local_access_keys(act, [0], fetch=False)
    loc.numpy()[:] = 7
    ps.post_local_access(loc)
    again = ps.local_access_keys(act, [0])
    assert again.numpy()[0, 0] == 7
    again.post()
    assert ps.stats()["slow_path_calls"] >= 4
    ps.shutdown()


def test_real_calls_before_finishing_are_refused_with_what_to_do():
    ps, w, _ = instance()
    with pytest.raises(geeps.StateError, match="finish_virtual_iteration"):
        ps.read_keys(w, [0])
    ps.shutdown()


def test_virtual_iteration_block_that_raises_does_not_finish():
    ps, w, _ = instance()
    with pytest.raises(RuntimeError):
        with ps.virtual_iteration() as v:
            v.read(w, [0])
            raise RuntimeError("stop")
    with pytest.raises(geeps.StateError):
        ps.plan()
    ps.shutdown()


def _worker(cluster, rank, slack, rounds, seen, errors):
    try:
        b = geeps.Builder(row_width=4, device_memory=1 << 20)
        w = b.parameter_table("w", 1)
        ps = b.build(cluster, rank=rank)
        with ps.virtual_iteration() as v:
            r = v.read(w, [0], slack=slack)
            g = v.pre_update(w, [0])
            v.update(g)
            v.post_read(r)
            v.table_clock(w)
        for c in range(rounds):
            with ps.read(r) as buf:
                value = float(buf.numpy()[0, 0])
            seen[rank].append((c, value))
            with ps.pre_update(g) as d:
                d.numpy()[:] = 1.0
            ps.table_clock(w)
        ps.shutdown()
    except Exception as e:  # reported by the test
        errors.append(e)


@pytest.mark.parametrize("slack", [0, 1])
def test_in_process_workers_see_every_update_within_the_slack(slack):
    workers, rounds = 3, 6
    cluster = geeps.LocalCluster(workers)
    seen = {r: [] for r in range(workers)}
    errors = []
    threads = [
        threading.Thread(target=_worker, args=(cluster, r, slack, rounds, seen, errors)) for r in range(workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for rank in range(workers):
        for clock, value in seen[rank]:
            # Every worker's updates of clocks < clock - slack, plus its own of every earlier clock.
            lowest = workers * max(0, clock - slack) + min(clock, slack)
            assert lowest <= value <= workers * clock, (rank, clock, value)
            if slack == 0:
                assert value == workers * clock


def test_checkpoint_and_restore_into_a_fresh_instance(tmp_path):
    ps, w, _ = instance()
    ps.finish_virtual_iteration()
    d = ps.pre_update_keys(w, range(4))
    d.copy_from(np.arange(16, dtype=np.float32))
    d.update()
    ps.clock()
    folder = ps.checkpoint(tmp_path, b"state-0")
    assert folder is not None
    ps.shutdown()
    again, w2, _ = instance()
    again.finish_virtual_iteration()
    restored = again.restore(tmp_path)
    assert restored["clock"] == 1 and restored["workers"] == 1
    assert restored["rank_states"] == [b"state-0"]
    buf = again.read_keys(w2, range(4), slack=0)
    np.testing.assert_array_equal(buf.numpy().reshape(-1), np.arange(16, dtype=np.float32))
    buf.post()
    again.shutdown()


def test_restore_of_a_missing_checkpoint_raises_checkpoint_error(tmp_path):
    ps, _, _ = instance()
    ps.finish_virtual_iteration()
    with pytest.raises(geeps.GeepsError):
        ps.restore(tmp_path / "none")
    ps.shutdown()


def test_instance_as_context_manager_shuts_down():
    ps, w, _ = instance()
    with ps:
        ps.finish_virtual_iteration()
    with pytest.raises(geeps.GeepsError, match="shut down"):
        ps.read_keys(w, [0])
