//! Reverse proxies the server trusts ([`ConnectionLimits::trusted_proxies`]):
//! a request that comes through one counts as its client's, the address
//! the proxy names in `X-Forwarded-For`.
//!
//! Every bound keyed on an address (connections, bytes being received,
//! and, for anonymous callers, open tasks, running bytes and streams; the
//! throttle on failed authentication too) would otherwise see one caller
//! behind a proxy: the proxy. Its connections are then not bounded per
//! address (the server's cap on connections still applies), and each of
//! its requests is counted against the client it names.
//!
//! The client is the rightmost address of `X-Forwarded-For` (all its
//! lines, in order) that is not itself a trusted proxy: each proxy appends
//! the address it was connected from, so what is left of the last trusted
//! hop was written by the client and is not believed. An entry that is not
//! an address (`unknown`, a name, garbage) ends the walk at the hop that
//! wrote it. A request from an address that is not trusted is its own
//! client, whatever its headers say.
//!
//! [`ConnectionLimits::trusted_proxies`]: super::accept::ConnectionLimits::trusted_proxies

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::HeaderMap;
use ipnet::IpNet;

/// The header each proxy appends its peer's address to.
const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// How many entries of `X-Forwarded-For` are looked at, from the right
/// (a chain of proxies longer than this is not believed further).
const MOST_HOPS: usize = 16;

/// The networks of the trusted proxies (none by default).
#[derive(Clone, Default)]
pub(crate) struct TrustedProxies {
    nets: Arc<[IpNet]>,
}

impl TrustedProxies {
    pub(crate) fn new(nets: &[IpNet]) -> Self {
        Self {
            nets: nets.iter().map(IpNet::trunc).collect(),
        }
    }

    /// Whether `ip` is a trusted proxy (an IPv4 address also as IPv6-mapped,
    /// as a dual-stack listener sees it).
    pub(crate) fn trusts(&self, ip: IpAddr) -> bool {
        if self.nets.is_empty() {
            return false;
        }
        let ip = ip.to_canonical();
        self.nets.iter().any(|n| n.contains(&ip))
    }

    /// The client of a request with `headers` that came from `peer`, a
    /// trusted proxy: the rightmost untrusted address it forwards for (its
    /// port when the entry has one, else 0), or `peer` itself when it names
    /// none.
    pub(crate) fn client(&self, peer: SocketAddr, headers: &HeaderMap) -> SocketAddr {
        let mut entries: Vec<&str> = Vec::new();
        for line in headers.get_all(X_FORWARDED_FOR) {
            let Ok(line) = line.to_str() else {
                return peer;
            };
            entries.extend(line.split(','));
        }
        let mut client = peer;
        for entry in entries.iter().rev().take(MOST_HOPS) {
            let Some(hop) = address(entry) else {
                return client;
            };
            client = hop;
            if !self.trusts(hop.ip()) {
                return client;
            }
        }
        client
    }
}

/// One entry of `X-Forwarded-For`: `192.0.2.1`, `192.0.2.1:4711`,
/// `2001:db8::1` or `[2001:db8::1]:4711`.
fn address(entry: &str) -> Option<SocketAddr> {
    let entry = entry.trim();
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip.to_canonical(), 0));
    }
    let with_port = entry.parse::<SocketAddr>().ok()?;
    Some(SocketAddr::new(
        with_port.ip().to_canonical(),
        with_port.port(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(nets: &[&str]) -> TrustedProxies {
        let nets: Vec<IpNet> = nets
            .iter()
            .map(|n| {
                n.parse()
                    .or_else(|_| n.parse::<IpAddr>().map(IpNet::from))
                    .expect("a net")
            })
            .collect();
        TrustedProxies::new(&nets)
    }

    fn headers(lines: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(X_FORWARDED_FOR, l.parse().expect("a value"));
        }
        h
    }

    fn peer(s: &str) -> SocketAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn the_client_is_the_rightmost_untrusted_hop() {
        let p = proxies(&["10.0.0.0/8", "::1/128"]);
        let proxy = peer("10.1.2.3:5000");
        assert_eq!(
            p.client(proxy, &headers(&["203.0.113.5"])),
            peer("203.0.113.5:0")
        );
        // What the client wrote itself (left of its own address) is not
        // believed; trusted hops are passed.
        assert_eq!(
            p.client(proxy, &headers(&["198.51.100.1, 203.0.113.5, 10.9.9.9"])),
            peer("203.0.113.5:0")
        );
        // Lines are one list, in order.
        assert_eq!(
            p.client(proxy, &headers(&["198.51.100.1", "203.0.113.7:4711"])),
            peer("203.0.113.7:4711")
        );
        assert_eq!(
            p.client(proxy, &headers(&["[2001:db8::1]:80"])),
            peer("[2001:db8::1]:80")
        );
        assert_eq!(
            p.client(proxy, &headers(&["2001:db8::2"])),
            peer("[2001:db8::2]:0")
        );
    }

    #[test]
    fn no_address_named_is_the_last_hop_known() {
        let p = proxies(&["10.0.0.0/8"]);
        let proxy = peer("10.1.2.3:5000");
        assert_eq!(p.client(proxy, &HeaderMap::new()), proxy);
        assert_eq!(p.client(proxy, &headers(&["unknown"])), proxy);
        assert_eq!(p.client(proxy, &headers(&[""])), proxy);
        assert_eq!(
            p.client(proxy, &headers(&["203.0.113.5, garbage, 10.0.0.7"])),
            peer("10.0.0.7:0")
        );
        // Only trusted hops: the leftmost.
        assert_eq!(
            p.client(proxy, &headers(&["10.0.0.8, 10.0.0.7"])),
            peer("10.0.0.8:0")
        );
    }

    #[test]
    fn a_long_chain_is_believed_so_far() {
        let p = proxies(&["10.0.0.0/8"]);
        let chain = std::iter::once("203.0.113.5".to_owned())
            .chain((0..40).map(|i| format!("10.0.0.{i}")))
            .collect::<Vec<_>>()
            .join(",");
        let client = p.client(peer("10.1.2.3:1"), &headers(&[&chain]));
        assert!(p.trusts(client.ip()), "{client}");
    }

    #[test]
    fn mapped_addresses_and_hosts_are_trusted() {
        let p = proxies(&["192.0.2.1", "10.0.0.0/8"]);
        assert!(p.trusts("::ffff:192.0.2.1".parse().expect("an address")));
        assert!(p.trusts("10.200.0.1".parse().expect("an address")));
        assert!(!p.trusts("192.0.2.2".parse().expect("an address")));
        assert!(!TrustedProxies::default().trusts("10.0.0.1".parse().expect("an address")));
    }
}
