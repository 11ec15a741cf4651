//! Which network addresses `web_fetch` may connect to, and the DNS resolver that enforces it.
//!
//! Server-side request forgery is refused by address, not by name: a host name is resolved and
//! only addresses the [`AddressPolicy`] allows are handed to the connector, so the connection
//! goes to an address that was checked (no second lookup can swap it). Literal IP hosts never
//! reach a resolver, so the tool checks them itself before each request. This module knows
//! nothing of URLs or HTTP.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// An address the policy refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "refused to connect to {address} ({reason} address{via}); private, loopback, link-local and metadata addresses are refused unless [web_fetch] allow_private_addresses is on"
)]
pub struct BlockedAddress {
    pub address: IpAddr,
    pub reason: &'static str,
    /// `", resolved from \"host\""` when the address came from DNS; empty for literals.
    via: String,
}

impl BlockedAddress {
    fn resolved_from(mut self, host: &str) -> BlockedAddress {
        self.via = format!(", resolved from \"{host}\"");
        self
    }
}

/// Which addresses may be connected to.
///
/// By default every non-public address is refused; `allow_private` lifts that, and
/// [`AddressPolicy::allowing`] lifts it for single addresses (embedding, tests).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    allow_private: bool,
    exceptions: Vec<IpAddr>,
}

impl AddressPolicy {
    /// Refuses every non-public address.
    pub fn deny_private() -> AddressPolicy {
        AddressPolicy::default()
    }

    /// Allows every address (`[web_fetch] allow_private_addresses = true`).
    pub fn allow_private() -> AddressPolicy {
        AddressPolicy {
            allow_private: true,
            exceptions: Vec::new(),
        }
    }

    /// The same policy, with `address` allowed whatever its range.
    pub fn allowing(mut self, address: IpAddr) -> AddressPolicy {
        self.exceptions.push(address);
        self
    }

    /// Whether a connection to `address` is allowed.
    pub fn check(&self, address: IpAddr) -> Result<(), BlockedAddress> {
        if self.allow_private || self.exceptions.contains(&address) {
            return Ok(());
        }
        match non_public_reason(address) {
            None => Ok(()),
            Some(reason) => Err(BlockedAddress {
                address,
                reason,
                via: String::new(),
            }),
        }
    }
}

/// Why `address` is not a public unicast address, or `None` when it is.
pub fn non_public_reason(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    let reason = if ip == Ipv4Addr::new(169, 254, 169, 254) {
        "cloud metadata"
    } else if ip.is_loopback() {
        "loopback"
    } else if ip.is_private() {
        "private"
    } else if ip.is_link_local() {
        "link-local"
    } else if a == 100 && (64..128).contains(&b) {
        "shared (CGNAT)"
    } else if a == 0 {
        "unspecified"
    } else if ip.is_broadcast() {
        "broadcast"
    } else if ip.is_multicast() {
        "multicast"
    } else if a >= 240 {
        "reserved"
    } else if (a, b, c) == (192, 0, 0) {
        // 192.0.0.0/24: protocol assignments (also where some clouds put metadata services).
        "reserved"
    } else if a == 198 && (b == 18 || b == 19) {
        "benchmarking"
    } else if matches!((a, b, c), (192, 0, 2) | (198, 51, 100) | (203, 0, 113)) {
        "documentation"
    } else {
        return None;
    };
    Some(reason)
}

fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    let segments = ip.segments();
    // Addresses that carry an IPv4 address are judged by it: mapped (::ffff:a.b.c.d),
    // compatible (::a.b.c.d) and the well-known NAT64 prefix (64:ff9b::/96).
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_reason(v4);
    }
    let embedded_v4 = || {
        let [.., a, b, c, d] = ip.octets();
        Ipv4Addr::new(a, b, c, d)
    };
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return v4_reason(embedded_v4());
    }
    let reason = if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        "cloud metadata"
    } else if ip.is_loopback() {
        "loopback"
    } else if ip.is_unspecified() {
        "unspecified"
    } else if segments[..6] == [0; 6] {
        return v4_reason(embedded_v4()).or(Some("reserved"));
    } else if segments[0] & 0xfe00 == 0xfc00 {
        "unique local (private)"
    } else if segments[0] & 0xffc0 == 0xfe80 {
        "link-local"
    } else if segments[0] & 0xffc0 == 0xfec0 {
        "site-local"
    } else if ip.is_multicast() {
        "multicast"
    } else if segments[0] == 0x2001 && segments[1] == 0x0db8 {
        "documentation"
    } else if segments[..3] == [0x64, 0xff9b, 1] {
        "local-use NAT64"
    } else {
        return None;
    };
    Some(reason)
}

/// A DNS resolver that hands the connector only the addresses the policy allows.
#[derive(Clone, Debug)]
pub struct CheckedResolver {
    policy: Arc<AddressPolicy>,
}

impl CheckedResolver {
    pub fn new(policy: Arc<AddressPolicy>) -> CheckedResolver {
        CheckedResolver { policy }
    }
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // Port 0: the connector puts the URL's port in.
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut first_refusal = None;
            let mut allowed = Vec::with_capacity(resolved.len());
            for address in resolved {
                match policy.check(address.ip()) {
                    Ok(()) => allowed.push(address),
                    Err(refused) => {
                        first_refusal.get_or_insert(refused);
                    }
                }
            }
            if allowed.is_empty()
                && let Some(refused) = first_refusal
            {
                return Err(Box::new(refused.resolved_from(&host)) as _);
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_classified() {
        let cases: &[(&str, Option<&str>)] = &[
            ("127.0.0.1", Some("loopback")),
            ("127.255.0.9", Some("loopback")),
            ("10.1.2.3", Some("private")),
            ("172.16.0.1", Some("private")),
            ("172.31.255.255", Some("private")),
            ("172.32.0.1", None),
            ("192.168.1.1", Some("private")),
            ("169.254.169.254", Some("cloud metadata")),
            ("169.254.1.1", Some("link-local")),
            ("100.64.0.1", Some("shared (CGNAT)")),
            ("100.127.255.255", Some("shared (CGNAT)")),
            ("100.128.0.1", None),
            ("0.0.0.0", Some("unspecified")),
            ("255.255.255.255", Some("broadcast")),
            ("224.0.0.1", Some("multicast")),
            ("240.0.0.1", Some("reserved")),
            ("192.0.0.192", Some("reserved")),
            ("8.8.8.8", None),
            ("93.184.216.34", None),
            ("::1", Some("loopback")),
            ("::", Some("unspecified")),
            ("fd00:ec2::254", Some("cloud metadata")),
            ("fd12:3456::1", Some("unique local (private)")),
            ("fc00::1", Some("unique local (private)")),
            ("fe80::1", Some("link-local")),
            ("ff02::1", Some("multicast")),
            ("::ffff:127.0.0.1", Some("loopback")),
            ("::ffff:169.254.169.254", Some("cloud metadata")),
            ("::ffff:8.8.8.8", None),
            ("::10.0.0.1", Some("private")),
            ("64:ff9b::a00:1", Some("private")),
            ("64:ff9b::808:808", None),
            ("2001:db8::1", Some("documentation")),
            ("2606:4700:4700::1111", None),
        ];
        for (text, expected) in cases {
            let address: IpAddr = text.parse().unwrap();
            assert_eq!(non_public_reason(address), *expected, "{text}");
        }
    }

    #[test]
    fn the_policy_allows_what_it_is_told_to() {
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let private: IpAddr = "10.0.0.1".parse().unwrap();
        let public: IpAddr = "8.8.8.8".parse().unwrap();
        let strict = AddressPolicy::deny_private();
        assert!(strict.check(public).is_ok());
        let refused = strict.check(loopback).unwrap_err();
        assert_eq!(refused.reason, "loopback");
        assert!(refused.to_string().contains("allow_private_addresses"));
        let excepted = AddressPolicy::deny_private().allowing(loopback);
        assert!(excepted.check(loopback).is_ok());
        assert!(excepted.check(private).is_err());
        assert!(AddressPolicy::allow_private().check(private).is_ok());
    }
}
