//! A target's row with its cells of the field: the subtree at the
//! target's task address in every tree that has one, taken out of the
//! state row and kept in the target's own row, so a snapshot writes the
//! cells of the targets that changed instead of the whole field every
//! time (at 100,000 observed targets the field was 15–21 MiB of JSON
//! every 5 s: the small box's largest transient, its longest stall and
//! most of its writes; docs/router.md, "The small box"; decision 0026).
//!
//! The invariant: a task subtree is left out of the state row exactly when
//! its target's row carries it ([`carried`]: a known target, at the
//! target's source and that source's current binding). Every write to a
//! task subtree marks its target changed (a deposit folds into its target;
//! the operator's priors and weights at a task address mark it), so its
//! row is written by the same snapshot as the state row that leaves the
//! subtree out. Aging scales every cell alike, so a row records the
//! field's `aged_to_s` when written and a restart ages its cells by what
//! the field aged since ([`routing::field::Field::graft`]).

use serde::{Deserialize, Serialize};

use routing::field::Subtrees;

use super::state::{Durable, TargetRec};

/// Labels above a task's cells: source, binding (the task is the third).
const TASK_DEPTH: usize = 3;

/// A target's cells as its row holds them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskCells {
    /// The binding the cells were under when written (the source is the
    /// target's): a source declared again with another binding leaves
    /// them where they were.
    pub binding: String,
    /// The field's `aged_to_s` when written, seconds.
    pub aged_to_s: f64,
    /// option → dimension → the subtree at the task's address.
    pub trees: Subtrees,
}

/// A target's row as written: the record, and its cells when it has any.
#[derive(Serialize)]
struct RowOut<'a> {
    #[serde(flatten)]
    rec: &'a TargetRec,
    #[serde(skip_serializing_if = "Option::is_none")]
    cells: Option<TaskCells>,
}

/// A target's row as read: rows written before the cells moved have none.
#[derive(Deserialize)]
struct RowIn {
    #[serde(flatten)]
    rec: TargetRec,
    #[serde(default)]
    cells: Option<TaskCells>,
}

/// The task address of target `name` in `d`: its source, the source's
/// binding, its name; `None` when its source is not declared.
pub(super) fn task_path(d: &Durable, name: &str, rec: &TargetRec) -> Option<Vec<String>> {
    let binding = &d.sources.get(&rec.source)?.binding;
    Some(vec![rec.source.clone(), binding.clone(), name.to_string()])
}

/// Whether the task subtree at `path` (source, binding, target) is carried
/// by its target's row in `d`, and so left out of the state row.
pub(super) fn carried(d: &Durable, path: &[String]) -> bool {
    let [source, binding, target] = path else {
        return false;
    };
    d.targets.get(target).is_some_and(|r| {
        r.source == *source && d.sources.get(source).is_some_and(|s| s.binding == *binding)
    })
}

/// The field of `d` as the state row holds it: without the task subtrees
/// the targets' rows carry.
pub(super) fn state_field(d: &Durable) -> routing::field::Field {
    d.field.pruned_at(TASK_DEPTH, |path| !carried(d, path))
}

/// The row of target `name` in `d`: its record and its task cells.
/// Errors: the record does not serialize.
pub(super) fn payload(
    d: &Durable,
    name: &str,
    rec: &TargetRec,
) -> Result<String, serde_json::Error> {
    let cells = task_path(d, name, rec).and_then(|path| {
        let trees = d.field.subtrees_at(&path);
        (!trees.is_empty()).then(|| TaskCells {
            binding: path[1].clone(),
            aged_to_s: d.aged_to_s,
            trees,
        })
    });
    serde_json::to_string(&RowOut { rec, cells })
}

/// Reads target row `payload`: the record and its cells.
pub(super) fn read(payload: &str) -> Result<(TargetRec, Option<TaskCells>), serde_json::Error> {
    let row: RowIn = serde_json::from_str(payload)?;
    Ok((row.rec, row.cells))
}

/// Puts target `name`'s row `cells` back into the field of `d` read from
/// the state row (before its caches are rebuilt), aged by what the field
/// aged since the row was written; where the state row holds a subtree
/// at that address it is newer and is kept. Returns whether the state
/// row held a subtree at the target's current task address: a state row
/// written before the cells moved to the rows, whose subtree the target's
/// row does not carry yet, so the target must be marked changed.
/// Errors: the cells do not fit the field (an undeclared option or
/// dimension, too deep, a non-finite time).
pub(super) fn restore_cells(
    d: &mut Durable,
    name: &str,
    rec: &TargetRec,
    cells: Option<TaskCells>,
) -> Result<bool, routing::field::FieldError> {
    let current = task_path(d, name, rec);
    let state_held = current
        .as_ref()
        .is_some_and(|p| d.field.holds_subtree_at(p));
    if let Some(c) = cells {
        let path = vec![rec.source.clone(), c.binding, name.to_string()];
        let aged_h = (d.aged_to_s - c.aged_to_s).max(0.0) / 3600.0;
        d.field.graft(&path, c.trees, aged_h)?;
    }
    Ok(state_held)
}
