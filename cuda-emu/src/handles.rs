//! Registries that turn driver objects (contexts, streams, events, modules,
//! functions, cuBLAS handles) into opaque handle values: a kind tag, a slot index and a
//! generation counter, so a destroyed or foreign handle is detected and
//! answered with an error, never dereferenced. The values are non-canonical
//! addresses (tag in the top byte), so a caller that dereferences one faults.
//! Must never hand out 0 or the driver's reserved stream handles (1, 2).

use std::sync::Mutex;

/// What a handle names; the tag in its top byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Context = 0xC1,
    Stream = 0xC2,
    Event = 0xC3,
    Module = 0xC4,
    Function = 0xC5,
    Blas = 0xC6,
}

struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

struct Slots<T> {
    slots: Vec<Slot<T>>,
    free: Vec<usize>,
}

/// Live objects of one kind behind generation-checked handles.
pub struct Registry<T> {
    kind: Kind,
    inner: Mutex<Slots<T>>,
}

const INDEX_BITS: u32 = 24;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

impl<T: Clone> Registry<T> {
    pub const fn new(kind: Kind) -> Self {
        Registry { kind, inner: Mutex::new(Slots { slots: Vec::new(), free: Vec::new() }) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots<T>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn encode(&self, index: usize, generation: u32) -> u64 {
        ((self.kind as u64) << 56) | ((generation as u64) << INDEX_BITS) | (index as u64 + 1)
    }

    /// (slot index, generation) of `handle`, if it is of this kind.
    fn decode(&self, handle: u64) -> Option<(usize, u32)> {
        if handle >> 56 != self.kind as u64 || handle & INDEX_MASK == 0 {
            return None;
        }
        let generation = ((handle >> INDEX_BITS) & 0xFFFF_FFFF) as u32;
        Some(((handle & INDEX_MASK) as usize - 1, generation))
    }

    /// Registers `value`; `None` when the registry is full (2^24 live objects).
    pub fn insert(&self, value: T) -> Option<u64> {
        self.insert_with(|_| value)
    }

    /// Registers the value `make` builds from its own handle.
    pub fn insert_with(&self, make: impl FnOnce(u64) -> T) -> Option<u64> {
        let mut s = self.lock();
        let index = match s.free.pop() {
            Some(i) => i,
            None if s.slots.len() < INDEX_MASK as usize => {
                s.slots.push(Slot { generation: 1, value: None });
                s.slots.len() - 1
            }
            None => return None,
        };
        let handle = self.encode(index, s.slots[index].generation);
        s.slots[index].value = Some(make(handle));
        Some(handle)
    }

    /// The object `handle` names, if it is live.
    pub fn get(&self, handle: u64) -> Option<T> {
        let (index, generation) = self.decode(handle)?;
        let s = self.lock();
        let slot = s.slots.get(index)?;
        (slot.generation == generation).then(|| slot.value.clone()).flatten()
    }

    /// Unregisters `handle`; later uses of it are stale.
    pub fn remove(&self, handle: u64) -> Option<T> {
        let (index, generation) = self.decode(handle)?;
        let mut s = self.lock();
        let slot = s.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1).max(1);
        s.free.push(index);
        Some(value)
    }

    /// Unregisters every object `doomed` picks, returning them.
    pub fn remove_where(&self, mut doomed: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut s = self.lock();
        let mut removed = Vec::new();
        let mut freed = Vec::new();
        for (index, slot) in s.slots.iter_mut().enumerate() {
            if slot.value.as_ref().is_some_and(&mut doomed) {
                removed.extend(slot.value.take());
                slot.generation = slot.generation.wrapping_add(1).max(1);
                freed.push(index);
            }
        }
        s.free.extend(freed);
        removed
    }

    /// Every live object `pick` selects.
    pub fn collect(&self, mut pick: impl FnMut(&T) -> bool) -> Vec<T> {
        self.lock().slots.iter().filter_map(|s| s.value.as_ref().filter(|v| pick(v)).cloned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_and_foreign_handles_are_refused() {
        let streams: Registry<u32> = Registry::new(Kind::Stream);
        let events: Registry<u32> = Registry::new(Kind::Event);
        let a = streams.insert(7).unwrap();
        assert!(a > 2 && a >> 56 == 0xC2);
        assert_eq!(streams.get(a), Some(7));
        assert_eq!(events.get(a), None, "a stream handle is no event");
        assert_eq!(streams.remove(a), Some(7));
        assert_eq!(streams.get(a), None);
        let b = streams.insert(8).unwrap();
        assert_ne!(a, b, "the reused slot has a new generation");
        assert_eq!(streams.get(a), None);
        assert_eq!(streams.remove(a), None);
        assert_eq!(streams.get(b), Some(8));
        assert_eq!(streams.get(0), None);
        assert_eq!(streams.get(1), None);
        assert_eq!(streams.remove_where(|v| *v == 8), vec![8]);
        assert_eq!(streams.get(b), None);
    }
}
