//! The radio log: what a modem would report at the MN, as CSV.
//!
//! Columns: `time_s` (Unix epoch seconds), `bs_id`, `sector_id`, `technology`, `rate_bps`
//! (downlink capacity offered over the interval ending at `time_s`, 0 in an outage), `state`
//! (`up` or `outage`), and with radio states `radio_state` (`idle`, `promoting`, `connected`,
//! `drx`, `fach`, `inactive`: `radio_state::State`). With several users a last column `user` (0-based) is added. One row per
//! user every interval, and one at each handoff (the cell that the row names is the new one).
use crate::capacity::CapacityMeter;
use crate::element::Nanos;
use crate::error::LinkError;
use crate::outage::{Handoff, HandoffSchedule, OutagePlan};
use crate::radio_state::RadioState;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;

pub struct UserRadio {
    pub meter: CapacityMeter,
    pub outages: OutagePlan,
    /// The user's radio state machine, when the link has one.
    pub radio: Option<Arc<RadioState>>,
    last_rate_bps: f64,
}

impl UserRadio {
    pub fn new(meter: CapacityMeter, outages: OutagePlan) -> Self {
        UserRadio {
            meter,
            outages,
            radio: None,
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
        let header = format!(
            "time_s,bs_id,sector_id,technology,rate_bps,state{}{}\n",
            if users.iter().any(|u| u.radio.is_some()) {
                ",radio_state"
            } else {
                ""
            },
            if users.len() > 1 { ",user" } else { "" }
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
            interval: interval.max(1_000_000),
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
            writeln!(
                self.out,
                "{epoch:.6},{},{},{},{:.0},{state}{radio}{user}",
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
    use crate::outage::OutageClipped;

    #[test]
    fn rows_at_each_interval_and_handoff() {
        let ms = 1_000_000;
        let plan = OutagePlan::new(&[(250 * ms, 100 * ms)], None, None);
        let meter = CapacityMeter::new(Box::new(OutageClipped::new(
            Box::new(SlotRates::constant(1e6).unwrap()),
            plan.clone(),
        )));
        let handoffs = HandoffSchedule::listed(vec![Handoff {
            at: 150 * ms,
            bs_id: "7".into(),
            sector_id: "2".into(),
            outage: 0,
        }]);
        let path = std::env::temp_dir().join(format!("cellperf-radio-{}.csv", std::process::id()));
        let p = path.to_str().unwrap();
        let mut log = RadioLog::create(
            p,
            vec![UserRadio::new(meter, plan)],
            Some(handoffs),
            "EV-DO",
            100 * ms,
            1_000_000_000_000_000_000,
        )
        .unwrap();
        log.write_due(400 * ms).unwrap();
        log.flush().unwrap();
        let text = std::fs::read_to_string(p).unwrap();
        std::fs::remove_file(p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
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
