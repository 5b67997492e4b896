//! The buffers an instance has handed to C and not yet taken back: by
//! acquisition handle (real calls by handle) and by buffer id (keyed calls),
//! each with the engine ticket that releases it and its kind. C posts by
//! handle or id, so this table is what turns a post into the engine's
//! `release_raw(ticket, ..)`. It never releases anything itself.

use std::collections::HashMap;

use geeps_core::{DevicePtr, ReleaseAs};

use crate::handles::GeepsHandle;
use crate::status::{Failure, FfiResult, GeepsStatus};

/// The kind of buffer, which fixes how it may be released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Read,
    Update,
    Local,
}

impl Kind {
    pub(crate) fn acquired_by(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Update => "pre_update",
            Kind::Local => "local_access",
        }
    }

    pub(crate) fn released_by(self) -> &'static str {
        match self {
            Kind::Read => "post_read",
            Kind::Update => "update (or discard_update)",
            Kind::Local => "post_local_access",
        }
    }

    /// Whether `how` releases a buffer of this kind.
    pub(crate) fn accepts(self, how: ReleaseAs) -> bool {
        matches!(
            (self, how),
            (Kind::Read, ReleaseAs::PostRead)
                | (Kind::Update, ReleaseAs::Update | ReleaseAs::Discard)
                | (Kind::Local, ReleaseAs::PostLocal { .. } | ReleaseAs::DiscardLocal)
        )
    }

    /// The release that gives a buffer back without writing anything, for a
    /// buffer acquired but not handed out.
    pub(crate) fn give_back(self) -> ReleaseAs {
        match self {
            Kind::Read => ReleaseAs::PostRead,
            Kind::Update => ReleaseAs::Discard,
            Kind::Local => ReleaseAs::PostLocal { save: Some(false) },
        }
    }
}

/// Where a held buffer came from: a recorded handle, or a keyed call's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Key {
    Handle(GeepsHandle),
    Buffer(u64),
}

impl Key {
    pub(crate) fn describe(self) -> String {
        match self {
            Key::Handle(h) => format!("handle {h:#x}"),
            Key::Buffer(id) => format!("buffer {id}"),
        }
    }
}

/// A buffer held by C: its ticket and kind, and where its memory is, so
/// that the copy helpers never trust the pointer and length C passes back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) ticket: u64,
    pub(crate) kind: Kind,
    pub(crate) ptr: DevicePtr,
    pub(crate) floats: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Held {
    entries: HashMap<Key, Entry>,
}

impl Held {
    /// Fails if `key` already holds a buffer: a handle names one buffer at
    /// a time, or its post would be ambiguous.
    pub(crate) fn check_free(&self, key: Key) -> FfiResult {
        match self.entries.get(&key) {
            Some(e) => Err(Failure::new(
                GeepsStatus::InvalidHandle,
                format!(
                    "{} already holds a {} buffer; call {} on it before acquiring it again",
                    key.describe(),
                    e.kind.acquired_by(),
                    e.kind.released_by()
                ),
            )),
            None => Ok(()),
        }
    }

    pub(crate) fn insert(&mut self, key: Key, entry: Entry) -> FfiResult {
        self.check_free(key)?;
        self.entries.insert(key, entry);
        Ok(())
    }

    /// The held buffer whose engine ticket (the `id` C sees) is `id`.
    pub(crate) fn find(&self, id: u64) -> Option<(Key, Entry)> {
        self.entries.iter().find(|(_, e)| e.ticket == id).map(|(k, e)| (*k, *e))
    }

    /// Takes the entry of `key` for a release `how` (named `call`); leaves
    /// it held if it is not there or of another kind.
    pub(crate) fn take(&mut self, key: Key, how: ReleaseAs, call: &str) -> FfiResult<Entry> {
        let Some(entry) = self.entries.get(&key).copied() else {
            if let (Key::Buffer(id), Some((Key::Handle(h), e))) = (key, self.find_by_key_ticket(key)) {
                return Err(Failure::new(
                    GeepsStatus::InvalidHandle,
                    format!(
                        "{call}: buffer {id} was acquired with handle {h:#x}; release it by that handle with {}",
                        e.kind.released_by()
                    ),
                ));
            }
            return Err(Failure::new(
                GeepsStatus::InvalidHandle,
                format!(
                    "{call}: {} holds no buffer of this instance (never acquired, or already released)",
                    key.describe()
                ),
            ));
        };
        if !entry.kind.accepts(how) {
            return Err(Failure::new(
                GeepsStatus::InvalidHandle,
                format!(
                    "{call}: {} holds a {} buffer; release it with {}",
                    key.describe(),
                    entry.kind.acquired_by(),
                    entry.kind.released_by()
                ),
            ));
        }
        self.entries.remove(&key);
        Ok(entry)
    }
}

impl Held {
    fn find_by_key_ticket(&self, key: Key) -> Option<(Key, Entry)> {
        match key {
            Key::Buffer(id) => self.find(id),
            Key::Handle(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posts_must_match_what_is_held() {
        let mut held = Held::default();
        let key = Key::Handle(7);
        held.insert(key, Entry { ticket: 1, kind: Kind::Read, ptr: DevicePtr(0), floats: 0 }).unwrap();
        let again = held.insert(key, Entry { ticket: 2, kind: Kind::Read, ptr: DevicePtr(0), floats: 0 }).unwrap_err();
        assert!(again.message.contains("already holds a read buffer"), "{}", again.message);
        let wrong = held.take(key, ReleaseAs::Update, "update").unwrap_err();
        assert!(wrong.message.contains("release it with post_read"), "{}", wrong.message);
        assert_eq!(held.take(key, ReleaseAs::PostRead, "post_read").unwrap().ticket, 1);
        let double = held.take(key, ReleaseAs::PostRead, "post_read").unwrap_err();
        assert_eq!(double.status, GeepsStatus::InvalidHandle);
        assert!(held.take(Key::Buffer(1), ReleaseAs::PostRead, "post_read").is_err(), "ids and handles differ");
        held.insert(key, Entry { ticket: 3, kind: Kind::Update, ptr: DevicePtr(0), floats: 0 }).unwrap();
        assert_eq!(held.find(3).map(|(k, _)| k), Some(key));
        let by_id = held.take(Key::Buffer(3), ReleaseAs::Update, "update_buffer").unwrap_err();
        assert!(by_id.message.contains("acquired with handle 0x7"), "{}", by_id.message);
    }
}
