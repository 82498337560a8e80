//! A2A wire formats, kept at the edge: the 1.0 ProtoJSON shapes
//! ([`wire::v1`]), the 0.3 JSON-RPC shapes ([`wire::v03`]), the JSON-RPC 2.0
//! envelope and error codes ([`jsonrpc`]), protocol version negotiation
//! ([`version`]), and conversion to and from `warden_core`'s task model.
//! No I/O here; the server bindings sit beside this crate.
#![forbid(unsafe_code)]

pub mod adapter;
pub mod engine;
pub mod error;
pub mod instance;
pub mod jsonrpc;
pub mod process;
pub mod server;
pub mod version;
pub mod wire;

pub use error::WireError;
pub use version::ProtocolVersion;
