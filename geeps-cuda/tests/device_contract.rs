//! Every method of the `Device` trait, checked against its documented
//! contract on every device: the host device always, the GPU when one is
//! present (skipped with the probe's reason otherwise). Kernels are checked
//! against a plain loop over the same random index, at ragged row widths.

use std::sync::Arc;

use geeps_core::device::{Device, IndexId, RowOp, RowPair, StreamId};
use geeps_core::Error;
use geeps_cuda::{CudaConfig, CudaDevice};
use geeps_testkit::{backends, Backend, Io};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

#[test]
fn allocations_are_zeroed_counted_and_bounded_by_the_capacity() {
    for b in backends("allocations_are_zeroed_counted_and_bounded_by_the_capacity") {
        let dev = b.device(1 << 20);
        let io = Io::new(&dev);
        assert_eq!(dev.info().capacity, 1 << 20, "{b:?}");
        assert_eq!(dev.info().host_addressable, b == Backend::Host, "{b:?}");
        let a = dev.alloc(1000).unwrap();
        assert_eq!(dev.used_bytes(), 4000, "{b:?}");
        assert!(io.get(a, 1000).iter().all(|v| *v == 0.0), "{b:?}: not zeroed");
        match dev.alloc(1 << 18) {
            Err(Error::DeviceOutOfMemory { requested, available, capacity }) => {
                assert_eq!((requested, available, capacity), (1 << 20, (1 << 20) - 4000, 1 << 20), "{b:?}")
            }
            other => panic!("{b:?}: {other:?}"),
        }
        // SAFETY: nothing uses `a` any more.
        unsafe { dev.free(a) };
        assert_eq!(dev.used_bytes(), 0, "{b:?}");
        let whole = dev.alloc(1 << 18).unwrap();
        unsafe { dev.free(whole) };
    }
}

#[test]
fn pinned_buffers_are_zeroed_and_writable() {
    for b in backends("pinned_buffers_are_zeroed_and_writable") {
        let dev = b.device(1 << 20);
        let mut p = dev.alloc_pinned(4097).unwrap();
        assert_eq!(p.len(), 4097);
        assert!(p.iter().all(|v| *v == 0.0), "{b:?}");
        p.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32);
        // Staging round trip, as the engine does it for host rows.
        let s = dev.create_stream().unwrap();
        let d = dev.alloc(p.len()).unwrap();
        let mut back = dev.alloc_pinned(p.len()).unwrap();
        unsafe {
            dev.copy_h2d(s, p.as_ptr(), d, p.len()).unwrap();
            dev.copy_d2h(s, d, back.as_mut_ptr(), p.len()).unwrap();
        }
        dev.synchronize(s).unwrap();
        assert_eq!(&back[..], &p[..], "{b:?}");
        // Pinned memory outlives the device that made it.
        drop(dev);
        assert_eq!(back[4096], 4096.0);
    }
}

#[test]
fn copies_and_clears_land_in_stream_order() {
    for b in backends("copies_and_clears_land_in_stream_order") {
        let dev = b.device(1 << 20);
        let s = dev.create_stream().unwrap();
        let (x, y) = (dev.alloc(777).unwrap(), dev.alloc(777).unwrap());
        let data: Vec<f32> = (0..777).map(|i| i as f32 * 0.5 - 100.0).collect();
        let mut out = vec![1.0f32; 777];
        unsafe {
            dev.copy_h2d(s, data.as_ptr(), x, 777).unwrap();
            dev.copy_d2d(s, x, y, 777).unwrap();
            dev.fill_zero(s, x.add_floats(100), 200).unwrap();
            dev.copy_d2h(s, y, out.as_mut_ptr(), 777).unwrap();
            // Zero-length work is a no-op, not an error.
            dev.copy_h2d(s, data.as_ptr(), x, 0).unwrap();
            dev.fill_zero(s, x, 0).unwrap();
        }
        dev.synchronize(s).unwrap();
        assert_eq!(out, data, "{b:?}");
        let io = Io::new(&dev);
        let xv = io.get(x, 777);
        assert!(xv[100..300].iter().all(|v| *v == 0.0), "{b:?}");
        assert_eq!(&xv[..100], &data[..100], "{b:?}");
        assert_eq!(&xv[300..], &data[300..], "{b:?}");
    }
}

#[test]
fn events_order_work_across_streams() {
    for b in backends("events_order_work_across_streams") {
        let dev = b.device(64 << 20);
        let (s1, s2) = (dev.create_stream().unwrap(), dev.create_stream().unwrap());
        let n = 1 << 20;
        let src = dev.alloc(n).unwrap();
        let dst = dev.alloc(n).unwrap();
        let mut host = dev.alloc_pinned(n).unwrap();
        host.iter_mut().enumerate().for_each(|(i, v)| *v = (i % 1000) as f32);
        let mut out = dev.alloc_pinned(n).unwrap();
        for round in 0..3 {
            unsafe {
                dev.copy_h2d(s1, host.as_ptr(), src, n).unwrap();
                dev.copy_d2d(s1, src, dst, n).unwrap();
            }
            let copied = dev.record_event(s1).unwrap();
            dev.stream_wait_event(s2, copied).unwrap();
            unsafe { dev.copy_d2h(s2, dst, out.as_mut_ptr(), n).unwrap() };
            let read = dev.record_event(s2).unwrap();
            dev.synchronize_event(read).unwrap();
            dev.synchronize_event(copied).unwrap();
            assert!(out.iter().zip(host.iter()).all(|(a, b)| a == b), "{b:?} round {round}");
            host.iter_mut().for_each(|v| *v += 1.0);
        }
    }
}

/// Faults the emulated driver has reported in this process; None on a real
/// driver (which has no such entry point) or on the host device.
fn emulator_faults() -> Option<u64> {
    // SAFETY: the driver cudarc loaded; the emulator's entry point takes nothing and returns a u64.
    unsafe {
        let lib = libloading::Library::new("libcuda.so.1").ok()?;
        let count = lib.get::<unsafe extern "C" fn() -> u64>(b"geeps_cuda_emu_fault_count\0").ok()?;
        Some(count())
    }
}

/// Dropping a device with work still queued on its streams waits for that
/// work before freeing the memory it uses (the emulated driver reports a
/// free of memory that queued work uses as a fault, which no call returns
/// from `Drop`, hence the count).
#[test]
fn dropping_a_device_with_queued_work_frees_nothing_in_use() {
    for b in backends("dropping_a_device_with_queued_work_frees_nothing_in_use") {
        let before = emulator_faults();
        let dev = b.device(64 << 20);
        let s = dev.create_stream().unwrap();
        let n = 1 << 20;
        let (x, y) = (dev.alloc(n).unwrap(), dev.alloc(n).unwrap());
        let host = vec![1.5f32; n];
        for _ in 0..4 {
            // SAFETY: `host` is a pageable source (staged at the call); x and y live until the drop.
            unsafe {
                dev.copy_h2d(s, host.as_ptr(), x, n).unwrap();
                dev.copy_d2d(s, x, y, n).unwrap();
            }
        }
        drop(dev);
        if b == Backend::Cuda {
            assert_eq!(emulator_faults(), before, "{b:?}: the emulator reported a fault while the device was dropped");
        }
    }
}

/// A plain loop: the contract's definition of each kernel.
fn expected(kind: usize, pairs: &[RowPair], store: &mut [f32], buffer: &mut [f32], w: usize) {
    for p in pairs {
        let (s, b) = (p.store_row as usize * w, p.buffer_row as usize * w);
        for c in 0..w {
            match kind {
                0 => buffer[b + c] = store[s + c],
                1 => store[s + c] = buffer[b + c],
                _ => store[s + c] += buffer[b + c],
            }
        }
    }
}

#[test]
fn kernels_follow_their_index_at_ragged_widths() {
    for b in backends("kernels_follow_their_index_at_ragged_widths") {
        let dev = b.device(64 << 20);
        let io = Io::new(&dev);
        let s = dev.create_stream().unwrap();
        let mut rng = StdRng::seed_from_u64(11);
        for width in [1usize, 5, 31, 128, 129, 257, 1000] {
            for kind in 0..3 {
                let (store_rows, buffer_rows, n) = (3000usize, 1200usize, rng.gen_range(1..1200));
                let mut b_rows: Vec<u32> = (0..buffer_rows as u32).collect();
                let mut s_rows: Vec<u32> = (0..store_rows as u32).collect();
                b_rows.shuffle(&mut rng);
                s_rows.shuffle(&mut rng);
                let pairs: Vec<RowPair> = b_rows
                    .iter()
                    .zip(&s_rows)
                    .take(n)
                    .map(|(&buffer_row, &store_row)| RowPair { buffer_row, store_row })
                    .collect();
                let mut store: Vec<f32> = (0..store_rows * width).map(|_| rng.gen_range(-1.0..1.0)).collect();
                let mut buffer: Vec<f32> = (0..buffer_rows * width).map(|_| rng.gen_range(-1.0..1.0)).collect();
                let (ds, db) = (dev.alloc(store.len()).unwrap(), dev.alloc(buffer.len()).unwrap());
                io.set(ds, &store);
                io.set(db, &buffer);
                let index = dev.upload_index(&pairs).unwrap();
                unsafe {
                    match kind {
                        0 => dev.rows(s, RowOp::Gather, ds, index, db, width),
                        1 => dev.rows(s, RowOp::ScatterAssign, ds, index, db, width),
                        _ => dev.rows(s, RowOp::ScatterAdd, ds, index, db, width),
                    }
                    .unwrap()
                };
                dev.synchronize(s).unwrap();
                expected(kind, &pairs, &mut store, &mut buffer, width);
                assert!(io.get(ds, store.len()) == store, "{b:?} kernel {kind} width {width}: store differs");
                assert!(io.get(db, buffer.len()) == buffer, "{b:?} kernel {kind} width {width}: buffer differs");
                dev.free_index(index);
                unsafe {
                    dev.free(ds);
                    dev.free(db);
                }
            }
        }
        // An empty index is a valid no-op.
        let empty = dev.upload_index(&[]).unwrap();
        let p = dev.alloc(8).unwrap();
        unsafe { dev.rows(s, RowOp::Gather, p, empty, p, 8).unwrap() };
        dev.synchronize(s).unwrap();
        dev.free_index(empty);
    }
}

#[test]
fn unknown_ids_are_errors_not_crashes() {
    for b in backends("unknown_ids_are_errors_not_crashes") {
        let dev: Arc<dyn Device> = b.device(1 << 20);
        let s = dev.create_stream().unwrap();
        let p = dev.alloc(16).unwrap();
        let err = unsafe { dev.rows(s, RowOp::Gather, p, IndexId(999), p, 4) }.unwrap_err();
        assert!(matches!(err, Error::Device(_)), "{b:?}: {err}");
        if b == Backend::Cuda {
            // The host device runs eagerly and has no stream or event table.
            assert!(matches!(dev.synchronize(StreamId(77)), Err(Error::Device(_))));
            assert!(matches!(dev.synchronize_event(geeps_core::device::EventId(77)), Err(Error::Device(_))));
            let dup = [RowPair { buffer_row: 0, store_row: 3 }, RowPair { buffer_row: 1, store_row: 3 }];
            assert!(matches!(dev.upload_index(&dup), Err(Error::Device(m)) if m.contains("store row 3")));
        }
    }
}

/// Opening a GPU that is not there is an error naming what to fix, whether
/// the machine has no driver at all or fewer GPUs than asked for.
#[test]
fn opening_a_missing_gpu_is_an_error_that_says_what_to_fix() {
    let err = CudaDevice::new(CudaConfig::ordinal(10_000)).unwrap_err();
    let Error::Device(msg) = &err else { panic!("{err:?}") };
    assert!(msg.contains("libcuda") || msg.contains("does not exist") || msg.contains("driver"), "{msg}");
    assert!(CudaDevice::probe(10_000).is_err());
}
