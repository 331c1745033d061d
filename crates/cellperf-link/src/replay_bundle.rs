//! The recorded link a replay runs on, read from a cellperf recording bundle (docs/formats.md,
//! "Recording bundle") or from CellReplay's own trace folder (`up-delay-light-pdo`,
//! `down-delay-light-pdo`, `up-heavy-pdo`, `down-heavy-pdo`, optional `latency-offset-up` /
//! `latency-offset-down`). Both hold the same series, so both become one [`Bundle`].
//!
//! Every problem is one line naming the file and, inside a series, the line:
//! `BUNDLE/downlink.light: line 12: times go backwards (1400.0 after 1600.0)`. A line is never
//! quoted (a path may name any file). A cellperf bundle's files end with a newline; a last line
//! without one is a file cut short (a copy interrupted, a disk full) and is refused.
use crate::error::LinkError;
use crate::replay_heavy::{parse_heavy, HeavySeries};
use crate::replay_light::{parse_light, LightSeries, Train};
use crate::series::{read, read_series, unreadable, Series};
use serde::Deserialize;
use std::path::{Path, PathBuf};

pub const FORMAT: &str = "cellperf-recording";
pub const VERSION: u64 = 1;

/// The light trains' packets sent and lost in a window starting at `start_ms`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossWindow {
    pub start_ms: f64,
    pub sent: u64,
    pub lost: u64,
}

/// Everything recorded for one direction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirectionTrace {
    pub light: Vec<Train>,
    /// The saturator's delivery opportunities (one 1500-byte packet each), ms from the start.
    pub heavy_ms: Vec<u64>,
    /// (packet size in bytes, extra one-way delay in ms), sizes increasing; may be empty.
    pub offset: Vec<(f64, f64)>,
    pub loss: Vec<LossWindow>,
    /// [start, end) in ms with no delivery in this direction.
    pub outages: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleKind {
    Cellperf,
    CellReplay,
}

#[derive(Debug, Clone)]
pub struct Bundle {
    pub path: PathBuf,
    pub kind: BundleKind,
    /// How long the recording is: the replay loops with this period.
    pub duration_ms: f64,
    /// False when the recording was cut short (still usable).
    pub complete: bool,
    pub downlink: Option<DirectionTrace>,
    pub uplink: Option<DirectionTrace>,
}

/// The manifest's format and version, read before the rest: a manifest of another format or
/// version is refused as such, whatever else it holds or lacks.
#[derive(Deserialize)]
struct Header {
    format: Option<serde_json::Value>,
    version: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Manifest {
    duration_s: f64,
    #[serde(default = "yes")]
    complete: bool,
    directions: Vec<String>,
}

fn yes() -> bool {
    true
}

/// CellReplay's file names, by direction.
const CELLREPLAY_FILES: [(&str, &str, &str); 2] = [
    (
        "down-delay-light-pdo",
        "down-heavy-pdo",
        "latency-offset-down",
    ),
    ("up-delay-light-pdo", "up-heavy-pdo", "latency-offset-up"),
];

impl Bundle {
    /// Reads and checks a bundle folder of either kind.
    pub fn load(path: &str) -> Result<Bundle, LinkError> {
        Self::open(path, None)
    }

    /// Reads and checks the manifest and the series of one direction only (a cellperf
    /// bundle; a CellReplay folder is read whole: its period is the longer direction's). Each
    /// direction's replay reads its own: a long recording's series are read once, not twice.
    pub fn load_direction(path: &str, direction: &str) -> Result<Bundle, LinkError> {
        Self::open(path, Some(direction))
    }

    /// One direction for a replay: its small series parsed; the heavy one opened
    /// (`HeavySeries::open`: its first stretch and last line) and the light one read, both
    /// parsed as the replay reaches them (`trace.light` and `trace.heavy_ms` empty). A
    /// CellReplay folder's light series are parsed whole (its period is the longer
    /// direction's: `LightSeries::parsed`, the trains in `trace.light`), its heavy ones opened.
    pub fn open_direction(
        path: &str,
        direction: &str,
    ) -> Result<(Bundle, DirectionTrace, HeavySeries, LightSeries), LinkError> {
        let (mut b, opened) = Self::read(path, Some(direction), true)?;
        let trace = match direction {
            "downlink" => b.downlink.take(),
            "uplink" => b.uplink.take(),
            _ => None,
        };
        let series = opened.into_iter().find(|o| o.direction == direction);
        match (trace, series) {
            (Some(trace), Some(o)) => Ok((b, trace, o.heavy, o.light)),
            _ => Err(no_direction(path, direction)),
        }
    }

    fn open(path: &str, only: Option<&str>) -> Result<Bundle, LinkError> {
        Ok(Self::read(path, only, false)?.0)
    }

    /// The bundle, with its light and heavy series parsed whole, or (`lazy`) opened and
    /// returned apart by direction.
    fn read(path: &str, only: Option<&str>, lazy: bool) -> Result<(Bundle, Opened), LinkError> {
        match Self::kind(path)? {
            BundleKind::Cellperf => Self::load_cellperf(Path::new(path), only, lazy),
            BundleKind::CellReplay => Self::load_cellreplay(Path::new(path), lazy),
        }
    }

    /// A cellperf bundle (a manifest) or a CellReplay folder (its trace files), or the error.
    fn kind(path: &str) -> Result<BundleKind, LinkError> {
        let dir = Path::new(path);
        if !dir.is_dir() {
            return Err(LinkError::file(
                path,
                "not a recording bundle (expected a folder with manifest.json, or CellReplay's trace files)",
            ));
        }
        if dir.join("manifest.json").exists() {
            Ok(BundleKind::Cellperf)
        } else if dir.join(CELLREPLAY_FILES[0].0).exists()
            || dir.join(CELLREPLAY_FILES[1].0).exists()
        {
            Ok(BundleKind::CellReplay)
        } else {
            Err(LinkError::file(
                path,
                "not a recording bundle: no manifest.json and no CellReplay trace files (down-delay-light-pdo, ...)",
            ))
        }
    }

    /// What the bundle holds, for `cellperf record --check` and `cellperf replay check`.
    pub fn summary(&self) -> serde_json::Value {
        let mut directions = serde_json::Map::new();
        for (name, trace) in [("downlink", &self.downlink), ("uplink", &self.uplink)] {
            if let Some(t) = trace {
                directions.insert(name.into(), t.summary());
            }
        }
        serde_json::json!({
            "path": self.path.display().to_string(),
            "kind": match self.kind { BundleKind::Cellperf => FORMAT, BundleKind::CellReplay => "cellreplay" },
            "duration_s": self.duration_ms / 1000.0,
            "complete": self.complete,
            "directions": directions,
        })
    }

    /// Writes one direction's heavy opportunities to `target` as a mahimahi trace (one
    /// millisecond per line, what `mm-link` reads), whole or not at all.
    pub fn write_heavy(&self, direction: &str, target: &str) -> Result<(), LinkError> {
        use std::io::Write;
        let trace = self.direction(direction).ok_or_else(|| {
            LinkError::file(
                &self.path.display().to_string(),
                format!("the recording has no {direction}"),
            )
        })?;
        let partial = format!("{target}.partial");
        let write = || -> std::io::Result<()> {
            let mut out = std::io::BufWriter::new(std::fs::File::create(&partial)?);
            for ms in &trace.heavy_ms {
                writeln!(out, "{ms}")?;
            }
            out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            std::fs::rename(&partial, target)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&partial);
            LinkError::file(target, format!("cannot write ({e})"))
        })
    }

    pub fn direction(&self, name: &str) -> Option<&DirectionTrace> {
        match name {
            "downlink" => self.downlink.as_ref(),
            "uplink" => self.uplink.as_ref(),
            _ => None,
        }
    }

    /// Checks what a replay of one direction needs without parsing its series: the manifest
    /// (format, version, duration, directions) and the direction's files, readable. The series'
    /// own errors come, once, when the replay parses them (`replay::replay_link`, and the
    /// heavy series' as the replay reaches them: `replay_heavy`).
    pub fn check_direction(path: &str, direction: &str) -> Result<(), LinkError> {
        let dir = Path::new(path);
        let files: Vec<PathBuf> = match Self::kind(path)? {
            BundleKind::Cellperf => {
                let manifest = read_manifest(dir)?;
                if !manifest.directions.iter().any(|d| d == direction) {
                    return Err(no_direction(path, direction));
                }
                // In the order `load_cellperf` reads them.
                std::iter::once(dir.join("outages"))
                    .chain(
                        ["light", "heavy", "offset", "loss"]
                            .iter()
                            .map(|series| dir.join(format!("{direction}.{series}"))),
                    )
                    .collect()
            }
            // Read whole (`load_cellreplay`): both directions' trains and saturator traces.
            BundleKind::CellReplay => CELLREPLAY_FILES
                .iter()
                .flat_map(|(light, heavy, _)| [dir.join(light), dir.join(heavy)])
                .collect(),
        };
        for file in files {
            std::fs::File::open(&file).map_err(|e| unreadable(&file, e))?;
        }
        Ok(())
    }

    fn load_cellperf(
        dir: &Path,
        only: Option<&str>,
        lazy: bool,
    ) -> Result<(Bundle, Opened), LinkError> {
        let manifest = read_manifest(dir)?;
        let outage_lines = read_series(&dir.join("outages"), true)?;
        let mut bundle = Bundle {
            path: dir.to_path_buf(),
            kind: BundleKind::Cellperf,
            duration_ms: manifest.duration_s * 1000.0,
            complete: manifest.complete,
            downlink: None,
            uplink: None,
        };
        let mut opened = Vec::new();
        for direction in &manifest.directions {
            if only.is_some_and(|o| o != direction) {
                continue;
            }
            let light = read_series(&dir.join(format!("{direction}.light")), true)?;
            let (light, heavy_ms) = if lazy {
                let mut trains = Vec::new();
                let light = LightSeries::open(light, &mut trains)?;
                let heavy = HeavySeries::open(&dir.join(format!("{direction}.heavy")), true)?;
                opened.push(OpenedDirection {
                    direction: direction.clone(),
                    heavy,
                    light,
                });
                (trains, Vec::new())
            } else {
                let heavy = read_series(&dir.join(format!("{direction}.heavy")), true)?;
                (parse_light(light)?, parse_heavy(&heavy)?)
            };
            let trace = DirectionTrace {
                light,
                heavy_ms,
                offset: parse_offset(&read_series(
                    &dir.join(format!("{direction}.offset")),
                    true,
                )?)?,
                loss: parse_loss(&read_series(&dir.join(format!("{direction}.loss")), true)?)?,
                outages: parse_outages(&outage_lines, direction)?,
            };
            if direction == "downlink" {
                bundle.downlink = Some(trace);
            } else {
                bundle.uplink = Some(trace);
            }
        }
        Ok((bundle, opened))
    }

    fn load_cellreplay(dir: &Path, lazy: bool) -> Result<(Bundle, Opened), LinkError> {
        let mut traces = Vec::new();
        let mut opened = Vec::new();
        let mut duration_ms = 0.0f64;
        for ((light, heavy_file, offset), direction) in
            CELLREPLAY_FILES.into_iter().zip(["downlink", "uplink"])
        {
            let offset_path = dir.join(offset);
            let light = parse_light(read_series(&dir.join(light), false)?)?;
            let heavy_path = dir.join(heavy_file);
            let (heavy_ms, heavy_last) = if lazy {
                let heavy = HeavySeries::open(&heavy_path, false)?;
                let last = heavy.last_ms();
                opened.push(OpenedDirection {
                    direction: direction.to_string(),
                    heavy,
                    light: LightSeries::parsed(),
                });
                (Vec::new(), last)
            } else {
                let heavy = parse_heavy(&read_series(&heavy_path, false)?)?;
                let last = heavy.last().copied().unwrap_or(0);
                (heavy, last)
            };
            let trace = DirectionTrace {
                light,
                heavy_ms,
                offset: if offset_path.exists() {
                    parse_offset(&read_series(&offset_path, false)?)?
                } else {
                    Vec::new()
                },
                loss: Vec::new(),
                outages: Vec::new(),
            };
            duration_ms = duration_ms.max(trace.period_hint_ms(heavy_last));
            traces.push(trace);
        }
        let uplink = traces.pop();
        let downlink = traces.pop();
        let bundle = Bundle {
            path: dir.to_path_buf(),
            kind: BundleKind::CellReplay,
            duration_ms,
            complete: true,
            downlink,
            uplink,
        };
        Ok((bundle, opened))
    }
}

/// A direction's series a replay parses as it reaches them (`Bundle::open_direction`).
struct OpenedDirection {
    direction: String,
    heavy: HeavySeries,
    light: LightSeries,
}

type Opened = Vec<OpenedDirection>;

impl DirectionTrace {
    fn summary(&self) -> serde_json::Value {
        let bases = self.light.iter().map(|t| t.base_delay_ms);
        let heavy_s = self.heavy_ms.last().copied().unwrap_or(0) as f64 / 1000.0;
        serde_json::json!({
            "trains": self.light.len(),
            "light_opportunities": self.light.iter().map(|t| t.pdo_ms.len()).sum::<usize>(),
            "heavy_opportunities": self.heavy_ms.len(),
            "heavy_mbps": if heavy_s > 0.0 { self.heavy_ms.len() as f64 * 1500.0 * 8.0 / heavy_s / 1e6 } else { 0.0 },
            "base_delay_ms": {
                "min": bases.clone().fold(f64::INFINITY, f64::min),
                "mean": bases.clone().sum::<f64>() / self.light.len().max(1) as f64,
                "max": bases.fold(f64::NEG_INFINITY, f64::max),
            },
            "offset_sizes": self.offset.len(),
            "loss_windows": self.loss.len(),
            "sent": self.loss.iter().map(|w| w.sent).sum::<u64>(),
            "lost": self.loss.iter().map(|w| w.lost).sum::<u64>(),
            "outages": self.outages.len(),
            "outage_s": self.outages.iter().map(|(s, e)| e - s).sum::<f64>() / 1000.0,
        })
    }

    /// The last time any series of this direction mentions (`heavy_last`: the heavy
    /// series' last time).
    fn period_hint_ms(&self, heavy_last: u64) -> f64 {
        let light = self
            .light
            .last()
            .map_or(0.0, |t| t.at_ms + t.pdo_ms.last().copied().unwrap_or(0.0));
        light.max(heavy_last as f64)
    }

    /// The base delay at recording time `t_ms`: linear between the trains around it, held
    /// before the first and after the last (the light trains sample it every train period).
    pub fn base_delay_ms(&self, t_ms: f64) -> f64 {
        let i = self.light.partition_point(|tr| tr.at_ms <= t_ms);
        if i == 0 {
            return self.light[0].base_delay_ms;
        }
        if i == self.light.len() {
            return self.light[i - 1].base_delay_ms;
        }
        let (a, b) = (&self.light[i - 1], &self.light[i]);
        let span = b.at_ms - a.at_ms;
        if span <= 0.0 {
            return b.base_delay_ms;
        }
        a.base_delay_ms + (b.base_delay_ms - a.base_delay_ms) * (t_ms - a.at_ms) / span
    }

    /// The least base delay of the light series within `reach_ms` of `t_ms` (`base_delay_ms`
    /// there without a train in reach): the link's delay without what a packet that finds it
    /// idle waits on top (the uplink's request for a grant, a fade at the train's start),
    /// as far as the trains nearby show it.
    pub fn base_floor_ms(&self, t_ms: f64, reach_ms: f64) -> f64 {
        let from = self.light.partition_point(|tr| tr.at_ms < t_ms - reach_ms);
        let to = self.light.partition_point(|tr| tr.at_ms <= t_ms + reach_ms);
        self.light[from..to]
            .iter()
            .map(|tr| tr.base_delay_ms)
            .reduce(f64::min)
            .unwrap_or_else(|| self.base_delay_ms(t_ms))
    }

    /// The extra one-way delay of a packet of `bytes`: linear between recorded sizes, the
    /// nearest recorded value outside them, 0 without an offset series.
    pub fn offset_ms(&self, bytes: usize) -> f64 {
        let size = bytes as f64;
        let i = self.offset.partition_point(|&(s, _)| s <= size);
        match (i, self.offset.len()) {
            (_, 0) => 0.0,
            (0, _) => self.offset[0].1,
            (i, n) if i == n => self.offset[n - 1].1,
            (i, _) => {
                let ((s0, o0), (s1, o1)) = (self.offset[i - 1], self.offset[i]);
                o0 + (o1 - o0) * (size - s0) / (s1 - s0)
            }
        }
    }

    /// The loss probability of the window holding recording time `t_ms` (0 outside windows).
    pub fn loss_probability(&self, t_ms: f64) -> f64 {
        let i = self.loss.partition_point(|w| w.start_ms <= t_ms);
        if i == 0 {
            return 0.0;
        }
        let w = self.loss[i - 1];
        let end = self.loss.get(i).map_or(w.start_ms + LOSS_WINDOW_MS, |n| {
            n.start_ms.min(w.start_ms + LOSS_WINDOW_MS)
        });
        if t_ms >= end || w.sent == 0 {
            0.0
        } else {
            w.lost as f64 / w.sent as f64
        }
    }

    /// The end of the outage holding recording time `t_ms`, if one does.
    pub fn outage_end_ms(&self, t_ms: f64) -> Option<f64> {
        let i = self.outages.partition_point(|&(s, _)| s <= t_ms);
        (i > 0 && t_ms < self.outages[i - 1].1).then(|| self.outages[i - 1].1)
    }
}

/// The loss series' window (docs/formats.md).
pub const LOSS_WINDOW_MS: f64 = 1000.0;

/// A cellperf bundle's manifest, read and checked: its format and version first, then the
/// duration and the directions.
fn read_manifest(dir: &Path) -> Result<Manifest, LinkError> {
    let manifest_path = dir.join("manifest.json");
    let name = manifest_path.display().to_string();
    let text = read(&manifest_path)?;
    let invalid = |e: serde_json::Error| {
        let problem = if e.is_eof() {
            "truncated (the JSON ends early)".to_string()
        } else {
            format!("not a bundle manifest ({e})")
        };
        LinkError::file(&name, problem)
    };
    let header: Header = serde_json::from_str(&text).map_err(invalid)?;
    let format = header.format.as_ref().and_then(|v| v.as_str());
    let version = header.version.as_ref().and_then(|v| v.as_u64());
    if format != Some(FORMAT) || version != Some(VERSION) {
        let shown =
            |v: &Option<serde_json::Value>| v.as_ref().map_or("none".into(), |v| v.to_string());
        return Err(LinkError::file(
            &name,
            format!(
                "format {} version {}: this cellperf reads format \"{FORMAT}\" version {VERSION}",
                shown(&header.format),
                shown(&header.version)
            ),
        ));
    }
    let manifest: Manifest = serde_json::from_str(&text).map_err(invalid)?;
    if !(manifest.duration_s.is_finite() && manifest.duration_s > 0.0) {
        return Err(LinkError::file(
            &name,
            format!(
                "duration_s {} is not a positive number of seconds",
                manifest.duration_s
            ),
        ));
    }
    if manifest.directions.is_empty() {
        return Err(LinkError::file(
            &name,
            "directions is empty: the bundle records nothing",
        ));
    }
    if let Some(d) = manifest
        .directions
        .iter()
        .find(|d| *d != "downlink" && *d != "uplink")
    {
        return Err(LinkError::file(
            &name,
            format!("direction {d:?} is not downlink or uplink"),
        ));
    }
    Ok(manifest)
}

/// The error of a replay of a direction the recording does not have.
pub fn no_direction(bundle: &str, direction: &str) -> LinkError {
    LinkError::file(
        bundle,
        format!("the recording has no {direction} (its manifest's directions)"),
    )
}

fn parse_offset(s: &Series) -> Result<Vec<(f64, f64)>, LinkError> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (line, f) in s.rows() {
        s.fields(line, &f, 2, "size_bytes offset_ms")?;
        let size = s.non_negative(line, f[0], "packet size")?;
        let offset = s.number(line, f[1], "offset")?;
        if let Some(&(prev, _)) = out.last() {
            if size <= prev {
                return Err(s.error(line, format!("sizes must increase ({size} after {prev})")));
            }
        }
        out.push((size, offset));
    }
    if out.is_empty() {
        return Err(s.empty("latency offset"));
    }
    Ok(out)
}

fn parse_loss(s: &Series) -> Result<Vec<LossWindow>, LinkError> {
    let mut out: Vec<LossWindow> = Vec::new();
    for (line, f) in s.rows() {
        s.fields(line, &f, 3, "start_ms sent lost")?;
        let start_ms = s.non_negative(line, f[0], "window start")?;
        s.in_order(line, start_ms, out.last().map(|w| w.start_ms))?;
        let sent = s.count(line, f[1], "sent")?;
        let lost = s.count(line, f[2], "lost")?;
        if lost > sent {
            return Err(s.error(line, format!("{lost} lost of {sent} sent")));
        }
        out.push(LossWindow {
            start_ms,
            sent,
            lost,
        });
    }
    if out.is_empty() {
        return Err(s.empty("loss"));
    }
    Ok(out)
}

/// One direction's outages from the shared `outages` file (which may be empty: none happened).
fn parse_outages(s: &Series, direction: &str) -> Result<Vec<(f64, f64)>, LinkError> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (line, f) in s.rows() {
        s.fields(line, &f, 3, "direction start_ms end_ms")?;
        if f[0] != "downlink" && f[0] != "uplink" {
            return Err(s.error(line, "the direction is not downlink or uplink"));
        }
        let start = s.non_negative(line, f[1], "start")?;
        let end = s.non_negative(line, f[2], "end")?;
        if end <= start {
            return Err(s.error(
                line,
                format!("the outage ends ({end}) before it starts ({start})"),
            ));
        }
        if f[0] != direction {
            continue;
        }
        if let Some(&(_, prev_end)) = out.last() {
            if start < prev_end {
                return Err(s.error(line, format!("times go backwards ({start:.1} before the previous outage's end {prev_end:.1})")));
            }
        }
        out.push((start, end));
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A bundle folder written for a test: its path, the folder removed when dropped (every
    /// run of the tests left ten of them in the temporary directory).
    pub struct TestBundle(String);

    impl std::ops::Deref for TestBundle {
        type Target = str;
        fn deref(&self) -> &str {
            &self.0
        }
    }

    impl Drop for TestBundle {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Writes a bundle folder from (file name, text) pairs.
    pub fn write_bundle(name: &str, files: &[(&str, &str)]) -> TestBundle {
        let dir =
            std::env::temp_dir().join(format!("cellperf-bundle-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, text) in files {
            std::fs::write(dir.join(file), text).unwrap();
        }
        TestBundle(dir.display().to_string())
    }

    pub const MANIFEST: &str = r#"{"format": "cellperf-recording", "version": 1, "duration_s": 10.0, "complete": true,
        "directions": ["downlink", "uplink"], "train_lengths": [10, 100], "train_period_ms": 200.0, "packet_size": 1400}"#;

    /// A small valid bundle with `overrides` replacing its files.
    pub fn bundle_with(name: &str, overrides: &[(&str, &str)]) -> TestBundle {
        let mut files: Vec<(&str, &str)> = vec![
            ("manifest.json", MANIFEST),
            (
                "downlink.light",
                "# t base pdo...\n0 20 0 1 2\n200.5 30 0 2\n",
            ),
            ("uplink.light", "0 10 0 3\n"),
            ("downlink.heavy", "1\n2\n3\n10\n"),
            ("uplink.heavy", "5\n10\n"),
            ("downlink.offset", "100 0\n1400 2.6\n"),
            ("uplink.offset", "100 0\n"),
            ("downlink.loss", "0 20 1\n1000 10 0\n"),
            ("uplink.loss", "0 2 0\n"),
            ("outages", "downlink 3000 4000\n"),
        ];
        for (file, text) in overrides {
            files.retain(|(f, _)| f != file);
            files.push((file, text));
        }
        write_bundle(name, &files)
    }

    #[test]
    fn a_bundle_reads_with_its_series() {
        let b = Bundle::load(&bundle_with("good", &[])).unwrap();
        let d = b.downlink.as_ref().unwrap();
        assert_eq!(b.duration_ms, 10_000.0);
        assert_eq!(
            d.light[1],
            Train {
                at_ms: 200.5,
                base_delay_ms: 30.0,
                pdo_ms: vec![0.0, 2.0]
            }
        );
        assert_eq!(d.heavy_ms, vec![1, 2, 3, 10]);
        assert_eq!(d.outages, vec![(3000.0, 4000.0)]);
        assert!(b.uplink.as_ref().unwrap().outages.is_empty());
        // Base delay: linear between trains, held outside.
        assert_eq!(d.base_delay_ms(100.25), 25.0);
        assert_eq!(d.base_delay_ms(5000.0), 30.0);
        assert!((d.offset_ms(750) - 1.3).abs() < 1e-12);
        assert_eq!(d.offset_ms(50), 0.0);
        assert_eq!(d.offset_ms(1500), 2.6);
        assert_eq!(d.loss_probability(999.0), 0.05);
        assert_eq!(d.loss_probability(1500.0), 0.0);
        assert_eq!(d.outage_end_ms(3500.0), Some(4000.0));
        assert_eq!(d.outage_end_ms(4000.0), None);
        let summary = b.summary();
        assert_eq!(summary["directions"]["downlink"]["light_opportunities"], 5);
        assert_eq!(summary["directions"]["downlink"]["lost"], 1);
        assert_eq!(summary["directions"]["downlink"]["outage_s"], 1.0);
        assert_eq!(summary["kind"], "cellperf-recording");
    }

    #[test]
    fn bad_bundles_are_one_line_naming_file_and_line() {
        let cases: [(&str, &str, &str); 9] = [
            (
                "downlink.light",
                "0 20 0 1\n100 20 0",
                "downlink.light: line 2: truncated",
            ),
            (
                "manifest.json",
                r#"{"format": "cellperf-recording", "version": 2, "duration_s": 1, "directions": ["uplink"]}"#,
                "manifest.json: format \"cellperf-recording\" version 2: this cellperf reads",
            ),
            (
                "manifest.json",
                r#"{"format": "cellperf-recording", "version": 1, "dur"#,
                "manifest.json: truncated",
            ),
            (
                "downlink.light",
                "0 20 0\n-5 20 0\n",
                "downlink.light: line 2: negative time (-5)",
            ),
            (
                "downlink.light",
                "1600 20 0\n1400 20 0\n",
                "downlink.light: line 2: times go backwards (1400.0 after 1600.0)",
            ),
            (
                "downlink.heavy",
                "# nothing\n",
                "downlink.heavy: the heavy delivery opportunity series is empty",
            ),
            (
                "uplink.loss",
                "0 5 6\n",
                "uplink.loss: line 1: 6 lost of 5 sent",
            ),
            (
                "outages",
                "uplink 50 20\n",
                "outages: line 1: the outage ends (20) before it starts (50)",
            ),
            (
                "downlink.heavy",
                "3\n2\n",
                "downlink.heavy: line 2: times go backwards (2 after 3)",
            ),
        ];
        for (i, (file, text, want)) in cases.iter().enumerate() {
            let path = bundle_with(&format!("bad{i}"), &[(file, text)]);
            let err = Bundle::load(&path).err().expect(want).to_string();
            assert!(err.contains(want) && !err.contains('\n'), "{err} / {want}");
            assert!(err.starts_with(&*path), "{err}");
        }
        let path = write_bundle("missing", &[("manifest.json", MANIFEST)]);
        let err = Bundle::load(&path).err().unwrap().to_string();
        assert!(err.ends_with("outages: missing from the bundle"), "{err}");
    }

    #[test]
    fn one_direction_reads_its_own_series_only() {
        // Each direction's replay reads its own files: a broken uplink does not stop the
        // downlink, and the uplink's error names its file and line.
        let path = bundle_with("onedir", &[("uplink.heavy", "5\n2\n")]);
        let b = Bundle::load_direction(&path, "downlink").unwrap();
        assert!(b.downlink.is_some() && b.uplink.is_none());
        assert_eq!(b.downlink.unwrap().heavy_ms, vec![1, 2, 3, 10]);
        let err = Bundle::load_direction(&path, "uplink")
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.ends_with("uplink.heavy: line 2: times go backwards (2 after 5)"),
            "{err}"
        );
        // A heavy line that is not one whole number says why, as before the fast path.
        for (text, want) in [
            (
                "1\n2 3\n",
                "line 2: expected 1 fields (one millisecond per line), found 2",
            ),
            ("1\n-4\n", "line 2: negative time (-4)"),
            ("1\n2.5\n", "line 2: time (ms) is not a whole number ≥ 0"),
        ] {
            let path = bundle_with("heavyline", &[("downlink.heavy", text)]);
            let err = Bundle::load_direction(&path, "downlink")
                .err()
                .unwrap()
                .to_string();
            assert!(err.ends_with(&format!("downlink.heavy: {want}")), "{err}");
        }
    }

    #[test]
    fn cellreplay_folders_read_too() {
        let path = write_bundle(
            "cellreplay",
            &[
                (
                    "down-delay-light-pdo",
                    "0 20 0 1 1 2 \n100 22 0 1\n200 24 0\n",
                ),
                ("up-delay-light-pdo", "0 10 0\n100 10 0\n200 10 0\n"),
                ("down-heavy-pdo", "0\n1\n1\n400\n"),
                ("up-heavy-pdo", "10\n20"),
                ("latency-offset-down", "100 0.5\n200 0.7\n"),
            ],
        );
        let b = Bundle::load(&path).unwrap();
        assert_eq!(b.kind, BundleKind::CellReplay);
        assert_eq!(b.duration_ms, 400.0);
        let d = b.downlink.as_ref().unwrap();
        assert_eq!(d.light[0].pdo_ms, vec![0.0, 1.0, 1.0, 2.0]);
        assert_eq!(d.offset, vec![(100.0, 0.5), (200.0, 0.7)]);
        assert!(b.uplink.as_ref().unwrap().offset.is_empty());
    }
}
