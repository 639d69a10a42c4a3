//! The budgets file (`ci/budgets.toml`): the profiles' budgets by name and
//! the comparison's `[compare]` table, read and checked before any run.
//!
//! It sits above both gates: [`crate::gate`] owns a profile's budgets and
//! [`crate::compare_gate`] the comparison's; this module only reads the
//! file that holds them (docs/gates.md).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::compare_gate::CompareBudget;
use crate::gate::ProfileBudget;

/// The budgets file: profiles by name (`A`, `B`, …).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// Profiles by name.
    pub profile: BTreeMap<String, ProfileBudget>,
    /// The comparison gate (`fleet-lab compare --gate`); `None` when the
    /// file has no `[compare]` table.
    #[serde(default)]
    pub compare: Option<CompareBudget>,
}

/// Why the budgets file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BudgetsError {
    /// Unreadable file.
    #[error("cannot read budgets {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not valid TOML, or an unknown key.
    #[error("budgets {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message (names the key and line).
        message: String,
    },
    /// A profile whose numbers cannot make a gate that can fail.
    #[error("budgets {path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, naming the keys.
        message: String,
    },
    /// No such profile.
    #[error("budgets {path} has no profile {name:?} (it has: {known})")]
    NoProfile {
        /// The file.
        path: String,
        /// The profile asked for.
        name: String,
        /// The profiles it has.
        known: String,
    },
}

impl Budgets {
    /// Reads and parses a budgets file.
    pub fn load(path: &Path) -> Result<Self, BudgetsError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| BudgetsError::Read {
            path: shown.clone(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| BudgetsError::Parse {
            path: shown,
            message: e.to_string(),
        })
    }

    /// One profile's budgets.
    pub fn profile(&self, name: &str, path: &Path) -> Result<&ProfileBudget, BudgetsError> {
        let p = self
            .profile
            .get(name)
            .ok_or_else(|| BudgetsError::NoProfile {
                path: path.display().to_string(),
                name: name.to_string(),
                known: self.profile.keys().cloned().collect::<Vec<_>>().join(", "),
            })?;
        p.validate(name).map_err(|message| BudgetsError::Invalid {
            path: path.display().to_string(),
            message,
        })?;
        Ok(p)
    }
}
