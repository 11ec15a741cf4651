//! Where a request belongs in a fleet of daemons sharing one store: which daemon runs a
//! session ([`ToolService::locate_session`]) and which should create a new one
//! ([`ToolService::place_new_session`]). The doors ask, and forward to the daemon named;
//! nothing here knows how a request travels.
//!
//! A session is run by its owner (`SessionRecord.owner`) while the owner's heartbeat is fresh
//! (younger than the fleet's node timeout). An owner gone silent runs nothing: until another
//! daemon adopts its sessions, they are [`SessionPlace::Nobody`] (the doors answer 503 with
//! `Retry-After`). A stored session this daemon owns but does not hold live is `Here`, as
//! before fleets (the service then says it is unknown); only an adoption in progress, between
//! the store's update and going live, shows it so for an instant.
//!
//! Decisions:
//! - Another daemon's place is cached for [`PLACE_TTL`], so a forwarded request costs no store
//!   read; a door that cannot reach the daemon named calls [`ToolService::forget_place`],
//!   and ownership only moves when the owner has stopped (adoption), so a stale entry
//!   costs at most one failed hop.
//! - Placement is by open sessions per live daemon, counted from the store: past
//!   `max_sessions` live sessions here, a new session goes to the live daemon with the fewest
//!   (this one when it is among the fewest). It reads every open session, which is fine for
//!   creates, not for every request.
//! - Access first: [`ToolService::locate_session`] takes the caller and answers a session the
//!   caller may not read (an agent's look at another's) with the `not_found` of a missing id,
//!   before any place is known, so neither a forward, a 503 (`Nobody`) nor a `conflict` tells
//!   an agent the session exists. The daemon a request is forwarded to checks again (it
//!   authenticates the forwarded `Authorization` itself), so the access rules are the owner's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use super::access::Access;
use super::{ServiceError, ToolService};
use crate::permission::Principal;
use crate::store::NodeRecord;

/// How long another daemon's place is trusted without reading the store again.
pub const PLACE_TTL: Duration = Duration::from_secs(1);

/// What the fleet's placement needs (from `[server]`).
#[derive(Clone, Debug)]
pub struct FleetPolicy {
    /// A daemon whose heartbeat is older than this runs nothing.
    pub node_timeout: Duration,
    /// Live sessions after which new ones are placed elsewhere; 0: no limit.
    pub max_sessions: usize,
}

impl Default for FleetPolicy {
    fn default() -> FleetPolicy {
        FleetPolicy {
            node_timeout: Duration::from_secs(15),
            max_sessions: 0,
        }
    }
}

/// Who runs a session (or should create a new one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionPlace {
    /// This daemon (or nobody at all: an unknown or closed session is answered here, as a 404).
    Here,
    /// Another live daemon, reached at `address`.
    Node { node_id: String, address: String },
    /// Nobody can run it right now: its daemon stopped and no other has adopted it yet.
    Nobody { owner: String },
}

/// The fleet's policy and the places recently read.
#[derive(Default)]
pub(super) struct Placement {
    pub(super) policy: FleetPolicy,
    cached: Mutex<HashMap<String, (SessionPlace, Instant)>>,
}

impl Placement {
    pub(super) fn new(policy: FleetPolicy) -> Placement {
        Placement {
            policy,
            cached: Mutex::default(),
        }
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, HashMap<String, (SessionPlace, Instant)>> {
        // Inserts and removes only; a panic cannot leave the map half-changed.
        self.cached.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn alive(&self, node: &NodeRecord) -> bool {
        match SystemTime::now().duration_since(node.heartbeat_at) {
            Ok(silent) => silent < self.policy.node_timeout,
            // A heartbeat from the future: another machine's clock runs ahead.
            Err(_) => true,
        }
    }
}

impl ToolService {
    /// Sets the fleet's placement policy (the defaults: 15 s node timeout, no session limit).
    pub fn with_fleet(mut self, policy: FleetPolicy) -> ToolService {
        self.placement = Placement::new(policy);
        self
    }

    /// Who runs session `id`, as `caller` may know it: see the module header.
    pub async fn locate_session(
        &self,
        caller: &Principal,
        id: &str,
    ) -> Result<SessionPlace, ServiceError> {
        // A presence test, not `session`: a hop asks on every request, and a miss there
        // formats a `not_found` only to drop it.
        if !self.live().contains_key(id) {
            // A live session's access is checked by the method that answers here.
            self.authorize(caller, id, Access::Read).await?;
        }
        self.place_of(id).await
    }

    /// Who runs session `id`, whoever asks (the caller was authorised already).
    pub(super) async fn place_of(&self, id: &str) -> Result<SessionPlace, ServiceError> {
        if self.live().contains_key(id) {
            return Ok(SessionPlace::Here);
        }
        if let Some((place, read_at)) = self.placement.cached().get(id)
            && read_at.elapsed() < PLACE_TTL
        {
            return Ok(place.clone());
        }
        let Some(record) = self.store.get_session(id).await? else {
            return Ok(SessionPlace::Here);
        };
        if record.closed_at.is_some() {
            return Ok(SessionPlace::Here);
        }
        if record.owner == self.settings.node_id {
            return Ok(SessionPlace::Here);
        }
        let place = match self.store.get_node(&record.owner).await? {
            Some(node) if self.placement.alive(&node) => SessionPlace::Node {
                node_id: node.id,
                address: node.address,
            },
            _ => SessionPlace::Nobody {
                owner: record.owner,
            },
        };
        if matches!(place, SessionPlace::Node { .. }) {
            self.placement
                .cached()
                .insert(id.to_owned(), (place.clone(), Instant::now()));
        }
        Ok(place)
    }

    /// Drops what is cached about session `id`'s place (its daemon did not answer).
    pub fn forget_place(&self, id: &str) {
        self.placement.cached().remove(id);
    }

    /// Where a new session should be created: here, unless this daemon holds `max_sessions`
    /// live sessions already and a live daemon holds fewer open ones.
    pub async fn place_new_session(&self) -> Result<SessionPlace, ServiceError> {
        let limit = self.placement.policy.max_sessions;
        if limit == 0 || self.live().len() < limit {
            return Ok(SessionPlace::Here);
        }
        let mut open: HashMap<String, usize> = HashMap::new();
        for session in self.store.list_sessions(false).await? {
            *open.entry(session.owner).or_default() += 1;
        }
        let here = open.get(&self.settings.node_id).copied().unwrap_or(0);
        let least = self
            .store
            .list_nodes()
            .await?
            .into_iter()
            .filter(|node| node.id != self.settings.node_id && self.placement.alive(node))
            .map(|node| (open.get(&node.id).copied().unwrap_or(0), node))
            .min_by(|(a, x), (b, y)| a.cmp(b).then_with(|| x.id.cmp(&y.id)));
        Ok(match least {
            Some((count, node)) if count < here => SessionPlace::Node {
                node_id: node.id,
                address: node.address,
            },
            _ => SessionPlace::Here,
        })
    }
}
