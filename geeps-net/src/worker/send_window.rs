//! A worker's send window over its TCP keeper connections: an update frame
//! of stripe j (of clock c) goes to its connection's writer only while the
//! oldest stripe not yet flushed on every connection is less than
//! `window` stripes behind it. Without it each connection's writer runs as
//! far ahead as its socket lets it, and where the links are the limit TCP
//! shares a host's uplink unevenly between its flows: one keeper gets its
//! last stripe tens of milliseconds after the others, and its publications
//! (which every worker's read waits for) go out last while other links
//! idle. Holding the flows within a few stripes of each other keeps every
//! keeper's stripes arriving together.
//!
//! Frames wait here in the order they were pushed (so batches of one
//! partition stay in order) and go out as flushes come back; a frame whose
//! connection has closed counts as flushed (the reader reports the loss).
//! It owns the held frames and the count of frames in flight per stripe;
//! it never encodes, writes or reorders frames.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::conn::writer::{Outgoing, Queue};

/// A stripe's place in the order of sending: clocks, then stripes.
pub(crate) type Position = u64;

/// The position of stripe `stripe` (of `stripes`) in clock `clock`.
pub(crate) fn position(clock: u64, stripe: u64, stripes: u64) -> Position {
    clock.saturating_mul(stripes).saturating_add(stripe)
}

struct Held {
    at: Position,
    queue: Queue,
    frame: Outgoing,
}

#[derive(Default)]
struct State {
    /// Frames handed to a writer and not yet flushed, per position.
    in_flight: BTreeMap<Position, usize>,
    held: VecDeque<Held>,
}

impl State {
    fn fits(&self, at: Position, window: u64) -> bool {
        self.in_flight.first_key_value().is_none_or(|(&oldest, _)| at < oldest.saturating_add(window))
    }
}

pub(crate) struct SendWindow {
    /// Stripes ahead of the oldest unflushed one that may be in flight (at least 1).
    window: u64,
    state: Mutex<State>,
}

/// Counts one frame out of flight when dropped: by the writer once the
/// frame is flushed, or with the frame when its connection is gone.
struct InFlight {
    window: Arc<SendWindow>,
    at: Position,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.window.flushed(self.at);
    }
}

impl SendWindow {
    pub(crate) fn new(window: usize) -> Arc<Self> {
        Arc::new(SendWindow { window: window.max(1) as u64, state: Mutex::new(State::default()) })
    }

    /// Sends `frame` (of stripe position `at`) to `queue` now if it fits
    /// the window, else once it does. False when the queue has closed.
    pub(crate) fn send(self: &Arc<Self>, at: Position, queue: &Queue, frame: Outgoing) -> bool {
        let mut st = self.state.lock();
        if st.held.is_empty() && st.fits(at, self.window) {
            let refused = self.forward(&mut st, at, queue, frame);
            drop(st);
            // Dropped without the lock: its guard counts it out.
            return refused.is_none();
        }
        st.held.push_back(Held { at, queue: queue.clone(), frame });
        true
    }

    /// Hands every held frame to its writer, window or not (before a
    /// leave, which must follow every update).
    pub(crate) fn release_all(self: &Arc<Self>) {
        let mut refused = Vec::new();
        let mut st = self.state.lock();
        while let Some(h) = st.held.pop_front() {
            refused.extend(self.forward(&mut st, h.at, &h.queue, h.frame));
        }
        drop(st);
        drop(refused);
    }

    /// Counts the frame in flight and queues it with a guard that counts
    /// it out; a closed queue gives the frame back, to be dropped once the
    /// lock is let go. (Checked first, so that dropping frames for a dead
    /// connection does not count each out through the next.)
    fn forward(self: &Arc<Self>, st: &mut State, at: Position, queue: &Queue, frame: Outgoing) -> Option<Outgoing> {
        if queue.is_closed() {
            return Some(frame);
        }
        *st.in_flight.entry(at).or_default() += 1;
        let guard = InFlight { window: self.clone(), at };
        queue.send(frame.guarded(guard)).err().map(|refused| refused.0)
    }

    fn flushed(self: &Arc<Self>, at: Position) {
        let mut refused = Vec::new();
        let mut st = self.state.lock();
        if let Some(n) = st.in_flight.get_mut(&at) {
            *n -= 1;
            if *n == 0 {
                st.in_flight.remove(&at);
            }
        }
        while st.held.front().is_some_and(|h| st.fits(h.at, self.window)) {
            let Some(h) = st.held.pop_front() else { break };
            // A closed queue's frame is dropped below; its reader reports the loss.
            refused.extend(self.forward(&mut st, h.at, &h.queue, h.frame));
        }
        drop(st);
        drop(refused);
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.state.lock().held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Body, UpdateHeader};
    use tokio::sync::mpsc;

    fn frame(partition: u32) -> Outgoing {
        Outgoing::new(Body::Update(UpdateHeader { partition, ..Default::default() }), None)
    }

    fn partition(o: &Outgoing) -> u32 {
        match &o.header.body {
            Some(Body::Update(u)) => u.partition,
            _ => panic!("not an update"),
        }
    }

    /// Flushes what `rx` holds as one batch, as a writer does (its frames
    /// dropped after the flush), and returns their partitions.
    fn flush_all(rx: &mut mpsc::UnboundedReceiver<Outgoing>) -> Vec<u32> {
        let mut batch = Vec::new();
        while let Ok(o) = rx.try_recv() {
            batch.push(o);
        }
        batch.iter().map(partition).collect()
    }

    #[test]
    fn frames_wait_for_the_oldest_stripe_and_keep_their_order() {
        let w = SendWindow::new(2);
        let (a, mut ra) = mpsc::unbounded_channel();
        let (b, mut rb) = mpsc::unbounded_channel();
        // Stripes 0..4 of one clock, to two keepers (partition = 2·stripe + keeper).
        for stripe in 0..4u32 {
            assert!(w.send(stripe as u64, &a, frame(2 * stripe)));
            assert!(w.send(stripe as u64, &b, frame(2 * stripe + 1)));
        }
        // Stripes 0 and 1 go; 2 and 3 wait for stripe 0 on both connections.
        assert_eq!(w.held(), 4);
        assert_eq!(flush_all(&mut ra), vec![0, 2]);
        // Stripe 0 flushed on a only: b still holds the window at stripe 0.
        assert_eq!(w.held(), 4);
        assert_eq!(flush_all(&mut rb), vec![1, 3]);
        assert_eq!(w.held(), 0);
        assert_eq!(flush_all(&mut ra), vec![4, 6]);
        assert_eq!(flush_all(&mut rb), vec![5, 7]);
    }

    #[test]
    fn an_older_clock_never_waits_and_release_all_empties_the_window() {
        let w = SendWindow::new(1);
        let (a, mut ra) = mpsc::unbounded_channel();
        assert!(w.send(position(5, 0, 4), &a, frame(0)));
        assert!(w.send(position(5, 1, 4), &a, frame(1)));
        assert_eq!(w.held(), 1);
        // Frames queue behind held ones, whatever their stripe: order is kept.
        assert!(w.send(position(4, 3, 4), &a, frame(2)));
        assert_eq!(w.held(), 2);
        w.release_all();
        assert_eq!(w.held(), 0);
        assert_eq!(flush_all(&mut ra), vec![0, 1, 2]);
    }

    #[test]
    fn a_closed_connection_counts_as_flushed() {
        let w = SendWindow::new(1);
        let (a, ra) = mpsc::unbounded_channel();
        let (b, mut rb) = mpsc::unbounded_channel();
        assert!(w.send(0, &a, frame(0)));
        assert!(w.send(1, &b, frame(1)));
        assert_eq!(w.held(), 1);
        // The writer of `a` goes away with the frame unflushed.
        drop(ra);
        assert_eq!(w.held(), 0);
        assert_eq!(flush_all(&mut rb), vec![1]);
        // A frame for the closed queue is refused.
        assert!(!w.send(2, &a, frame(2)));
    }

    #[test]
    fn held_frames_for_a_dead_connection_go_at_once() {
        let w = SendWindow::new(1);
        let (a, mut ra) = mpsc::unbounded_channel();
        let (b, rb) = mpsc::unbounded_channel();
        assert!(w.send(0, &a, frame(0)));
        // Far more than a stack could take one at a time.
        for at in 1..=100_000u64 {
            assert!(w.send(at, &b, frame(1)));
        }
        drop(rb);
        assert_eq!(flush_all(&mut ra), vec![0]);
        assert_eq!(w.held(), 0);
        assert!(w.state.lock().in_flight.is_empty());
    }

    #[test]
    fn positions_order_clocks_before_stripes() {
        assert!(position(3, 7, 8) < position(4, 0, 8));
        assert_eq!(position(u64::MAX, 1, 8), u64::MAX);
    }
}
