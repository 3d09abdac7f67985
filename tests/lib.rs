//! End-to-end tests of bucket-provisioner; the tests live beside this file.
