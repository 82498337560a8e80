mod a2a;
mod api;
mod cli;
mod harness;
mod memory;
mod restart;
mod sse;
