mod harness;
mod lifecycle;
mod limits;
mod proc_alive;
mod stdio;
