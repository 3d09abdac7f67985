//! The book's page of `s3-bucket-provisioner`'s flags
//! (`docs/src/reference/flags/s3-bucket-provisioner.txt`) is what its `--help` prints,
//! so the two cannot drift apart.

#[test]
fn the_books_flags_page_is_what_help_prints() {
    test_support::reference::check_help(
        env!("CARGO_BIN_EXE_s3-bucket-provisioner"),
        "s3-bucket-provisioner",
        "cargo test -p s3-provisioner --test flags_reference",
    );
}
