//! toold hosts an LLM agent's tool system as a network service.
//!
//! A tour of the crate, from the contract outwards:
//!
//! - [`tool`]: what a tool is. [`tool::ToolSpec`] declares metadata with fail-closed defaults;
//!   the [`tool::Tool`] trait validates and executes.
//! - [`registry`]: which tools exist, by name and alias; a session's frozen
//!   [`registry::ToolPool`]; definitions in each provider's format; provider call shapes in
//!   and result shapes out.
//! - [`dispatch`]: a batch of calls becomes one result per call, in order. Calls stream in,
//!   are partitioned into parallel and serial groups, and pass through a `tower` pipeline of
//!   phases (validation, permission, hooks, execution, offload, audit).
//! - [`tools`]: the built-in tools and the path rules they share.
//! - [`mcp`]: the bridge: external MCP servers' tools in a session's pool.
//! - [`provider`]: tools provided by connected programs (and the `agent` tool's executor).
//! - [`permission`], [`hooks`]: the decisions the pipeline asks for.
//! - [`session`]: state calls read and leave behind.
//! - [`shell_syntax`]: what a bash line does, read from its syntax tree (for `bash`'s flags and
//!   the permission rules).
//! - [`event`]: lifecycle events, fanned out without ever blocking dispatch.
//! - [`workspace`]: a session's filesystem as a copy-on-write view; files, archives,
//!   snapshots' layers.
//! - [`config`]: settings, from file to environment to flags.
//!
//! - [`service`]: the typed façade every door calls; [`store`]: persistence behind traits.
//! - [`api`]: the doors (HTTP with SSE, gRPC) that translate wire formats into service calls,
//!   behind one gate, on one listener.
//! - [`server`]: wiring from settings to a listening daemon, and its shutdown.
//! - [`telemetry`]: the metrics toold reports and the Prometheus recorder they land in.
//! - [`client`]: the terminal client (`toold sessions | tools | call | tail | approvals`),
//!   which speaks to a daemon over its HTTP API and imports none of the modules above.
//!
//! The core modules above know nothing of HTTP, gRPC or SQL; only `api` names the doors'
//! crates (and `mcp`, the bridge, `rmcp` too) and only `store` names SQL.

pub mod api;
pub mod cli;
pub mod client;
pub mod config;
pub mod dispatch;
pub mod environment;
pub mod event;
pub mod hooks;
pub mod mcp;
pub mod permission;
pub mod provider;
pub mod registry;
pub mod server;
pub mod service;
pub mod session;
pub mod shell_syntax;
pub mod store;
pub mod telemetry;
pub mod tool;
pub mod tools;
pub mod workspace;
