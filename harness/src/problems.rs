//! The problems a run finds: each counted by its kind in the run's figures
//! (`errors`, `lost`, ...), and the first [`KEPT`] described for the
//! report.

/// How many problems a run describes; the rest are only counted.
pub const KEPT: usize = 20;

/// The first problems a run found, described.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Problems(Vec<String>);

impl Problems {
    /// Describes `message`, while fewer than [`KEPT`] are described.
    pub fn describe(&mut self, message: String) {
        if self.0.len() < KEPT {
            self.0.push(message);
        }
    }

    /// Counts one more problem in `counter` and describes it.
    pub fn count(&mut self, counter: &mut u64, message: String) {
        *counter += 1;
        self.describe(message);
    }

    /// The descriptions, in the order they were found.
    pub fn iter(&self) -> std::slice::Iter<'_, String> {
        self.0.iter()
    }

    /// Appends one report line per description to `out`, each after
    /// `prefix`.
    pub fn report(&self, out: &mut String, prefix: &str) {
        for problem in &self.0 {
            out.push_str(prefix);
            out.push_str(problem);
            out.push('\n');
        }
    }
}
