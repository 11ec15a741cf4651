//! Generates the gRPC door's messages, server and client from `proto/toold/v1/toold.proto`
//! (tonic + prost), and the encoded file descriptor set that reflection serves. protoc comes
//! from `protoc-bin-vendored`, so building needs no system protoc. Nothing else happens here.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; nothing else reads the environment here.
    unsafe { std::env::set_var("PROTOC", protoc) };
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        // The daemon serves through axum, and clients bring their own channel.
        .build_transport(false)
        // `bytes` fields as `Bytes`: a file's chunks pass between the wire and the workspace
        // without a copy.
        .bytes(".toold.v1")
        .file_descriptor_set_path(out_dir.join("toold_descriptor.bin"))
        .compile_protos(&["proto/toold/v1/toold.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
