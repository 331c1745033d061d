//! The radio log: what a modem would report at the MN, as CSV.
//!
//! Columns: `time_s` (Unix epoch seconds), `bs_id`, `sector_id`, `technology`, `rate_bps`
//! (downlink capacity offered over the interval ending at `time_s`, 0 in an outage), `state`
//! (`up` or `outage`), and with radio states `radio_state` (`idle`, `promoting`, `connected`,
//! `drx`, `fach`, `inactive`: `radio_state::State`), with link-layer ARQ `frames`,
//! `frame_errors` and `fer` (HARQ chains ended over the interval ending at `time_s`, those that
//! failed, their ratio: seed 002 Fig. 9 left; empty on handoff rows, which end no interval, and
//! `fer` empty when nothing was sent). With several users a last column `user` (0-based) is
//! added. One row per user every interval, and one at each handoff (the cell that the row names
//! is the new one).
use crate::capacity::CapacityMeter;
use crate::element::{secs_to_nanos, Nanos};
use crate::error::LinkError;
use crate::frame_errors::FrameTally;
use crate::outage::{Handoff, HandoffSchedule, OutagePlan};
use crate::radio_state::RadioState;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;

/// The log's interval: `interval_s`, at least 1 ms.
pub fn interval_ns(interval_s: f64) -> Nanos {
    secs_to_nanos(interval_s).max(1_000_000)
}

pub struct UserRadio {
    pub meter: CapacityMeter,
    pub outages: OutagePlan,
    /// The user's radio state machine, when the link has one.
    pub radio: Option<Arc<RadioState>>,
    /// The downlink ARQ's frames, when the link has one (`Element::count_frames`).
    pub frames: Option<FrameTally>,
    last_rate_bps: f64,
}

impl UserRadio {
    pub fn new(meter: CapacityMeter, outages: OutagePlan) -> Self {
        UserRadio {
            meter,
            outages,
            radio: None,
            frames: None,
            last_rate_bps: 0.0,
        }
    }
}

pub struct RadioLog {
    out: BufWriter<File>,
    path: String,
    users: Vec<UserRadio>,
    handoffs: Option<HandoffSchedule>,
    next_handoff: Option<Handoff>,
    bs_id: String,
    sector_id: String,
    technology: String,
    interval: Nanos,
    next_sample: Nanos,
    last_sample: Nanos,
    epoch_at_zero_ns: u64,
}

impl RadioLog {
    pub fn create(
        path: &str,
        users: Vec<UserRadio>,
        mut handoffs: Option<HandoffSchedule>,
        technology: &str,
        interval: Nanos,
        epoch_at_zero_ns: u64,
    ) -> Result<Self, LinkError> {
        let file = File::create(path)
            .map_err(|e| LinkError::file(path, format!("cannot create the radio log ({e})")))?;
        let mut out = BufWriter::new(file);
        let column = |on: bool, name: &'static str| if on { name } else { "" };
        let header = format!(
            "time_s,bs_id,sector_id,technology,rate_bps,state{}{}{}\n",
            column(users.iter().any(|u| u.radio.is_some()), ",radio_state"),
            column(
                users.iter().any(|u| u.frames.is_some()),
                ",frames,frame_errors,fer"
            ),
            column(users.len() > 1, ",user")
        );
        out.write_all(header.as_bytes())
            .map_err(|e| LinkError::file(path, format!("cannot write ({e})")))?;
        let next_handoff = handoffs.as_mut().and_then(|h| h.next_handoff());
        Ok(RadioLog {
            out,
            path: path.to_string(),
            users,
            handoffs,
            next_handoff,
            bs_id: "1".into(),
            sector_id: "1".into(),
            technology: technology.replace(',', " "),
            interval,
            next_sample: 0,
            last_sample: 0,
            epoch_at_zero_ns,
        })
    }

    /// When the next row is due.
    pub fn due(&self) -> Nanos {
        self.next_handoff
            .as_ref()
            .map_or(self.next_sample, |h| h.at.min(self.next_sample))
    }

    /// Writes every row due by `now`.
    pub fn write_due(&mut self, now: Nanos) -> Result<(), LinkError> {
        while self.due() <= now {
            let handoff_first = self
                .next_handoff
                .as_ref()
                .is_some_and(|h| h.at < self.next_sample);
            if handoff_first {
                let h = self.next_handoff.take().expect("checked");
                self.bs_id = h.bs_id.replace(',', " ");
                self.sector_id = h.sector_id.replace(',', " ");
                self.next_handoff = self.handoffs.as_mut().and_then(|s| s.next_handoff());
                self.rows(h.at, false)?;
            } else {
                let t = self.next_sample;
                self.rows(t, true)?;
                self.last_sample = t;
                self.next_sample += self.interval;
            }
        }
        Ok(())
    }

    fn rows(&mut self, t: Nanos, sample: bool) -> Result<(), LinkError> {
        let many = self.users.len() > 1;
        let epoch = (self.epoch_at_zero_ns + t) as f64 / 1e9;
        for (i, u) in self.users.iter_mut().enumerate() {
            if sample && t > self.last_sample {
                u.last_rate_bps =
                    u.meter.offered_until(t) * 8.0 / ((t - self.last_sample) as f64 / 1e9);
            }
            let state = if u.outages.in_outage(t) {
                "outage"
            } else {
                "up"
            };
            let user = if many { format!(",{i}") } else { String::new() };
            let radio = match &u.radio {
                Some(r) => format!(",{}", r.state_at(t).name()),
                None => String::new(),
            };
            let frames = match (&u.frames, sample) {
                (None, _) => String::new(),
                (Some(_), false) => ",,,".into(),
                (Some(tally), true) => {
                    let c = tally.lock().expect("frame tally").take_until(t);
                    let fer = if c.sent > 0 {
                        format!("{:.6}", c.failed as f64 / c.sent as f64)
                    } else {
                        String::new()
                    };
                    format!(",{},{},{fer}", c.sent, c.failed)
                }
            };
            writeln!(
                self.out,
                "{epoch:.6},{},{},{},{:.0},{state}{radio}{frames}{user}",
                self.bs_id, self.sector_id, self.technology, u.last_rate_bps
            )
            .map_err(|e| LinkError::file(&self.path, format!("cannot write ({e})")))?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> Result<(), LinkError> {
        self.out
            .flush()
            .map_err(|e| LinkError::file(&self.path, format!("cannot write ({e})")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::SlotRates;
    use crate::frame_errors::FrameBins;
    use crate::outage::OutageClipped;

    const MS: Nanos = 1_000_000;

    /// The lines of a log of `user` with one handoff to 7/2 at 150 ms, written up to `until`.
    fn written(user: UserRadio, epoch_at_zero_ns: u64, until: Nanos) -> Vec<String> {
        let handoffs = HandoffSchedule::listed(vec![Handoff {
            at: 150 * MS,
            bs_id: "7".into(),
            sector_id: "2".into(),
            outage: 0,
        }]);
        let name = format!(
            "cellperf-radio-{}-{epoch_at_zero_ns}.csv",
            std::process::id()
        );
        let path = std::env::temp_dir().join(name);
        let p = path.to_str().unwrap();
        let mut log = RadioLog::create(
            p,
            vec![user],
            Some(handoffs),
            "EV-DO",
            100 * MS,
            epoch_at_zero_ns,
        )
        .unwrap();
        log.write_due(until).unwrap();
        log.flush().unwrap();
        let text = std::fs::read_to_string(p).unwrap();
        std::fs::remove_file(p).unwrap();
        text.lines().map(String::from).collect()
    }

    #[test]
    fn each_sample_row_counts_the_arq_frames_of_its_interval() {
        let plan = OutagePlan::new(&[], None, None);
        let meter = CapacityMeter::new(Box::new(SlotRates::constant(1e6).unwrap()));
        let mut user = UserRadio::new(meter, plan);
        let tally = FrameBins::shared(100 * MS);
        // Interval (0, 100 ms]: 4 frames, 1 in error; (100, 200]: none; (200, 300]: 2 of 2.
        for (at, failed) in [
            (10, false),
            (20, true),
            (30, false),
            (99, false),
            (210, true),
            (250, true),
        ] {
            tally.lock().unwrap().record(at * MS, failed);
        }
        user.frames = Some(tally);
        assert_eq!(
            written(user, 0, 300 * MS),
            vec![
                "time_s,bs_id,sector_id,technology,rate_bps,state,frames,frame_errors,fer",
                "0.000000,1,1,EV-DO,0,up,0,0,",
                "0.100000,1,1,EV-DO,1000000,up,4,1,0.250000",
                "0.150000,7,2,EV-DO,1000000,up,,,",
                "0.200000,7,2,EV-DO,1000000,up,0,0,",
                "0.300000,7,2,EV-DO,1000000,up,2,2,1.000000",
            ]
        );
    }

    #[test]
    fn rows_at_each_interval_and_handoff() {
        let plan = OutagePlan::new(&[(250 * MS, 100 * MS)], None, None);
        let meter = CapacityMeter::new(Box::new(OutageClipped::new(
            Box::new(SlotRates::constant(1e6).unwrap()),
            plan.clone(),
        )));
        assert_eq!(
            written(
                UserRadio::new(meter, plan),
                1_000_000_000_000_000_000,
                400 * MS
            ),
            vec![
                "time_s,bs_id,sector_id,technology,rate_bps,state",
                "1000000000.000000,1,1,EV-DO,0,up",
                "1000000000.100000,1,1,EV-DO,1000000,up",
                "1000000000.150000,7,2,EV-DO,1000000,up",
                "1000000000.200000,7,2,EV-DO,1000000,up",
                "1000000000.300000,7,2,EV-DO,500000,outage",
                "1000000000.400000,7,2,EV-DO,500000,up",
            ]
        );
    }
}
