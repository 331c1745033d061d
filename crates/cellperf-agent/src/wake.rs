//! Wakes a test's control loop when one of the test's data threads ends. The loop waits on
//! its control connection between looks at its threads; without this it learnt of a thread's
//! end only at its next read timeout (up to 100 ms at the server, 50 ms at the probe), and a
//! report or `send_done` waited that long (issue 34: every round trip of a run counts).

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// An eventfd: data threads add to it as they end, the control loop waits on it beside its
/// connection.
#[derive(Debug)]
pub struct Wake(OwnedFd);

impl Wake {
    pub fn new() -> io::Result<Arc<Wake>> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(Arc::new(Wake(unsafe { OwnedFd::from_raw_fd(fd) })))
    }

    fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes the 8 bytes of `one`; the counter cannot overflow in a test's life.
        unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// Waits until `conn` has something to read (true), or a data thread ended, or `timeout`
    /// passed (false: look at the threads, then wait again).
    pub fn wait(&self, conn: &impl AsFd, timeout: Duration) -> bool {
        let mut fds = [
            libc::pollfd {
                fd: conn.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.0.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if n <= 0 {
            return false;
        }
        if fds[1].revents != 0 {
            let mut count = [0u8; 8];
            // SAFETY: reads at most 8 bytes into `count` (clears the counter; non-blocking).
            unsafe { libc::read(self.0.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
        }
        // Errors and hang-ups count as readable: the next read reports them.
        fds[0].revents != 0
    }
}

/// A data thread that wakes its control loop as it ends.
#[derive(Debug)]
pub struct Waking<T> {
    handle: JoinHandle<T>,
    ended: Arc<AtomicBool>,
}

impl<T> Waking<T> {
    /// Whether the thread's work is over (set before the wake, so a woken loop sees it;
    /// `join` then waits only for the thread's own exit).
    pub fn is_finished(&self) -> bool {
        self.ended.load(Ordering::Acquire) || self.handle.is_finished()
    }

    pub fn join(self) -> std::thread::Result<T> {
        self.handle.join()
    }
}

/// Runs `f` on a new thread that wakes `wake` when it ends, returned or panicked.
pub fn spawn_waking<T: Send + 'static>(
    wake: &Arc<Wake>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Waking<T> {
    struct OnExit(Arc<Wake>, Arc<AtomicBool>);
    impl Drop for OnExit {
        fn drop(&mut self) {
            self.1.store(true, Ordering::Release);
            self.0.wake();
        }
    }
    let ended = Arc::new(AtomicBool::new(false));
    let on_exit = OnExit(wake.clone(), ended.clone());
    let handle = std::thread::spawn(move || {
        let _on_exit = on_exit;
        f()
    });
    Waking { handle, ended }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::time::Instant;

    /// A thread's end wakes a waiter at once, not at its timeout; so does data on the
    /// connection, which alone says "readable".
    #[test]
    fn a_thread_ending_or_data_arriving_wakes_the_waiter() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let wake = Wake::new().unwrap();
        let t = Instant::now();
        let h = spawn_waking(&wake, || std::thread::sleep(Duration::from_millis(50)));
        assert!(!wake.wait(&s, Duration::from_secs(5)));
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        assert!(h.is_finished());
        h.join().unwrap();
        // Cleared: the next wait runs to its timeout.
        assert!(!wake.wait(&s, Duration::from_millis(30)));
        std::io::Write::write_all(&mut c, b"x").unwrap();
        assert!(wake.wait(&s, Duration::from_secs(5)));
    }
}
