//! A producer thread's lanes: the thread-local lookup from a queue to this
//! thread's [`Writer`] for it (`docs/lanes.md`, "Which pushes go to a
//! lane").
//!
//! Each thread keeps a short list of entries, one per queue and class it
//! pushed to, keyed by the queue's unique id (never its address, which a
//! later queue may reuse), with a one-entry hint for the last one used. An
//! entry holds the writer and an `Arc` of the queue's shared part, type
//! erased (the list is one thread-local for every payload type; the id
//! fixes the type, so the cast back is sound). The writer is dropped before
//! the `Arc` (its drop marks the lane abandoned; the `Arc`'s may free the
//! lane). Entries of closed queues are pruned at every lookup that passes
//! them, and dropped after the list is released, so a payload's or a
//! queue's drop that pushes again finds the list free.
//!
//! A lookup that cannot borrow the list (a push from a drop that runs
//! inside a lookup) or reach it (a push from another thread-local's
//! destructor during thread exit) returns `None`: the caller pushes on the
//! stack instead.

use crate::sync::Arc;
use std::cell::RefCell;

use super::lane::{Lane, Writer, CLOSED};
use super::registry::Registry;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::util::CachePadded;

/// Unique queue ids (0 is never one).
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// What a queue's shared part holds for its lanes.
pub(crate) struct LaneHome<T> {
    id: u64,
    /// The push counter (bit 63: CLOSED; bit 62: BUSY, `busy.rs`).
    pub(crate) order: CachePadded<AtomicU64>,
    /// The consumer's counted flags (`DeliQueue::set_counted`), read by
    /// every lane push: a line of its own that is only read once set.
    counted: CachePadded<AtomicU32>,
    /// Lane items with the counted flags removed by their ticket and by
    /// walkers, counted by whoever removed them (the consumer reaches a
    /// removed item only behind every item before it, which a barrier may
    /// hold).
    gone: CachePadded<[AtomicU64; 2]>,
    pub(crate) registry: Registry<T>,
}

impl<T> LaneHome<T> {
    pub(crate) fn new() -> LaneHome<T> {
        LaneHome {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            order: CachePadded(AtomicU64::new(0)),
            counted: CachePadded(AtomicU32::new(0)),
            gone: CachePadded([AtomicU64::new(0), AtomicU64::new(0)]),
            registry: Registry::new(),
        }
    }

    /// The flags whose lane pushes each lane counts.
    #[inline]
    pub(crate) fn counted(&self) -> u32 {
        self.counted.load(Ordering::Relaxed)
    }

    /// Sets [`counted`](Self::counted) (the consumer, before the pushes
    /// it should count).
    pub(crate) fn set_counted(&self, flags: u32) {
        self.counted.store(flags, Ordering::Relaxed);
    }

    /// A lane item with `flags` was removed: by its ticket, or by a
    /// walker (`by_walker`). Counted if its flags are.
    pub(crate) fn note_gone(&self, flags: u32, by_walker: bool) {
        if flags & self.counted() != 0 {
            // Release: the removal's CAS read the item's publish, which
            // came after its lane counted it; a consumer that reads this
            // count (Acquire) and then the lane's count sees the item in
            // both.
            self.gone[usize::from(by_walker)].fetch_add(1, Ordering::Release);
        }
    }

    /// Counted lane items removed so far: (by ticket, by walker). Read
    /// before the lanes' counts (see `note_gone`).
    pub(crate) fn gone(&self) -> (u64, u64) {
        (
            self.gone[0].load(Ordering::Acquire),
            self.gone[1].load(Ordering::Acquire),
        )
    }

    /// Whether the push counter says closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.order.load(Ordering::Acquire) & CLOSED != 0
    }
}

/// A queue's shared part, as far as lanes go.
pub(crate) trait HasLanes<T>: Send + Sync {
    fn home(&self) -> &LaneHome<T>;
}

/// One thread's writer for one queue and class, type erased.
struct Entry {
    id: u64,
    class: u8,
    /// A `Box<Held<T, O>>`.
    held: *mut (),
    closed: unsafe fn(*mut ()) -> bool,
    drop: unsafe fn(*mut ()),
}

struct Held<T, O> {
    writer: Writer<T>,
    /// Dropped after the writer (field order).
    _owner: Arc<O>,
}

/// # Safety
/// `p` is a live `Box<Held<T, O>>`.
unsafe fn closed<T, O: HasLanes<T>>(p: *mut ()) -> bool {
    // SAFETY: as the contract.
    unsafe { &*(p as *const Held<T, O>) }
        ._owner
        .home()
        .is_closed()
}

/// # Safety
/// `p` is a `Box<Held<T, O>>` nobody else holds.
unsafe fn drop_held<T, O>(p: *mut ()) {
    // SAFETY: as the contract.
    drop(unsafe { Box::from_raw(p as *mut Held<T, O>) });
}

impl Drop for Entry {
    fn drop(&mut self) {
        // SAFETY: the entry owns its `Held`.
        unsafe { (self.drop)(self.held) }
    }
}

struct Local {
    entries: Vec<Entry>,
    hint: usize,
}

#[cfg(not(any(loom, shuttle)))]
std::thread_local! {
    static LANES: RefCell<Local> = const {
        RefCell::new(Local {
            entries: Vec::new(),
            hint: 0,
        })
    };
}
// Loom and shuttle run their threads on one OS thread (or in a model of
// their own): their thread-locals are the model's threads'.
#[cfg(all(shuttle, not(loom)))]
shuttle::thread_local! {
    static LANES: RefCell<Local> = RefCell::new(Local {
        entries: Vec::new(),
        hint: 0,
    });
}
#[cfg(loom)]
loom::thread_local! {
    static LANES: RefCell<Local> = RefCell::new(Local {
        entries: Vec::new(),
        hint: 0,
    });
}

/// Calls `f` with this thread's writer for `owner`'s queue and `class`,
/// making and registering the lane on the thread's first push there.
/// `None` (and `f` not called) if the thread's list cannot be used now:
/// the caller pushes on the stack.
///
/// The hint's entry is looked at inline; any other case (a miss, entries
/// to prune) goes out of line to point the hint at the entry, and the look
/// is made again. So a push to the queue the thread pushed to last pays
/// for neither the search nor the pruned entries' drop, and `f` has one
/// call site (it is inlined).
#[inline]
pub(crate) fn with_writer<T, O, R>(
    owner: &Arc<O>,
    class: u8,
    f: impl FnOnce(&mut Writer<T>) -> R,
) -> Option<R>
where
    O: HasLanes<T> + 'static,
{
    let id = owner.home().id;
    let mut f = Some(f);
    loop {
        let hit = LANES.try_with(|cell| {
            let local = cell.try_borrow_mut().ok()?;
            match local.entries.get(local.hint) {
                Some(e) if e.id == id && e.class == class => {
                    // SAFETY: the entry's id is `owner`'s, so its `held` is
                    // a `Held<T, O>`; the list is borrowed, so nobody else
                    // uses it.
                    let held = unsafe { &mut *(e.held as *mut Held<T, O>) };
                    let f = f.take().expect("called once");
                    Some(Some(f(&mut held.writer)))
                }
                _ => Some(None),
            }
        });
        match hit {
            Ok(Some(Some(out))) => return Some(out),
            // Another pass: a drop of a pruned entry that pushes to
            // another queue may have moved the hint. A pass with nothing
            // pruned runs no code before the next look, which then hits;
            // so there are at most as many passes as queues freed by
            // those drops.
            Ok(Some(None)) if point_hint(owner, class) => continue,
            // The list is busy (a push from a drop inside a lookup) or
            // gone (thread exit).
            _ => return None,
        }
    }
}

/// Points this thread's hint at its entry for `owner`'s queue and `class`
/// (made and registered if there is none), pruning the entries of closed
/// queues it passes; false if the list cannot be used now.
#[cold]
#[inline(never)]
fn point_hint<T, O>(owner: &Arc<O>, class: u8) -> bool
where
    O: HasLanes<T> + 'static,
{
    let mut pruned = Vec::new();
    let pointed = LANES
        .try_with(|cell| {
            let Ok(mut local) = cell.try_borrow_mut() else {
                return false;
            };
            let i = find_or_add(&mut local, owner, class, &mut pruned);
            local.hint = i;
            true
        })
        .unwrap_or(false);
    // Outside the borrow: a writer's or a queue's drop may push again.
    drop(pruned);
    pointed
}

fn find_or_add<T, O>(local: &mut Local, owner: &Arc<O>, class: u8, pruned: &mut Vec<Entry>) -> usize
where
    O: HasLanes<T> + 'static,
{
    let id = owner.home().id;
    let mut i = 0;
    let mut found = None;
    while i < local.entries.len() {
        let e = &local.entries[i];
        if e.id == id && e.class == class {
            found = Some(i);
            i += 1;
            continue;
        }
        // SAFETY: the entry holds its `Held` for its own types.
        if unsafe { (e.closed)(e.held) } {
            pruned.push(local.entries.swap_remove(i));
            if found == Some(local.entries.len()) {
                found = Some(i);
            }
            continue;
        }
        i += 1;
    }
    if let Some(i) = found {
        return i;
    }
    let (lane, writer) = Lane::of_class(class, &owner.home().registry.pool);
    // SAFETY: a new lane; the registry owns it from here.
    unsafe { owner.home().registry.register(lane) };
    let held = Box::new(Held {
        writer,
        _owner: owner.clone(),
    });
    local.entries.push(Entry {
        id,
        class,
        held: Box::into_raw(held) as *mut (),
        closed: closed::<T, O>,
        drop: drop_held::<T, O>,
    });
    local.entries.len() - 1
}

/// How many lanes this thread holds (tests).
#[cfg(all(test, not(loom)))]
pub(crate) fn held() -> usize {
    LANES.with(|l| l.borrow().entries.len())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::lane::Outcome;
    use super::super::node::Meta;
    use super::super::registry::Lanes;
    use super::*;
    use std::sync::atomic::AtomicUsize as StdUsize;

    struct Home<T>(LaneHome<T>, Arc<StdUsize>);
    impl<T: Send> HasLanes<T> for Home<T> {
        fn home(&self) -> &LaneHome<T> {
            &self.0
        }
    }
    impl<T> Drop for Home<T> {
        fn drop(&mut self) {
            self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn home<T>() -> (Arc<Home<T>>, Arc<StdUsize>) {
        let dropped = Arc::new(StdUsize::new(0));
        (Arc::new(Home(LaneHome::new(), dropped.clone())), dropped)
    }

    const M: Meta = Meta {
        when: 0,
        tag: 0,
        flags: 0,
    };

    fn push<T: Send + 'static>(h: &Arc<Home<T>>, class: u8, v: T) -> bool {
        with_writer(h, class, |w: &mut Writer<T>| {
            matches!(w.push(&h.0.order, v, M), Outcome::Accepted(_))
        })
        .expect("the list is free")
    }

    /// Pops everything the consumer sees, in lane order.
    fn pop<T>(lanes: &mut Lanes<T>, h: &LaneHome<T>) -> Vec<T> {
        lanes.adopt(&h.registry, false);
        let mut out = Vec::new();
        for i in 0..lanes.slots() {
            while let Some(super::super::lane::Head::Queued(w, _)) =
                lanes.head(&h.registry, i, false)
            {
                out.push(lanes.take(i, w).ok().unwrap());
            }
        }
        lanes.maintain(&h.registry);
        out
    }

    #[test]
    fn one_lane_per_thread_queue_and_class() {
        let (a, _) = home::<u32>();
        let (b, _) = home::<String>();
        let before = held();
        assert!(push(&a, 0, 1));
        assert!(push(&a, 0, 2));
        assert!(push(&b, 0, "x".to_string()));
        assert!(push(&a, 1, 3));
        assert_eq!(held(), before + 3);
        let other = std::thread::spawn({
            let a = a.clone();
            move || {
                assert!(push(&a, 0, 4));
                held()
            }
        })
        .join()
        .unwrap();
        assert_eq!(other, 1);
        let mut lanes = Lanes::new();
        let mut got = pop(&mut lanes, &a.0);
        got.sort_unstable();
        assert_eq!(got, [1, 2, 3, 4]);
        // The exited thread's lane retires; its `Arc` went with it.
        lanes.maintain(&a.0.registry);
        assert_eq!(lanes.len(), 2);
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&a.0.registry) };
        let mut lb = Lanes::new();
        assert_eq!(pop(&mut lb, &b.0), ["x"]);
        // SAFETY: as above.
        unsafe { lb.hand_over(&b.0.registry) };
        // Close both: the next lookup prunes them.
        a.0.order.fetch_or(CLOSED, Ordering::AcqRel);
        b.0.order.fetch_or(CLOSED, Ordering::AcqRel);
        let (c, _) = home::<u8>();
        assert!(push(&c, 0, 9));
        assert_eq!(held(), before + 1);
    }

    #[test]
    fn a_closed_queue_is_freed_once_pruned_and_its_drop_may_push() {
        // Queue `a`'s payload pushes to queue `b` when dropped: dropping
        // `a` (pruned from the list) runs that push with the list free.
        struct PushOnDrop(Arc<Home<u8>>);
        impl Drop for PushOnDrop {
            fn drop(&mut self) {
                assert!(push(&self.0, 0, 5));
            }
        }
        let (b, _) = home::<u8>();
        let (a, a_dropped) = home::<PushOnDrop>();
        assert!(push(&a, 0, PushOnDrop(b.clone())));
        a.0.order.fetch_or(CLOSED, Ordering::AcqRel);
        drop(a);
        assert_eq!(
            a_dropped.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "held by the list"
        );
        // The next lookup (for `b`) prunes `a`: its last `Arc` drops after
        // the list is released, freeing its lane and the payload, which
        // pushes to `b` again, before the push that pruned it (the drop of
        // `a` came first).
        assert!(push(&b, 0, 6));
        assert_eq!(a_dropped.load(std::sync::atomic::Ordering::SeqCst), 1);
        let mut lanes = Lanes::new();
        assert_eq!(pop(&mut lanes, &b.0), [5, 6]);
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&b.0.registry) };
    }

    #[test]
    fn a_push_from_a_thread_local_destructor_at_exit_finds_no_freed_writer() {
        // `LATE` is registered before the thread's lane list, so its
        // destructor runs after the list's (the usual reverse order): its
        // push must not reach a writer the list's drop freed.
        type Report = std::sync::mpsc::Sender<Option<bool>>;
        struct PushAtExit(Option<(Arc<Home<u8>>, Report)>);
        impl Drop for PushAtExit {
            fn drop(&mut self) {
                if let Some((h, tx)) = self.0.take() {
                    let r = with_writer(&h, 0, |w: &mut Writer<u8>| {
                        matches!(w.push(&h.0.order, 8, M), Outcome::Accepted(_))
                    });
                    let _ = tx.send(r);
                }
            }
        }
        thread_local! {
            static LATE: RefCell<PushAtExit> = const { RefCell::new(PushAtExit(None)) };
        }
        let (a, _) = home::<u8>();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn({
            let a = a.clone();
            move || {
                LATE.with(|l| l.borrow_mut().0 = Some((a.clone(), tx)));
                assert!(push(&a, 0, 7));
            }
        })
        .join()
        .unwrap();
        let at_exit = rx.recv().unwrap();
        let mut lanes = Lanes::new();
        let got = pop(&mut lanes, &a.0);
        // SAFETY: the consumer's only hand-over.
        unsafe { lanes.hand_over(&a.0.registry) };
        match at_exit {
            // The list was gone: the push is told to use the stack.
            None => assert_eq!(got, [7]),
            // Destructors ran the other way round: the lane took it.
            Some(accepted) => {
                assert!(accepted);
                assert_eq!(got, [7, 8]);
            }
        }
    }

    #[test]
    fn a_push_from_inside_a_lookup_is_told_to_use_the_stack() {
        let (a, _) = home::<u8>();
        let inner = with_writer(&a, 0, |_: &mut Writer<u8>| {
            with_writer(&a, 0, |_: &mut Writer<u8>| ()).is_none()
        });
        assert_eq!(inner, Some(true));
    }
}
