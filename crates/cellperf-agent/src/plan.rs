//! The probe's tests (docs/methods.md §2) as sequences of UDP or TCP steps, from the options a user
//! gave. Every range check names the command-line option it concerns.

use serde::Deserialize;

use crate::wire::{Direction, TcpSpec, Trains, UdpSpec, MAX_TRAIN_LENGTHS};

/// Which one-way delay the result reports (docs/methods.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwdChoice {
    /// Receive minus send time; meaningful with synchronised clocks.
    Raw,
    /// Raw minus its minimum over the run: cancels a constant clock offset.
    Excess,
    /// Half the round trip (echo tests).
    HalfRtt,
    /// Receive minus send time with the probe's measured clock offset removed.
    Offset,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepLabel {
    Single,
    Size(u32),
    Window(u32),
    Mss(u32),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Udp(UdpSpec),
    Tcp(TcpSpec),
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlanStep {
    pub label: StepLabel,
    pub step: Step,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub test: String,
    pub direction: Direction,
    pub owd: OwdChoice,
    pub steps: Vec<PlanStep>,
    /// Round trips of the clock exchange before the test (0: none, the ends share a clock).
    pub clock_samples: usize,
    /// Where the probe keeps the server's resumption ticket between runs ([`crate::ticket`]).
    pub ticket_file: Option<std::path::PathBuf>,
}

/// The clock exchange's round trips unless `clock_samples` says otherwise.
pub const CLOCK_SAMPLES: usize = 8;

/// The probe's options as the CLI passes them (JSON object; absent = default).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    pub direction: Option<String>,
    pub rate_bps: Option<f64>,
    pub payload: Option<u32>,
    pub duration_s: Option<f64>,
    pub bytes: Option<u64>,
    pub congestion: Option<String>,
    pub window: Option<u32>,
    pub mss: Option<u32>,
    pub streams: Option<u32>,
    pub codec: Option<String>,
    pub sizes: Option<Vec<u32>>,
    pub count: Option<u64>,
    pub interval_s: Option<f64>,
    pub timeout_s: Option<f64>,
    pub windows: Option<Vec<u32>>,
    pub mss_values: Option<Vec<u32>>,
    pub owd: Option<String>,
    pub lengths: Option<Vec<u32>>,
    pub period_s: Option<f64>,
    /// A testbed's setting, not a test's (so not in [`OPTION_TESTS`]): 0 skips the clock
    /// exchange where both ends run on one host's clock (the emulated testbed).
    pub clock_samples: Option<u32>,
    /// Also a setting, not a test's: the file of the resumption ticket ([`crate::ticket`]).
    pub ticket_file: Option<String>,
}

pub const TESTS: [&str; 9] = [
    "udp-cbr",
    "tcp-bulk",
    "voip",
    "min-delay",
    "ping-sweep",
    "cn-ping-sweep",
    "sparse",
    "window-sweep",
    "trains",
];

/// Voice codecs: (name, payload bytes, packet interval in ms) — 000 §4.3.
pub const CODECS: [(&str, u32, u64); 2] = [("g711", 160, 20), ("g729", 20, 20)];

/// Which option applies to which test, by the options' CLI names: the ONE table behind the
/// probe's refusal below and `cellperf run --check` (exported to Python by cellperf-py as
/// `probe_option_tests`; `cellperf.campaign.spec` reads it, and a test iterates it through both).
/// `duration` of ping-sweep is absent: its length is `count` × `interval` per size.
pub const OPTION_TESTS: &[(&str, &[&str])] = &[
    (
        "direction",
        &["udp-cbr", "tcp-bulk", "sparse", "window-sweep", "trains"],
    ),
    ("rate", &["udp-cbr"]),
    ("payload", &["udp-cbr", "sparse", "trains"]),
    (
        "duration",
        &[
            "udp-cbr",
            "tcp-bulk",
            "voip",
            "min-delay",
            "sparse",
            "window-sweep",
            "trains",
        ],
    ),
    ("bytes", &["tcp-bulk"]),
    ("congestion", &["tcp-bulk", "window-sweep"]),
    ("window", &["tcp-bulk", "window-sweep"]),
    ("mss", &["tcp-bulk", "window-sweep"]),
    ("streams", &["tcp-bulk", "window-sweep"]),
    ("codec", &["voip"]),
    ("sizes", &["ping-sweep", "cn-ping-sweep", "trains"]),
    ("count", &["ping-sweep", "cn-ping-sweep"]),
    ("interval", &["ping-sweep", "cn-ping-sweep", "sparse"]),
    (
        "timeout",
        &[
            "udp-cbr",
            "voip",
            "min-delay",
            "ping-sweep",
            "cn-ping-sweep",
            "sparse",
            "trains",
        ],
    ),
    ("windows", &["window-sweep"]),
    ("mss-values", &["window-sweep"]),
    (
        "owd",
        &[
            "udp-cbr",
            "voip",
            "min-delay",
            "ping-sweep",
            "cn-ping-sweep",
            "sparse",
            "trains",
        ],
    ),
    ("lengths", &["trains"]),
    ("period", &["trains"]),
];

/// Whether option `name` (CLI name) applies to `test`, after [`OPTION_TESTS`].
pub fn applies(name: &str, test: &str) -> bool {
    OPTION_TESTS
        .iter()
        .any(|(o, tests)| *o == name && tests.contains(&test))
}

/// A rule of what this host's kernel takes for a TCP option ([`KERNEL_RULES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelRule {
    /// One of the names a file under /proc/sys lists (space-separated).
    Listed(&'static str),
    /// A whole number within Linux's fixed bounds: (least, most, what the bounds are).
    Within(u64, u64, &'static str),
    /// A whole number of bytes at most a sysctl's value (the kernel caps it there, silently).
    AtMostSysctl(&'static str),
    /// The sysctl (path under /proc/sys) the campaign runner writes for the setting; it must exist.
    Sysctl(&'static str),
}

/// What this host's kernel takes of the TCP options, by the options' CLI names (and the
/// campaign runner's settings `sack` and `timestamps`): the ONE table behind the probe's
/// check before it connects ([`kernel_check`]), the server's for what it applies at its end,
/// `cellperf run --check` and the runner's sysctls (exported to Python by cellperf-py as
/// `kernel_rules`, `kernel_refusal` and `probe_check`). `windows` and `mss-values` take the
/// rule of one window or MSS per value.
pub const KERNEL_RULES: &[(&str, KernelRule)] = &[
    // setsockopt(TCP_CONGESTION) of a name the kernel lacks fails with ENOENT (modules that
    // could load on demand are not counted: the list is what `sysctl` shows as available).
    (
        "congestion",
        KernelRule::Listed("net/ipv4/tcp_available_congestion_control"),
    ),
    // setsockopt(TCP_MAXSEG) refuses values outside TCP_MIN_MSS..MAX_TCP_WINDOW (EINVAL).
    (
        "mss",
        KernelRule::Within(88, 32_767, "TCP_MAXSEG takes 88..32767"),
    ),
    // SO_RCVBUF / SO_SNDBUF are capped at these without an error: the window would not be
    // the one asked for.
    ("window", KernelRule::AtMostSysctl("net/core/rmem_max")),
    ("window", KernelRule::AtMostSysctl("net/core/wmem_max")),
    ("sack", KernelRule::Sysctl("net/ipv4/tcp_sack")),
    ("timestamps", KernelRule::Sysctl("net/ipv4/tcp_timestamps")),
];

/// Linux's bounds of an MSS, from [`KERNEL_RULES`].
pub fn mss_bounds() -> (u64, u64) {
    KERNEL_RULES
        .iter()
        .find_map(|(o, r)| match (o, r) {
            (&"mss", KernelRule::Within(lo, hi, _)) => Some((*lo, *hi)),
            _ => None,
        })
        .expect("KERNEL_RULES has the MSS bounds")
}

/// This host's /proc/sys.
pub const PROC_SYS: &str = "/proc/sys";

fn sysctl_name(path: &str) -> String {
    path.replace('/', ".")
}

/// Why the kernel whose /proc/sys is `proc_sys` would refuse `value` for option `name`
/// (after [`KERNEL_RULES`]), or None. A value that is no number for a numeric rule, or a file
/// that cannot be read, is not judged here.
pub fn kernel_refusal(proc_sys: &std::path::Path, name: &str, value: &str) -> Option<String> {
    let name = match name {
        "windows" => "window",
        "mss-values" => "mss",
        n => n,
    };
    let read = |path: &str| std::fs::read_to_string(proc_sys.join(path)).ok();
    KERNEL_RULES
        .iter()
        .filter(|(o, _)| *o == name)
        .find_map(|(_, rule)| match *rule {
            KernelRule::Listed(path) => {
                let list = read(path)?;
                let names: Vec<&str> = list.split_whitespace().collect();
                (!names.contains(&value)).then(|| {
                    format!(
                        "'{}' is not available in this kernel ({}: {})",
                        value.escape_debug(),
                        sysctl_name(path),
                        names.join(" ")
                    )
                })
            }
            KernelRule::Within(lo, hi, what) => {
                let v: u64 = value.parse().ok()?;
                (!(lo..=hi).contains(&v)).then(|| format!("{v} B refused by the kernel ({what})"))
            }
            KernelRule::AtMostSysctl(path) => {
                let v: u64 = value.parse().ok()?;
                let most: u64 = read(path)?.trim().parse().ok()?;
                (v > most).then(|| {
                    format!(
                        "{v} B is over {} = {most}: the kernel caps the socket buffer there \
                         (raise the sysctl or take a smaller window)",
                        sysctl_name(path)
                    )
                })
            }
            KernelRule::Sysctl(path) => (!proc_sys.join(path).exists())
                .then(|| format!("this kernel has no {}", sysctl_name(path))),
        })
}

/// The first option of `plan` that the kernel of `proc_sys` would refuse, as one line
/// `--option: problem`: what the probe sets on its own sockets (window, MSS, and the
/// congestion control of what it sends) and, with `both_ends` (the server runs on this
/// kernel too, as on an emulated link), what the server sets (the congestion control of
/// what it sends).
pub fn kernel_check(
    plan: &Plan,
    both_ends: bool,
    proc_sys: &std::path::Path,
) -> Result<(), String> {
    for s in &plan.steps {
        let Step::Tcp(t) = &s.step else { continue };
        let sends_here = matches!(t.direction, Direction::Up | Direction::Both);
        let window = if matches!(s.label, StepLabel::Window(_)) {
            "windows"
        } else {
            "window"
        };
        let mss = if matches!(s.label, StepLabel::Mss(_)) {
            "mss-values"
        } else {
            "mss"
        };
        let checks = [
            (
                "congestion",
                t.congestion.clone().filter(|_| sends_here || both_ends),
            ),
            (window, t.window_bytes.map(|w| w.to_string())),
            (mss, t.mss.map(|m| m.to_string())),
        ];
        for (name, value) in checks {
            if let Some(why) = value.and_then(|v| kernel_refusal(proc_sys, name, &v)) {
                return Err(format!("--{name}: {why}"));
            }
        }
    }
    Ok(())
}

fn given(o: &Options) -> Vec<&'static str> {
    let mut v = Vec::new();
    let mut add = |cond: bool, name: &'static str| {
        if cond {
            v.push(name)
        }
    };
    add(o.direction.is_some(), "direction");
    add(o.rate_bps.is_some(), "rate");
    add(o.payload.is_some(), "payload");
    add(o.duration_s.is_some(), "duration");
    add(o.bytes.is_some(), "bytes");
    add(o.congestion.is_some(), "congestion");
    add(o.window.is_some(), "window");
    add(o.mss.is_some(), "mss");
    add(o.streams.is_some(), "streams");
    add(o.codec.is_some(), "codec");
    add(o.sizes.is_some(), "sizes");
    add(o.count.is_some(), "count");
    add(o.interval_s.is_some(), "interval");
    add(o.timeout_s.is_some(), "timeout");
    add(o.windows.is_some(), "windows");
    add(o.mss_values.is_some(), "mss-values");
    add(o.owd.is_some(), "owd");
    add(o.lengths.is_some(), "lengths");
    add(o.period_s.is_some(), "period");
    v
}

fn positive(name: &str, v: f64) -> Result<f64, String> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!("--{name}: must be a positive number, not {v}"))
    }
}

/// A positive number of seconds no longer than the longest test a server allows.
fn seconds(name: &str, v: f64) -> Result<f64, String> {
    let v = positive(name, v)?;
    if v > crate::limits::MAX_DURATION_S {
        return Err(format!(
            "--{name}: {v} s is over {} s (a day)",
            crate::limits::MAX_DURATION_S
        ));
    }
    Ok(v)
}

impl Options {
    /// Reads the options the CLI passes as JSON; an error names the option and its value
    /// (not a JSON line and column).
    pub fn from_json(text: &str) -> Result<Options, String> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| format!("probe options are not valid JSON ({e})"))?;
        let serde_json::Value::Object(fields) = value else {
            return Err("probe options must be a JSON object".into());
        };
        // Each field alone, so the one that does not fit is named.
        for (key, v) in &fields {
            let one = serde_json::Value::Object([(key.clone(), v.clone())].into_iter().collect());
            if let Err(e) = serde_json::from_value::<Options>(one) {
                let option = match key.as_str() {
                    "rate_bps" => "rate",
                    "duration_s" => "duration",
                    "interval_s" => "interval",
                    "timeout_s" => "timeout",
                    "mss_values" => "mss-values",
                    "period_s" => "period",
                    k => k,
                };
                return Err(if e.to_string().starts_with("unknown field") {
                    format!("probe options: unknown option {key:?}")
                } else {
                    format!(
                        "--{option}: {v} is not a valid value (expected {})",
                        expected_of(&e.to_string())
                    )
                });
            }
        }
        serde_json::from_value(serde_json::Value::Object(fields))
            .map_err(|e| format!("probe options: {e}"))
    }
}

/// The kind of value serde wanted, from its message ("invalid type: …, expected u32").
fn expected_of(serde_message: &str) -> &str {
    serde_message
        .rsplit_once("expected ")
        .map_or("another value", |(_, want)| match want {
            "u32" => "a whole number below 2^32",
            "u64" => "a whole number below 2^64",
            "f64" => "a number",
            w => w,
        })
}

fn direction(o: &Options, default: Direction, allow_both: bool) -> Result<Direction, String> {
    match o.direction.as_deref() {
        None => Ok(default),
        Some("up") => Ok(Direction::Up),
        Some("down") => Ok(Direction::Down),
        Some("both") if allow_both => Ok(Direction::Both),
        Some(d) => Err(format!(
            "--direction: '{}' is not one of up, down{}",
            d.escape_debug(),
            if allow_both { ", both" } else { "" }
        )),
    }
}

fn payload(o: &Options, default: u32) -> Result<u32, String> {
    let p = o.payload.unwrap_or(default);
    if !(20..=crate::udp::MAX_PAYLOAD).contains(&p) {
        return Err(format!(
            "--payload: {p} B outside 20..{} B (the probe header takes 20)",
            crate::udp::MAX_PAYLOAD
        ));
    }
    Ok(p)
}

fn drain_ms(o: &Options, default_s: f64) -> Result<u64, String> {
    let t = seconds("timeout", o.timeout_s.unwrap_or(default_s))?;
    if t > 30.0 {
        return Err(format!("--timeout: {t} s is over 30 s"));
    }
    Ok((t * 1e3).round() as u64)
}

/// A stream of `payload`-byte packets every `interval_s` for `duration_s`.
fn stream(
    direction: Direction,
    payload: u32,
    interval_s: f64,
    duration_s: f64,
    drain_ms: u64,
) -> Result<UdpSpec, String> {
    let interval_ns = (interval_s * 1e9).round() as u64;
    if interval_ns == 0 {
        return Err("--rate: too high (less than 1 ns between packets)".into());
    }
    let count = ((duration_s / interval_s).round() as u64).max(1);
    if count > crate::limits::MAX_PACKETS {
        return Err(format!("--duration: {duration_s} s at one packet every {interval_s} s is {count} packets, over the limit of {}", crate::limits::MAX_PACKETS));
    }
    Ok(UdpSpec {
        direction,
        payload_bytes: payload,
        interval_ns,
        count,
        drain_ms,
        trains: None,
    })
}

/// Packet trains (docs/agents.md "trains"): trains of each length in turn, one every
/// `--period`, their packets back to back, for `--duration`.
fn trains(o: &Options, direction: Direction) -> Result<UdpSpec, String> {
    let lengths = o.lengths.clone().unwrap_or_else(|| vec![10, 100]);
    if lengths.is_empty() || lengths.len() > MAX_TRAIN_LENGTHS {
        return Err(format!(
            "--lengths: give 1..{MAX_TRAIN_LENGTHS} train lengths"
        ));
    }
    if let Some(l) = lengths
        .iter()
        .find(|&&l| l == 0 || l as u64 > crate::limits::MAX_PACKETS)
    {
        return Err(format!(
            "--lengths: {l} outside 1..{}",
            crate::limits::MAX_PACKETS
        ));
    }
    let period = seconds("period", o.period_s.unwrap_or(0.2))?;
    let d = seconds("duration", o.duration_s.unwrap_or(10.0))?;
    let period_ns = (period * 1e9).round() as u64;
    // Back to back: each packet is due 1 ns after the one before, so the sender hands a train
    // to the kernel in as few system calls as it can (GSO batches).
    let interval_ns = 1;
    let longest = *lengths.iter().max().unwrap_or(&1) as u64;
    if longest * interval_ns >= period_ns {
        return Err(format!(
            "--period: {period} s is too short for a train of {longest}"
        ));
    }
    // --sizes: one size a train, in turn (docs/agents.md "trains"); --payload is then not given.
    let payloads = o.sizes.clone().unwrap_or_default();
    if o.sizes.is_some() && o.payload.is_some() {
        return Err("--sizes and --payload: give one (--sizes cycles a size per train)".into());
    }
    if o.sizes.is_some() && (payloads.is_empty() || payloads.len() > MAX_TRAIN_LENGTHS) {
        return Err(format!("--sizes: give 1..{MAX_TRAIN_LENGTHS} sizes"));
    }
    if let Some(s) = payloads
        .iter()
        .find(|&&s| !(20..=crate::udp::MAX_PAYLOAD).contains(&s))
    {
        return Err(format!(
            "--sizes: {s} B outside 20..{} B",
            crate::udp::MAX_PAYLOAD
        ));
    }
    let payload_bytes = match payloads.iter().max() {
        Some(&largest) => largest,
        None => payload(o, 1400)?,
    };
    let n_trains = ((d / period).round() as u64).max(1);
    let cycle: u64 = lengths.iter().map(|&l| l as u64).sum();
    let whole = n_trains / lengths.len() as u64;
    let rest: u64 = lengths
        .iter()
        .take((n_trains % lengths.len() as u64) as usize)
        .map(|&l| l as u64)
        .sum();
    let count = whole.saturating_mul(cycle).saturating_add(rest);
    if count > crate::limits::MAX_PACKETS {
        return Err(format!(
            "--duration: {d} s of trains is {count} packets, over the limit of {}",
            crate::limits::MAX_PACKETS
        ));
    }
    Ok(UdpSpec {
        direction,
        payload_bytes,
        interval_ns,
        count,
        drain_ms: drain_ms(o, 2.0)?,
        trains: Some(Trains {
            lengths,
            period_ns,
            payloads,
        }),
    })
}

fn tcp_spec(
    o: &Options,
    direction: Direction,
    window: Option<u32>,
    mss: Option<u32>,
) -> Result<TcpSpec, String> {
    let duration_s = seconds("duration", o.duration_s.unwrap_or(10.0))?;
    let streams = o.streams.unwrap_or(1);
    if !(1..=crate::limits::MAX_STREAMS).contains(&streams) {
        return Err(format!(
            "--streams: {streams} outside 1..{}",
            crate::limits::MAX_STREAMS
        ));
    }
    if let Some(w) = window {
        if !(2048..=64 << 20).contains(&w) {
            return Err(format!("--window: {w} B outside 2 KiB..64 MiB"));
        }
    }
    if let Some(m) = mss {
        let (lo, hi) = mss_bounds();
        if !(lo..=hi).contains(&(m as u64)) {
            return Err(format!(
                "--mss: {m} B outside {lo}..{hi} (the kernel's TCP_MAXSEG bounds)"
            ));
        }
    }
    if o.bytes == Some(0) {
        return Err("--bytes: must be positive".into());
    }
    Ok(TcpSpec {
        direction,
        duration_ms: (duration_s * 1e3).round() as u64,
        bytes: o.bytes,
        streams,
        congestion: o.congestion.clone(),
        window_bytes: window,
        mss,
    })
}

pub fn plan(test: &str, o: &Options) -> Result<Plan, String> {
    if !TESTS.contains(&test) {
        return Err(format!(
            "--test: unknown test '{}' (one of {})",
            test.escape_debug(),
            TESTS.join(", ")
        ));
    }
    if let Some(bad) = given(o).into_iter().find(|g| !applies(g, test)) {
        return Err(format!("--{bad} does not apply to --test {test}"));
    }
    let echo_default = matches!(test, "voip" | "min-delay" | "ping-sweep" | "cn-ping-sweep");
    let owd = match o.owd.as_deref() {
        None if echo_default => OwdChoice::HalfRtt,
        None | Some("raw") => OwdChoice::Raw,
        Some("excess") => OwdChoice::Excess,
        Some("offset") => OwdChoice::Offset,
        Some("half-rtt") if echo_default => OwdChoice::HalfRtt,
        Some("half-rtt") => {
            return Err(format!(
                "--owd half-rtt needs an echoed test (voip, min-delay, ping-sweep, cn-ping-sweep), not {test}"
            ))
        }
        Some(k) => {
            return Err(format!(
                "--owd: '{}' is not one of raw, excess, offset, half-rtt",
                k.escape_debug()
            ))
        }
    };
    let clock_samples = match o.clock_samples {
        None => CLOCK_SAMPLES,
        Some(0) if owd == OwdChoice::Offset => {
            return Err(
                "--owd offset needs the clock exchange: --clock-samples 0 leaves none".into(),
            )
        }
        Some(n) if n <= 64 => n as usize,
        Some(n) => return Err(format!("--clock-samples: at most 64, not {n}")),
    };
    let ticket_file = o.ticket_file.as_ref().map(std::path::PathBuf::from);
    let single = |step: crate::plan::Step, dir| Plan {
        test: test.into(),
        direction: dir,
        owd,
        clock_samples,
        ticket_file: ticket_file.clone(),
        steps: vec![PlanStep {
            label: StepLabel::Single,
            step,
        }],
    };
    match test {
        "udp-cbr" => {
            let dir = direction(o, Direction::Up, true)?;
            let p = payload(o, 1460)?;
            let rate = positive("rate", o.rate_bps.unwrap_or(1e6))?;
            if rate > crate::limits::MAX_RATE_BPS {
                return Err(format!(
                    "--rate: {rate} bit/s is over {:e} bit/s",
                    crate::limits::MAX_RATE_BPS
                ));
            }
            let d = seconds("duration", o.duration_s.unwrap_or(10.0))?;
            Ok(single(
                Step::Udp(stream(dir, p, p as f64 * 8.0 / rate, d, drain_ms(o, 2.0)?)?),
                dir,
            ))
        }
        "voip" => {
            let name = o
                .codec
                .as_deref()
                .unwrap_or("g711")
                .to_ascii_lowercase()
                .replace(['.', '-'], "");
            let (_, size, ms) = CODECS.iter().find(|c| c.0 == name).ok_or_else(|| {
                format!(
                    "--codec: unknown codec '{}' (one of g711, g729)",
                    name.escape_debug()
                )
            })?;
            let d = seconds("duration", o.duration_s.unwrap_or(30.0))?;
            Ok(single(
                Step::Udp(stream(
                    Direction::Echo,
                    *size,
                    *ms as f64 / 1e3,
                    d,
                    drain_ms(o, 2.0)?,
                )?),
                Direction::Echo,
            ))
        }
        "min-delay" => {
            let d = seconds("duration", o.duration_s.unwrap_or(30.0))?;
            Ok(single(
                Step::Udp(stream(Direction::Echo, 40, 0.040, d, drain_ms(o, 2.0)?)?),
                Direction::Echo,
            ))
        }
        "sparse" => {
            let dir = direction(o, Direction::Down, false)?;
            let i = seconds("interval", o.interval_s.unwrap_or(0.1))?;
            let d = seconds("duration", o.duration_s.unwrap_or(60.0))?;
            Ok(single(
                Step::Udp(stream(dir, payload(o, 1460)?, i, d, drain_ms(o, 2.0)?)?),
                dir,
            ))
        }
        // The same probes pinged from either end: the MN's (echo) or the CN's (cn_echo).
        "ping-sweep" | "cn-ping-sweep" => {
            let dir = if test == "ping-sweep" {
                Direction::Echo
            } else {
                Direction::CnEcho
            };
            let sizes = o
                .sizes
                .clone()
                .unwrap_or_else(|| vec![128, 256, 512, 1024, 1500]);
            if sizes.is_empty() {
                return Err("--sizes: give at least one size".into());
            }
            let count = o.count.unwrap_or(100);
            if count == 0 || count > crate::limits::MAX_PACKETS {
                return Err(format!(
                    "--count: {count} outside 1..{}",
                    crate::limits::MAX_PACKETS
                ));
            }
            let i = seconds("interval", o.interval_s.unwrap_or(1.0))?;
            if count as f64 * i > crate::limits::MAX_DURATION_S {
                return Err(format!(
                    "--count: {count} probes every {i} s take over a day"
                ));
            }
            let drain = drain_ms(o, 10.0)?;
            let mut steps = Vec::new();
            for s in sizes {
                if !(20..=crate::udp::MAX_PAYLOAD).contains(&s) {
                    return Err(format!(
                        "--sizes: {s} B outside 20..{} B",
                        crate::udp::MAX_PAYLOAD
                    ));
                }
                let mut spec = stream(dir, s, i, i, drain)?;
                spec.count = count;
                steps.push(PlanStep {
                    label: StepLabel::Size(s),
                    step: Step::Udp(spec),
                });
            }
            Ok(Plan {
                test: test.into(),
                direction: dir,
                owd,
                clock_samples,
                ticket_file,
                steps,
            })
        }
        "trains" => {
            let dir = direction(o, Direction::Both, true)?;
            Ok(single(Step::Udp(trains(o, dir)?), dir))
        }
        "tcp-bulk" => {
            let dir = direction(o, Direction::Up, true)?;
            Ok(single(Step::Tcp(tcp_spec(o, dir, o.window, o.mss)?), dir))
        }
        "window-sweep" => {
            let dir = direction(o, Direction::Down, false)?;
            let steps = match (&o.windows, &o.mss_values) {
                (Some(ws), None) if !ws.is_empty() => ws
                    .iter()
                    .map(|&w| {
                        Ok(PlanStep {
                            label: StepLabel::Window(w),
                            step: Step::Tcp(tcp_spec(o, dir, Some(w), o.mss)?),
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?,
                (None, Some(ms)) if !ms.is_empty() => ms
                    .iter()
                    .map(|&m| {
                        Ok(PlanStep {
                            label: StepLabel::Mss(m),
                            step: Step::Tcp(tcp_spec(o, dir, o.window, Some(m))?),
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?,
                (None, None) => [16u32, 32, 64, 128, 256, 512, 1024]
                    .iter()
                    .map(|&k| {
                        Ok(PlanStep {
                            label: StepLabel::Window(k * 1024),
                            step: Step::Tcp(tcp_spec(o, dir, Some(k * 1024), o.mss)?),
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?,
                _ => {
                    return Err(
                        "--windows and --mss-values: give one non-empty list, not both".into(),
                    )
                }
            };
            Ok(Plan {
                test: test.into(),
                direction: dir,
                owd,
                clock_samples,
                ticket_file,
                steps,
            })
        }
        _ => unreachable!("checked against TESTS"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbr_rate_becomes_interval_and_count() {
        let o = Options {
            rate_bps: Some(10e6),
            duration_s: Some(3.0),
            ..Default::default()
        };
        let p = plan("udp-cbr", &o).unwrap();
        let Step::Udp(s) = &p.steps[0].step else {
            panic!("udp expected")
        };
        // 1460 B × 8 / 10 Mb/s = 1.168 ms; 3 s / 1.168 ms = 2568.5 → 2568 packets.
        assert_eq!(
            (s.payload_bytes, s.interval_ns, s.count),
            (1460, 1_168_000, 2568)
        );
        assert_eq!(s.direction, Direction::Up);
    }

    #[test]
    fn trains_cycle_their_lengths_over_the_duration() {
        let o = Options {
            lengths: Some(vec![10, 100]),
            period_s: Some(0.2),
            duration_s: Some(1.0),
            ..Default::default()
        };
        let p = plan("trains", &o).unwrap();
        let Step::Udp(s) = &p.steps[0].step else {
            panic!("trains are UDP")
        };
        // 5 trains: 10, 100, 10, 100, 10.
        assert_eq!(
            (p.direction, s.count, s.payload_bytes),
            (Direction::Both, 230, 1400)
        );
        assert_eq!(s.trains.as_ref().unwrap().period_ns, 200_000_000);
        assert_eq!(s.duration_ns(), 1_000_000_000);
        // --sizes: one size a train, the largest the spec's payload.
        let sized = Options {
            lengths: Some(vec![1]),
            sizes: Some(vec![100, 1400, 400]),
            period_s: Some(0.05),
            duration_s: Some(0.3),
            ..Default::default()
        };
        let Step::Udp(s) = &plan("trains", &sized).unwrap().steps[0].step else {
            panic!("trains are UDP")
        };
        assert_eq!((s.count, s.payload_bytes), (6, 1400));
        assert_eq!(s.trains.as_ref().unwrap().payloads, [100, 1400, 400]);
        for (o, why) in [
            (
                Options {
                    sizes: Some(vec![100]),
                    payload: Some(100),
                    ..Default::default()
                },
                "--sizes and --payload: give one",
            ),
            (
                Options {
                    sizes: Some(vec![10]),
                    ..Default::default()
                },
                "--sizes: 10 B outside",
            ),
            (
                Options {
                    lengths: Some(vec![]),
                    ..Default::default()
                },
                "--lengths: give 1..",
            ),
            (
                Options {
                    lengths: Some(vec![0]),
                    ..Default::default()
                },
                "--lengths: 0 outside",
            ),
            (
                Options {
                    period_s: Some(0.0),
                    ..Default::default()
                },
                "--period: must be a positive number",
            ),
            (
                Options {
                    rate_bps: Some(1e6),
                    ..Default::default()
                },
                "--rate does not apply to --test trains",
            ),
        ] {
            let e = plan("trains", &o).unwrap_err();
            assert!(e.starts_with(why), "{e}");
        }
    }

    #[test]
    fn voip_presets_and_sweeps() {
        let o = Options {
            codec: Some("G.729".into()),
            duration_s: Some(1.0),
            ..Default::default()
        };
        let Step::Udp(s) = &plan("voip", &o).unwrap().steps[0].step else {
            panic!()
        };
        assert_eq!(
            (s.payload_bytes, s.interval_ns, s.count, s.direction),
            (20, 20_000_000, 50, Direction::Echo)
        );
        let ps = plan("ping-sweep", &Options::default()).unwrap();
        assert_eq!(ps.steps.len(), 5);
        assert_eq!(ps.owd, OwdChoice::HalfRtt);
        let Step::Udp(s) = &ps.steps[4].step else {
            panic!()
        };
        assert_eq!(
            (s.payload_bytes, s.count, s.interval_ns, s.drain_ms),
            (1500, 100, 1_000_000_000, 10_000)
        );
        let ws = plan(
            "window-sweep",
            &Options {
                mss_values: Some(vec![536, 1460]),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(ws.steps[1].label, StepLabel::Mss(1460));
    }

    /// A value holding a newline is echoed escaped: the error stays one line (the options
    /// fuzz target found `--owd` echoing a raw newline).
    #[test]
    fn echoed_values_stay_on_one_line() {
        let odd = "x'\n\"y".to_string();
        let errors = [
            plan(&odd, &Options::default()).unwrap_err(),
            plan(
                "udp-cbr",
                &Options {
                    owd: Some(odd.clone()),
                    ..Default::default()
                },
            )
            .unwrap_err(),
            plan(
                "udp-cbr",
                &Options {
                    direction: Some(odd.clone()),
                    ..Default::default()
                },
            )
            .unwrap_err(),
            plan(
                "voip",
                &Options {
                    codec: Some(odd.clone()),
                    ..Default::default()
                },
            )
            .unwrap_err(),
        ];
        for e in errors {
            assert!(
                !e.contains('\n') && e.starts_with("--") && e.contains("x\\'\\n\\\"y"),
                "{e}"
            );
        }
    }

    /// Every option of the table is one `given` reports, and every test it names exists.
    #[test]
    fn option_table_names_known_options_and_tests() {
        let all = Options {
            direction: Some("x".into()),
            rate_bps: Some(1.0),
            payload: Some(1),
            duration_s: Some(1.0),
            bytes: Some(1),
            congestion: Some("x".into()),
            window: Some(1),
            mss: Some(1),
            streams: Some(1),
            codec: Some("x".into()),
            sizes: Some(vec![]),
            count: Some(1),
            interval_s: Some(1.0),
            timeout_s: Some(1.0),
            windows: Some(vec![]),
            mss_values: Some(vec![]),
            owd: Some("x".into()),
            lengths: Some(vec![]),
            period_s: Some(1.0),
            clock_samples: None,
            ticket_file: None,
        };
        let names = given(&all);
        assert_eq!(names.len(), OPTION_TESTS.len());
        for (o, tests) in OPTION_TESTS {
            assert!(names.contains(o), "{o}");
            assert!(tests.iter().all(|t| TESTS.contains(t)), "{o}");
        }
        // min-delay sends fixed 40-byte probes: --payload is refused (run --check agreed once).
        assert!(!applies("payload", "min-delay"));
    }

    #[test]
    fn bad_options_name_the_option() {
        let e = |t: &str, o: Options| plan(t, &o).unwrap_err();
        assert!(e("udp-cbrr", Options::default()).starts_with("--test: unknown test"));
        assert!(e(
            "udp-cbr",
            Options {
                payload: Some(10),
                ..Default::default()
            }
        )
        .starts_with("--payload"));
        assert!(e(
            "udp-cbr",
            Options {
                rate_bps: Some(-1.0),
                ..Default::default()
            }
        )
        .starts_with("--rate"));
        assert!(e(
            "udp-cbr",
            Options {
                codec: Some("g711".into()),
                ..Default::default()
            }
        )
        .starts_with("--codec does not apply"));
        assert!(e(
            "voip",
            Options {
                codec: Some("opus".into()),
                ..Default::default()
            }
        )
        .starts_with("--codec"));
        assert!(e(
            "udp-cbr",
            Options {
                owd: Some("half-rtt".into()),
                ..Default::default()
            }
        )
        .starts_with("--owd"));
        assert!(e(
            "tcp-bulk",
            Options {
                streams: Some(99),
                ..Default::default()
            }
        )
        .starts_with("--streams"));
        assert!(e(
            "sparse",
            Options {
                direction: Some("both".into()),
                ..Default::default()
            }
        )
        .starts_with("--direction"));
    }

    /// NaN, infinite and huge durations, intervals and timeouts are refused naming the option
    /// (a duration of 1e308 s asked for u64::MAX packets and overflowed count × interval).
    #[test]
    fn non_finite_and_huge_times_are_refused_by_name() {
        let bad = |test: &str, o: Options| {
            plan(test, &o)
                .err()
                .unwrap_or_else(|| panic!("{test} {o:?} accepted"))
        };
        for v in [f64::NAN, f64::INFINITY, 1e308, -1.0, 0.0, 86_401.0] {
            assert!(
                bad(
                    "udp-cbr",
                    Options {
                        duration_s: Some(v),
                        ..Default::default()
                    }
                )
                .starts_with("--duration:"),
                "{v}"
            );
            assert!(
                bad(
                    "tcp-bulk",
                    Options {
                        duration_s: Some(v),
                        ..Default::default()
                    }
                )
                .starts_with("--duration:"),
                "{v}"
            );
            assert!(
                bad(
                    "sparse",
                    Options {
                        interval_s: Some(v),
                        ..Default::default()
                    }
                )
                .starts_with("--interval:"),
                "{v}"
            );
            assert!(
                bad(
                    "voip",
                    Options {
                        timeout_s: Some(v),
                        ..Default::default()
                    }
                )
                .starts_with("--timeout:"),
                "{v}"
            );
        }
        let e = bad(
            "udp-cbr",
            Options {
                rate_bps: Some(1e9),
                payload: Some(20),
                duration_s: Some(86_400.0),
                ..Default::default()
            },
        );
        assert!(
            e.starts_with("--duration:") && e.contains("over the limit of 67108864"),
            "{e}"
        );
        assert!(bad(
            "ping-sweep",
            Options {
                count: Some(u64::MAX),
                ..Default::default()
            }
        )
        .starts_with("--count:"));
        assert!(bad(
            "udp-cbr",
            Options {
                rate_bps: Some(1e300),
                ..Default::default()
            }
        )
        .starts_with("--rate:"));
    }

    #[test]
    fn options_json_errors_name_the_option_not_a_column() {
        let e = Options::from_json(r#"{"direction": "up", "count": 1e308}"#).unwrap_err();
        assert_eq!(
            e,
            "--count: 1e+308 is not a valid value (expected a whole number below 2^64)"
        );
        let e = Options::from_json(r#"{"payload": 99999999999}"#).unwrap_err();
        assert_eq!(
            e,
            "--payload: 99999999999 is not a valid value (expected a whole number below 2^32)"
        );
        assert_eq!(
            Options::from_json(r#"{"duration_s": "x"}"#).unwrap_err(),
            r#"--duration: "x" is not a valid value (expected a number)"#
        );
        assert!(Options::from_json(r#"{"duration_s": NaN}"#)
            .unwrap_err()
            .starts_with("probe options are not valid JSON"));
        assert_eq!(
            Options::from_json(r#"{"launch": 1}"#).unwrap_err(),
            r#"probe options: unknown option "launch""#
        );
        assert_eq!(
            Options::from_json(r#"{"duration_s": 2.5}"#)
                .unwrap()
                .duration_s,
            Some(2.5)
        );
    }

    /// The kernel's rules on a crafted /proc/sys: a congestion control it lacks, an MSS
    /// outside TCP_MAXSEG's bounds, a window over rmem_max, a sysctl it does not have; and
    /// which end's kernel the plan's congestion control concerns.
    #[test]
    fn kernel_rules_refuse_what_the_kernel_would() {
        let dir = std::env::temp_dir().join(format!("cellperf-proc-sys-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("net/ipv4")).unwrap();
        std::fs::create_dir_all(dir.join("net/core")).unwrap();
        let write = |p: &str, v: &str| std::fs::write(dir.join(p), v).unwrap();
        write(
            "net/ipv4/tcp_available_congestion_control",
            "reno bbr cubic\n",
        );
        write("net/core/rmem_max", "4194304\n");
        write("net/core/wmem_max", "8388608\n");
        write("net/ipv4/tcp_sack", "1\n");
        let r = |o: &str, v: &str| kernel_refusal(&dir, o, v);
        assert_eq!(
            r("congestion", "vegas").as_deref(),
            Some("'vegas' is not available in this kernel (net.ipv4.tcp_available_congestion_control: reno bbr cubic)")
        );
        assert_eq!(r("congestion", "bbr"), None);
        assert_eq!(r("window", "4194304"), None);
        let over =
            "4194305 B is over net.core.rmem_max = 4194304: the kernel caps the socket buffer \
                    there (raise the sysctl or take a smaller window)";
        assert_eq!(r("windows", "4194305").as_deref(), Some(over));
        assert_eq!(r("mss", "88"), None);
        assert_eq!(r("mss", "32767"), None);
        assert_eq!(
            r("mss-values", "32768").as_deref(),
            Some("32768 B refused by the kernel (TCP_MAXSEG takes 88..32767)")
        );
        assert_eq!(r("sack", "true"), None);
        assert_eq!(
            r("timestamps", "false").as_deref(),
            Some("this kernel has no net.ipv4.tcp_timestamps")
        );
        assert_eq!(r("rate", "1"), None); // no rule

        let tcp = |direction: &str, cc: &str| {
            plan(
                "tcp-bulk",
                &Options {
                    direction: Some(direction.into()),
                    congestion: Some(cc.into()),
                    ..Default::default()
                },
            )
            .unwrap()
        };
        // A download's congestion control is the server's: another kernel unless both ends
        // are this one (an emulated link).
        assert_eq!(kernel_check(&tcp("down", "vegas"), false, &dir), Ok(()));
        let refused = "--congestion: 'vegas' is not available in this kernel \
                       (net.ipv4.tcp_available_congestion_control: reno bbr cubic)";
        assert_eq!(
            kernel_check(&tcp("down", "vegas"), true, &dir).unwrap_err(),
            refused
        );
        assert_eq!(
            kernel_check(&tcp("up", "vegas"), false, &dir).unwrap_err(),
            refused
        );
        assert_eq!(
            kernel_check(&tcp("both", "vegas"), false, &dir).unwrap_err(),
            refused
        );
        assert_eq!(kernel_check(&tcp("up", "cubic"), true, &dir), Ok(()));
        let ws = plan(
            "window-sweep",
            &Options {
                windows: Some(vec![65536, 4194305]),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            kernel_check(&ws, false, &dir).unwrap_err(),
            format!("--windows: {over}")
        );
        // An MSS the kernel refuses is refused by the plan itself (fixed bounds).
        let e = plan(
            "tcp-bulk",
            &Options {
                mss: Some(40_000),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(
            e,
            "--mss: 40000 B outside 88..32767 (the kernel's TCP_MAXSEG bounds)"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The rules agree with this host's kernel: setsockopt takes the MSS bounds and refuses
    /// one past them, and takes every congestion control the list names and none other.
    #[test]
    fn kernel_rules_agree_with_setsockopt_here() {
        let proc_sys = std::path::Path::new(PROC_SYS);
        let sock =
            || socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let (lo, hi) = mss_bounds();
        for (v, ok) in [(lo, true), (hi, true), (lo - 1, false), (hi + 1, false)] {
            assert_eq!(sock().set_mss(v as u32).is_ok(), ok, "MSS {v}");
            assert_eq!(
                kernel_refusal(proc_sys, "mss", &v.to_string()).is_none(),
                ok,
                "MSS {v}"
            );
        }
        let listed =
            std::fs::read_to_string(proc_sys.join("net/ipv4/tcp_available_congestion_control"))
                .unwrap();
        for cc in listed.split_whitespace().chain(["nosuchcc"]) {
            let ok = sock().set_tcp_congestion(cc.as_bytes()).is_ok();
            assert_eq!(
                kernel_refusal(proc_sys, "congestion", cc).is_none(),
                ok,
                "{cc}"
            );
        }
    }
}
