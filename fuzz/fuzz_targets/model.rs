//! Drives the DeliQueue's and a Looper's `Handle` operations from fuzzer
//! input and checks each result against a sequential model: an ordered
//! map `(when, seq) -> entry` where sync barriers hold sync entries back,
//! asynchronous ones pass, front pushes come first (newest first), a
//! cancel or a removal takes an entry out once, and quit runs (safely) or
//! drops what is left, counted.
//!
//! ```sh
//! cargo +nightly fuzz run model                  # until stopped
//! bash scripts/fuzz.sh 600                       # ten minutes
//! ```
#![no_main]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deliloop::queue::{DeliQueue, Push, Ticket};
use deliloop::{BarrierToken, Handle, Looper, MessageId, PostError, Tag};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Sync,
    Async,
    Barrier,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    id: usize,
    tag: Option<u64>,
    kind: Kind,
}

/// The sequential specification.
#[derive(Default)]
struct Model {
    map: BTreeMap<(u64, i64), Entry>,
    up: i64,
    down: i64,
}

impl Model {
    fn insert(&mut self, when: Option<u64>, e: Entry) -> (u64, i64) {
        let key = match when {
            None => {
                self.down -= 1;
                (0, self.down)
            }
            Some(w) => {
                self.up += 1;
                (w, self.up)
            }
        };
        self.map.insert(key, e);
        key
    }

    fn remove_id(&mut self, id: usize) -> bool {
        let key = self.map.iter().find(|(_, e)| e.id == id).map(|(k, _)| *k);
        key.and_then(|k| self.map.remove(&k)).is_some()
    }

    fn remove_where(&mut self, mut pred: impl FnMut(&Entry) -> bool) -> usize {
        let before = self.map.len();
        self.map.retain(|_, e| !pred(e));
        before - self.map.len()
    }

    /// The first entry that may come out: the earliest asynchronous one,
    /// or the earliest sync one unless the earliest sync entry is a
    /// barrier. Barriers never come out.
    fn head(&self) -> Option<((u64, i64), Entry)> {
        let sync = self.map.iter().find(|(_, e)| e.kind != Kind::Async);
        let sync = sync.filter(|(_, e)| e.kind == Kind::Sync);
        let asyn = self.map.iter().find(|(_, e)| e.kind == Kind::Async);
        match (sync, asyn) {
            (Some(s), Some(a)) => Some(if a.0 < s.0 { a } else { s }),
            (s, a) => s.or(a),
        }
        .map(|(k, e)| (*k, *e))
    }

    fn pop(&mut self, now: u64) -> Option<usize> {
        let (key, e) = self.head().filter(|(k, _)| k.0 <= now)?;
        self.map.remove(&key);
        Some(e.id)
    }
}

// ---------------------------------------------------------------- queue

#[derive(Arbitrary, Debug)]
enum QueueOp {
    Push {
        when: u8,
        tag: Option<u8>,
        asynchronous: bool,
    },
    Front {
        tag: Option<u8>,
        asynchronous: bool,
    },
    Barrier {
        when: u8,
    },
    Cancel(u8),
    RemoveTag(u8),
    RemoveAsync,
    Any(u8),
    Pop(u8),
    Deadline,
    Len,
}

fn queue(ops: &[QueueOp]) {
    let mut q = DeliQueue::new();
    let p = q.producer();
    let mut m = Model::default();
    let mut tickets: Vec<(usize, Ticket<usize>)> = Vec::new();
    let mut next = 0;
    for op in ops {
        // `when: None` is a front push.
        let mut push = |when: Option<u64>, tag: Option<u8>, asynchronous: bool| {
            let id = next;
            next += 1;
            let mut opts = when.map_or_else(Push::front, Push::at);
            if let Some(t) = tag {
                opts = opts.tag(t as u64);
            }
            if asynchronous {
                opts = opts.asynchronous();
            }
            let (t, _) = p.push_cancellable(id, opts).unwrap();
            let kind = if asynchronous {
                Kind::Async
            } else {
                Kind::Sync
            };
            let e = Entry {
                id,
                tag: tag.map(u64::from),
                kind,
            };
            m.insert(when, e);
            tickets.push((id, t));
        };
        match *op {
            QueueOp::Push {
                when,
                tag,
                asynchronous,
            } => {
                push(Some(when as u64), tag, asynchronous);
            }
            QueueOp::Front { tag, asynchronous } => push(None, tag, asynchronous),
            QueueOp::Barrier { when } => {
                let id = next;
                next += 1;
                let (t, _) = p.push_barrier(id, when as u64, 0).unwrap();
                let e = Entry {
                    id,
                    tag: None,
                    kind: Kind::Barrier,
                };
                m.insert(Some(when as u64), e);
                tickets.push((id, t));
            }
            QueueOp::Cancel(i) => {
                if let Some((id, t)) = tickets.get(i as usize % tickets.len().max(1)) {
                    assert_eq!(t.cancel(), m.remove_id(*id), "cancel of {id}");
                    // What the runtime does after removing a barrier.
                    let _ = p.nudge();
                }
            }
            QueueOp::RemoveTag(k) => {
                let k = k as u64 % 4;
                let want = m.remove_where(|e| e.tag == Some(k));
                assert_eq!(
                    p.remove_where(|i| i.tag() == Some(k)),
                    want,
                    "remove tag {k}"
                );
            }
            QueueOp::RemoveAsync => {
                let want = m.remove_where(|e| e.kind == Kind::Async);
                assert_eq!(
                    p.remove_where(|i| i.is_asynchronous()),
                    want,
                    "remove async"
                );
            }
            QueueOp::Any(k) => {
                let k = k as u64 % 4;
                let want = m.map.values().any(|e| e.tag == Some(k));
                assert_eq!(p.any(|i| i.tag() == Some(k)), want, "any tag {k}");
            }
            QueueOp::Pop(now) => {
                let want = m.pop(now as u64);
                assert_eq!(
                    q.pop_due(now as u64).map(|e| e.item),
                    want,
                    "pop_due({now})"
                );
            }
            QueueOp::Deadline => {
                let want = m.head().map(|(k, _)| k.0);
                assert_eq!(q.next_deadline(), want, "next_deadline");
            }
            QueueOp::Len => assert_eq!(q.len(), m.map.len(), "len"),
        }
    }
    q.close();
    assert!(p.push(usize::MAX, 0).is_err(), "a push after close");
    let drained: Vec<usize> = q.drain().into_iter().map(|e| e.item).collect();
    let want: Vec<usize> = m.map.values().map(|e| e.id).collect();
    assert_eq!(drained, want, "drain");
    for (_, t) in &tickets {
        assert!(!t.cancel(), "a cancel after drain");
    }
}

// ---------------------------------------------------------------- handle

#[derive(Arbitrary, Debug)]
enum HandleOp {
    Post {
        tag: Option<u8>,
        asynchronous: bool,
        far: bool,
    },
    Front,
    Cancel(u8),
    Remove(u8),
    RemoveAsync,
    Has(u8),
    Barrier,
    /// Removes a barrier by a clone of its token (a second removal of the
    /// same barrier must fail).
    Unbarrier(u8),
    Dispatch,
    Quit {
        safely: bool,
    },
}

/// Far in the model's future, but still in post order.
const FAR: u64 = 1 << 62;

fn handle(ops: &[HandleOp]) {
    let looper = Looper::new().unwrap();
    let h: Handle = looper.handle();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut m = Model::default();
    let (mut clock, mut next) = (1u64, 0usize);
    let mut ids: Vec<(usize, MessageId)> = Vec::new();
    let mut barriers: Vec<(usize, BarrierToken)> = Vec::new();
    let (mut accepted, mut ran, mut cancelled, mut removed) = (0u64, 0u64, 0u64, 0u64);
    let mut quit = false;
    let check_ran = |m_ran: Vec<usize>| {
        let got = std::mem::take(&mut *log.lock().unwrap());
        assert_eq!(got, m_ran, "run order");
    };
    for op in ops {
        match *op {
            HandleOp::Post {
                tag,
                asynchronous,
                far,
            } => {
                let id = next;
                next += 1;
                let l = log.clone();
                let mut b = h.message(move || l.lock().unwrap().push(id));
                if let Some(t) = tag {
                    b = b.tag(Tag(t as u64 % 4));
                }
                if asynchronous {
                    b = b.asynchronous();
                }
                if far {
                    b = b.delay(Duration::from_secs(3600));
                }
                match b.post() {
                    Ok(mid) => {
                        assert!(!quit, "a post after quit was accepted");
                        accepted += 1;
                        clock += 1;
                        let kind = if asynchronous {
                            Kind::Async
                        } else {
                            Kind::Sync
                        };
                        let when = if far { FAR + clock } else { clock };
                        let e = Entry {
                            id,
                            tag: tag.map(|t| t as u64 % 4),
                            kind,
                        };
                        m.insert(Some(when), e);
                        ids.push((id, mid));
                    }
                    Err(PostError::Quit(_)) => assert!(quit, "refused before quit"),
                    Err(PostError::Full(_)) => panic!("no watermarks, yet Full"),
                }
            }
            HandleOp::Front => {
                let id = next;
                next += 1;
                let l = log.clone();
                match h.post_at_front(move || l.lock().unwrap().push(id)) {
                    Ok(mid) => {
                        assert!(!quit);
                        accepted += 1;
                        let e = Entry {
                            id,
                            tag: None,
                            kind: Kind::Sync,
                        };
                        m.insert(None, e);
                        ids.push((id, mid));
                    }
                    Err(e) => assert!(quit && e.is_quit()),
                }
            }
            HandleOp::Cancel(i) => {
                if let Some((id, mid)) = ids.get(i as usize % ids.len().max(1)) {
                    let want = m.remove_id(*id);
                    assert_eq!(mid.cancel(), want, "cancel of {id}");
                    cancelled += u64::from(want);
                }
            }
            HandleOp::Remove(k) => {
                let k = k as u64 % 4;
                let want = m.remove_where(|e| e.tag == Some(k));
                assert_eq!(h.remove(Tag(k)), want, "remove tag {k}");
                removed += want as u64;
            }
            HandleOp::RemoveAsync => {
                // Barriers are the runtime's own: predicates never see them.
                let want = m.remove_where(|e| e.kind == Kind::Async);
                assert_eq!(
                    h.remove_where(|i| i.is_asynchronous()),
                    want,
                    "remove async"
                );
                removed += want as u64;
            }
            HandleOp::Has(k) => {
                let k = k as u64 % 4;
                let want = m.map.values().any(|e| e.tag == Some(k));
                assert_eq!(h.has(Tag(k)), want, "has tag {k}");
            }
            HandleOp::Barrier => match h.post_sync_barrier() {
                Ok(token) => {
                    assert!(!quit);
                    let id = next;
                    next += 1;
                    clock += 1;
                    let e = Entry {
                        id,
                        tag: None,
                        kind: Kind::Barrier,
                    };
                    m.insert(Some(clock), e);
                    barriers.push((id, token));
                }
                Err(e) => assert!(quit && e.is_quit()),
            },
            HandleOp::Unbarrier(i) => {
                if let Some((id, token)) = barriers.get(i as usize % barriers.len().max(1)) {
                    let want = m.remove_id(*id);
                    assert_eq!(
                        h.remove_sync_barrier(token.clone()).is_ok(),
                        want,
                        "barrier {id}"
                    );
                }
            }
            HandleOp::Dispatch => {
                let mut want = Vec::new();
                if !quit {
                    while let Some(id) = m.pop(FAR - 1) {
                        want.push(id);
                    }
                }
                while looper.dispatch_ready().dispatched > 0 {}
                ran += want.len() as u64;
                check_ran(want);
            }
            HandleOp::Quit { safely } => {
                if quit {
                    continue;
                }
                quit = true;
                let mut want = Vec::new();
                if safely {
                    // In order; once past a barrier only asynchronous ones run.
                    let mut held = false;
                    for (k, e) in &m.map {
                        match e.kind {
                            Kind::Barrier => held = true,
                            Kind::Async if k.0 < FAR => want.push(e.id),
                            Kind::Sync if k.0 < FAR && !held => want.push(e.id),
                            _ => {}
                        }
                    }
                    h.quit_safely();
                } else {
                    h.quit();
                }
                m.map.clear();
                assert!(looper.dispatch_ready().quit);
                ran += want.len() as u64;
                check_ran(want);
            }
        }
    }
    if !quit {
        h.quit();
        m.map.clear();
        assert!(looper.dispatch_ready().quit);
        check_ran(Vec::new());
    }
    let s = looper.stats();
    assert_eq!((s.posted, s.messages_run), (accepted, ran), "{s:?}");
    assert_eq!((s.cancelled, s.removed), (cancelled, removed), "{s:?}");
    assert_eq!(
        s.posted,
        s.messages_run + s.cancelled + s.removed + s.messages_dropped,
        "{s:?}"
    );
}

#[derive(Arbitrary, Debug)]
struct Input {
    queue: Vec<QueueOp>,
    handle: Vec<HandleOp>,
}

fuzz_target!(|input: Input| {
    queue(&input.queue);
    handle(&input.handle);
});
