//! Declared extents (the guard mode, on unless `GEEPS_CUDA_EMU_GUARD=0`):
//! a program may say, just before a launch, which bytes each pointer
//! argument covers (`geeps_cuda_emu_declare_extents`, from the thread that
//! launches). The launch then holds each such argument to its range: the
//! interpreter faults on an access that lies in an allocation whose every
//! pointer argument was declared but in none of their ranges, a native
//! kernel sees only the declared bytes, and the race detector takes the
//! ranges as what the kernel touches. A blob or row range carved out of a
//! larger allocation is thus bounded as an allocation is. Must never keep a
//! declaration past the next launch of its thread.

use std::cell::RefCell;

thread_local! {
    static PENDING: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Replaces this thread's declaration for its next launch: (address, bytes) pairs.
pub fn declare(ranges: Vec<(u64, u64)>) {
    PENDING.with(|p| *p.borrow_mut() = ranges);
}

/// Takes this thread's declaration (empty when there is none).
pub fn take() -> Vec<(u64, u64)> {
    PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()))
}

/// The declared bytes from `address` on, if a range starts there.
pub fn reach(declared: &[(u64, u64)], address: u64) -> Option<u64> {
    declared.iter().filter(|&&(at, _)| at == address).map(|&(_, bytes)| bytes).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declaration_serves_one_launch_of_its_thread() {
        declare(vec![(0x1000, 64), (0x2000, 8)]);
        assert!(std::thread::spawn(take).join().unwrap().is_empty(), "another thread sees nothing");
        let d = take();
        assert_eq!(reach(&d, 0x1000), Some(64));
        assert_eq!(reach(&d, 0x1004), None);
        assert!(take().is_empty(), "taken once");
    }
}
