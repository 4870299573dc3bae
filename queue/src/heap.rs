//! The consumer's min-heap, ordered by `(when, seq)`.
//!
//! It holds no atomics: only the loop thread touches it. Entries carry their
//! key inline, so sifting compares without touching the nodes. Removal is
//! lazy (a cancelled entry stays until it surfaces or the heap is
//! compacted), which keeps cancellation O(1) and heap moves node-free.
//!
//! Two comparators are kept side by side: the branchless one from the
//! DeliQueue design, `signum(dw) * 2 + signum(ds) < 0`, and the ordinary
//! lexicographic one. `benches/queue.rs` measures both; [`DefaultOrder`] names
//! the one the queue uses.

/// An ordering key: due time, then arrival sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// When the entry is due, in the queue's ticks.
    pub when: u64,
    /// Arrival order among entries with equal `when`.
    pub seq: i64,
}

/// A comparator for [`Key`]s.
pub trait Order {
    /// Whether `a` comes strictly before `b`.
    fn less(a: &Key, b: &Key) -> bool;
}

/// `signum(when1 - when2) * 2 + signum(seq1 - seq2) < 0`, without branches.
#[derive(Clone, Copy, Debug, Default)]
pub struct Branchless;

/// `when1 < when2 || (when1 == when2 && seq1 < seq2)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Branchy;

impl Order for Branchless {
    #[inline(always)]
    fn less(a: &Key, b: &Key) -> bool {
        let w = (a.when > b.when) as i32 - (a.when < b.when) as i32;
        let s = (a.seq > b.seq) as i32 - (a.seq < b.seq) as i32;
        w * 2 + s < 0
    }
}

impl Order for Branchy {
    #[inline(always)]
    fn less(a: &Key, b: &Key) -> bool {
        a.when < b.when || (a.when == b.when && a.seq < b.seq)
    }
}

/// The comparator the queue uses: the faster one in `benches/queue.rs`.
pub type DefaultOrder = Branchy;

/// A binary min-heap of `(Key, V)` pairs.
///
/// ```
/// use deliloop_queue::heap::{Branchless, Key, MinHeap};
///
/// let mut h = MinHeap::<&str, Branchless>::new();
/// h.push(Key { when: 5, seq: 1 }, "late");
/// h.push(Key { when: 1, seq: 2 }, "early");
/// assert_eq!(h.pop().map(|(_, v)| v), Some("early"));
/// ```
#[derive(Debug)]
pub struct MinHeap<V, O: Order = DefaultOrder> {
    items: Vec<(Key, V)>,
    _order: std::marker::PhantomData<O>,
}

impl<V, O: Order> Default for MinHeap<V, O> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V, O: Order> MinHeap<V, O> {
    /// An empty heap.
    pub fn new() -> Self {
        MinHeap {
            items: Vec::new(),
            _order: std::marker::PhantomData,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the heap is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The smallest entry.
    pub fn peek(&self) -> Option<&(Key, V)> {
        self.items.first()
    }

    /// Inserts an entry: O(log n).
    pub fn push(&mut self, key: Key, value: V) {
        self.items.push((key, value));
        self.sift_up(self.items.len() - 1);
    }

    /// Removes the smallest entry: O(log n).
    pub fn pop(&mut self) -> Option<(Key, V)> {
        let last = self.items.len().checked_sub(1)?;
        self.items.swap(0, last);
        let top = self.items.pop();
        if !self.items.is_empty() {
            self.sift_down(0);
        }
        top
    }

    /// Keeps only the entries for which `keep` is true, then restores the
    /// heap order in O(n).
    pub fn retain(&mut self, mut keep: impl FnMut(&Key, &V) -> bool) {
        self.items.retain(|(k, v)| keep(k, v));
        for i in (0..self.items.len() / 2).rev() {
            self.sift_down(i);
        }
    }

    /// The entries, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &(Key, V)> + '_ {
        self.items.iter()
    }

    /// Removes every entry, in no particular order.
    pub fn drain(&mut self) -> impl Iterator<Item = (Key, V)> + '_ {
        self.items.drain(..)
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if !O::less(&self.items[i].0, &self.items[parent].0) {
                break;
            }
            self.items.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.items.len();
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let child = if right < n && O::less(&self.items[right].0, &self.items[left].0) {
                right
            } else {
                left
            };
            if !O::less(&self.items[child].0, &self.items[i].0) {
                break;
            }
            self.items.swap(i, child);
            i = child;
        }
    }
}
