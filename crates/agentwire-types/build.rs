//! Compiles the project's A2A proto without a system `protoc`: protox parses
//! the files into a descriptor set, prost generates the Rust types, pbjson
//! generates their ProtoJSON serde, and (feature `grpc`) tonic generates the
//! gRPC client and server.

use std::path::PathBuf;

/// The codec of the generated gRPC services: prost's, with a server's
/// request walked against the read limits before it is decoded
/// (`src/limits/wire.rs`).
#[cfg(feature = "grpc")]
const CODEC: &str = "crate::limits::wire::Codec";

/// The repeated fields whose ProtoJSON readers are bounded while a request
/// is read (`src/limits`): pbjson reads each with `map_.next_value()`,
/// which becomes the bounded reader of `crate::limits`.
const BOUNDED_LISTS: &[(&str, &str)] = &[
    ("parts", "crate::limits::Parts<_>"),
    ("extensions", "crate::limits::List<_>"),
    ("reference_task_ids", "crate::limits::List<_>"),
    ("accepted_output_modes", "crate::limits::List<_>"),
];

/// Rewrites the readers of [`BOUNDED_LISTS`] in pbjson's output; fails the
/// build if pbjson no longer writes them the way this expects.
fn bound_lists(path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut text = std::fs::read_to_string(path)?;
    for (field, reader) in BOUNDED_LISTS {
        let from = format!("{field}__ = Some(map_.next_value()?);");
        if !text.contains(&from) {
            return Err(
                format!("pbjson no longer reads `{field}` as `{from}`: see build.rs").into(),
            );
        }
        text = text.replace(
            &from,
            &format!("{field}__ = Some(map_.next_value::<{reader}>()?.0);"),
        );
    }
    std::fs::write(path, text)?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let proto = root.join("lf/a2a/v1/a2a.proto");
    println!("cargo:rerun-if-changed={}", root.display());

    let fds = protox::compile([&proto], [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let descriptor_path = out.join("a2a_descriptor.bin");
    std::fs::write(&descriptor_path, prost::Message::encode_to_vec(&fds))?;

    let mut config = prost_build::Config::new();
    config
        .file_descriptor_set_path(&descriptor_path)
        .skip_protoc_run()
        .compile_well_known_types()
        .extern_path(".google.protobuf.Timestamp", "crate::Timestamp")
        .extern_path(".google.protobuf.Struct", "crate::wkt::Struct")
        .extern_path(".google.protobuf.Value", "crate::wkt::Value")
        .extern_path(".google.protobuf.ListValue", "crate::wkt::ListValue")
        .extern_path(".google.protobuf.NullValue", "crate::wkt::NullValue")
        .extern_path(".google.protobuf", "::pbjson_types")
        .bytes([".lf.a2a.v1.Part"])
        // A status seldom carries a message: boxed, it costs a pointer
        // instead of a whole message in every task, status and event.
        .boxed(".lf.a2a.v1.TaskStatus.message");

    #[cfg(feature = "grpc")]
    {
        tonic_prost_build::configure()
            .build_client(true)
            .build_server(true)
            .codec_path(CODEC)
            .skip_protoc_run()
            .file_descriptor_set_path(&descriptor_path)
            .compile_fds_with_config(fds.clone(), config)?;
    }
    #[cfg(not(feature = "grpc"))]
    {
        config.compile_fds(fds.clone())?;
    }

    let descriptor_set = std::fs::read(&descriptor_path)?;
    pbjson_build::Builder::new()
        .register_descriptors(&descriptor_set)?
        .ignore_unknown_fields()
        .exclude([".lf.a2a.v1.ListTasksResponse"])
        .build(&[".lf.a2a.v1"])?;
    bound_lists(&out.join("lf.a2a.v1.serde.rs"))?;

    #[cfg(all(feature = "v0_3", feature = "grpc"))]
    compile_v03(&root, &out)?;
    Ok(())
}

/// The A2A 0.3 gRPC service (package `a2a.v1`, feature `v0_3` with
/// `grpc`): its messages, their ProtoJSON serde (the bridge to the 0.3
/// HTTP+JSON forms, see `src/v0_3/grpc.rs`), its client and its server.
#[cfg(all(feature = "v0_3", feature = "grpc"))]
fn compile_v03(
    root: &std::path::Path,
    out: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let proto = root.join("a2a/v1/a2a.proto");
    let fds = protox::compile([&proto], [root])?;
    let descriptor_path = out.join("a2a_v03_descriptor.bin");
    std::fs::write(&descriptor_path, prost::Message::encode_to_vec(&fds))?;
    let mut config = prost_build::Config::new();
    config
        .file_descriptor_set_path(&descriptor_path)
        .skip_protoc_run()
        .compile_well_known_types()
        .extern_path(".google.protobuf.Timestamp", "crate::Timestamp")
        .extern_path(".google.protobuf.Struct", "crate::wkt::Struct")
        .extern_path(".google.protobuf.Value", "crate::wkt::Value")
        .extern_path(".google.protobuf.ListValue", "crate::wkt::ListValue")
        .extern_path(".google.protobuf.NullValue", "crate::wkt::NullValue")
        .extern_path(".google.protobuf", "::pbjson_types");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .codec_path(CODEC)
        .skip_protoc_run()
        .file_descriptor_set_path(&descriptor_path)
        .compile_fds_with_config(fds, config)?;
    let descriptor_set = std::fs::read(&descriptor_path)?;
    pbjson_build::Builder::new()
        .register_descriptors(&descriptor_set)?
        .ignore_unknown_fields()
        .build(&[".a2a.v1"])?;
    Ok(())
}
