//! How many objects each cache holds, for `apiserver_storage_objects`
//! (read at a metrics scrape; nothing on the write path). Reads only.

use super::{Caches, WatchCache};

impl WatchCache {
    /// Objects held; `None` until the first list has loaded.
    pub fn object_count(&self) -> Option<usize> {
        let state = self.read();
        state.ready.then_some(state.objects.len())
    }
}

impl Caches {
    /// Each loaded cache's storage name and object count.
    pub fn object_counts(&self) -> Vec<(String, usize)> {
        self.all()
            .into_iter()
            .filter_map(|(storage, cache)| Some((storage, cache.object_count()?)))
            .collect()
    }
}
