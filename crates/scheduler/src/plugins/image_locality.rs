//! ImageLocality: prefers nodes that already have the pod's images,
//! weighted by image size and by how widely the image is spread.

use k8s_openapi::api::core::v1::Pod;

use super::names;
use crate::framework::{
    CycleState, NodeInfo, Plugin, ScorePlugin, Snapshot, Status, MAX_NODE_SCORE,
};

const MB: i64 = 1024 * 1024;
/// Below this total size images do not count (upstream `minThreshold`).
pub const MIN_THRESHOLD: i64 = 23 * MB;
/// Per-container cap (upstream `maxContainerThreshold`).
pub const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

const PRE_SCORE_KEY: &str = "PreScoreImageLocality";

/// The ImageLocality plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImageLocality;

impl Plugin for ImageLocality {
    fn name(&self) -> &'static str {
        names::IMAGE_LOCALITY
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

/// Appends `:latest` when the name has no tag (upstream
/// `normalizedImageName`).
pub fn normalized_image_name(name: &str) -> String {
    if name.rfind(':') <= name.rfind('/') {
        format!("{name}:latest")
    } else {
        name.to_string()
    }
}

/// What PreScore works out once per pod.
#[derive(Debug)]
struct PreScore {
    total_nodes: usize,
    images: Vec<String>,
}

/// Upstream `calculatePriority`.
pub fn calculate_priority(sum: i64, num_containers: usize) -> i64 {
    let max = MAX_CONTAINER_THRESHOLD
        * i64::try_from(num_containers).unwrap_or(i64::MAX / MAX_CONTAINER_THRESHOLD);
    if max <= MIN_THRESHOLD {
        return 0;
    }
    let clamped = sum.clamp(MIN_THRESHOLD, max);
    MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) / (max - MIN_THRESHOLD)
}

impl ScorePlugin for ImageLocality {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
        _nodes: &[&NodeInfo],
    ) -> Status {
        // The pod's image names, normalized once rather than for every node.
        let images: Vec<String> = pod
            .spec
            .iter()
            .flat_map(|spec| {
                spec.init_containers
                    .iter()
                    .flatten()
                    .chain(spec.containers.iter())
            })
            .map(|c| normalized_image_name(c.image.as_deref().unwrap_or_default()))
            .collect();
        state.write(
            PRE_SCORE_KEY,
            PreScore {
                total_nodes: snapshot.len(),
                images,
            },
        );
        Status::success()
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        _pod: &Pod,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), Status> {
        state.score_each(PRE_SCORE_KEY, nodes, out, |pre: &PreScore, node| {
            pre.score(node)
        })
    }
}

impl PreScore {
    fn score(&self, node: &NodeInfo) -> i64 {
        if node.image_states().is_empty() {
            return calculate_priority(0, self.images.len());
        }
        let mut sum = 0i64;
        for image in &self.images {
            if let Some(s) = node.image_states().get(image) {
                let spread = s.num_nodes as f64 / self.total_nodes.max(1) as f64;
                sum += (s.size as f64 * spread) as i64;
            }
        }
        calculate_priority(sum, self.images.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_client::testing::{node, pod};

    #[test]
    fn normalizes_names() {
        let cases = [
            ("nginx", "nginx:latest"),
            ("nginx:1.25", "nginx:1.25"),
            ("localhost:5000/app", "localhost:5000/app:latest"),
            ("localhost:5000/app:v1", "localhost:5000/app:v1"),
            ("gcr.io/x/y@sha256:abc", "gcr.io/x/y@sha256:abc"),
        ];
        for (name, want) in cases {
            assert_eq!(normalized_image_name(name), want);
        }
    }

    #[test]
    fn scores_like_upstream() {
        // Upstream image_locality_test: two containers; node1 has a 40MB
        // and a 300MB image, node2 a 2000MB one; each on one of two nodes.
        let p = pod("p")
            .image("gcr.io/40")
            .container("c1", "gcr.io/300")
            .build();
        let p2 = pod("p")
            .image("gcr.io/2000")
            .container("c1", "gcr.io/10")
            .build();
        let snap = Snapshot::new(
            vec![
                node("n1")
                    .image(&["gcr.io/40:latest"], 40 * MB)
                    .image(&["gcr.io/300:latest"], 300 * MB)
                    .build(),
                node("n2").image(&["gcr.io/2000:latest"], 2000 * MB).build(),
            ],
            vec![],
        );
        let mut state = CycleState::new();
        assert!(ImageLocality
            .pre_score(&mut state, &p, &snap, &[])
            .is_success());
        // (40+300)/2 = 170MB → 100*(170-23)/(2000-23) = 7
        let n1 = snap.get("n1").expect("n1");
        let n2 = snap.get("n2").expect("n2");
        assert_eq!(ImageLocality.score(&state, &p, n1), Ok(7));
        assert_eq!(ImageLocality.score(&state, &p, n2), Ok(0));
        // 2000/2 = 1000MB → 100*(1000-23)/(2000-23) = 49
        let mut state = CycleState::new();
        assert!(ImageLocality
            .pre_score(&mut state, &p2, &snap, &[])
            .is_success());
        assert_eq!(ImageLocality.score(&state, &p2, n2), Ok(49));
    }
}
