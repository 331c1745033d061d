//! Errors a user can fix, each worded as one line that names the file or option at fault.
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum LinkError {
    /// A trace, handoff or other input file is unreadable or malformed.
    File { path: String, problem: String },
    /// A specification value (rate, delay, queue, ...) is invalid.
    Spec(String),
    /// The operating system refused something (TUN, namespace, file creation).
    System(String),
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::File { path, problem } => write!(f, "{path}: {problem}"),
            LinkError::Spec(s) | LinkError::System(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for LinkError {}

impl LinkError {
    pub fn file(path: &str, problem: impl Into<String>) -> Self {
        LinkError::File {
            path: path.to_string(),
            problem: problem.into(),
        }
    }

    pub fn spec(problem: impl Into<String>) -> Self {
        LinkError::Spec(problem.into())
    }
}
