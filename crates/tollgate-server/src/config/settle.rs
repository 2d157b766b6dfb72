//! Reading a file another process may still be writing: a reload waits
//! until two reads [`SETTLE`] apart give the same contents, so that an
//! editor's save, `cat > file` or a copy is not applied halfway. An atomic
//! rename (write a temporary file, then `mv` it over the config) is seen
//! whole at once, and is the safe way to update a config
//! (`docs/config.md`).

use std::time::Duration;

/// How long a file must stay the same before a reload applies it.
pub(crate) const SETTLE: Duration = Duration::from_millis(500);

/// How many times a reload reads a changing file before it gives up until
/// the next change (20 × [`SETTLE`]: 10 s).
const TRIES: usize = 20;

/// What `read` gives twice in a row, [`SETTLE`] apart; `None` when the
/// file kept changing.
pub(crate) async fn settled<T: PartialEq>(mut read: impl FnMut() -> T) -> Option<T> {
    let mut last = read();
    for _ in 0..TRIES {
        tokio::time::sleep(SETTLE).await;
        let now = read();
        if now == last {
            return Some(now);
        }
        last = now;
    }
    None
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_read_is_settled_when_it_repeats() {
        // a writer that changes the file on the first three reads
        let reads = Cell::new(0);
        let got = settled(|| {
            reads.set(reads.get() + 1);
            reads.get().min(4)
        })
        .await;
        assert_eq!(got, Some(4));
        assert_eq!(reads.get(), 5);
        // one that never stops
        let reads = Cell::new(0);
        let got = settled(|| {
            reads.set(reads.get() + 1);
            reads.get()
        })
        .await;
        assert_eq!(got, None);
        assert_eq!(reads.get(), TRIES + 1);
    }
}
