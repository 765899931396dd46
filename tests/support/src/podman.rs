//! Real containers for the stories: Debian's `podman` (with `runc`), the host's own image loaded
//! from the OCI layout `cargo xtask image` writes, and a small shell image for the container
//! deployer's `main` containers, pushed to a loopback registry.
//!
//! Podman is configured for this machine through a `containers.conf` of the run's own
//! (`CONTAINERS_CONF`): `runc` where it is installed (Debian's default `crun` fails on
//! cgroups-v1/hybrid machines), host networking (servers stay on loopback), and rlimits at the
//! machine's own hard limits (a container may not raise them).
//!
//! Missing podman or a missing image layout: one SKIP line locally, a failure with `CI=true`.
//!
//! Owns: the stories' podman configuration and images. Must not touch: images or containers it
//! did not create.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The tag the stories load the host's image under.
pub const HOST_IMAGE: &str = "localhost/deployer-host:test";

/// Podman, configured for this machine.
pub struct Podman {
    conf: PathBuf,
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false")
}

fn which(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn hard_limit(flag: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", &format!("ulimit -H{flag}")])
        .output()
        .expect("sh");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn rlimit(name: &str, flag: &str, cap: u64) -> String {
    let hard = hard_limit(flag);
    let n = hard.parse::<u64>().map_or(cap, |h| h.min(cap));
    format!("{name}={n}:{n}")
}

impl Podman {
    /// Podman and runc on this machine, or `None` (with a SKIP line) where they are missing.
    /// With `CI=true` a missing tool is a failure.
    pub fn get() -> Option<&'static Podman> {
        static PODMAN: OnceLock<Option<Podman>> = OnceLock::new();
        let podman = PODMAN.get_or_init(|| {
            let missing: Vec<&str> = ["podman", "skopeo"]
                .into_iter()
                .filter(|p| !which(p))
                .collect();
            if !missing.is_empty() {
                assert!(
                    !in_ci(),
                    "{} missing (apt install podman runc skopeo)",
                    missing.join(", ")
                );
                return None;
            }
            let dir = std::env::temp_dir().join(format!("deployer-podman-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let conf = dir.join("containers.conf");
            let runtime = if which("runc") {
                "[engine]\nruntime = \"runc\"\n"
            } else {
                ""
            };
            std::fs::write(
                &conf,
                format!(
                    "[containers]\nnetns = \"host\"\ndefault_ulimits = [\"{}\", \"{}\"]\n{runtime}",
                    rlimit("nofile", "n", 1 << 20),
                    // Higher nproc limits are refused here even below the hard limit.
                    rlimit("nproc", "u", 4096),
                ),
            )
            .unwrap();
            Some(Podman { conf })
        });
        if podman.is_none() {
            eprintln!("SKIP: podman is not installed (apt install podman runc skopeo)");
        }
        podman.as_ref()
    }

    /// The `containers.conf` to give podman (`CONTAINERS_CONF`).
    pub fn containers_conf(&self) -> &Path {
        &self.conf
    }

    /// `podman` with this machine's configuration.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new("podman");
        cmd.env("CONTAINERS_CONF", &self.conf);
        cmd
    }

    /// Runs `podman args...`; panics with its stderr if it fails. Returns stdout.
    pub fn run(&self, args: &[&str]) -> String {
        let out = self.command().args(args).output().expect("podman");
        assert!(
            out.status.success(),
            "podman {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The host's image (`cargo xtask image`'s layout in `<target>/oci-image`), loaded into
    /// podman's storage as [`HOST_IMAGE`] once per test binary. `None` (SKIP) where no image was
    /// built; with `CI=true` a failure.
    pub fn host_image(&self) -> Option<&'static str> {
        static LOADED: Mutex<bool> = Mutex::new(false);
        let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        if *loaded {
            return Some(HOST_IMAGE);
        }
        let layout = image_layout();
        if !layout.join("index.json").exists() {
            assert!(
                !in_ci(),
                "no image in {}: run `cargo xtask image` first",
                layout.display()
            );
            eprintln!(
                "SKIP: no host image in {} (run `cargo xtask image`)",
                layout.display()
            );
            return None;
        }
        let tag = image_tag(&layout);
        let out = Command::new("skopeo")
            .arg("copy")
            .arg("--quiet")
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("containers-storage:{HOST_IMAGE}"))
            .env("CONTAINERS_CONF", &self.conf)
            .output()
            .expect("skopeo");
        assert!(
            out.status.success(),
            "loading the host's image: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        *loaded = true;
        Some(HOST_IMAGE)
    }

    /// A small image with a POSIX shell and the usual tools (Debian's static busybox), pushed to
    /// the registry at `registry` (`127.0.0.1:<port>`, plain HTTP) as `<registry>/<name>`.
    /// Returns the reference to pull.
    pub fn push_shell_image(&self, registry: &str, name: &str) -> String {
        let local = format!("localhost/{name}");
        self.build_shell_image(&local);
        let remote = format!("{registry}/{name}");
        self.run(&["push", "--quiet", "--tls-verify=false", &local, &remote]);
        remote
    }

    /// The shell image of [`Self::push_shell_image`] in podman's storage as `local`
    /// (`localhost/<name>:<tag>`), as `cargo xtask dev --pod-runtime podman` builds its
    /// example's image.
    pub fn build_shell_image(&self, local: &str) {
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.exists());
        let busybox = busybox.unwrap_or_else(|| {
            panic!("busybox is missing (apt install busybox-static): the shell image needs it")
        });
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(root.path().join("tmp")).unwrap();
        std::fs::copy(busybox, bin.join("busybox")).unwrap();
        // Every applet as a relative link to /bin/busybox (`busybox --install` would link to
        // this machine's path).
        let list = Command::new(busybox).arg("--list").output().unwrap();
        assert!(list.status.success(), "busybox --list");
        for applet in String::from_utf8_lossy(&list.stdout).lines() {
            if applet != "busybox" {
                std::os::unix::fs::symlink("busybox", bin.join(applet)).unwrap();
            }
        }
        let packed_dir = tempfile::tempdir().unwrap();
        let tar = packed_dir.path().join("rootfs.tar");
        let tar = tar.as_path();
        let packed = Command::new("tar")
            .arg("-C")
            .arg(root.path())
            .arg("-cf")
            .arg(tar)
            .args(["bin", "tmp"])
            .status()
            .unwrap();
        assert!(packed.success(), "tar");
        self.run(&[
            "import",
            "--quiet",
            "--change",
            "CMD [\"/bin/sh\"]",
            "--change",
            "ENV PATH=/bin",
            &tar.display().to_string(),
            local,
        ]);
    }
}

/// Where `cargo xtask image` writes the host's image: `$DEPLOYER_TEST_IMAGE_LAYOUT`, else
/// `<workspace>/target/oci-image`.
pub fn image_layout() -> PathBuf {
    std::env::var("DEPLOYER_TEST_IMAGE_LAYOUT")
        .map(PathBuf::from)
        .unwrap_or_else(|_| crate::workspace().join("target/oci-image"))
}

/// The tag of the layout's (only) image.
fn image_tag(layout: &Path) -> String {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
        .as_str()
        .unwrap_or("latest")
        .to_string()
}
