//! Wire shapes per protocol version.

pub mod rest03;
pub mod v03;
pub mod v1;
