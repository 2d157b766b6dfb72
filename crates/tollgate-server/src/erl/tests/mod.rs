//! ERL mode's tests that span its files: validation as ERL validates,
//! calls as ERL answers them, counting in one Redis with ERL, and what
//! tollgate adds to ERL when asked (`extensions`).

mod extensions;
mod metadata;
mod redis;
mod service;
mod validate;
