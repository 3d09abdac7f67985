//! The book's page of `hostpath-volume-provisioner`'s flags
//! (`docs/src/reference/flags/hostpath-volume-provisioner.txt`) is what its `--help` prints,
//! so the two cannot drift apart.

#[test]
fn the_books_flags_page_is_what_help_prints() {
    test_support::reference::check_help(
        env!("CARGO_BIN_EXE_hostpath-volume-provisioner"),
        "hostpath-volume-provisioner",
        "cargo test -p hostpath-volume-provisioner --test flags_reference",
    );
}
