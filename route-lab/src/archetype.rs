//! The four device archetypes and what each is in the simulated world:
//! the router's declared order, the shared effects on success and latency,
//! cloud cost, population share and capabilities; the adapter versions;
//! and one simulated device. Source: `ROUTING.md` §5.

use serde::{Deserialize, Serialize};

/// The archetypes, in the router's declared order.
pub const ARCHETYPES: [&str; 4] = ["browser", "desktop", "container_render", "container_plain"];
/// Index of `browser` in [`ARCHETYPES`].
pub const BROWSER: usize = 0;
/// Index of `desktop`.
pub const DESKTOP: usize = 1;
/// Index of `container_render`.
pub const RENDER: usize = 2;
/// Index of `container_plain`.
pub const PLAIN: usize = 3;

/// The shared archetype effect μ_a on the logit of success.
pub const ARCH_LOGIT: [f64; 4] = [2.6, 2.4, 2.4, 3.0];
/// Mean ln-latency m_a (ln seconds): browser 4 s, desktop 3 s, render 5 s, plain 1.5 s.
pub const ARCH_LN_LATENCY: [f64; 4] = [1.386, 1.099, 1.609, 0.405];
/// Cloud cost of one attempt per archetype, in failure-equivalents (client devices cost 0).
pub const CLOUD_COST: [f64; 4] = [0.0, 0.0, 0.12, 0.04];
/// Population share per archetype.
pub const ARCH_SHARE: [f64; 4] = [0.55, 0.20, 0.10, 0.15];
/// Capabilities each archetype declares.
pub const CAPABILITIES: [&[&str]; 4] = [
    &["needs_js", "residential"],
    &["needs_js", "residential"],
    &["needs_js"],
    &[],
];
/// The adapter version every device runs unless upgraded.
pub const ADAPTER_OK: &str = "3.2";
/// The buggy adapter version of `adapter-bug`.
pub const ADAPTER_BUGGY: &str = "3.3";
/// The versions of the correct rollouts (`[[events.adapter_rollout]]`),
/// the i-th entry's in time order; at most this many rollouts a world.
pub const ADAPTER_LATER: [&str; 8] = ["3.4", "3.5", "3.6", "3.7", "3.8", "3.9", "3.10", "3.11"];
/// The adapter id (one binding per source: `html-v1`).
pub const ADAPTER_ID: &str = "html";

/// One simulated device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceSpec {
    /// Device id.
    pub id: String,
    /// Index into [`ARCHETYPES`].
    pub archetype: usize,
    /// Writes the forged hash on every success.
    pub liar: bool,
    /// Online sessions `(from, to)`, seconds, sorted, disjoint.
    pub sessions: Vec<(f64, f64)>,
    /// When it upgrades to [`ADAPTER_BUGGY`], if ever.
    pub upgrade_at: Option<f64>,
    /// Its correct upgrades: (when, index into [`ADAPTER_LATER`]), in the
    /// order of the world's rollouts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rollouts: Vec<(f64, usize)>,
    /// Sources unreachable from this device's network (it fails with `network`).
    pub blocked: Vec<usize>,
}
