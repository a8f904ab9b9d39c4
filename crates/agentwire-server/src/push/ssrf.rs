//! Which webhook URLs the server may call (spec 13.2, SSRF protection).
//!
//! A webhook URL must be `http(s)` with a host. By default every address
//! that is not globally routable is refused: loopback, private ranges,
//! link-local, unspecified, carrier-grade NAT, documentation, benchmarking,
//! multicast, reserved and the IPv6 forms that embed one of those. The
//! check runs twice: when a config is created (the URL's literal address,
//! or the addresses its name resolves to when it resolves) and at delivery
//! time on the addresses the connection will actually use ([`GuardedResolver`]
//! is the HTTP client's DNS resolver, so a name that changes its answer
//! between the two checks gains nothing). An allow-list of networks and
//! host names opens exceptions for development and tests.
//!
//! The same policy guards every URL the agent registry
//! (`agentwire-registry`) fetches: [`UrlPolicy::guard`] makes any
//! `reqwest` client check the addresses it connects to and each redirect
//! it would follow, and [`refusal_in`] finds the policy's refusal in the
//! error of a request it stopped.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;

/// The allow-list and scheme rules for webhook URLs.
#[derive(Debug, Clone, Default)]
pub struct UrlPolicy {
    allowed_nets: Vec<IpNet>,
    allowed_hosts: Vec<String>,
    require_https: bool,
}

/// Why a webhook URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

impl UrlPolicy {
    /// The default policy: `http` and `https` URLs whose addresses are
    /// globally routable.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also allows the addresses of `net` (e.g. `"127.0.0.0/8"`, `"::1/128"`,
    /// `"10.1.2.3/32"`). Panics on a malformed network: it is configuration.
    pub fn allow_net(mut self, net: &str) -> Self {
        let parsed: IpNet = net
            .parse()
            .or_else(|_| net.parse::<IpAddr>().map(IpNet::from))
            .unwrap_or_else(|_| panic!("not a network (CIDR) or address: {net:?}"));
        self.allowed_nets.push(parsed);
        self
    }

    /// Also allows a host name (exact, case-insensitive) and whatever it
    /// resolves to, e.g. `"localhost"` or `"hooks.internal"`.
    pub fn allow_host(mut self, host: &str) -> Self {
        self.allowed_hosts
            .push(host.trim_end_matches('.').to_ascii_lowercase());
        self
    }

    /// Allows loopback webhooks (`127.0.0.0/8`, `::1`, `localhost`): for
    /// development and tests.
    pub fn allow_loopback(self) -> Self {
        self.allow_net("127.0.0.0/8")
            .allow_net("::1/128")
            .allow_host("localhost")
    }

    /// Refuses plain `http` webhook URLs (spec 13.2 recommends HTTPS).
    pub fn require_https(mut self, on: bool) -> Self {
        self.require_https = on;
        self
    }

    /// Whether loopback addresses are allowed (all of `127.0.0.0/8` and
    /// `::1`).
    pub fn allows_loopback(&self) -> bool {
        self.check_ip(IpAddr::V4(Ipv4Addr::LOCALHOST)).is_ok()
            && self.check_ip(IpAddr::V6(Ipv6Addr::LOCALHOST)).is_ok()
    }

    /// Makes `builder` a client that only connects where this policy
    /// allows: its DNS resolver keeps only allowed addresses (checked at
    /// connection time, so a name whose answer changes after an earlier
    /// check gains nothing), each redirect is checked with
    /// [`UrlPolicy::check_url`] before it is followed (at most
    /// `max_redirects` of them; none are followed with 0, the 3xx answer is
    /// returned), and no proxy is used (the address checked must be the
    /// address connected to). A URL whose host is an IP address does not go
    /// through the resolver: check the first URL with
    /// [`UrlPolicy::check_url`] before sending. A request the policy stops
    /// fails with an error in whose source chain [`refusal_in`] finds the
    /// [`Refused`].
    pub fn guard(
        self: &Arc<Self>,
        builder: reqwest::ClientBuilder,
        max_redirects: usize,
    ) -> reqwest::ClientBuilder {
        let redirect = if max_redirects == 0 {
            reqwest::redirect::Policy::none()
        } else {
            let policy = Arc::clone(self);
            reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() > max_redirects {
                    let why = Refused(format!("more than {max_redirects} redirects"));
                    return attempt.error(why);
                }
                match policy.check_url(attempt.url().as_str()) {
                    Ok(_) => attempt.follow(),
                    Err(r) => {
                        let why = Refused(format!("a redirect to {}: {}", attempt.url(), r.0));
                        attempt.error(why)
                    }
                }
            })
        };
        builder
            .dns_resolver(Arc::new(GuardedResolver {
                policy: Arc::clone(self),
            }))
            .redirect(redirect)
            .no_proxy()
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.allowed_hosts.contains(&host)
    }

    /// Checks one address: allowed when it is in the allow-list or globally
    /// routable.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), Refused> {
        let ip = canonical(ip);
        if self.allowed_nets.iter().any(|n| n.contains(&ip)) {
            return Ok(());
        }
        match special_purpose(ip) {
            None => Ok(()),
            Some(what) => Err(Refused(format!("{ip} is {what}"))),
        }
    }

    /// Checks the form of a webhook URL and its host (without DNS): the
    /// parsed URL, or why it is refused.
    pub fn check_url(&self, url: &str) -> Result<reqwest::Url, Refused> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| Refused(format!("{url:?} is not an absolute URL ({e})")))?;
        match parsed.scheme() {
            "https" => {}
            "http" if !self.require_https => {}
            "http" => {
                return Err(Refused("webhooks must use https on this server".to_owned()));
            }
            s => {
                return Err(Refused(format!(
                    "the scheme {s:?} is not allowed; webhooks are http(s) URLs"
                )));
            }
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(Refused(
                "credentials in the URL are not allowed; use the config's authentication"
                    .to_owned(),
            ));
        }
        match parsed.host() {
            None => Err(Refused("the URL has no host".to_owned())),
            Some(url::Host::Ipv4(ip)) => self.check_ip(IpAddr::V4(ip)).map(|()| parsed),
            Some(url::Host::Ipv6(ip)) => self.check_ip(IpAddr::V6(ip)).map(|()| parsed),
            Some(url::Host::Domain(name)) => {
                if self.host_allowed(name) {
                    return Ok(parsed);
                }
                let lower = name.trim_end_matches('.').to_ascii_lowercase();
                if lower == "localhost" || lower.ends_with(".localhost") {
                    return Err(Refused(format!("{name} is a loopback name")));
                }
                Ok(parsed)
            }
        }
    }

    /// The full check done when a config is created: the URL's form, then
    /// (for a host name) the addresses it resolves to, if it resolves within
    /// a short time. A name that does not resolve yet is accepted here; the
    /// delivery checks the addresses it connects to anyway.
    pub async fn check_webhook(&self, url: &str) -> Result<(), Refused> {
        let parsed = self.check_url(url)?;
        let Some(url::Host::Domain(name)) = parsed.host() else {
            return Ok(());
        };
        if self.host_allowed(name) {
            return Ok(());
        }
        let port = parsed.port_or_known_default().unwrap_or(443);
        let lookup = tokio::net::lookup_host((name.to_owned(), port));
        if let Ok(Ok(addrs)) = tokio::time::timeout(Duration::from_secs(2), lookup).await {
            for a in addrs {
                self.check_ip(a.ip())
                    .map_err(|r| Refused(format!("{name} resolves to {}", r.0)))?;
            }
        }
        Ok(())
    }
}

/// IPv4-mapped IPv6 addresses are checked as the IPv4 address they carry.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

fn in4(ip: Ipv4Addr, net: [u8; 4], prefix: u8) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn in6(ip: Ipv6Addr, net: [u16; 8], prefix: u8) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    (u128::from(ip) & mask) == (u128::from(Ipv6Addr::from(net)) & mask)
}

/// What kind of special-purpose address `ip` is, or `None` for a globally
/// routable one (IANA special-purpose registries, RFC 6890 and updates).
pub fn special_purpose(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    const NETS: &[([u8; 4], u8, &str)] = &[
        ([0, 0, 0, 0], 8, "an unspecified (\"this network\") address"),
        ([10, 0, 0, 0], 8, "a private address (10.0.0.0/8)"),
        ([100, 64, 0, 0], 10, "a shared (carrier-grade NAT) address"),
        ([127, 0, 0, 0], 8, "a loopback address"),
        ([169, 254, 0, 0], 16, "a link-local address"),
        ([172, 16, 0, 0], 12, "a private address (172.16.0.0/12)"),
        ([192, 0, 0, 0], 24, "an IETF protocol assignment address"),
        ([192, 0, 2, 0], 24, "a documentation address"),
        ([192, 88, 99, 0], 24, "a 6to4 relay anycast address"),
        ([192, 168, 0, 0], 16, "a private address (192.168.0.0/16)"),
        ([198, 18, 0, 0], 15, "a benchmarking address"),
        ([198, 51, 100, 0], 24, "a documentation address"),
        ([203, 0, 113, 0], 24, "a documentation address"),
        ([224, 0, 0, 0], 4, "a multicast address"),
        ([240, 0, 0, 0], 4, "a reserved address"),
    ];
    NETS.iter()
        .find(|(net, prefix, _)| in4(ip, *net, *prefix))
        .map(|(_, _, what)| *what)
}

fn special_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("the unspecified address");
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    // Forms that carry an IPv4 address: judged by that address.
    let embedded = |ip: Ipv6Addr, at: usize| {
        let o = ip.octets();
        Ipv4Addr::new(o[at], o[at + 1], o[at + 2], o[at + 3])
    };
    if in6(ip, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96) {
        return special_v4(embedded(ip, 12));
    }
    if in6(ip, [0, 0, 0, 0, 0, 0, 0, 0], 96) {
        return Some("an IPv4-compatible (deprecated) address");
    }
    if in6(ip, [0x2002, 0, 0, 0, 0, 0, 0, 0], 16) {
        return Some("a 6to4 address");
    }
    const NETS: &[([u16; 8], u8, &str)] = &[
        (
            [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
            48,
            "a local-use NAT64 address",
        ),
        ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "a discard-only address"),
        (
            [0x2001, 0, 0, 0, 0, 0, 0, 0],
            23,
            "an IETF protocol assignment address (Teredo, ORCHID...)",
        ),
        (
            [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
            32,
            "a documentation address",
        ),
        ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "a documentation address"),
        (
            [0xfc00, 0, 0, 0, 0, 0, 0, 0],
            7,
            "a unique local (private) address",
        ),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "a link-local address"),
        (
            [0xfec0, 0, 0, 0, 0, 0, 0, 0],
            10,
            "a site-local (deprecated) address",
        ),
        ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "a multicast address"),
    ];
    NETS.iter()
        .find(|(net, prefix, _)| in6(ip, *net, *prefix))
        .map(|(_, _, what)| *what)
}

/// The DNS resolver of the push HTTP client: resolves with the system
/// resolver and keeps only the addresses the policy allows, so the address
/// connected to is the address checked.
#[derive(Debug, Clone)]
pub(crate) struct GuardedResolver {
    pub(crate) policy: Arc<UrlPolicy>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = Arc::clone(&self.policy);
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if policy.host_allowed(&host) {
                return Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs);
            }
            let mut refused = None;
            let allowed: Vec<SocketAddr> = addrs
                .into_iter()
                .filter(|a| match policy.check_ip(a.ip()) {
                    Ok(()) => true,
                    Err(r) => {
                        refused.get_or_insert(r);
                        false
                    }
                })
                .collect();
            if allowed.is_empty() {
                let why = refused.map_or_else(|| "no address".to_owned(), |r| r.0);
                let err: Box<dyn std::error::Error + Send + Sync> =
                    Box::new(Refused(format!("{host} resolves to {why}")));
                return Err(err);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Whether a listen address given by an operator (`--host`: an IP address
/// or a name) is loopback only: a loopback address (IPv4-mapped forms
/// included), or a name all of whose addresses are loopback. `0.0.0.0`,
/// `::`, any other address and a name that does not resolve are not.
pub async fn is_loopback_host(host: &str) -> bool {
    let host = host.trim();
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return canonical(ip).is_loopback();
    }
    let lookup = tokio::net::lookup_host((bare.to_owned(), 0));
    match tokio::time::timeout(Duration::from_secs(2), lookup).await {
        Ok(Ok(addrs)) => {
            let addrs: Vec<SocketAddr> = addrs.collect();
            !addrs.is_empty() && addrs.iter().all(|a| canonical(a.ip()).is_loopback())
        }
        _ => false,
    }
}

/// The refusal in an error's source chain, if the policy caused it.
pub fn refusal_in(err: &(dyn std::error::Error + 'static)) -> Option<Refused> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<Refused>() {
            return Some(r.clone());
        }
        cur = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_addresses_are_refused_by_default() {
        let p = UrlPolicy::new();
        for bad in [
            "http://127.0.0.1/hook",
            "http://10.1.2.3/",
            "http://172.20.0.1/",
            "http://192.168.1.1/",
            "http://169.254.169.254/latest/meta-data",
            "http://0.0.0.0/",
            "http://[::1]/",
            "http://[::ffff:10.0.0.1]/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://100.64.0.1/",
            "http://localhost:8080/",
            "http://api.localhost/",
            "ftp://example.com/",
            "file:///etc/passwd",
            "http://user:pw@example.com/",
            "not a url",
        ] {
            assert!(p.check_url(bad).is_err(), "{bad} should be refused");
        }
        for good in [
            "https://hooks.example.com/a2a",
            "http://93.184.216.34/x",
            "https://[2606:4700::1111]/",
        ] {
            assert!(p.check_url(good).is_ok(), "{good} should be allowed");
        }
        let why = p.check_url("http://10.0.0.7/").unwrap_err().0;
        assert!(why.contains("private"), "{why}");
    }

    #[test]
    fn allow_list_opens_exceptions() {
        let p = UrlPolicy::new().allow_loopback().allow_net("10.9.0.0/16");
        assert!(p.check_url("http://127.0.0.1:9/").is_ok());
        assert!(p.check_url("http://localhost:9/").is_ok());
        assert!(p.check_url("http://[::1]:9/").is_ok());
        assert!(p.check_url("http://10.9.3.4/").is_ok());
        assert!(p.check_url("http://10.8.3.4/").is_err());
        let https = UrlPolicy::new().require_https(true);
        assert!(https.check_url("http://example.com/").is_err());
        assert!(https.check_url("https://example.com/").is_ok());
    }

    /// Every spelling of a loopback address: refused by default, allowed
    /// by `allow_loopback`.
    const LOOPBACK_SPELLINGS: &[&str] = &[
        "http://127.0.0.1/hook",
        "http://127.1/hook",
        "http://127.0.1/hook",
        "http://0x7f000001/hook",
        "http://0x7f.0.0.1/hook",
        "http://2130706433/hook",
        "http://0177.0.0.1/hook",
        "http://127.255.255.254/hook",
        "http://[::1]/hook",
        "http://[0:0:0:0:0:0:0:1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://[::ffff:7f00:1]/hook",
        "http://localhost/hook",
        "http://LOCALHOST./hook",
        "http://a.b.localhost/hook",
    ];

    #[test]
    fn every_loopback_spelling_is_recognised() {
        let strict = UrlPolicy::new();
        let open = UrlPolicy::new().allow_loopback();
        for url in LOOPBACK_SPELLINGS {
            let why = strict.check_url(url).expect_err(url).0;
            assert!(why.contains("loopback"), "{url}: {why}");
            if !url.contains("a.b.localhost") {
                assert!(open.check_url(url).is_ok(), "{url} should be allowed");
            }
        }
        assert!(!strict.allows_loopback());
        assert!(open.allows_loopback());
        // NAT64 and IPv4-compatible forms of loopback stay refused.
        for url in ["http://[64:ff9b::7f00:1]/", "http://[::127.0.0.1]/"] {
            assert!(open.check_url(url).is_err(), "{url}");
        }
    }

    #[tokio::test]
    async fn loopback_listen_addresses() {
        for host in [
            "127.0.0.1",
            "127.0.0.2",
            "::1",
            "[::1]",
            "::ffff:127.0.0.1",
            "localhost",
        ] {
            assert!(is_loopback_host(host).await, "{host}");
        }
        for host in [
            "0.0.0.0",
            "::",
            "[::]",
            "10.0.0.1",
            "192.168.1.7",
            "fe80::1",
        ] {
            assert!(!is_loopback_host(host).await, "{host}");
        }
    }

    #[tokio::test]
    async fn resolver_drops_refused_addresses() {
        use reqwest::dns::Resolve;
        let r = GuardedResolver {
            policy: Arc::new(UrlPolicy::new()),
        };
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        let err = match r.resolve(name).await {
            Ok(_) => panic!("localhost must be refused"),
            Err(e) => e,
        };
        assert!(refusal_in(&*err).is_some());
        let open = GuardedResolver {
            policy: Arc::new(UrlPolicy::new().allow_loopback()),
        };
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        assert!(open.resolve(name).await.is_ok());
    }
}
