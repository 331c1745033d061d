//! Radio frames sent and frames in error over time: the frame error rate of seed 002 Fig. 9
//! left, which a modem's log reports and the emulated cell's ARQ knows. The ARQ element adds
//! every frame (a HARQ chain) when it ends, in error or not; the radio log takes the counts of
//! each of its intervals. Time here is the link's nanoseconds
//! (`element::Nanos`); this module sits below `element` so that the `Element` trait can hand
//! a tally out.
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Frames sent and, of those, the ones that failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameCount {
    pub sent: u64,
    pub failed: u64,
}

impl FrameCount {
    fn add(&mut self, other: FrameCount) {
        self.sent += other.sent;
        self.failed += other.failed;
    }
}

/// Counts in bins of `bin` ns from time 0, forgotten once taken.
#[derive(Debug)]
pub struct FrameBins {
    bin: u64,
    /// Index of `bins[0]` (every bin before it was taken).
    first: u64,
    bins: VecDeque<FrameCount>,
}

/// A tally shared by the element that transmits and the log that reads it.
pub type FrameTally = Arc<Mutex<FrameBins>>;

impl FrameBins {
    pub fn shared(bin: u64) -> FrameTally {
        Arc::new(Mutex::new(FrameBins {
            bin: bin.max(1),
            first: 0,
            bins: VecDeque::new(),
        }))
    }

    /// A frame at `at`. One in a bin already taken (a packet accepted after the log passed its
    /// time) counts in the first bin not yet taken.
    pub fn record(&mut self, at: u64, failed: bool) {
        let k = (at / self.bin).max(self.first);
        let i = (k - self.first) as usize;
        if self.bins.len() <= i {
            self.bins.resize(i + 1, FrameCount::default());
        }
        self.bins[i].add(FrameCount {
            sent: 1,
            failed: u64::from(failed),
        });
    }

    /// The counts of the bins that end by `t`, forgotten.
    pub fn take_until(&mut self, t: u64) -> FrameCount {
        let end = t / self.bin;
        let mut sum = FrameCount::default();
        while self.first < end {
            if let Some(c) = self.bins.pop_front() {
                sum.add(c);
            }
            self.first += 1;
            if self.bins.is_empty() {
                self.first = self.first.max(end);
            }
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_taken_per_bin_once_and_late_ones_go_to_the_next_bin() {
        let tally = FrameBins::shared(100);
        let mut b = tally.lock().unwrap();
        for (at, failed) in [
            (0, false),
            (99, true),
            (100, true),
            (250, false),
            (251, true),
        ] {
            b.record(at, failed);
        }
        assert_eq!(b.take_until(100), FrameCount { sent: 2, failed: 1 });
        assert_eq!(b.take_until(150), FrameCount::default());
        // Bin 1 ends at 200, bin 2 at 300.
        assert_eq!(b.take_until(300), FrameCount { sent: 3, failed: 2 });
        // A transmission at 120, recorded after the log passed 300, counts in bin 3.
        b.record(120, true);
        b.record(350, false);
        assert_eq!(b.take_until(1000), FrameCount { sent: 2, failed: 1 });
        assert_eq!(b.take_until(2000), FrameCount::default());
        b.record(2050, false);
        assert_eq!(b.take_until(2100), FrameCount { sent: 1, failed: 0 });
    }
}
