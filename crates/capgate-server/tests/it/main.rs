//! The server's integration tests, one binary: each module is one area, each test a server of its
//! own on a free loopback port, spoken to over a socket.

mod check;
mod common;
mod connections;
mod ext_authz;
mod gateway;
mod nginx;
mod operator;
mod reload;
