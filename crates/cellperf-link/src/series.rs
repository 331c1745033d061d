//! A bundle's text series (docs/formats.md, "Recording bundle"): a file read whole, its
//! meaningful lines, and the one-line errors that name the file and the line. The readers
//! of every series (`replay_bundle`, `replay_heavy`) share them.
use crate::error::LinkError;
use std::path::Path;

/// A series file's text; `rows` gives its meaningful lines, split into fields as they are
/// parsed (a long recording's heavy trace has millions of lines: no string is copied).
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) text: String,
}

impl Series {
    /// (line number, fields) of each line that is not blank or a comment.
    pub(crate) fn rows(&self) -> impl Iterator<Item = (usize, Vec<&str>)> + '_ {
        self.text.lines().enumerate().filter_map(|(i, l)| {
            let l = l.trim();
            (!l.is_empty() && !l.starts_with('#')).then(|| (i + 1, l.split_whitespace().collect()))
        })
    }

    pub(crate) fn error(&self, line: usize, problem: impl std::fmt::Display) -> LinkError {
        LinkError::file(&self.name, format!("line {line}: {problem}"))
    }

    /// Refuses a time earlier than the line before's.
    pub(crate) fn in_order<T: PartialOrd + std::fmt::Debug>(
        &self,
        line: usize,
        t: T,
        previous: Option<T>,
    ) -> Result<(), LinkError> {
        match previous {
            Some(p) if t < p => {
                Err(self.error(line, format!("times go backwards ({t:?} after {p:?})")))
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn empty(&self, what: &str) -> LinkError {
        LinkError::file(&self.name, format!("the {what} series is empty"))
    }

    pub(crate) fn number(&self, line: usize, field: &str, what: &str) -> Result<f64, LinkError> {
        match field.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.error(line, format!("{what} is not a number"))),
        }
    }

    pub(crate) fn non_negative(
        &self,
        line: usize,
        field: &str,
        what: &str,
    ) -> Result<f64, LinkError> {
        let v = self.number(line, field, what)?;
        if v < 0.0 {
            return Err(self.error(line, format!("negative {what} ({v})")));
        }
        Ok(v)
    }

    pub(crate) fn count(&self, line: usize, field: &str, what: &str) -> Result<u64, LinkError> {
        field
            .parse::<u64>()
            .map_err(|_| self.error(line, format!("{what} is not a whole number ≥ 0")))
    }

    pub(crate) fn fields(
        &self,
        line: usize,
        fields: &[&str],
        want: usize,
        layout: &str,
    ) -> Result<(), LinkError> {
        if fields.len() != want {
            return Err(self.error(
                line,
                format!("expected {want} fields ({layout}), found {}", fields.len()),
            ));
        }
        Ok(())
    }
}

pub(crate) fn unreadable(path: &Path, e: std::io::Error) -> LinkError {
    let name = path.display().to_string();
    match e.kind() {
        std::io::ErrorKind::NotFound => LinkError::file(&name, "missing from the bundle"),
        _ => LinkError::file(&name, format!("cannot read ({e})")),
    }
}

pub(crate) fn read(path: &Path) -> Result<String, LinkError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| unreadable(path, e))?;
    String::from_utf8(bytes).map_err(|_| LinkError::file(&name, "not text"))
}

/// Reads a series file; `newline_ends` refuses a last line without its newline (cut short).
pub(crate) fn read_series(path: &Path, newline_ends: bool) -> Result<Series, LinkError> {
    let text = read(path)?;
    let name = path.display().to_string();
    if newline_ends && !text.is_empty() && !text.ends_with('\n') {
        let last = text.lines().count();
        return Err(LinkError::file(
            &name,
            format!("line {last}: truncated (the file ends inside a line)"),
        ));
    }
    Ok(Series { name, text })
}
