//! A source's registration on Windows, where mio registers only its own
//! socket types: a mio socket made on the source's socket, used only to
//! register, re-register and deregister it. mio's Windows backend polls
//! the socket handle itself (readable, writable, hung up, whatever the
//! socket's kind), so the wrapper's type does not matter and none of its
//! operations is ever called.
//!
//! Invariants: the wrapper never closes the socket (the `Async` owns it):
//! it is held in `ManuallyDrop` and taken apart with `into_raw_socket`,
//! which releases mio's state and leaves the socket open. The `Async`
//! deregisters before it drops its socket, so the wrapper never outlives
//! the socket while registered.

use std::io;
use std::mem::ManuallyDrop;
use std::os::windows::io::{FromRawSocket, IntoRawSocket, RawSocket};

use mio::{Interest, Registry, Token};

pub(crate) struct Handle {
    /// A clone of the reactor's registry (one selector, shared).
    registry: Registry,
    sock: ManuallyDrop<mio::net::TcpStream>,
    token: Token,
    interests: Interest,
}

impl Handle {
    /// Registers `socket` under `token` for `interests`.
    ///
    /// # Errors
    /// From mio's registration.
    pub(crate) fn register(
        registry: &Registry,
        socket: RawSocket,
        token: Token,
        interests: Interest,
    ) -> io::Result<Handle> {
        let registry = registry.try_clone()?;
        // SAFETY: `socket` is an open socket that the `Async` being made
        // owns and keeps open until after `deregister` (module docs); the
        // wrapper never closes it.
        let mut sock = ManuallyDrop::new(unsafe { mio::net::TcpStream::from_raw_socket(socket) });
        if let Err(e) = registry.register(&mut *sock, token, interests) {
            let _ = ManuallyDrop::into_inner(sock).into_raw_socket();
            return Err(e);
        }
        Ok(Handle {
            registry,
            sock,
            token,
            interests,
        })
    }

    /// Polls the socket again after a report: what mio's own types do
    /// when an operation fails with `WouldBlock`.
    ///
    /// # Errors
    /// From mio's re-registration; the socket is then not polled, and the
    /// caller marks it ready so that the next operation meets the error
    /// (`source.rs`, `clear`).
    pub(crate) fn rearm(&mut self) -> io::Result<()> {
        self.registry
            .reregister(&mut *self.sock, self.token, self.interests)
    }

    /// Deregisters the socket and releases the wrapper without closing it.
    ///
    /// # Errors
    /// From mio's deregistration.
    pub(crate) fn deregister(self) -> io::Result<()> {
        let Handle {
            registry, mut sock, ..
        } = self;
        let r = registry.deregister(&mut *sock);
        let _ = ManuallyDrop::into_inner(sock).into_raw_socket();
        r
    }
}
