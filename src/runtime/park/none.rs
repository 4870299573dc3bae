//! No parker timer: Windows (whose IOCP handle is not a pollable fd) and
//! the Unixes without a checked timer source. The parker sleeps with the
//! poll's timeout instead (the parker's module docs).

use std::io;
use std::time::Duration;

use mio::{Poll, Token};

/// Never made: [`Timer::new`] returns `None`.
pub(crate) enum Timer {}

impl Timer {
    pub(crate) fn new(_poll: &Poll, _token: Token) -> io::Result<Option<Timer>> {
        Ok(None)
    }

    pub(crate) fn arm(&self, _d: Duration) -> io::Result<()> {
        match *self {}
    }

    pub(crate) fn disarm(&self) -> io::Result<()> {
        match *self {}
    }

    pub(crate) fn arm_at(&self, _at: u64) -> io::Result<()> {
        match *self {}
    }
}
