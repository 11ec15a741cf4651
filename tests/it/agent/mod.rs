//! The `agent` tool's child sessions (DESIGN §11): `children` drives the service in process
//! (what `open_child` gives, its scoped token, the parent's close and interrupt), `http` the
//! real daemon over HTTP (children made with `parent_session_id`, who may, events relayed to
//! the parent's subscribers), `grpc` the same over gRPC.

mod children;
mod grpc;
mod http;
mod provider;
