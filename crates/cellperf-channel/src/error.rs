//! The one error type of this crate: every problem is a value with a one-line message
//! that names what was wrong, never a panic.
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum ChannelError {
    /// A trace with no slots.
    EmptyTrace,
    /// A per-slot state outside the rate table (`state`, first slot where it occurs).
    UnknownState { state: u64, slot: usize },
    /// Time stamps that go backwards (index of the first offending row).
    NonMonotonicTime { row: usize },
    /// Two inputs that must have the same length do not.
    LengthMismatch { what: &'static str, expected: usize, got: usize },
    /// A parameter outside its domain (name and explanation).
    InvalidParameter(String),
    /// A model file that cannot be used (wrong format, version, inconsistent content).
    InvalidModel(String),
    /// A mahimahi trace line that is not a millisecond time stamp (1-based line number).
    InvalidMahimahi { line: usize, reason: String },
    /// Too many distinct states for the analysis asked for.
    TooManyStates { states: usize, limit: usize },
}

impl fmt::Display for ChannelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChannelError::EmptyTrace => write!(f, "the trace has no slots"),
            ChannelError::UnknownState { state, slot } => {
                write!(f, "state {state} at slot {slot} is not in the rate table")
            }
            ChannelError::NonMonotonicTime { row } => {
                write!(f, "time goes backwards at data row {}", row + 1)
            }
            ChannelError::LengthMismatch { what, expected, got } => {
                write!(f, "{what}: expected {expected} values, got {got}")
            }
            ChannelError::InvalidParameter(m) => write!(f, "{m}"),
            ChannelError::InvalidModel(m) => write!(f, "{m}"),
            ChannelError::InvalidMahimahi { line, reason } => write!(f, "line {line}: {reason}"),
            ChannelError::TooManyStates { states, limit } => {
                write!(f, "{states} distinct states, more than the {limit} this analysis supports")
            }
        }
    }
}

impl std::error::Error for ChannelError {}
