//! Idle handlers (Android's `MessageQueue.IdleHandler`): callbacks run on
//! the loop thread when nothing is due, once per idle period.
//!
//! An idle period starts when a turn finds nothing to dispatch and ends
//! when something is dispatched. The handlers run once at its start, before
//! the loop parks (or, for a host driving `dispatch_ready`, when a call
//! finds nothing due). A handler returning `false` is removed; one that
//! panics is removed and counted (`Stats::idle_panics`), and the loop goes
//! on. Handlers may add or remove handlers, themselves included.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::core::Core;
use super::looper::Looper;
use crate::stats::Counters;

/// Identifies an idle handler, for [`Looper::remove_idle_handler`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IdleId(u64);

type Handler = Box<dyn FnMut() -> bool>;

/// What [`Looper::set_message_logging`] prints with: called with each line.
pub type Printer = Box<dyn FnMut(&str)>;

#[derive(Default)]
pub(crate) struct IdleHandlers {
    list: Vec<(IdleId, Handler)>,
    next: u64,
    /// Removed while the list was out running.
    removed: Vec<IdleId>,
    running: bool,
}

/// The loop's idle handlers and whether they ran in this idle period.
#[derive(Default)]
pub(crate) struct Idle {
    handlers: RefCell<IdleHandlers>,
    ran: Cell<bool>,
}

impl Idle {
    /// Something was dispatched: the next idle period runs the handlers.
    #[inline]
    pub(crate) fn new_period(&self) {
        self.ran.set(false);
    }
}

/// Message logging (`Looper::set_message_logging`).
#[derive(Default)]
pub(crate) struct MessageLog {
    printer: RefCell<Option<Printer>>,
    on: Cell<bool>,
}

impl MessageLog {
    /// With logging on, prints Android's ">>>>> Dispatching to" line.
    #[inline]
    pub(crate) fn start(&self, looper: u64, kind: &str, tag: Option<u64>) {
        if self.on.get() {
            self.log(">>>>> Dispatching to", looper, kind, tag);
        }
    }

    /// With logging on, prints Android's "<<<<< Finished to" line.
    #[inline]
    pub(crate) fn end(&self, looper: u64, kind: &str, tag: Option<u64>) {
        if self.on.get() {
            self.log("<<<<< Finished to", looper, kind, tag);
        }
    }

    /// The printer is taken out while it runs, so it may replace itself.
    #[cold]
    fn log(&self, what: &str, looper: u64, kind: &str, tag: Option<u64>) {
        let Some(mut printer) = self.printer.borrow_mut().take() else {
            return;
        };
        let line = match tag {
            Some(t) => format!("{what} Looper({looper}) {kind} tag={t}"),
            None => format!("{what} Looper({looper}) {kind}"),
        };
        printer(&line);
        let mut slot = self.printer.borrow_mut();
        if slot.is_none() && self.on.get() {
            *slot = Some(printer);
        }
    }
}

impl Core {
    /// Runs the idle handlers if they have not run in this idle period.
    pub(crate) fn run_idle(&self) {
        if self.idle.ran.get() {
            return;
        }
        let mut list = {
            let mut idle = self.idle.handlers.borrow_mut();
            if idle.list.is_empty() {
                // Nothing ran: a handler added later in this idle period
                // still runs at the next look.
                return;
            }
            self.idle.ran.set(true);
            idle.running = true;
            std::mem::take(&mut idle.list)
        };
        let mut keep = Vec::with_capacity(list.len());
        for (id, mut f) in list.drain(..) {
            if self.idle.handlers.borrow().removed.contains(&id) {
                continue;
            }
            match catch_unwind(AssertUnwindSafe(&mut f)) {
                Ok(true) => keep.push((id, f)),
                Ok(false) => {}
                Err(_) => Counters::bump(&self.stats.counters().idle_panics),
            }
        }
        let mut idle = self.idle.handlers.borrow_mut();
        let removed = std::mem::take(&mut idle.removed);
        keep.retain(|(id, _)| !removed.contains(id));
        // Handlers added while running go after the ones that stay.
        keep.append(&mut idle.list);
        idle.list = keep;
        idle.running = false;
    }
}

impl Looper {
    /// Adds an idle handler: `f` runs on the loop thread each time the loop
    /// runs out of due work (once per idle period, before it parks, or when
    /// [`dispatch_ready`](Looper::dispatch_ready) finds nothing due).
    /// Returning `false` removes it. A handler that panics is removed and
    /// counted in [`Stats::idle_panics`](crate::stats::Stats); the loop goes
    /// on.
    ///
    /// ```
    /// use std::cell::Cell;
    /// use std::rc::Rc;
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let runs = Rc::new(Cell::new(0));
    /// let r = runs.clone();
    /// looper.add_idle_handler(move || { r.set(r.get() + 1); true });
    /// looper.dispatch_ready();          // idle: runs once
    /// looper.dispatch_ready();          // still the same idle period
    /// assert_eq!(runs.get(), 1);
    /// looper.handle().post(|| {}).unwrap();
    /// looper.dispatch_ready();          // dispatched: a new idle period
    /// looper.dispatch_ready();
    /// assert_eq!(runs.get(), 2);
    /// ```
    pub fn add_idle_handler(&self, f: impl FnMut() -> bool + 'static) -> IdleId {
        let mut idle = self.core.idle.handlers.borrow_mut();
        idle.next += 1;
        let id = IdleId(idle.next);
        idle.list.push((id, Box::new(f)));
        id
    }

    /// Removes an idle handler; `false` if it was already gone.
    ///
    /// ```
    /// use deliloop::Looper;
    ///
    /// let looper = Looper::new().unwrap();
    /// let id = looper.add_idle_handler(|| true);
    /// assert!(looper.remove_idle_handler(id));
    /// assert!(!looper.remove_idle_handler(id));
    /// ```
    pub fn remove_idle_handler(&self, id: IdleId) -> bool {
        let mut idle = self.core.idle.handlers.borrow_mut();
        if let Some(i) = idle.list.iter().position(|(h, _)| *h == id) {
            let handler = idle.list.remove(i);
            drop(idle);
            drop(handler); // outside the borrow: its drop may reach the looper
            return true;
        }
        if idle.running && !idle.removed.contains(&id) {
            // It is out running with the rest: drop it when they are back.
            idle.removed.push(id);
            return true;
        }
        false
    }

    /// Turns message logging on (`Some(printer)`) or off (`None`), as
    /// Android's `Looper.setMessageLogging`: `printer` gets a line before
    /// and after each dispatched entry, `">>>>> Dispatching to Looper(1)
    /// message tag=7"` and `"<<<<< Finished to Looper(1) message tag=7"`
    /// (the kind is `message`, `task`, `timer` or `run_sync`; the tag
    /// appears when the message has one).
    ///
    /// ```
    /// use std::cell::RefCell;
    /// use std::rc::Rc;
    /// use deliloop::{Looper, Tag};
    ///
    /// let looper = Looper::new().unwrap();
    /// let lines = Rc::new(RefCell::new(Vec::new()));
    /// let l = lines.clone();
    /// looper.set_message_logging(Some(Box::new(move |s: &str| l.borrow_mut().push(s.to_owned()))));
    /// looper.handle().message(|| {}).tag(Tag(7)).post().unwrap();
    /// looper.dispatch_ready();
    /// let lines = lines.borrow();
    /// assert!(lines[0].starts_with(">>>>> Dispatching to") && lines[0].ends_with("message tag=7"));
    /// assert!(lines[1].starts_with("<<<<< Finished to"));
    /// ```
    pub fn set_message_logging(&self, printer: Option<Printer>) {
        self.core.log.on.set(printer.is_some());
        *self.core.log.printer.borrow_mut() = printer;
    }
}
