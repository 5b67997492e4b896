//! Checkpoints of the whole parameter server: a run stopped at a checkpoint
//! and resumed from it ends bit-identical to one never stopped (BSP's
//! deterministic apply); a checkpoint loads into another number of
//! workers; a checkpoint made on the host device round-trips through every
//! device; and each misuse gets an error that says what to do. Killing a
//! process while it checkpoints is `checkpoint_kill.rs`.

mod checkpoint_fixture;
mod common;

use std::path::Path;
use std::sync::Arc;

use checkpoint_fixture::{build, on_cluster, temp_dir, WIDTH};
use geeps::{keys, Config, Error, Geeps, InProcessCluster, Slack, TableId, Transport};

const ROWS: u32 = 10;

fn bits(ps: &Geeps, t: TableId, rows: u32) -> Vec<u32> {
    let buf = ps.read_keys(&keys(t, 0..rows), Slack::BSP).unwrap();
    let out = buf.as_slice().unwrap().iter().map(|v| v.to_bits()).collect();
    buf.post().unwrap();
    out
}

/// Trains application clocks `from..to`; checkpoints into `save` after
/// clock `at` with a state naming the rank and clock. Returns the final
/// bits of both tables and, on rank 0, the bits at the checkpoint.
fn train(
    ps: &Geeps,
    w: TableId,
    bias: TableId,
    from: u64,
    to: u64,
    save: Option<(&Path, u64)>,
) -> (Vec<u32>, Vec<u32>) {
    let rank = ps.rank();
    let mut at_checkpoint = Vec::new();
    for clock in from..to {
        for (t, rows) in [(w, ROWS), (bias, 3)] {
            let read = ps.read_keys(&keys(t, 0..rows), Slack::BSP).unwrap();
            let mut d = ps.pre_update_keys(&keys(t, 0..rows)).unwrap();
            common::order_sensitive_delta(rank, clock, read.as_slice().unwrap(), d.as_mut_slice().unwrap());
            d.update().unwrap();
            read.post().unwrap();
        }
        ps.clock().unwrap();
        if let Some((dir, at)) = save {
            if clock + 1 == at {
                let state = format!("rank {rank} at {at}");
                let written = ps.checkpoint(dir, state.as_bytes()).unwrap();
                assert_eq!(written.is_some(), rank == 0);
                if rank == 0 {
                    at_checkpoint = [bits(ps, w, ROWS), bits(ps, bias, 3)].concat();
                }
            }
        }
    }
    ([bits(ps, w, ROWS), bits(ps, bias, 3)].concat(), at_checkpoint)
}

#[test]
fn a_resumed_run_ends_bit_identical_to_an_uninterrupted_one_and_loads_into_other_sizes() {
    const WORKERS: usize = 3;
    let dir = temp_dir("resume");
    let d = dir.clone();
    let whole = on_cluster(WORKERS, move |t| {
        let (ps, w, bias) = build(t, ROWS);
        let out = train(&ps, w, bias, 0, 10, Some((&d, 6)));
        ps.shutdown().unwrap();
        out
    });
    let at_checkpoint = whole[0].1.clone();
    assert!(!at_checkpoint.is_empty());

    let d = dir.clone();
    let resumed = on_cluster(WORKERS, move |t| {
        let (ps, w, bias) = build(t, ROWS);
        let r = ps.restore(&d).unwrap();
        assert_eq!((r.clock, r.workers, r.rank_states.len()), (6, WORKERS, WORKERS));
        assert_eq!(r.rank_states[ps.rank()], format!("rank {} at 6", ps.rank()).into_bytes());
        let restored = [bits(&ps, w, ROWS), bits(&ps, bias, 3)].concat();
        let out = train(&ps, w, bias, r.clock, 10, None);
        ps.shutdown().unwrap();
        (out.0, restored)
    });
    for (rank, (end, restored)) in resumed.iter().enumerate() {
        assert_eq!(restored, &at_checkpoint, "rank {rank} restored other rows than were saved");
        assert_eq!(end, &whole[rank].0, "rank {rank}: the resumed run ended elsewhere than the uninterrupted one");
    }

    // Another world size: the rows re-shard over the keepers as they are.
    for workers in [1, 2, 5] {
        let d = dir.clone();
        let loaded = on_cluster(workers, move |t| {
            let (ps, w, bias) = build(t, ROWS);
            let r = ps.restore(&d).unwrap();
            assert_eq!(r.workers, WORKERS);
            let rows = [bits(&ps, w, ROWS), bits(&ps, bias, 3)].concat();
            ps.shutdown().unwrap();
            rows
        });
        for rows in loaded {
            assert_eq!(rows, at_checkpoint, "restored into {workers} workers");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn single() -> (Geeps, TableId, TableId) {
    let t: Arc<dyn Transport> = InProcessCluster::new(1).unwrap().transport(0).unwrap();
    build(t, ROWS)
}

#[test]
fn misuse_gets_errors_that_say_what_to_do() {
    let dir = temp_dir("misuse");
    let (ps, w, bias) = single();
    let e = ps.restore(&dir).unwrap_err();
    assert!(matches!(e, Error::Checkpoint { .. }) && e.to_string().contains("no such folder"), "{e}");

    ps.table_clock(w).unwrap();
    ps.table_clock(bias).unwrap();
    assert!(ps.checkpoint(&dir, b"").unwrap().is_some());

    // Restore needs a fresh instance.
    let e = ps.restore(&dir).unwrap_err().to_string();
    assert!(e.contains("fresh instance"), "{e}");
    ps.shutdown().unwrap();

    // Tables must match by name and size.
    let t: Arc<dyn Transport> = InProcessCluster::new(1).unwrap().transport(0).unwrap();
    let (other, _, _) = build(t, ROWS + 1);
    let e = other.restore(&dir).unwrap_err().to_string();
    assert!(e.contains("table `w` was saved with 10 rows; this instance declares 11"), "{e}");
    other.shutdown().unwrap();

    // A damaged newest checkpoint falls back to the one before.
    let (ps, w, bias) = single();
    for _ in 0..2 {
        ps.table_clock(w).unwrap();
        ps.table_clock(bias).unwrap();
        ps.checkpoint(&dir, b"").unwrap();
    }
    ps.shutdown().unwrap();
    let newest = dir.join(std::fs::read_to_string(dir.join("LATEST")).unwrap().trim());
    std::fs::write(newest.join("table-0.f32"), b"torn").unwrap();
    let (ps, _, _) = single();
    assert_eq!(ps.restore(&dir).unwrap().clock, 1);
    ps.shutdown().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_checkpoint_that_cannot_be_written_leaves_no_staging_folder_and_says_how_much_it_wrote() {
    let dir = temp_dir("unwritable");
    let (ps, w, bias) = single();
    ps.table_clock(w).unwrap();
    ps.table_clock(bias).unwrap();
    // The table's temporary file cannot be created (a folder holds its
    // name), as when the disk is full halfway through.
    let stage = dir.join(".staging-000000000001");
    std::fs::create_dir_all(stage.join(format!(".table-0.f32.tmp-{}", std::process::id()))).unwrap();
    let e = ps.checkpoint(&dir, b"state").unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::Checkpoint { .. }), "{text}");
    assert!(text.contains(&format!("cannot write {} bytes", ROWS as usize * WIDTH * 4)), "{text}");
    assert!(!stage.exists(), "the staging folder stayed: {:?}", std::fs::read_dir(&dir).unwrap().collect::<Vec<_>>());
    // Nothing half-written counts as a checkpoint: the next one is whole.
    ps.table_clock(w).unwrap();
    ps.table_clock(bias).unwrap();
    assert!(ps.checkpoint(&dir, b"state").unwrap().is_some());
    ps.shutdown().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Saving and restoring move rows between the device and host memory: a
/// checkpoint made on the host device is restored on each device (the CUDA
/// device too, under a driver or the emulated one), saved again from
/// there, and that second checkpoint holds the same rows.
#[test]
fn checkpoints_round_trip_through_every_device() {
    let dir = temp_dir("devices");
    let (ps, w, bias) = single();
    let values: Vec<f32> = (0..ROWS as usize * WIDTH).map(|i| i as f32 * 0.5 - 3.0).collect();
    let mut d = ps.pre_update_keys(&keys(w, 0..ROWS)).unwrap();
    d.as_mut_slice().unwrap().copy_from_slice(&values);
    d.update().unwrap();
    ps.clock().unwrap();
    ps.checkpoint(dir.join("host"), b"host").unwrap();
    ps.shutdown().unwrap();
    let _ = bias;
    for backend in geeps_testkit::backends("checkpoints_round_trip_through_every_device") {
        let mut b = Geeps::builder(Config::default().with_row_width(WIDTH).with_device_memory(16 << 20));
        b.parameter_table("w", ROWS);
        b.parameter_table("bias", 3);
        b.local_table("scratch", 2);
        b.device(backend.device(64 << 20));
        b.transport(InProcessCluster::new(1).unwrap().transport(0).unwrap());
        let on_device = b.build().unwrap();
        on_device.finish_virtual_iteration().unwrap();
        assert_eq!(on_device.restore(dir.join("host")).unwrap().rank_states, vec![b"host".to_vec()]);
        on_device.checkpoint(dir.join("again"), b"again").unwrap();
        on_device.shutdown().unwrap();

        let (back, w, _) = single();
        back.restore(dir.join("again")).unwrap();
        let buf = back.read_keys(&keys(w, 0..ROWS), Slack::BSP).unwrap();
        assert_eq!(buf.as_slice().unwrap(), &values[..], "{backend:?}");
        drop(buf);
        back.shutdown().unwrap();
        std::fs::remove_dir_all(dir.join("again")).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
