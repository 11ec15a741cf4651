//! OpenTelemetry traces (DESIGN §9) against the real daemon: the span tree and its attributes
//! exported to real OTLP receivers over gRPC and HTTP/protobuf (`traces`), the other doors'
//! incoming context (`doors`), and the context handed onward to hooks and shells with traces
//! off (`propagation`). `receiver` holds the receivers.

mod doors;
mod propagation;
mod receiver;
mod traces;
