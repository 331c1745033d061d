//! A bundle's light series (the recorded trains: when each was sent, its base delay, its
//! delivery opportunities) parsed as the replay reaches it (issue 29), as the heavy series is
//! (`replay_heavy`): a replay's CPU depends on how long it plays, not on how long the
//! recording is. An hour's light series is ~2 MB per direction, ~70,000 lines of decimals:
//! parsed whole at the build it was 20-40 ms of a replay's CPU and its largest allocation.
//!
//! The file is read whole at the build (a copy, ~1 ms per hour of recording; its last line's
//! newline is checked then, as every series'), and parsed from its start as far as the build
//! needs ([`LightSeries::parse_while`]); the replay then parses on per packet
//! ([`LightSeries::reach`]) so that the trains it may look at are parsed: the next
//! [`AHEAD_TRAINS`] after the replay's moment. A fault found after the build is kept
//! ([`LightSeries::take_fault`]) and ends the series where it is; the replay element hands it
//! to the emulator, which ends the run with it (as a heavy series' fault).
//!
//! One parser ([`light_line`]) reads a light series whole (`Bundle::load`: `cellperf record
//! --check`, `replay info`, `run --check`) or a line at a time, with the same errors.
use crate::error::LinkError;
use crate::series::Series;

/// How many trains past the replay's moment are kept parsed: what a replay looks at after it
/// (the next train's time and base delay, and a longer train within `LONGER_WITHIN` of the
/// current one) is within them.
pub const AHEAD_TRAINS: usize = 80;
/// Bytes parsed at the build (about 3 min of a recording's trains, 6 s of its 100-packet
/// lines): a fault there stops the run before its command starts.
pub const FIRST_STRETCH_BYTES: usize = 64 * 1024;

/// One light packet train: when it was sent, its first packet's one-way delay, and the
/// delivery times of its delivered packets after the first one's delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct Train {
    pub at_ms: f64,
    pub base_delay_ms: f64,
    pub pdo_ms: Vec<f64>,
}

/// Parses one light line's fields (`t_ms base_delay_ms pdo_0 [pdo_1 ...]`) after the train
/// `previous` (times in order).
fn light_line(
    s: &Series,
    line: usize,
    f: &[&str],
    previous: Option<&Train>,
) -> Result<Train, LinkError> {
    if f.len() < 3 {
        return Err(s.error(
            line,
            format!(
                "expected t_ms base_delay_ms pdo_0 [pdo_1 ...], found {} fields",
                f.len()
            ),
        ));
    }
    let at_ms = s.non_negative(line, f[0], "time")?;
    s.in_order(line, at_ms, previous.map(|t| t.at_ms))?;
    let base_delay_ms = s.non_negative(line, f[1], "base delay")?;
    let mut pdo_ms = Vec::with_capacity(f.len() - 2);
    for field in &f[2..] {
        let pdo = s.non_negative(line, field, "delivery time")?;
        if let Some(&prev) = pdo_ms.last() {
            if pdo < prev {
                return Err(s.error(
                    line,
                    format!("delivery times go backwards ({pdo} after {prev})"),
                ));
            }
        }
        pdo_ms.push(pdo);
    }
    Ok(Train {
        at_ms,
        base_delay_ms,
        pdo_ms,
    })
}

/// A light series parsed whole.
pub(crate) fn parse_light(s: Series) -> Result<Vec<Train>, LinkError> {
    let mut series = LightSeries::new(s);
    let mut out = Vec::new();
    series.parse_while(&mut out, |_| true);
    match series.take_fault() {
        Some(e) => Err(e),
        None if out.is_empty() => Err(series.series.empty("light train")),
        None => Ok(out),
    }
}

/// A light series' text and how far it is parsed; the trains go to the caller's vector.
pub struct LightSeries {
    series: Series,
    /// The byte where the next line starts (the text's length: parsed whole, or a fault).
    pos: usize,
    /// That line's number.
    line: usize,
    fault: Option<LinkError>,
}

impl std::fmt::Debug for LightSeries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LightSeries")
            .field("name", &self.series.name)
            .field("pos", &self.pos)
            .field("complete", &self.complete())
            .finish()
    }
}

impl LightSeries {
    pub(crate) fn new(series: Series) -> Self {
        LightSeries {
            series,
            pos: 0,
            line: 1,
            fault: None,
        }
    }

    /// Starts a replay's parse of `series`: its first [`FIRST_STRETCH_BYTES`] (and on to
    /// its first train) onto `out`, so that a fault there, or an empty series, stops the run
    /// before its command starts.
    pub(crate) fn open(series: Series, out: &mut Vec<Train>) -> Result<Self, LinkError> {
        let mut s = Self::new(series);
        while !s.complete() && (s.pos < FIRST_STRETCH_BYTES || out.is_empty()) {
            s.parse_line(out);
        }
        match s.take_fault() {
            Some(e) => Err(e),
            None if out.is_empty() => Err(s.series.empty("light train")),
            None => Ok(s),
        }
    }

    /// A series already parsed whole (its trains are the caller's).
    pub fn parsed() -> Self {
        Self::new(Series {
            name: String::new(),
            text: String::new(),
        })
    }

    /// Whether every line is parsed (or a fault ended the series).
    pub fn complete(&self) -> bool {
        self.pos >= self.series.text.len()
    }

    /// Parses trains onto `out` while `more(out)` holds and lines are left. A fault is kept
    /// (`take_fault`) and ends the series at the trains parsed before it.
    pub fn parse_while(&mut self, out: &mut Vec<Train>, mut more: impl FnMut(&[Train]) -> bool) {
        while !self.complete() && more(out) {
            self.parse_line(out);
        }
    }

    /// Parses the next line: a train onto `out`, nothing (blank, a comment), or a fault.
    fn parse_line(&mut self, out: &mut Vec<Train>) {
        let text = &self.series.text[self.pos..];
        let end = text.find('\n').map_or(text.len(), |i| i + 1);
        let raw = text[..end].trim();
        let line = self.line;
        self.pos += end;
        self.line += 1;
        if raw.is_empty() || raw.starts_with('#') {
            return;
        }
        let fields: Vec<&str> = raw.split_whitespace().collect();
        match light_line(&self.series, line, &fields, out.last()) {
            Ok(train) => out.push(train),
            Err(e) => {
                self.pos = self.series.text.len();
                self.fault.get_or_insert(e);
            }
        }
    }

    /// Parses on until `AHEAD_TRAINS` trains are after `ms` (recording time), or to the end.
    pub fn reach(&mut self, ms: f64, out: &mut Vec<Train>) {
        self.parse_while(out, |trains| {
            let after = trains.len() - trains.partition_point(|t| t.at_ms <= ms);
            after < AHEAD_TRAINS
        });
    }

    /// The fault found, once.
    pub fn take_fault(&mut self) -> Option<LinkError> {
        self.fault.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(text: &str) -> Series {
        Series {
            name: "B/downlink.light".into(),
            text: text.into(),
        }
    }

    fn text(lines: usize) -> String {
        (0..lines)
            .map(|i| format!("{} 20.5 0 1.{i}\n", 50 * i))
            .collect()
    }

    #[test]
    fn parsed_on_demand_as_the_whole() {
        let t = format!("# a comment\n\n{}", text(1000));
        let whole = parse_light(series(&t)).unwrap();
        assert_eq!(whole.len(), 1000);
        let mut s = LightSeries::new(series(&t));
        let mut out = Vec::new();
        s.reach(0.0, &mut out);
        assert_eq!(
            out.len(),
            AHEAD_TRAINS + 1,
            "train 0 at 0 ms and 80 after it"
        );
        s.reach(10_000.0, &mut out);
        assert_eq!(out.len(), 201 + AHEAD_TRAINS);
        assert!(!s.complete());
        s.reach(f64::INFINITY, &mut out);
        assert!(s.complete() && s.take_fault().is_none());
        assert_eq!(out, whole);
    }

    #[test]
    fn a_fault_is_kept_with_its_line_and_ends_the_series() {
        let t = format!("{}900000 1 x\n{}", text(500), text(3));
        let mut s = LightSeries::new(series(&t));
        let mut out = Vec::new();
        s.reach(1000.0, &mut out);
        assert!(s.take_fault().is_none(), "line 501 not reached yet");
        s.reach(30_000.0, &mut out);
        assert_eq!(out.len(), 500);
        assert!(s.complete());
        assert_eq!(
            s.take_fault().unwrap().to_string(),
            "B/downlink.light: line 501: delivery time is not a number"
        );
        assert!(s.take_fault().is_none(), "once");
        assert_eq!(
            parse_light(series(&t)).unwrap_err().to_string(),
            "B/downlink.light: line 501: delivery time is not a number"
        );
    }
}
