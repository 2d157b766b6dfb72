//! Atomic batches: several requests decided all or nothing by one call of
//! `lua/batch.lua`, each in its policy's form, its keys on one slot of a
//! cluster.

use super::form::Form;
use super::pack::{Arg, pack};
use super::reply::decision;
use super::{RedisStore, keys};
use crate::store::Request;
use crate::{Decision, Error, Result};

impl RedisStore {
    /// Decides `requests` (validated, no pair twice, at least one) all or
    /// nothing.
    pub(super) async fn batch(&self, requests: &[Request<'_>]) -> Result<Vec<Decision>> {
        let forms: Vec<Form> = requests.iter().map(|r| self.form(r.policy)).collect();
        let keys: Vec<Vec<u8>> = requests
            .iter()
            .zip(&forms)
            .map(|(r, form)| self.key_in_form(r.policy, r.key, form))
            .collect();
        if self.is_cluster() {
            let first = keys::slot(&keys[0]);
            if keys.iter().any(|k| keys::slot(k) != first) {
                return Err(Error::argument(
                    "atomic",
                    "on Redis Cluster an atomic batch needs all its keys in one slot; these are in several",
                ));
            }
        }
        let mut args = vec![Arg::Bin(pack(&self.time_args()?))];
        for (r, form) in requests.iter().zip(&forms) {
            args.push(Arg::Str(form.tag(r.policy)));
            args.push(Arg::Bin(pack(&form.batch_numbers(r.policy, r.cost))));
        }
        let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let reply = self
            .run(&self.inner.scripts.batch, &key_refs, &args)
            .await?;
        // Denied as a whole, batch.lua has already reported each key as a
        // peek, denied, with the retry of those over their limit.
        requests
            .iter()
            .zip(reply.chunks(5))
            .map(|(r, chunk)| decision(r.policy, chunk))
            .collect()
    }
}
