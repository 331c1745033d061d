//! A bundle's heavy series (the saturator's delivery opportunities, one millisecond per line)
//! read as the replay reaches it (issue 29): a replay's start-up and CPU depend on how long it
//! plays, not on how long the recording is.
//!
//! At the build ([`HeavySeries::open`]): the file opened, its last line read from the file's
//! end (its time is the trace's period: the replay loops with it), and its first stretch
//! ([`FIRST_STRETCH_BYTES`]) parsed, so a fault there stops the run before its command starts.
//! The rest is parsed in chunks: [`HeavySeries::read_ahead`], per packet, parses to the
//! replay's moment and keeps the parsed times [`AHEAD_MS`] ahead of it, one chunk at a time,
//! and a time past what is parsed is parsed to on the spot ([`HeavySeries::reach`], [`HeavySeries::get`]: the simulator's
//! virtual time does only that). A fault found later is kept ([`HeavySeries::take_fault`]) and
//! ends the series where it is; the element hands it to the emulator, which ends the run with it.
//!
//! One parser ([`HeavyParser`]) reads a heavy series whole (`cellperf record --check`, the
//! export) or in chunks, with the same errors.
use crate::error::LinkError;
use crate::series::{read_series, unreadable, Series};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Bytes parsed at the build: about 20 s of a 4-Mb/s saturator (6-byte lines).
pub const FIRST_STRETCH_BYTES: usize = 64 * 1024;
/// Bytes read and parsed in one step after that (~600 lines, about a second of home-lte's
/// downlink): a step is taken on a packet's way through the replay, so it is kept small.
pub const CHUNK_BYTES: usize = 4 * 1024;
/// How far past the replay's moment the parsed times are kept (ms).
pub const AHEAD_MS: u64 = 5_000;
/// Bytes read from a file's end for its last line.
const TAIL_BYTES: u64 = 4096;

/// A heavy series parsed whole (`replay_heavy`'s parser, in one chunk).
pub(crate) fn parse_heavy(s: &Series) -> Result<Vec<u64>, LinkError> {
    let bytes = s.text.as_bytes();
    // Sized once: grown by doubling, the vector was copied about twice over.
    let mut out: Vec<u64> = Vec::with_capacity(bytes.iter().filter(|&&b| b == b'\n').count() + 1);
    let mut parser = HeavyParser::new(s.name.clone());
    parser.feed(bytes, &mut out)?;
    parser.finish(&mut out)?;
    match out.last() {
        None => Err(s.empty("heavy delivery opportunity")),
        Some(0) => Err(LinkError::file(
            &s.name,
            "the heavy trace lasts 0 ms (its last time is its period)",
        )),
        Some(_) => Ok(out),
    }
}

/// A heavy trace's line other than digits alone: `None` for a blank line or a comment.
fn heavy_line(s: &Series, line: usize, raw: &[u8]) -> Result<Option<u64>, LinkError> {
    // Split at a newline of valid UTF-8: still valid.
    let text = std::str::from_utf8(raw).unwrap_or_default().trim();
    if text.is_empty() || text.starts_with('#') {
        return Ok(None);
    }
    let f: Vec<&str> = text.split_whitespace().collect();
    s.fields(line, &f, 1, "one millisecond per line")?;
    if f[0].starts_with('-') {
        return Err(s.error(line, format!("negative time ({})", f[0])));
    }
    s.count(line, f[0], "time (ms)").map(Some)
}

/// The heavy series' parser: lines fed in chunks of any size, numbered across them.
pub struct HeavyParser {
    series: Series,
    line: usize,
    /// The start of a line the last chunk ended inside.
    partial: Vec<u8>,
}

impl HeavyParser {
    pub fn new(name: String) -> Self {
        HeavyParser {
            series: Series {
                name,
                text: String::new(),
            },
            line: 1,
            partial: Vec::new(),
        }
    }

    pub fn name(&self) -> &str {
        &self.series.name
    }

    /// Parses the whole lines of `bytes` (after the part of a line the last chunk ended
    /// with), appending their times to `out` (the times parsed before, checked in order with
    /// them); keeps a last line without its newline for the next call or `finish`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<u64>) -> Result<(), LinkError> {
        let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
            self.partial.extend_from_slice(bytes);
            return Ok(());
        };
        let mut whole = &bytes[..=end];
        if !self.partial.is_empty() {
            let first = whole.iter().position(|&b| b == b'\n').expect("has one");
            let mut line = std::mem::take(&mut self.partial);
            line.extend_from_slice(&whole[..=first]);
            self.lines(&line, out)?;
            whole = &whole[first + 1..];
        }
        self.lines(whole, out)?;
        self.partial.extend_from_slice(&bytes[end + 1..]);
        Ok(())
    }

    /// The end of the text: its last line, if it has no newline.
    pub fn finish(&mut self, out: &mut Vec<u64>) -> Result<(), LinkError> {
        if self.partial.is_empty() {
            return Ok(());
        }
        let mut line = std::mem::take(&mut self.partial);
        line.push(b'\n');
        self.lines(&line, out)
    }

    /// Whole lines (`bytes` ends with a newline). A line of digits alone is read in the one
    /// pass over the bytes (a long recording has millions of lines: splitting, checking and
    /// then reading each line was most of a replay's start-up); any other line (a comment,
    /// spaces, CR LF, a mistake) goes the way of every series.
    fn lines(&mut self, bytes: &[u8], out: &mut Vec<u64>) -> Result<(), LinkError> {
        let (mut start, mut ms, mut digits, mut plain) = (0, 0u64, 0, true);
        for (i, &b) in bytes.iter().enumerate() {
            if b != b'\n' {
                if b.is_ascii_digit() && digits < 18 {
                    ms = ms * 10 + u64::from(b - b'0');
                    digits += 1;
                } else {
                    plain = false;
                }
                continue;
            }
            let value = if plain && digits > 0 {
                Some(ms)
            } else {
                heavy_line(&self.series, self.line, &bytes[start..i])?
            };
            if let Some(value) = value {
                self.series
                    .in_order(self.line, value, out.last().copied())?;
                out.push(value);
            }
            (self.line, start, ms, digits, plain) = (self.line + 1, i + 1, 0, 0, true);
        }
        Ok(())
    }
}

/// A heavy series parsed as far as the replay has reached (and `AHEAD_MS` more), or whole.
pub struct HeavySeries {
    path: PathBuf,
    newline_ends: bool,
    parser: HeavyParser,
    /// Open while the file has more to parse.
    file: Option<std::fs::File>,
    /// The times parsed so far (ms, in order).
    times: Vec<u64>,
    /// The last line's time: the period.
    last_ms: u64,
    /// A fault found after the build, until taken.
    fault: Option<LinkError>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for HeavySeries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeavySeries")
            .field("path", &self.path)
            .field("parsed", &self.times.len())
            .field("complete", &self.complete())
            .field("last_ms", &self.last_ms)
            .finish()
    }
}

impl HeavySeries {
    /// Opens the heavy series at `path` (`newline_ends`: a last line without its newline is a
    /// file cut short): its last line read from the end and its first stretch parsed. A file
    /// whose end does not read as a time (empty, cut short, a last line that is not a whole
    /// number, a last time of 0) is parsed whole for its error, as `Bundle::load` says it.
    pub fn open(path: &Path, newline_ends: bool) -> Result<Self, LinkError> {
        let mut file = std::fs::File::open(path).map_err(|e| unreadable(path, e))?;
        let Some(last_ms) = last_time(&mut file, newline_ends).filter(|&ms| ms > 0) else {
            return Self::whole(path, newline_ends);
        };
        file.seek(SeekFrom::Start(0))
            .map_err(|e| unreadable(path, e))?;
        let mut s = HeavySeries {
            path: path.to_path_buf(),
            newline_ends,
            parser: HeavyParser::new(path.display().to_string()),
            file: Some(file),
            times: Vec::new(),
            last_ms,
            fault: None,
            buf: Vec::new(),
        };
        s.step(FIRST_STRETCH_BYTES);
        // A stretch of comments only: on to the first time.
        while s.times.is_empty() && s.file.is_some() {
            s.step(CHUNK_BYTES);
        }
        match s.fault.take() {
            Some(e) => Err(e),
            None if s.times.is_empty() => Self::whole(path, newline_ends),
            None => Ok(s),
        }
    }

    /// The same file opened again, from its start (the link's capacity meter reads it apart
    /// from the replay).
    pub fn reopen(&self) -> Result<Self, LinkError> {
        Self::open(&self.path, self.newline_ends)
    }

    /// The series parsed whole.
    fn whole(path: &Path, newline_ends: bool) -> Result<Self, LinkError> {
        let times = parse_heavy(&read_series(path, newline_ends)?)?;
        let mut s = Self::from_times(times);
        s.path = path.to_path_buf();
        s.parser = HeavyParser::new(path.display().to_string());
        Ok(s)
    }

    /// A series already parsed (ms, non-decreasing, not empty; the last > 0).
    pub fn from_times(times: Vec<u64>) -> Self {
        HeavySeries {
            path: PathBuf::new(),
            newline_ends: true,
            parser: HeavyParser::new(String::new()),
            file: None,
            last_ms: times.last().copied().unwrap_or(1).max(1),
            times,
            fault: None,
            buf: Vec::new(),
        }
    }

    /// The last line's time (the period; known from the build).
    pub fn last_ms(&self) -> u64 {
        self.last_ms
    }

    /// The times parsed so far.
    pub fn parsed(&self) -> &[u64] {
        &self.times
    }

    /// Whether the whole file is parsed (or a fault ended it).
    pub fn complete(&self) -> bool {
        self.file.is_none()
    }

    /// The times, parsed on until one is after `ms` (or to the file's end).
    pub fn reach(&mut self, ms: u64) -> &[u64] {
        while self.file.is_some() && self.times.last().is_none_or(|&t| t <= ms) {
            self.step(CHUNK_BYTES);
        }
        &self.times
    }

    /// The `i`th time, parsed to if need be; None past the series' end.
    pub fn get(&mut self, i: usize) -> Option<u64> {
        while self.file.is_some() && self.times.len() <= i {
            self.step(CHUNK_BYTES);
        }
        self.times.get(i).copied()
    }

    /// Called per packet with the replay's moment `ms`: parses on to it if the parsed times
    /// end before it (a packet after a long idle: the idle's stretch), then one chunk more if
    /// they end less than `AHEAD_MS` after it. The horizon so follows the replay's clock a
    /// small step at a time, whether or not the packets use the heavy opportunities (a light
    /// flow in mode `full` never does), and a fault is found up to `AHEAD_MS` before the
    /// replay needs its line.
    pub fn read_ahead(&mut self, ms: u64) {
        self.reach(ms);
        if self.file.is_some() && self.times.last().is_none_or(|&t| t <= ms + AHEAD_MS) {
            self.step(CHUNK_BYTES);
        }
    }

    /// The fault found after the build, once.
    pub fn take_fault(&mut self) -> Option<LinkError> {
        self.fault.take()
    }

    /// Reads and parses up to `bytes` more; at the file's end, its last line. A fault (or a
    /// read error) is kept and ends the series at the times parsed before it.
    fn step(&mut self, bytes: usize) {
        let Some(file) = &mut self.file else { return };
        self.buf.resize(bytes, 0);
        let result = match file.read(&mut self.buf) {
            Err(e) => Err(LinkError::file(
                self.parser.name(),
                format!("cannot read ({e})"),
            )),
            Ok(0) => {
                self.file = None;
                self.parser.finish(&mut self.times)
            }
            Ok(n) => self.parser.feed(&self.buf[..n], &mut self.times),
        };
        let result = result.and_then(|()| self.past_last());
        if let Err(e) = result {
            self.file = None;
            self.fault.get_or_insert(e);
        }
    }

    /// Refuses a time after the last line's, as the parse in order would once it got there.
    fn past_last(&mut self) -> Result<(), LinkError> {
        match self.times.last() {
            Some(&t) if t > self.last_ms => {
                let i = self.times.partition_point(|&x| x <= self.last_ms);
                self.times.truncate(i);
                Err(LinkError::file(
                    self.parser.name(),
                    format!(
                        "times go backwards (the last line's {} is before {t})",
                        self.last_ms
                    ),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// The time on the last line of `file` that is not blank or a comment, read from its end;
/// None if the end does not read as one (the whole parse then says why).
fn last_time(file: &mut std::fs::File, newline_ends: bool) -> Option<u64> {
    let len = file.metadata().ok()?.len();
    let from = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(from)).ok()?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).ok()?;
    if newline_ends && tail.last() != Some(&b'\n') {
        return None;
    }
    let text = std::str::from_utf8(&tail).ok()?;
    let mut lines = text.lines();
    // The first line of a tail read from inside the file may be cut: never taken.
    let skip_first = usize::from(from > 0);
    let count = text.lines().count();
    let line = lines
        .by_ref()
        .rev()
        .take(count.saturating_sub(skip_first))
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))?;
    let mut fields = line.split_whitespace();
    let (ms, None) = (fields.next()?, fields.next()) else {
        return None;
    };
    ms.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| ms.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("cellperf-heavy-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// One opportunity a ms for `seconds`.
    fn long_trace(seconds: u64) -> String {
        (1..=seconds * 1000).map(|ms| format!("{ms}\n")).collect()
    }

    #[test]
    fn chunks_of_any_size_parse_as_the_whole() {
        let text = "# c\n1\n2\n \n3\r\n10\n";
        let mut whole = Vec::new();
        let mut p = HeavyParser::new("t".into());
        p.feed(text.as_bytes(), &mut whole).unwrap();
        p.finish(&mut whole).unwrap();
        assert_eq!(whole, vec![1, 2, 3, 10]);
        for size in 1..text.len() {
            let (mut out, mut p) = (Vec::new(), HeavyParser::new("t".into()));
            for chunk in text.as_bytes().chunks(size) {
                p.feed(chunk, &mut out).unwrap();
            }
            p.finish(&mut out).unwrap();
            assert_eq!(out, whole, "chunks of {size}");
        }
        // Line numbers count across chunks.
        let mut p = HeavyParser::new("t".into());
        let mut out = Vec::new();
        p.feed(b"1\n2\n", &mut out).unwrap();
        let e = p.feed(b"x\n", &mut out).unwrap_err().to_string();
        assert_eq!(e, "t: line 3: time (ms) is not a whole number ≥ 0");
    }

    #[test]
    fn the_build_reads_the_first_stretch_and_the_last_line_only() {
        let path = file("long", &long_trace(600));
        let s = HeavySeries::open(&path, true).unwrap();
        assert_eq!(s.last_ms(), 600_000);
        assert!(!s.complete());
        // 64 KB of 5-7-byte lines: some 10,000 ms of the 600,000.
        let parsed = s.parsed().len();
        assert!((9_000..13_000).contains(&parsed), "{parsed}");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_fault_past_the_first_stretch_is_kept_and_ends_the_series() {
        let mut text = long_trace(60);
        text = text.replacen("40000\n", "40000.5\n", 1);
        let path = file("fault", &text);
        let mut s = HeavySeries::open(&path, true).unwrap();
        assert_eq!(s.take_fault(), None);
        assert_eq!(s.reach(30_000).partition_point(|&t| t <= 30_000), 30_000);
        assert_eq!(s.take_fault(), None);
        s.reach(45_000);
        let e = s.take_fault().unwrap().to_string();
        assert_eq!(
            e,
            format!(
                "{}: line 40000: time (ms) is not a whole number ≥ 0",
                path.display()
            )
        );
        assert!(s.complete() && s.take_fault().is_none());
        // Everything before the fault is there; the series ends there.
        assert_eq!(s.parsed().last(), Some(&39_999));
        assert_eq!(s.get(40_000), None);
        // In the first stretch it is the build's error.
        let path2 = file("early", &text.replacen("100\n", "-100\n", 1));
        let e = HeavySeries::open(&path2, true).unwrap_err().to_string();
        assert!(e.ends_with("line 100: negative time (-100)"), "{e}");
        for p in [path, path2] {
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn a_bad_end_is_the_whole_parses_error() {
        for (text, want) in [
            ("1\n2\n3", "line 3: truncated (the file ends inside a line)"),
            ("1\n2\nx\n", "line 3: time (ms) is not a whole number ≥ 0"),
            ("", "the heavy delivery opportunity series is empty"),
            (
                "0\n0\n",
                "the heavy trace lasts 0 ms (its last time is its period)",
            ),
        ] {
            let path = file("end", text);
            let e = HeavySeries::open(&path, true).unwrap_err().to_string();
            assert!(e.ends_with(want), "{e} / {want}");
            let _ = std::fs::remove_file(path);
        }
        // CellReplay's files may end without a newline.
        let path = file("cr", "1\n5\n7");
        let mut s = HeavySeries::open(&path, false).unwrap();
        assert_eq!((s.last_ms(), s.reach(100).to_vec()), (7, vec![1, 5, 7]));
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn reading_ahead_keeps_the_horizon_a_few_seconds_past_the_moment() {
        let path = file("ahead", &long_trace(600));
        let mut s = HeavySeries::open(&path, true).unwrap();
        for ms in (0..60_000).step_by(10) {
            s.read_ahead(ms);
            let horizon = *s.parsed().last().unwrap();
            assert!(horizon > ms + AHEAD_MS - 3_000, "{horizon} at {ms}");
        }
        // Never much more than the moment + AHEAD_MS + a chunk (~700 lines).
        assert!(*s.parsed().last().unwrap() < 60_000 + AHEAD_MS + 3_000);
        let _ = std::fs::remove_file(path);
    }
}
