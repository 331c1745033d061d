//! Event logs of one direction's bottleneck in the format of mahimahi's link shells
//! (`mm-link --uplink-log/--downlink-log`), which `mm-throughput-graph` and `mm-delay-graph`
//! read.
//!
//! The format (mahimahi `src/frontend/link_queue.cc`): `#` comment lines, among them
//! `# init timestamp: T0` (wall clock, ms since the Unix epoch, at time 0) and
//! `# base timestamp: B` (the link's time 0 in ms after T0; 0 here), then one line per event,
//! times in integer milliseconds after T0, in time order:
//! - `t + bytes`: a packet reached the queue;
//! - `t - bytes delay`: a packet's last byte left the bottleneck, `delay` ms after it arrived;
//! - `t # bytes`: a delivery opportunity (capacity offered, used or not);
//! - `t d packets bytes`: packets dropped (queue full, CoDel, an outage in drop mode).
//!
//! Opportunities come from a reader of the same capacity stream as the link's (outages
//! removed): a mahimahi trace gives its own 1500-byte opportunities, one line each, as
//! mahimahi writes them; a fluid capacity (constant, slot or Markov rates) is cut into
//! millisecond buckets, each written as 1500-byte opportunities plus one for the remainder,
//! with fractions of a byte carried over so that the total is exact to the byte. Random loss
//! and the fixed delay act after the bottleneck and are not in the log, as mahimahi's
//! `mm-loss` and `mm-delay` are separate shells.
use crate::capacity::{CapacityMeter, MAHIMAHI_OPPORTUNITY_BYTES};
use crate::element::{LinkEvent, Nanos};
use crate::error::LinkError;
use std::fs::File;
use std::io::{BufWriter, Write};

const NANOS_PER_MS: Nanos = 1_000_000;

/// One line, kept until every line of an earlier millisecond has been written.
#[derive(Debug, Clone, Copy)]
struct Line {
    at: Nanos,
    kind: Kind,
}

/// In mahimahi's order within one millisecond: it serves the opportunities due (logging them
/// and the departures they complete) before it logs an arrival, and a drop follows its arrival.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Opportunity { bytes: u64 },
    Departure { bytes: usize, delay_ms: u64 },
    Arrival { bytes: usize },
    Drop { packets: u64, bytes: u64 },
}

impl Kind {
    fn rank(&self) -> u8 {
        match self {
            Kind::Opportunity { .. } => 0,
            Kind::Departure { .. } => 1,
            Kind::Arrival { .. } => 2,
            Kind::Drop { .. } => 3,
        }
    }
}

pub struct MahimahiLog {
    out: BufWriter<File>,
    path: String,
    capacity: CapacityMeter,
    /// The first millisecond whose opportunities are not yet in `pending`.
    next_ms: u64,
    offered_bytes: f64,
    opportunity_bytes: u64,
    pending: Vec<Line>,
}

impl MahimahiLog {
    /// `link` names the direction (`Uplink`/`Downlink`, as mahimahi does), `description` the
    /// rate and queue; `epoch_ms_at_zero` is the wall-clock time of the link's time 0.
    pub fn create(
        path: &str,
        link: &str,
        rate: &str,
        queue: &str,
        capacity: CapacityMeter,
        epoch_ms_at_zero: u64,
    ) -> Result<Self, LinkError> {
        let file = File::create(path)
            .map_err(|e| LinkError::file(path, format!("cannot create the event log ({e})")))?;
        let mut log = MahimahiLog {
            out: BufWriter::with_capacity(1 << 16, file),
            path: path.to_string(),
            capacity,
            next_ms: 0,
            offered_bytes: 0.0,
            opportunity_bytes: 0,
            pending: Vec::new(),
        };
        let header = format!(
            "# cellperf emulate ({link}) [{rate}] > {path}\n# queue: {queue}\n# init timestamp: {epoch_ms_at_zero}\n# base timestamp: 0\n"
        );
        log.out
            .write_all(header.as_bytes())
            .map_err(|e| log.write_error(e))?;
        Ok(log)
    }

    fn write_error(&self, e: std::io::Error) -> LinkError {
        LinkError::file(&self.path, format!("cannot write ({e})"))
    }

    fn push_events(&mut self, events: impl IntoIterator<Item = LinkEvent>) {
        for e in events {
            self.pending.push(match e {
                LinkEvent::Arrival { at, bytes } => Line {
                    at,
                    kind: Kind::Arrival { bytes },
                },
                LinkEvent::Departure { at, bytes, arrived } => Line {
                    at,
                    kind: Kind::Departure {
                        bytes,
                        delay_ms: at / NANOS_PER_MS - arrived / NANOS_PER_MS,
                    },
                },
                LinkEvent::Drop { at, packets, bytes } => Line {
                    at,
                    kind: Kind::Drop { packets, bytes },
                },
            });
        }
    }

    /// Adds the opportunities offered in [`next_ms` ms, `until`) as lines at `next_ms`.
    fn push_opportunities_until(&mut self, until: Nanos) {
        self.offered_bytes += self.capacity.offered_until(until);
        // Whole bytes only; the fraction waits for the next bucket (1e-6: float sums of
        // 1500-byte opportunities stay exact, fluid ones must not lose a byte to rounding).
        let mut new =
            ((self.offered_bytes + 1e-6).floor() as u64).saturating_sub(self.opportunity_bytes);
        self.opportunity_bytes += new;
        let at = self.next_ms * NANOS_PER_MS;
        let full = MAHIMAHI_OPPORTUNITY_BYTES as u64;
        while new > 0 {
            let bytes = new.min(full);
            self.pending.push(Line {
                at,
                kind: Kind::Opportunity { bytes },
            });
            new -= bytes;
        }
    }

    /// Takes the link's new events and writes every line of the milliseconds that ended by
    /// `now`. Everything that happens at or before `now` must have been given by then.
    pub fn write_until(
        &mut self,
        now: Nanos,
        events: impl IntoIterator<Item = LinkEvent>,
    ) -> Result<(), LinkError> {
        self.push_events(events);
        let now_ms = now / NANOS_PER_MS;
        while self.next_ms < now_ms {
            self.push_opportunities_until((self.next_ms + 1) * NANOS_PER_MS);
            self.next_ms += 1;
        }
        self.write_lines(|l| l.at / NANOS_PER_MS < now_ms)
    }

    /// Writes the last lines at the end of the run at `now`: the opportunities of the last,
    /// partial millisecond and every event up to `now` (a departure scheduled later never
    /// happened).
    pub fn finish(
        &mut self,
        now: Nanos,
        events: impl IntoIterator<Item = LinkEvent>,
    ) -> Result<(), LinkError> {
        self.write_until(now, events)?;
        self.push_opportunities_until(now);
        self.write_lines(|l| l.at <= now)?;
        self.out.flush().map_err(|e| self.write_error(e))
    }

    fn write_lines(&mut self, ready: impl Fn(&Line) -> bool) -> Result<(), LinkError> {
        self.pending
            .sort_by_key(|l| (l.at / NANOS_PER_MS, l.kind.rank(), l.at));
        let n = self.pending.iter().take_while(|l| ready(l)).count();
        for line in self.pending.drain(..n) {
            let ms = line.at / NANOS_PER_MS;
            let r = match line.kind {
                Kind::Opportunity { bytes } => writeln!(self.out, "{ms} # {bytes}"),
                Kind::Departure { bytes, delay_ms } => {
                    writeln!(self.out, "{ms} - {bytes} {delay_ms}")
                }
                Kind::Arrival { bytes } => writeln!(self.out, "{ms} + {bytes}"),
                Kind::Drop { packets, bytes } => writeln!(self.out, "{ms} d {packets} {bytes}"),
            };
            r.map_err(|e| LinkError::file(&self.path, format!("cannot write ({e})")))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::{MahimahiTrace, SlotRates};
    use crate::element::{Element, Packet};
    use crate::queue::{Queue, QueueSpec};
    use crate::server::RateServer;

    const MS: Nanos = NANOS_PER_MS;

    fn lines(log: MahimahiLog, path: &std::path::Path) -> Vec<String> {
        drop(log);
        let text = std::fs::read_to_string(path).unwrap();
        std::fs::remove_file(path).unwrap();
        text.lines().map(String::from).collect()
    }

    #[test]
    fn mahimahi_trace_run_logged_as_mahimahi_would() {
        // Opportunities at 1, 2, 2, 5 ms (period 5 ms); a 2-packet drop-tail queue.
        let trace = MahimahiTrace::parse("1\n2\n2\n5\n", "t").unwrap();
        let mut server = RateServer::new(
            Box::new(trace.clone()),
            Queue::new(QueueSpec::DropTailPackets(2)),
            None,
        )
        .record_events();
        let path = std::env::temp_dir().join(format!("cellperf-mm-log-{}.log", std::process::id()));
        let p = path.to_str().unwrap();
        let mut log = MahimahiLog::create(
            p,
            "Downlink",
            "mahimahi:t",
            "droptail [packets=2]",
            CapacityMeter::new(Box::new(trace)),
            1_700_000_000_000,
        )
        .unwrap();
        let mut out = Vec::new();
        let mut events = Vec::new();
        // Four 1000-byte packets at 0.5 ms: one in service, two queued, one dropped.
        for _ in 0..4 {
            server.accept(Packet::new(vec![0; 1000], MS / 2));
        }
        for now in [MS / 2, 3 * MS + 1, 6 * MS + 1] {
            server.release(now, &mut out);
            server.take_events(&mut events);
            log.write_until(now, events.drain(..)).unwrap();
        }
        // A packet arriving at 6.2 ms, served by the opportunity at 7 ms: not due at 6.5 ms.
        server.accept(Packet::new(vec![0; 100], 6 * MS + 200_000));
        server.release(6 * MS + 500_000, &mut out);
        server.take_events(&mut events);
        log.finish(6 * MS + 500_000, events.drain(..)).unwrap();
        let got = lines(log, &path);
        assert_eq!(
            got[0],
            format!("# cellperf emulate (Downlink) [mahimahi:t] > {p}")
        );
        assert_eq!(
            got[1..],
            [
                "# queue: droptail [packets=2]",
                "# init timestamp: 1700000000000",
                "# base timestamp: 0",
                "0 + 1000",
                "0 + 1000",
                "0 + 1000",
                "0 + 1000",
                "0 d 1 1000",
                "1 # 1500",
                "1 - 1000 1",
                "2 # 1500",
                "2 # 1500",
                // The second packet takes 500 bytes left at 1 ms and 500 at 2 ms; the third
                // the rest of the first 2 ms opportunity.
                "2 - 1000 2",
                "2 - 1000 2",
                "5 # 1500",
                "6 # 1500",
                "6 + 100",
            ]
        );
    }

    #[test]
    fn fluid_capacity_cut_into_millisecond_opportunities_exact_to_the_byte() {
        // 13.2 Mb/s: 1650 bytes per ms.
        let path =
            std::env::temp_dir().join(format!("cellperf-mm-fluid-{}.log", std::process::id()));
        let p = path.to_str().unwrap();
        let meter = CapacityMeter::new(Box::new(SlotRates::constant(13.2e6).unwrap()));
        let mut log =
            MahimahiLog::create(p, "Uplink", "13.2 Mbit/s", "infinite", meter, 0).unwrap();
        log.write_until(2 * MS + 5, []).unwrap();
        // A third of a millisecond more: 550 bytes.
        log.finish(2 * MS + MS / 3, []).unwrap();
        let got = lines(log, &path);
        assert_eq!(
            got[4..],
            ["0 # 1500", "0 # 150", "1 # 1500", "1 # 150", "2 # 549"]
        );
    }
}
