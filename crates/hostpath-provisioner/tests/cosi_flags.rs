//! The binary's COSI flags: a wrong endpoint or driver name stops it at start with a message
//! naming what is wrong, before anything is contacted, and `--cosi-only` needs an endpoint.

use std::process::{Command, Output};

fn run(root: &std::path::Path, flags: &[&str]) -> Output {
    let root_flag = format!("--root={}", root.display());
    Command::new(env!("CARGO_BIN_EXE_hostpath-bucket-provisioner"))
        .args(["--kubeconfig=/nonexistent", "--s3-listen=127.0.0.1:0", &root_flag])
        .args(flags)
        .output()
        .unwrap()
}

#[test]
fn wrong_cosi_flags_stop_the_binary_at_start() {
    let root = tempfile::tempdir().unwrap();
    for (flags, named) in [
        (&["--cosi-endpoint=tcp://127.0.0.1:1"][..], "tcp://127.0.0.1:1"),
        (&["--cosi-endpoint=unix:///run/cosi/no-extension"][..], "no-extension"),
        (&["--cosi-endpoint=unix:///tmp/x.sock", "--cosi-driver-name=-bad-"][..], "-bad-"),
        (&["--cosi-only"][..], "--cosi-endpoint"),
    ] {
        let output = run(root.path(), flags);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{flags:?} was accepted");
        assert!(stderr.contains(named), "{flags:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn a_stale_socket_is_replaced_when_the_binary_starts() {
    let root = tempfile::tempdir().unwrap();
    let socket = root.path().join("cosi/cosi.sock");
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    std::fs::write(&socket, b"left by a process that ended").unwrap();
    let endpoint = format!("--cosi-endpoint=unix://{}", socket.display());
    // The socket is bound before the Kubernetes client is made (which then fails here).
    let output = run(&root.path().join("buckets"), &[&endpoint, "--cosi-only"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(!stderr.contains("COSI socket"), "the stale file was replaced: {stderr}");
    let kind = std::fs::symlink_metadata(&socket).unwrap().file_type();
    assert!(std::os::unix::fs::FileTypeExt::is_socket(&kind), "a socket took the file's place");
}
