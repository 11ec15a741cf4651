//! The image cache: OCI images pulled over the distribution API, checked, unpacked once and
//! shared read-only (DESIGN §12).
//!
//! Layout under `<data_dir>/images`: `<hex>/rootfs` (the image's layers merged, see
//! `unpack`) and `<hex>/image.json` (what `GET /v1/images` shows), where `<hex>` is the
//! manifest's sha256 — content-addressed, so two tags of one image share one root. A pull
//! builds in `tmp/<uuid>` and renames into place, so a failed pull (registry down, a digest
//! that does not match, a layer that does not unpack) leaves nothing behind, and a crash a
//! temporary directory `open` removes. Layer blobs are deleted once applied.
//!
//! Checks: `oci-client` resolves a manifest list for the host's platform and checks each blob
//! it streams against the digest that named it (and a manifest pulled by digest); the
//! config's bytes are checked here against the manifest's config digest.
//!
//! Once: pulls of one reference are serialised on a per-reference lock and the second asker
//! finds the first one's result, so twenty sessions created at once fetch each blob once. A
//! session on a reference already in the cache does not ask the registry again (the cache's
//! `references`); `POST /v1/images/pull` always does.
//!
//! In use: a session holds an [`ImageLease`] for as long as it runs; `delete` refuses an
//! image with a lease. Deliberately absent: events and metrics (the service reports what a
//! pull says through its progress callback), and layers shared between images.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::spec::{Credentials, Registry};
use super::unpack::{apply_layer, tree_bytes};

/// Why an image could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("image \"{0}\" is not a valid reference: {1}")]
    InvalidReference(String, String),
    #[error("image \"{0}\" was not found in its registry")]
    NotFound(String),
    #[error("image \"{0}\": the registry is unreachable: {1}")]
    Unreachable(String, String),
    #[error("image \"{0}\": {1} does not match its digest")]
    DigestMismatch(String, String),
    #[error("image \"{0}\": the registry refused: {1}")]
    Registry(String, String),
    #[error("image \"{0}\": {1}")]
    Unpack(String, String),
    #[error("no image \"{0}\" in the cache")]
    UnknownDigest(String),
    #[error("image \"{0}\" is used by {1} session(s)")]
    InUse(String, usize),
}

/// What a cached image is, as `GET /v1/images` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageInfo {
    /// The manifest's digest (`sha256:…`).
    pub digest: String,
    /// The references pulled into it.
    pub references: Vec<String>,
    /// Bytes of the unpacked root.
    pub size_bytes: u64,
    pub layers: usize,
    /// The image config's `Env` (`NAME=value`), `WorkingDir` and `User`.
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    pub user: Option<String>,
    /// RFC 3339.
    pub pulled_at: String,
    /// Sessions using it now.
    #[serde(default)]
    pub in_use: usize,
}

/// A pull's progress, for `image:pull` events.
#[derive(Clone, Debug, Serialize)]
pub struct PullProgress {
    pub image: String,
    /// `manifest`, `layer`, `done`, `cached`.
    pub phase: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<usize>,
    pub layers: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
}

/// Where progress goes.
pub type Progress<'a> = &'a (dyn Fn(PullProgress) + Send + Sync);

/// The cache; cheap to clone.
#[derive(Clone)]
pub struct ImageCache {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    registries: Vec<Registry>,
    client: Client,
    flights: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Reference (as written, and in full) → manifest digest.
    known: HashMap<String, String>,
    leases: HashMap<String, usize>,
}

/// A session's hold on an image: while it lives the image cannot be deleted.
pub struct ImageLease {
    inner: Arc<Inner>,
    pub info: ImageInfo,
    pub rootfs: PathBuf,
}

impl Drop for ImageLease {
    fn drop(&mut self) {
        let mut state = self.inner.state.lock().unwrap();
        if let Some(n) = state.leases.get_mut(&self.info.digest) {
            *n = n.saturating_sub(1);
        }
    }
}

impl std::fmt::Debug for ImageLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageLease")
            .field("digest", &self.info.digest)
            .finish()
    }
}

impl ImageCache {
    /// The cache under `dir` (made if missing); half-finished pulls are removed.
    pub fn open(dir: &Path, registries: Vec<Registry>) -> std::io::Result<ImageCache> {
        fs::create_dir_all(dir)?;
        let _ = fs::remove_dir_all(dir.join("tmp"));
        fs::create_dir_all(dir.join("tmp"))?;
        let insecure = registries
            .iter()
            .filter(|r| r.insecure)
            .map(|r| r.host.clone())
            .collect();
        // The bridge's choice too (`mcp`): ring, installed once per process if none is.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(insecure),
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(120)),
            max_concurrent_download: 4,
            ..ClientConfig::default()
        });
        let cache = ImageCache {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                registries,
                client,
                flights: Mutex::default(),
                state: Mutex::default(),
            }),
        };
        let mut state = cache.inner.state.lock().unwrap();
        for info in cache.read_all() {
            for reference in &info.references {
                state.known.insert(reference.clone(), info.digest.clone());
            }
        }
        drop(state);
        Ok(cache)
    }

    /// The image `reference` names, pulled if the cache does not know it, leased.
    pub async fn lease(
        &self,
        reference: &str,
        progress: Progress<'_>,
    ) -> Result<ImageLease, ImageError> {
        if let Some(lease) = self.lease_known(reference) {
            progress(PullProgress::of(reference, "cached", &lease.info));
            return Ok(lease);
        }
        let flight = self.flight(reference);
        let _turn = flight.lock().await;
        if let Some(lease) = self.lease_known(reference) {
            progress(PullProgress::of(reference, "cached", &lease.info));
            return Ok(lease);
        }
        let info = self.fetch(reference, progress).await?;
        self.lease_digest(&info.digest)
    }

    /// Pulls `reference` from its registry (even when cached: a tag may have moved).
    pub async fn pull(
        &self,
        reference: &str,
        progress: Progress<'_>,
    ) -> Result<ImageInfo, ImageError> {
        let flight = self.flight(reference);
        let _turn = flight.lock().await;
        self.fetch(reference, progress).await
    }

    /// Every cached image.
    pub fn list(&self) -> Vec<ImageInfo> {
        let state = self.inner.state.lock().unwrap();
        let mut all = self.read_all();
        for info in &mut all {
            info.in_use = state.leases.get(&info.digest).copied().unwrap_or(0);
        }
        all.sort_by(|a, b| a.pulled_at.cmp(&b.pulled_at));
        all
    }

    /// Bytes the cache holds.
    pub fn bytes(&self) -> u64 {
        self.read_all().iter().map(|i| i.size_bytes).sum()
    }

    /// Removes an image no session uses.
    pub fn delete(&self, digest: &str) -> Result<ImageInfo, ImageError> {
        let hex = digest_hex(digest).ok_or_else(|| ImageError::UnknownDigest(digest.into()))?;
        let mut state = self.inner.state.lock().unwrap();
        let info = read_info(&self.inner.dir.join(hex))
            .ok_or_else(|| ImageError::UnknownDigest(digest.into()))?;
        match state.leases.get(&info.digest) {
            Some(&n) if n > 0 => return Err(ImageError::InUse(info.digest, n)),
            _ => {}
        }
        state.known.retain(|_, d| *d != info.digest);
        let doomed = self
            .inner
            .dir
            .join("tmp")
            .join(uuid::Uuid::now_v7().to_string());
        let io = |e: std::io::Error| ImageError::Unpack(info.digest.clone(), e.to_string());
        fs::rename(self.inner.dir.join(hex), &doomed).map_err(io)?;
        drop(state);
        fs::remove_dir_all(&doomed).map_err(io)?;
        Ok(info)
    }

    fn flight(&self, reference: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut flights = self.inner.flights.lock().unwrap();
        flights.retain(|_, f| Arc::strong_count(f) > 1);
        flights.entry(reference.to_string()).or_default().clone()
    }

    fn lease_known(&self, reference: &str) -> Option<ImageLease> {
        let digest = self
            .inner
            .state
            .lock()
            .unwrap()
            .known
            .get(reference)?
            .clone();
        self.lease_digest(&digest).ok()
    }

    /// A lease on a cached image by its digest (no registry asked).
    pub fn lease_cached(&self, digest: &str) -> Result<ImageLease, ImageError> {
        self.lease_digest(digest)
    }

    fn lease_digest(&self, digest: &str) -> Result<ImageLease, ImageError> {
        let hex = digest_hex(digest).ok_or_else(|| ImageError::UnknownDigest(digest.into()))?;
        let mut state = self.inner.state.lock().unwrap();
        let dir = self.inner.dir.join(hex);
        let info = read_info(&dir).ok_or_else(|| ImageError::UnknownDigest(digest.into()))?;
        *state.leases.entry(info.digest.clone()).or_default() += 1;
        Ok(ImageLease {
            inner: self.inner.clone(),
            info,
            rootfs: dir.join("rootfs"),
        })
    }

    fn read_all(&self) -> Vec<ImageInfo> {
        let Ok(entries) = fs::read_dir(&self.inner.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| e.file_name() != "tmp")
            .filter_map(|e| read_info(&e.path()))
            .collect()
    }

    fn auth(&self, reference: &Reference) -> RegistryAuth {
        let host = reference.registry();
        let found = self.inner.registries.iter().find(|r| r.host == host);
        match found.map(|r| &r.credentials) {
            Some(Credentials::Basic { username, password }) => {
                RegistryAuth::Basic(username.clone(), password.clone())
            }
            Some(Credentials::Bearer(token)) => RegistryAuth::Bearer(token.clone()),
            _ => RegistryAuth::Anonymous,
        }
    }

    /// Resolves, downloads, checks and unpacks `name`; records it under its references.
    async fn fetch(&self, name: &str, progress: Progress<'_>) -> Result<ImageInfo, ImageError> {
        let reference: Reference = name.parse().map_err(|e: oci_client::ParseError| {
            ImageError::InvalidReference(name.into(), e.to_string())
        })?;
        let auth = self.auth(&reference);
        let client = &self.inner.client;
        let (manifest, digest, config) = client
            .pull_manifest_and_config(&reference, &auth)
            .await
            .map_err(|e| classify(name, e))?;
        check_bytes(
            name,
            "the config",
            &manifest.config.digest,
            config.as_bytes(),
        )?;
        let hex = digest_hex(&digest)
            .ok_or_else(|| ImageError::Registry(name.into(), format!("manifest digest {digest}")))?
            .to_string();
        let final_dir = self.inner.dir.join(&hex);
        if read_info(&final_dir).is_some() {
            return self.remember(name, &reference, &final_dir);
        }
        let layers = manifest.layers.len();
        progress(PullProgress {
            image: name.into(),
            phase: "manifest",
            digest: Some(digest.clone()),
            layer: None,
            layers,
            size_bytes: None,
        });
        let tmp = self
            .inner
            .dir
            .join("tmp")
            .join(uuid::Uuid::now_v7().to_string());
        let built = self
            .build(name, &reference, &auth, &manifest.layers, &tmp, progress)
            .await;
        let result = built.and_then(|()| {
            let mut info = image_info(name, &digest, layers, &config, &tmp.join("rootfs"))?;
            info.references = vec![name.to_string(), reference.whole()];
            info.references.dedup();
            let json = serde_json::to_vec_pretty(&info).unwrap_or_default();
            let io = |e: std::io::Error| ImageError::Unpack(name.into(), e.to_string());
            fs::write(tmp.join("image.json"), json).map_err(io)?;
            match fs::rename(&tmp, &final_dir) {
                Ok(()) => Ok(()),
                Err(_) if read_info(&final_dir).is_some() => Ok(()),
                Err(e) => Err(io(e)),
            }
        });
        let _ = fs::remove_dir_all(&tmp);
        result?;
        let info = self.remember(name, &reference, &final_dir)?;
        progress(PullProgress::of(name, "done", &info));
        Ok(info)
    }

    async fn build(
        &self,
        name: &str,
        reference: &Reference,
        auth: &RegistryAuth,
        layers: &[oci_client::manifest::OciDescriptor],
        tmp: &Path,
        progress: Progress<'_>,
    ) -> Result<(), ImageError> {
        let io = |e: std::io::Error| ImageError::Unpack(name.into(), e.to_string());
        let rootfs = tmp.join("rootfs");
        fs::create_dir_all(&rootfs).map_err(io)?;
        let _ = auth;
        for (index, layer) in layers.iter().enumerate() {
            if layer.media_type.contains("zstd") || layer.media_type.contains("nondistributable") {
                return Err(ImageError::Unpack(
                    name.into(),
                    format!(
                        "layer {} has an unsupported media type {}",
                        layer.digest, layer.media_type
                    ),
                ));
            }
            progress(PullProgress {
                image: name.into(),
                phase: "layer",
                digest: Some(layer.digest.clone()),
                layer: Some(index + 1),
                layers: layers.len(),
                size_bytes: Some(layer.size.max(0) as u64),
            });
            let blob = tmp.join("layer.blob");
            let file = tokio::fs::File::create(&blob).await.map_err(io)?;
            self.inner
                .client
                .pull_blob(reference, layer, file)
                .await
                .map_err(|e| classify(name, e))?;
            let (blob2, root2) = (blob.clone(), rootfs.clone());
            tokio::task::spawn_blocking(move || apply_layer(&blob2, &root2))
                .await
                .map_err(|e| ImageError::Unpack(name.into(), e.to_string()))?
                .map_err(|e| {
                    ImageError::Unpack(name.into(), format!("layer {}: {e}", layer.digest))
                })?;
            fs::remove_file(&blob).map_err(io)?;
        }
        Ok(())
    }

    fn remember(
        &self,
        name: &str,
        reference: &Reference,
        dir: &Path,
    ) -> Result<ImageInfo, ImageError> {
        let mut info = read_info(dir).ok_or_else(|| ImageError::UnknownDigest(name.into()))?;
        let mut state = self.inner.state.lock().unwrap();
        for r in [name.to_string(), reference.whole()] {
            // A tag moved: the older image no longer answers to it.
            state.known.insert(r.clone(), info.digest.clone());
            if !info.references.contains(&r) {
                info.references.push(r);
            }
        }
        let json = serde_json::to_vec_pretty(&info).unwrap_or_default();
        let _ = fs::write(dir.join("image.json"), json);
        Ok(info)
    }
}

impl PullProgress {
    fn of(image: &str, phase: &'static str, info: &ImageInfo) -> PullProgress {
        PullProgress {
            image: image.into(),
            phase,
            digest: Some(info.digest.clone()),
            layer: None,
            layers: info.layers,
            size_bytes: Some(info.size_bytes),
        }
    }
}

fn read_info(dir: &Path) -> Option<ImageInfo> {
    let bytes = fs::read(dir.join("image.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The hex of a `sha256:` digest, when it is one.
pub fn digest_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
    .then_some(hex)
}

fn check_bytes(name: &str, what: &str, digest: &str, bytes: &[u8]) -> Result<(), ImageError> {
    let actual = format!("sha256:{:x}", Sha256::digest(bytes));
    if actual == digest {
        Ok(())
    } else {
        Err(ImageError::DigestMismatch(
            name.into(),
            format!("{what} ({actual}, expected {digest})"),
        ))
    }
}

fn image_info(
    name: &str,
    digest: &str,
    layers: usize,
    config: &str,
    rootfs: &Path,
) -> Result<ImageInfo, ImageError> {
    let value: serde_json::Value = serde_json::from_str(config)
        .map_err(|e| ImageError::Registry(name.into(), format!("the image config: {e}")))?;
    let section = &value["config"];
    let text = |key: &str| {
        section[key]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let env = section["Env"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    Ok(ImageInfo {
        digest: digest.to_string(),
        references: Vec::new(),
        size_bytes: tree_bytes(rootfs),
        layers,
        env,
        working_dir: text("WorkingDir"),
        user: text("User"),
        pulled_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        in_use: 0,
    })
}

/// An `oci-client` error as one of ours.
fn classify(name: &str, err: OciDistributionError) -> ImageError {
    let text = err.to_string();
    match err {
        OciDistributionError::ImageManifestNotFoundError(_) => ImageError::NotFound(name.into()),
        OciDistributionError::RegistryError { ref envelope, .. }
            if envelope.errors.iter().any(|e| {
                matches!(
                    e.code,
                    OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown
                )
            }) =>
        {
            ImageError::NotFound(name.into())
        }
        OciDistributionError::DigestError(_) => ImageError::DigestMismatch(name.into(), text),
        OciDistributionError::RequestError(ref e) if e.is_connect() || e.is_timeout() => {
            ImageError::Unreachable(name.into(), text)
        }
        OciDistributionError::RequestError(_) | OciDistributionError::IoError(_) => {
            ImageError::Unreachable(name.into(), text)
        }
        _ => ImageError::Registry(name.into(), text),
    }
}
