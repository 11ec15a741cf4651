//! A real OCI registry on loopback with a test image in it, built offline: a root filesystem
//! from Debian's `busybox-static` (with a marker file and an `Env` entry), made an OCI image
//! with `umoci`, pushed with `skopeo` to Debian's `docker-registry` (the distribution
//! project's registry) started on port 0 with a temporary config. Its log counts blob GETs.
//!
//! `benches/environment.rs` includes this file as a module (`#[path]`), so the bench measures
//! the image the tests use: what it needs of its parent is `tool_on_path` alone.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What the test image holds: `/etc/marker` with this text.
pub const MARKER: &str = "toold-test-image";
/// And this `Env` entry.
pub const IMAGE_ENV: &str = "TOOLD_IMAGE_MARK=from-the-image";

/// The programs the fixture needs, or why not (CI installs them: `.ci/run`).
pub fn available() -> Result<(), String> {
    for tool in ["docker-registry", "umoci", "skopeo"] {
        if super::tool_on_path(tool).is_none() {
            return Err(format!("{tool} is not installed"));
        }
    }
    if !Path::new("/bin/busybox").is_file() {
        return Err("busybox-static is not installed (/bin/busybox)".into());
    }
    Ok(())
}

/// The OCI layout with the image, built once per test process.
fn layout() -> &'static Path {
    static LAYOUT: OnceLock<PathBuf> = OnceLock::new();
    LAYOUT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        build_layout(&dir);
        dir
    })
}

fn run(command: &mut Command) {
    let out = command.output().expect("fixture tool starts");
    assert!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn build_layout(dir: &Path) {
    let image = dir.join("img");
    let bundle = dir.join("bundle");
    let tag = format!("{}:latest", image.display());
    run(Command::new("umoci").args(["init", "--layout"]).arg(&image));
    run(Command::new("umoci").args(["new", "--image", &tag]));
    run(Command::new("umoci")
        .args(["unpack", "--image", &tag])
        .arg(&bundle));
    let rootfs = bundle.join("rootfs");
    for sub in ["bin", "etc", "tmp", "workspace"] {
        std::fs::create_dir_all(rootfs.join(sub)).unwrap();
    }
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
    for applet in [
        "sh", "ls", "cat", "echo", "pwd", "uname", "env", "id", "mkdir", "rm", "head", "dd", "wc",
        "sleep", "touch", "wget", "test", "true", "false", "sed", "grep", "printf", "df", "yes",
        "seq", "stat", "readlink",
    ] {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet)).unwrap();
    }
    std::fs::write(rootfs.join("etc/marker"), format!("{MARKER}\n")).unwrap();
    std::fs::write(rootfs.join("etc/os-release"), "ID=toold-busybox\n").unwrap();
    run(Command::new("umoci")
        .args(["repack", "--image", &tag])
        .arg(&bundle));
    run(Command::new("umoci").args([
        "config",
        "--image",
        &tag,
        "--config.env",
        IMAGE_ENV,
        "--config.env",
        "PATH=/bin",
    ]));
}

/// A registry process with the test image pushed as `test/busybox:1`; killed when dropped.
pub struct Registry {
    child: Option<Child>,
    pub dir: tempfile::TempDir,
    /// `127.0.0.1:PORT`.
    pub host: String,
}

impl Registry {
    pub fn start() -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: info\n  formatter: text\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:0\n",
                dir.path().join("store").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("docker-registry starts");
        let mut registry = Registry {
            child: Some(child),
            dir,
            host: String::new(),
        };
        registry.host = registry.wait_listening();
        registry.push("test/busybox:1");
        registry
    }

    fn wait_listening(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(at) = self.log().split("listening on ").nth(1) {
                let host: String = at
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                    .collect();
                if host.contains(':') {
                    return host;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("docker-registry did not listen within 30 s: {}", self.log());
    }

    /// Pushes the test image under `name` (`repo:tag`).
    pub fn push(&self, name: &str) {
        let source = format!("oci:{}:latest", layout().join("img").display());
        run(Command::new("skopeo").args([
            "copy",
            "--quiet",
            "--dest-tls-verify=false",
            &source,
            &format!("docker://{}/{name}", self.host),
        ]));
    }

    /// `host/name`.
    pub fn image(&self, name: &str) -> String {
        format!("{}/{name}", self.host)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// The access log's GETs of blobs (`GET /v2/…/blobs/sha256:…` answered 200).
    pub fn blob_gets(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| l.contains("\"GET /v2/") && l.contains("/blobs/sha256:"))
            .filter_map(|l| l.split("/blobs/").nth(1))
            .filter_map(|rest| rest.split(' ').next())
            .map(str::to_owned)
            .collect()
    }

    /// The stored blobs' data files (to tamper with one).
    pub fn blob_files(&self) -> Vec<PathBuf> {
        let root = self
            .dir
            .path()
            .join("store/docker/registry/v2/blobs/sha256");
        let mut out = Vec::new();
        for prefix in std::fs::read_dir(root).unwrap().flatten() {
            for blob in std::fs::read_dir(prefix.path()).unwrap().flatten() {
                out.push(blob.path().join("data"));
            }
        }
        out
    }

    /// Stops the registry (a registry that is down).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A `[[environments.registries]]` entry for it (plain HTTP).
    pub fn settings(&self) -> String {
        format!(
            "[[environments.registries]]\nhost = \"{}\"\ninsecure = true\n",
            self.host
        )
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}
