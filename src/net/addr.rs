//! The address forms that `bind`, `connect` and `send_to` accept, and
//! host-name resolution on the blocking pool.
//!
//! A literal address (a `SocketAddr`, an IP with a port, or a string that
//! parses as one) is used as it is, on the calling thread. A host name is
//! resolved by the system resolver (`getaddrinfo`, through std's
//! `ToSocketAddrs`) on a thread of [`spawn_blocking`]'s pool, so a slow
//! resolver never blocks the loop.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::spawn_blocking;

/// An address for `bind`, `connect` or `send_to`, or a host name and port
/// to resolve into some.
///
/// Implemented for `SocketAddr` (and its V4 and V6 forms), `(IpAddr,
/// u16)`, `(Ipv4Addr, u16)`, `(Ipv6Addr, u16)`, `str` and `String`
/// (`"host:port"`), `(&str, u16)`, `(String, u16)`, `[SocketAddr]` and
/// `Vec<SocketAddr>` (tried in order), and references to any of them. A
/// host name is resolved on the blocking pool, never on the calling
/// thread; a literal address is used as it is. The port of a string is a
/// decimal `u16`; anything else is an `InvalidInput` error.
///
/// Sealed: the forms are this crate's to choose.
///
/// ```
/// use std::net::{Ipv4Addr, SocketAddr};
/// use deliloop::net::TcpListener;
///
/// deliloop::block_on(async {
///     let a = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
///     let b = TcpListener::bind("localhost:0").await.unwrap(); // resolved off the loop
///     let addrs: &[SocketAddr] = &["127.0.0.1:0".parse().unwrap()];
///     let c = TcpListener::bind(addrs).await.unwrap();
///     for l in [a, b, c] {
///         assert!(l.local_addr().unwrap().ip().is_loopback());
///     }
/// });
/// ```
pub trait ToSocketAddrs: sealed::Sealed {}

pub(crate) mod sealed {
    use std::net::SocketAddr;

    /// What an address form is, before any resolution.
    pub trait Sealed {
        /// This form, borrowed.
        fn addrs(&self) -> Addrs<'_>;
    }

    /// An address form, borrowed.
    pub enum Addrs<'a> {
        /// A literal address.
        One(SocketAddr),
        /// Literal addresses, tried in order.
        Slice(&'a [SocketAddr]),
        /// `"host:port"`, or a literal socket address as a string.
        Str(&'a str),
        /// A host name or a literal IP, and a port.
        HostPort(&'a str, u16),
    }
}

use sealed::{Addrs, Sealed};

/// Resolves `host` (`"name:port"`, or a literal socket address) with the
/// system resolver, on the blocking pool: the calling thread never waits
/// on the resolver. A literal address comes back at once.
///
/// # Errors
/// `InvalidInput` when `host` has no `:port` or its port is not a decimal
/// `u16`; the resolver's error when the name does not resolve.
///
/// ```
/// deliloop::block_on(async {
///     let mut addrs = deliloop::net::lookup_host("localhost:80").await.unwrap();
///     assert!(addrs.all(|a| a.ip().is_loopback() && a.port() == 80));
///     assert!(deliloop::net::lookup_host("localhost").await.is_err());
/// });
/// ```
pub async fn lookup_host(host: &str) -> io::Result<impl Iterator<Item = SocketAddr>> {
    resolve_str(host).await
}

/// Resolved addresses: borrowed, literal, or from the resolver.
pub(crate) enum Resolved<'a> {
    One(Option<SocketAddr>),
    Slice(std::slice::Iter<'a, SocketAddr>),
    Many(std::vec::IntoIter<SocketAddr>),
}

impl Iterator for Resolved<'_> {
    type Item = SocketAddr;

    fn next(&mut self) -> Option<SocketAddr> {
        match self {
            Resolved::One(a) => a.take(),
            Resolved::Slice(i) => i.next().copied(),
            Resolved::Many(i) => i.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Resolved::One(a) => (a.is_some() as usize, Some(a.is_some() as usize)),
            Resolved::Slice(i) => i.size_hint(),
            Resolved::Many(i) => i.size_hint(),
        }
    }
}

/// The addresses of `addr`, resolving a host name on the blocking pool.
pub(crate) async fn resolve<A: ToSocketAddrs + ?Sized>(addr: &A) -> io::Result<Resolved<'_>> {
    match addr.addrs() {
        Addrs::One(a) => Ok(Resolved::One(Some(a))),
        Addrs::Slice(s) => Ok(Resolved::Slice(s.iter())),
        Addrs::Str(s) => resolve_str(s).await,
        Addrs::HostPort(host, port) => resolve_host_port(host, port).await,
    }
}

async fn resolve_str(s: &str) -> io::Result<Resolved<'static>> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(Resolved::One(Some(a)));
    }
    let (host, port) = split_host_port(s)?;
    resolve_host_port(host, port).await
}

async fn resolve_host_port(host: &str, port: u16) -> io::Result<Resolved<'static>> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(Resolved::One(Some(SocketAddr::new(ip, port))));
    }
    let host = host.to_owned();
    let addrs = spawn_blocking(move || {
        std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port)).map(Iterator::collect)
    })
    .await?;
    Ok(Resolved::Many(Vec::into_iter(addrs)))
}

/// `"host:port"` into its parts; the port is one to five decimal digits
/// that fit a `u16` (no sign, no service name).
fn split_host_port(s: &str) -> io::Result<(&str, u16)> {
    let invalid = |msg| io::Error::new(io::ErrorKind::InvalidInput, msg);
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| invalid("invalid socket address: no port (want \"host:port\")"))?;
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid("invalid port value: not a decimal number"));
    }
    let port = port
        .parse::<u16>()
        .map_err(|_| invalid("invalid port value: above 65535"))?;
    Ok((host, port))
}

macro_rules! literal {
    ($($t:ty => |$s:ident| $e:expr;)*) => {$(
        impl ToSocketAddrs for $t {}
        impl Sealed for $t {
            fn addrs(&self) -> Addrs<'_> {
                let $s = self;
                Addrs::One($e)
            }
        }
    )*};
}

literal! {
    SocketAddr => |s| *s;
    SocketAddrV4 => |s| SocketAddr::V4(*s);
    SocketAddrV6 => |s| SocketAddr::V6(*s);
    (IpAddr, u16) => |s| SocketAddr::new(s.0, s.1);
    (Ipv4Addr, u16) => |s| SocketAddr::new(IpAddr::V4(s.0), s.1);
    (Ipv6Addr, u16) => |s| SocketAddr::new(IpAddr::V6(s.0), s.1);
}

impl ToSocketAddrs for str {}
impl Sealed for str {
    fn addrs(&self) -> Addrs<'_> {
        Addrs::Str(self)
    }
}

impl ToSocketAddrs for String {}
impl Sealed for String {
    fn addrs(&self) -> Addrs<'_> {
        Addrs::Str(self)
    }
}

impl ToSocketAddrs for (&str, u16) {}
impl Sealed for (&str, u16) {
    fn addrs(&self) -> Addrs<'_> {
        Addrs::HostPort(self.0, self.1)
    }
}

impl ToSocketAddrs for (String, u16) {}
impl Sealed for (String, u16) {
    fn addrs(&self) -> Addrs<'_> {
        Addrs::HostPort(&self.0, self.1)
    }
}

impl ToSocketAddrs for [SocketAddr] {}
impl Sealed for [SocketAddr] {
    fn addrs(&self) -> Addrs<'_> {
        Addrs::Slice(self)
    }
}

impl ToSocketAddrs for Vec<SocketAddr> {}
impl Sealed for Vec<SocketAddr> {
    fn addrs(&self) -> Addrs<'_> {
        Addrs::Slice(self)
    }
}

impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {}
impl<T: ToSocketAddrs + ?Sized> Sealed for &T {
    fn addrs(&self) -> Addrs<'_> {
        (**self).addrs()
    }
}

#[cfg(test)]
mod tests {
    use super::split_host_port;

    #[test]
    fn a_port_is_a_decimal_u16() {
        assert_eq!(split_host_port("h:80").unwrap(), ("h", 80));
        assert_eq!(split_host_port("h:65535").unwrap(), ("h", 65535));
        for bad in ["h", "h:", "h:http", "h:+80", "h:-1", "h:65536", "h: 80"] {
            let e = split_host_port(bad).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{bad}");
        }
    }
}
