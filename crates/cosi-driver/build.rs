//! Compiles the project's COSI protocol definitions (both versions) without protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/cosi_v1alpha1.proto", "proto/cosi_v1alpha2.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
