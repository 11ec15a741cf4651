//! The terminal client (`toold sessions | tools | call | tail | approvals | audit | cp |
//! snapshot | fork`), run as the real binary against a real daemon (`http::harness`): `call`'s
//! exit codes (0, 1, 2, 3, 4) and an offloaded output printed whole; `tail -o json` printing
//! every event exactly once across a graceful restart of the daemon; `approvals allow|deny`
//! resolving a waiting call; the listings; `cp` round trips of a tree and of single files,
//! `snapshot` and `fork`; on a (pseudo-)terminal, `call`'s spinner and `tail`'s colours.
//!
//! The client gets the daemon's address through `TOOLD_URL` (and the token through
//! `TOOLD_TOKEN`), as a person's shell would give it, with none of the caller's other
//! `TOOLD_*` settings.

mod approvals;
mod audit;
mod call;
mod cli;
mod environment_listing;
mod harness;
mod snapshots;
mod tail;
mod terminal;
mod transfer;
mod transfer_refusals;
