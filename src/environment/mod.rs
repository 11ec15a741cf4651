//! Environments (DESIGN §12): where a session's tools run when it asks for an image.
//!
//! [`spec`] is what a session asks for and what `[environments]` allows; [`images`] the
//! cache of OCI images pulled from registries, unpacked by [`unpack`]; [`disk`] the
//! filesystem that bounds a session's writes (`disk_mb`). Deliberately absent:
//! the session's filesystem view (`workspace`) and the sandbox commands run in
//! (`tools::shell::sandbox`): an environment hands them an image root as a lower directory.
//! Decisions: `docs/decisions/environments.md`.

pub mod disk;
pub mod images;
pub mod spec;
pub mod unpack;

pub use images::{ImageCache, ImageError, ImageInfo, ImageLease, PullProgress};
pub use spec::{
    Credentials, EnvironmentRequest, Isolation, Limits, Network, Registry, RegistrySettings,
};
