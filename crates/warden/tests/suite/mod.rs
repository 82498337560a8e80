mod a2a;
mod api;
mod cli;
mod harness;
mod interop;
mod memory;
mod restart;
mod sse;
