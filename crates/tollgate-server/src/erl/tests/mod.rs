//! ERL mode's tests that span its files: validation as ERL validates,
//! calls as ERL answers them, and counting in one Redis with ERL.

mod metadata;
mod redis;
mod service;
mod validate;
