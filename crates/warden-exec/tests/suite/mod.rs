mod harness;
mod lifecycle;
mod limits;
mod stdio;
