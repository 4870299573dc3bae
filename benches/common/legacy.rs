//! `LegacyMessageQueue`: Android's queue before DeliQueue, reproduced as a
//! baseline for the benchmarks (rows B, C, F and J). Not part of the runtime.
//!
//! One mutex guards a singly linked list sorted by `when`. An insert walks
//! from the head to its place (O(N) in the backlog), except that `when == 0`
//! or a `when` before the head goes to the head. The consumer is woken only
//! when it is blocked and the new message becomes the head.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

struct Node<T> {
    when: u64,
    item: T,
    next: Option<Box<Node<T>>>,
}

struct Inner<T> {
    head: Option<Box<Node<T>>>,
    len: usize,
    blocked: bool,
    quitting: bool,
}

/// Android's pre-17 `MessageQueue`: a mutex and a sorted linked list.
///
/// ```
/// use legacy::LegacyMessageQueue;
///
/// let q = LegacyMessageQueue::new();
/// q.enqueue("later", 20).unwrap();
/// q.enqueue("sooner", 10).unwrap();
/// assert_eq!(q.poll(15), Some("sooner"));
/// assert_eq!(q.poll(15), None);
/// ```
pub struct LegacyMessageQueue<T> {
    inner: Mutex<Inner<T>>,
    cond: Condvar,
    origin: Instant,
}

impl<T> Default for LegacyMessageQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> LegacyMessageQueue<T> {
    /// An empty queue. Times are ticks (ns) since its creation.
    pub fn new() -> Self {
        LegacyMessageQueue {
            inner: Mutex::new(Inner {
                head: None,
                len: 0,
                blocked: false,
                quitting: false,
            }),
            cond: Condvar::new(),
            origin: Instant::now(),
        }
    }

    /// Ticks now.
    pub fn now(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// Inserts `item` due at `when` under the lock, walking the list to its
    /// place. Returns whether it woke the consumer.
    ///
    /// # Errors
    /// Gives the item back after [`quit`](Self::quit).
    pub fn enqueue(&self, item: T, when: u64) -> Result<bool, T> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.quitting {
            return Err(item);
        }
        inner.len += 1;
        let at_head = match &inner.head {
            None => true,
            Some(h) => when == 0 || when < h.when,
        };
        if at_head {
            let next = inner.head.take();
            inner.head = Some(Box::new(Node { when, item, next }));
            let wake = inner.blocked;
            drop(inner);
            if wake {
                self.cond.notify_one();
            }
            return Ok(wake);
        }
        let mut p = inner.head.as_mut().expect("not at head, so a head exists");
        while p.next.as_ref().is_some_and(|n| n.when <= when) {
            p = p.next.as_mut().expect("checked");
        }
        let next = p.next.take();
        p.next = Some(Box::new(Node { when, item, next }));
        Ok(false)
    }

    /// Takes the head if it is due at `now`.
    pub fn poll(&self, now: u64) -> Option<T> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        Self::pop_due(&mut inner, now)
    }

    /// Waits until the head is due (or `timeout` passes) and takes it.
    pub fn next(&self, timeout: Duration) -> Option<T> {
        let give_up = Instant::now() + timeout;
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = self.now();
            if let Some(item) = Self::pop_due(&mut inner, now) {
                return Some(item);
            }
            let left = give_up.saturating_duration_since(Instant::now());
            if left.is_zero() || inner.quitting {
                return None;
            }
            let wait = inner.head.as_ref().map_or(left, |h| {
                Duration::from_nanos(h.when.saturating_sub(now)).min(left)
            });
            inner.blocked = true;
            inner = self
                .cond
                .wait_timeout(inner, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            inner.blocked = false;
        }
    }

    /// Removes every message for which `pred` is true; returns how many.
    pub fn remove_where(&self, mut pred: impl FnMut(&T) -> bool) -> usize {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut removed = 0;
        let mut kept: Option<Box<Node<T>>> = None;
        let mut tail = &mut kept;
        let mut cur = inner.head.take();
        while let Some(mut node) = cur {
            cur = node.next.take();
            if pred(&node.item) {
                removed += 1;
            } else {
                tail = &mut tail.insert(node).next;
            }
        }
        inner.head = kept;
        inner.len -= removed;
        removed
    }

    /// Messages pending.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).len
    }

    /// Whether no message is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Refuses later enqueues and wakes a blocked consumer.
    pub fn quit(&self) {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .quitting = true;
        self.cond.notify_all();
    }

    fn pop_due(inner: &mut Inner<T>, now: u64) -> Option<T> {
        if inner.head.as_ref()?.when > now {
            return None;
        }
        let mut head = inner.head.take()?;
        inner.head = head.next.take();
        inner.len -= 1;
        Some(head.item)
    }
}

impl<T> Drop for Inner<T> {
    /// Iterative, so a long list cannot overflow the stack.
    fn drop(&mut self) {
        let mut cur = self.head.take();
        while let Some(mut node) = cur {
            cur = node.next.take();
        }
    }
}
