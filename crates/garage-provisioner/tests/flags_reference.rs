//! The book's page of `garage-bucket-provisioner`'s flags
//! (`docs/src/reference/flags/garage-bucket-provisioner.txt`) is what its `--help` prints,
//! so the two cannot drift apart.

#[test]
fn the_books_flags_page_is_what_help_prints() {
    test_support::reference::check_help(
        env!("CARGO_BIN_EXE_garage-bucket-provisioner"),
        "garage-bucket-provisioner",
        "cargo test -p garage-provisioner --test flags_reference",
    );
}
