//! Writes the CRDs generated from the Rust types into a directory (default `crds/`).

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "crds".into()));
    std::fs::create_dir_all(&dir)?;
    for file in bucket_api::crd_files() {
        let path = dir.join(&file.file_name);
        std::fs::write(&path, file.to_yaml())?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
