//! Atomic batches: several requests decided all or nothing by one call of
//! `lua/batch.lua`, each in its policy's form. On a cluster a batch whose
//! keys span slots is decided slot by slot, with refunds (`cross_slot.rs`).

use super::form::Form;
use super::pack::{Arg, pack};
use super::reply::decision;
use super::{RedisStore, keys};
use crate::store::Request;
use crate::{Decision, Result};

impl RedisStore {
    /// Decides `requests` (validated, no pair twice, at least one) all or
    /// nothing.
    pub(super) async fn batch(&self, requests: &[Request<'_>]) -> Result<Vec<Decision>> {
        let forms: Vec<Form> = requests.iter().map(|r| self.form(r.policy)).collect();
        if forms.iter().any(|f| matches!(f, Form::WindowOffset { .. })) {
            return Err(super::form::offset_unsupported("check_many"));
        }
        let keys: Vec<Vec<u8>> = requests
            .iter()
            .zip(&forms)
            .map(|(r, form)| self.key_in_form(r.policy, r.key, form))
            .collect();
        if self.is_cluster() {
            let first = keys::slot(&keys[0]);
            if keys.iter().any(|k| keys::slot(k) != first) {
                return self.batch_across_slots(requests, &forms, &keys).await;
            }
        }
        let all: Vec<usize> = (0..requests.len()).collect();
        self.batch_script(requests, &forms, &keys, &all).await
    }

    /// The requests at `which` (their keys in one slot) decided all or
    /// nothing by one call of `lua/batch.lua`.
    pub(super) async fn batch_script(
        &self,
        requests: &[Request<'_>],
        forms: &[Form],
        keys: &[Vec<u8>],
        which: &[usize],
    ) -> Result<Vec<Decision>> {
        let time = self.time_args()?;
        let near = self.calendar_time(time[0]);
        let mut args = vec![Arg::Bin(pack(&time))];
        for &i in which {
            let (r, form) = (&requests[i], &forms[i]);
            args.push(Arg::Str(form.tag(r.policy)));
            args.push(Arg::Bin(pack(&form.batch_numbers(r.policy, r.cost, near))));
        }
        let key_refs: Vec<&[u8]> = which.iter().map(|&i| keys[i].as_slice()).collect();
        let reply = self
            .run(&self.inner.scripts.batch, &key_refs, &args)
            .await?;
        // Denied as a whole, batch.lua has already reported each key as a
        // peek, denied, with the retry of those over their limit.
        which
            .iter()
            .zip(reply.chunks(5))
            .map(|(&i, chunk)| decision(requests[i].policy, chunk))
            .collect()
    }
}
