//! Wire shapes per protocol version.

pub mod v03;
pub mod v1;
